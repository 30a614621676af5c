use super::*;
use crate::graph::ValueDef;
use crate::text;

fn f32t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims.to_vec())
}

/// Lower and check what every test wants: a verified graph whose inputs
/// are the data inputs then the parameters, by name and type, each used.
fn lower(model: &Model) -> Graph {
    let g = model
        .to_mir()
        .unwrap_or_else(|e| panic!("{} does not lower: {e}", model.name));
    g.verify().unwrap();
    let mut want: Vec<(String, TensorType)> = model.inputs.clone();
    want.extend(model.parameters().into_iter().map(|p| (p.name, p.ty)));
    let have: Vec<(String, TensorType)> = g
        .inputs
        .iter()
        .map(|&v| {
            (
                g.values[v.index()].name.clone().unwrap_or_default(),
                g.ty(v).clone(),
            )
        })
        .collect();
    assert_eq!(have, want);
    for &v in &g.inputs {
        let used = g.nodes.iter().any(|n| n.inputs.contains(&v)) || g.outputs.contains(&v);
        assert!(
            used,
            "graph input {:?} is never used",
            g.values[v.index()].name
        );
    }
    g
}

fn params(model: &Model) -> Vec<(String, Vec<usize>)> {
    model
        .parameters()
        .into_iter()
        .map(|p| (p.name, p.ty.dims().to_vec()))
        .collect()
}

fn p(name: &str, dims: &[usize]) -> (String, Vec<usize>) {
    (name.to_string(), dims.to_vec())
}

fn count(g: &Graph, op: &str) -> usize {
    g.op_histogram().get(op).copied().unwrap_or(0)
}

fn round_trips(g: &Graph) {
    let printed = text::print(g);
    let parsed = text::parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(text::print(&parsed), printed);
}

#[test]
fn linear_is_x_times_w_transposed_plus_bias() {
    let m = Model::new(
        "lin",
        Linear::new(4, 8, true).with_activation(Activation::Gelu),
    )
    .with_input("x", f32t(&[2, 3, 4]));
    assert_eq!(params(&m), vec![p("weight", &[8, 4]), p("bias", &[8])]);
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[2, 3, 8])]);
    let mm = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "matmul_bias_act")
        .expect("a fused matmul");
    assert_eq!(mm.attrs.str("activation").unwrap(), "gelu");
    assert_eq!(count(&g, "permute"), 1);

    let plain = lower(&Model::new("lin", Linear::new(4, 8, false)).with_input("x", f32t(&[4])));
    assert_eq!(plain.output_types(), vec![f32t(&[8])]);
    assert_eq!(count(&plain, "matmul"), 1);
    assert_eq!(count(&plain, "matmul_bias_act"), 0);
}

#[test]
fn errors_name_the_block_and_the_problem() {
    let m = Model::new(
        "net",
        Sequential::new().with("head", Linear::new(4, 2, true)),
    )
    .with_input("x", f32t(&[2, 5]));
    let e = m.to_mir().unwrap_err().to_string();
    assert!(
        e.contains("block `head` (Linear)") && e.contains("last axis 4") && e.contains("f32[2,5]"),
        "{e}"
    );

    let m = Model::new("net", Embedding::new(10, 4)).with_input("ids", f32t(&[3]));
    let e = m.to_mir().unwrap_err().to_string();
    assert!(
        e.contains("block `net` (Embedding)") && e.contains("i32 or i64"),
        "{e}"
    );

    let m =
        Model::new("net", Conv2d::new(4, 6, 3).with_groups(4)).with_input("x", f32t(&[1, 4, 8, 8]));
    assert!(m.to_mir().unwrap_err().to_string().contains("groups = 4"));
    let m =
        Model::new("net", Conv2d::new(4, 6, 3).with_groups(0)).with_input("x", f32t(&[1, 4, 8, 8]));
    assert!(m.to_mir().unwrap_err().to_string().contains("groups = 0"));

    let m = Model::new("net", Attention::new(8, 3, false)).with_input("x", f32t(&[1, 2, 8]));
    assert!(m.to_mir().unwrap_err().to_string().contains("heads = 3"));
}

/// A block that reads a parameter it never declared.
struct Undeclared;
impl Block for Undeclared {
    fn kind(&self) -> &'static str {
        "Undeclared"
    }
    fn lower(&self, cx: &mut Lower, _: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        Ok(vec![cx.param("scale")?])
    }
}

#[test]
fn missing_parameters_and_bad_names_are_errors() {
    let m = Model::new(
        "net",
        Sequential::new().with("a", Sequential::new().with("b", Undeclared)),
    );
    let e = m.to_mir().unwrap_err().to_string();
    assert!(
        e.contains("block `a.b` (Undeclared)") && e.contains("`a.b.scale`"),
        "{e}"
    );
    // The innermost block names itself once; enclosing blocks do not re-prefix.
    assert_eq!(e.matches("block `").count(), 1, "{e}");

    let twice = Model::new(
        "net",
        Sequential::new()
            .with("l", Linear::new(2, 2, true))
            .with("l", Linear::new(2, 2, true)),
    );
    assert!(twice
        .to_mir()
        .unwrap_err()
        .to_string()
        .contains("two children named `l`"));
    let bad = Model::new(
        "net",
        Sequential::new().with("a b", Linear::new(2, 2, true)),
    );
    assert!(bad.to_mir().unwrap_err().to_string().contains("\"a b\""));
    let clash = Model::new("net", Linear::new(2, 2, true)).with_input("weight", f32t(&[2]));
    assert!(clash
        .to_mir()
        .unwrap_err()
        .to_string()
        .contains("`weight` names two graph inputs"));
}

#[test]
fn embedding_and_norms() {
    let m = Model::new("emb", Embedding::new(100, 16))
        .with_input("ids", TensorType::new(DType::I64, vec![2, 5]));
    assert_eq!(params(&m), vec![p("weight", &[100, 16])]);
    assert_eq!(lower(&m).output_types(), vec![f32t(&[2, 5, 16])]);
    let m = Model::new("emb", Embedding::new(100, 16))
        .with_input("ids", TensorType::new(DType::I32, vec![7]));
    assert_eq!(lower(&m).output_types(), vec![f32t(&[7, 16])]);

    let ln = Model::new("ln", LayerNorm::new(16, 1e-12)).with_input("x", f32t(&[2, 5, 16]));
    assert_eq!(params(&ln), vec![p("weight", &[16]), p("bias", &[16])]);
    let g = lower(&ln);
    assert_eq!(g.output_types(), vec![f32t(&[2, 5, 16])]);
    assert_eq!(g.nodes[0].attrs.float("eps").unwrap(), 1e-12);

    let rms = Model::new("rms", RmsNorm::new(16, 1e-6)).with_input("x", f32t(&[5, 16]));
    assert_eq!(params(&rms), vec![p("weight", &[16])]);
    assert_eq!(lower(&rms).output_types(), vec![f32t(&[5, 16])]);
}

#[test]
fn mlps() {
    let m =
        Model::new("mlp", Mlp::new(8, 32, Activation::GeluTanh)).with_input("x", f32t(&[2, 3, 8]));
    assert_eq!(
        params(&m),
        vec![
            p("fc1.weight", &[32, 8]),
            p("fc1.bias", &[32]),
            p("fc2.weight", &[8, 32]),
            p("fc2.bias", &[8])
        ]
    );
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[2, 3, 8])]);
    let acts: Vec<&str> = g
        .nodes
        .iter()
        .filter_map(|n| n.attrs.str("activation").ok())
        .collect();
    assert_eq!(acts, vec!["gelu_tanh", "none"]);

    let m = Model::new("swiglu", GatedMlp::new(8, 24)).with_input("x", f32t(&[3, 8]));
    assert_eq!(
        params(&m),
        vec![
            p("gate.weight", &[24, 8]),
            p("up.weight", &[24, 8]),
            p("down.weight", &[8, 24])
        ]
    );
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[3, 8])]);
    assert_eq!(count(&g, "swiglu"), 1);

    let m = Model::new(
        "geglu",
        GatedMlp::new(8, 24).with_activation(Activation::Gelu),
    )
    .with_input("x", f32t(&[3, 8]));
    let g = lower(&m);
    assert_eq!(
        (count(&g, "gelu"), count(&g, "mul"), count(&g, "swiglu")),
        (1, 1, 0)
    );
}

#[test]
fn attention_heads_masks_and_gqa() {
    let m = Model::new("attn", Attention::new(16, 4, false)).with_input("x", f32t(&[2, 5, 16]));
    let names: Vec<String> = m.parameters().into_iter().map(|p| p.name).collect();
    let want: Vec<String> = ["q", "k", "v", "o"]
        .iter()
        .flat_map(|l| [format!("{l}.weight"), format!("{l}.bias")])
        .collect();
    assert_eq!(names, want);
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[2, 5, 16])]);
    let att = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "attention")
        .expect("an attention node");
    assert_eq!(g.ty(att.inputs[0]), &f32t(&[2, 4, 5, 4]));
    assert_eq!(att.attrs.str("mask_kind").unwrap(), "none");

    let causal =
        lower(&Model::new("attn", Attention::new(16, 4, true)).with_input("x", f32t(&[2, 5, 16])));
    let att = causal
        .nodes
        .iter()
        .find(|n| n.op.name() == "attention")
        .expect("an attention node");
    assert_eq!(att.attrs.str("mask_kind").unwrap(), "causal");

    // A bool padding mask on a causal block: folded together, custom kind.
    let m = Model::new("attn", Attention::new(16, 4, true))
        .with_input("x", f32t(&[2, 5, 16]))
        .with_input("mask", TensorType::new(DType::Bool, vec![2, 1, 5, 5]));
    let g = lower(&m);
    assert_eq!(count(&g, "and"), 1);
    let att = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "attention")
        .expect("an attention node");
    assert_eq!(att.attrs.str("mask_kind").unwrap(), "custom");

    // An additive mask stays additive.
    let m = Model::new("attn", Attention::new(16, 4, false))
        .with_input("x", f32t(&[2, 5, 16]))
        .with_input("bias", f32t(&[5, 5]));
    let g = lower(&m);
    let att = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "attention")
        .expect("an attention node");
    assert_eq!(att.attrs.str("mask_kind").unwrap(), "bias");

    // Grouped-query: 4 query heads share 2 kv heads of width 4.
    let gqa = Attention::new(16, 4, true)
        .with_kv_heads(2)
        .with_bias(false);
    let m = Model::new("gqa", gqa)
        .with_input("x", f32t(&[2, 5, 16]))
        .with_input("mask", TensorType::new(DType::Bool, vec![2, 4, 5, 5]));
    assert_eq!(
        params(&m),
        vec![
            p("q.weight", &[16, 16]),
            p("k.weight", &[8, 16]),
            p("v.weight", &[8, 16]),
            p("o.weight", &[16, 16])
        ]
    );
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[2, 5, 16])]);
    let att = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "attention")
        .expect("an attention node");
    assert_eq!(g.ty(att.inputs[0]), &f32t(&[2, 2, 2, 5, 4]));
    assert_eq!(g.ty(att.inputs[1]), &f32t(&[2, 2, 1, 5, 4]));

    let mqa = Model::new("mqa", Attention::new(16, 4, false).with_kv_heads(1))
        .with_input("x", f32t(&[1, 3, 16]));
    assert_eq!(lower(&mqa).output_types(), vec![f32t(&[1, 3, 16])]);

    let bad = Model::new("attn", Attention::new(16, 4, false))
        .with_input("x", f32t(&[2, 5, 16]))
        .with_input("mask", TensorType::new(DType::Bool, vec![2, 5, 5]));
    assert!(bad
        .to_mir()
        .unwrap_err()
        .to_string()
        .contains("mask must be"));
}

fn encoder_layer_params(prefix: &str, d: usize, h: usize) -> Vec<(String, Vec<usize>)> {
    let mut v = Vec::new();
    for l in ["q", "k", "v", "o"] {
        v.push(p(&format!("{prefix}attn.{l}.weight"), &[d, d]));
        v.push(p(&format!("{prefix}attn.{l}.bias"), &[d]));
    }
    v.push(p(&format!("{prefix}ln1.weight"), &[d]));
    v.push(p(&format!("{prefix}ln1.bias"), &[d]));
    v.push(p(&format!("{prefix}mlp.fc1.weight"), &[h, d]));
    v.push(p(&format!("{prefix}mlp.fc1.bias"), &[h]));
    v.push(p(&format!("{prefix}mlp.fc2.weight"), &[d, h]));
    v.push(p(&format!("{prefix}mlp.fc2.bias"), &[d]));
    v.push(p(&format!("{prefix}ln2.weight"), &[d]));
    v.push(p(&format!("{prefix}ln2.bias"), &[d]));
    v
}

#[test]
fn encoder_layer_lowers_and_round_trips_through_text() {
    let m = Model::new("bert_layer", TransformerEncoderLayer::new(16, 4, 64, 1e-12))
        .with_input("x", f32t(&[2, 6, 16]));
    assert_eq!(params(&m), encoder_layer_params("", 16, 64));
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[2, 6, 16])]);
    assert_eq!(
        (
            count(&g, "layer_norm"),
            count(&g, "attention"),
            count(&g, "add")
        ),
        (2, 1, 2)
    );
    // Post-norm: the graph ends in ln2.
    let last = g.nodes.last().expect("nodes");
    assert_eq!(
        (last.op.name(), last.origin.as_deref()),
        ("layer_norm", Some("ln2"))
    );
    round_trips(&g);
    assert_eq!(Graph::from_json(&g.to_json()).unwrap(), g);

    let pre = Model::new(
        "pre",
        TransformerEncoderLayer::new(16, 4, 64, 1e-5).with_norm_first(true),
    )
    .with_input("x", f32t(&[2, 6, 16]))
    .with_input("mask", TensorType::new(DType::Bool, vec![2, 1, 6, 6]));
    let g = lower(&pre);
    assert_eq!(g.output_types(), vec![f32t(&[2, 6, 16])]);
    assert_eq!(g.nodes.last().expect("nodes").op.name(), "add");
    round_trips(&g);
}

#[test]
fn decoder_layer_is_llama_shaped() {
    let layer = TransformerDecoderLayer::new(16, 4, 40, 1e-6).with_kv_heads(2);
    let m = Model::new("llama_layer", layer).with_input("x", f32t(&[1, 6, 16]));
    assert_eq!(
        params(&m),
        vec![
            p("attn_norm.weight", &[16]),
            p("attn.q.weight", &[16, 16]),
            p("attn.k.weight", &[8, 16]),
            p("attn.v.weight", &[8, 16]),
            p("attn.o.weight", &[16, 16]),
            p("mlp_norm.weight", &[16]),
            p("mlp.gate.weight", &[40, 16]),
            p("mlp.up.weight", &[40, 16]),
            p("mlp.down.weight", &[16, 40]),
        ]
    );
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[1, 6, 16])]);
    for op in ["rms_norm", "qk_rope", "attention", "swiglu"] {
        assert!(count(&g, op) > 0, "no {op}");
    }
    let att = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "attention")
        .expect("an attention node");
    assert_eq!(att.attrs.str("mask_kind").unwrap(), "causal");
    round_trips(&g);
}

#[test]
fn conv_and_batch_norm() {
    let m = Model::new("conv", Conv2d::new(3, 6, 3).with_stride(2).with_padding(1))
        .with_input("x", f32t(&[1, 3, 8, 8]));
    assert_eq!(
        params(&m),
        vec![p("weight", &[6, 3, 3, 3]), p("bias", &[6])]
    );
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[1, 6, 4, 4])]);
    assert_eq!(g.nodes[0].attrs.ints("pads").unwrap(), &[1, 1, 1, 1]);

    let m = Model::new("dw", Conv2d::new(4, 8, 3).with_groups(2).with_bias(false))
        .with_input("x", f32t(&[2, 4, 5, 5]));
    assert_eq!(params(&m), vec![p("weight", &[8, 2, 3, 3])]);
    assert_eq!(lower(&m).output_types(), vec![f32t(&[2, 8, 3, 3])]);

    let m = Model::new("bn", BatchNorm::new(6, 1e-5)).with_input("x", f32t(&[2, 6, 4, 4]));
    assert_eq!(
        params(&m),
        vec![
            p("weight", &[6]),
            p("bias", &[6]),
            p("running_mean", &[6]),
            p("running_var", &[6])
        ]
    );
    assert_eq!(lower(&m).output_types(), vec![f32t(&[2, 6, 4, 4])]);
}

#[test]
fn lstm_scans_a_cell() {
    let m = Model::new("lstm", Lstm::new(3, 4)).with_input("x", f32t(&[5, 2, 3]));
    assert_eq!(
        params(&m),
        vec![
            p("weight_ih", &[16, 3]),
            p("weight_hh", &[16, 4]),
            p("bias_ih", &[16]),
            p("bias_hh", &[16])
        ]
    );
    let g = lower(&m);
    assert_eq!(
        g.output_types(),
        vec![f32t(&[5, 2, 4]), f32t(&[2, 4]), f32t(&[2, 4])]
    );
    let scan = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "scan")
        .expect("a scan");
    let body = scan.attrs.graph("body").unwrap();
    assert_eq!(count(body, "lstm_cell"), 1);
    assert!(body
        .nodes
        .iter()
        .all(|n| n.origin.as_deref() == Some("lstm")));
    round_trips(&g);

    let with_state = Model::new("lstm", Lstm::new(3, 4))
        .with_input("x", f32t(&[5, 2, 3]))
        .with_input("h0", f32t(&[2, 4]))
        .with_input("c0", f32t(&[2, 4]));
    let g = lower(&with_state);
    assert_eq!(
        g.output_types(),
        vec![f32t(&[5, 2, 4]), f32t(&[2, 4]), f32t(&[2, 4])]
    );
    assert_eq!(count(&g, "broadcast"), 0);
}

fn tiny_bert() -> Model {
    let root = Sequential::new()
        .with("embed", Embedding::new(50, 16))
        .with("encoder", TransformerEncoder::new(2, 16, 4, 32, 1e-12))
        .with(
            "pooler",
            Linear::new(16, 16, true).with_activation(Activation::Tanh),
        );
    Model::new("bert", root).with_input("ids", TensorType::new(DType::I64, vec![2, 6]))
}

#[test]
fn nested_models_have_dotted_parameter_names() {
    let m = tiny_bert();
    let mut want = vec![p("embed.weight", &[50, 16])];
    want.extend(encoder_layer_params("encoder.layers.0.", 16, 32));
    want.extend(encoder_layer_params("encoder.layers.1.", 16, 32));
    want.push(p("pooler.weight", &[16, 16]));
    want.push(p("pooler.bias", &[16]));
    assert_eq!(params(&m), want);
    assert_eq!(
        m.num_parameters(),
        want.iter()
            .map(|(_, d)| d.iter().product::<usize>())
            .sum::<usize>()
    );
    let g = lower(&m);
    assert_eq!(g.output_types(), vec![f32t(&[2, 6, 16])]);
    let weight = g
        .inputs
        .iter()
        .find(|&&v| g.values[v.index()].name.as_deref() == Some("encoder.layers.0.attn.q.weight"));
    assert!(weight.is_some());
}

#[test]
fn every_node_records_the_block_that_made_it() {
    let m = tiny_bert();
    let g = lower(&m);
    let paths: HashSet<String> = m
        .blocks()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !p.is_empty())
        .collect();
    for (i, n) in g.nodes.iter().enumerate() {
        let o = n
            .origin
            .as_deref()
            .unwrap_or_else(|| panic!("node {i} ({}) has no origin", n.op.name()));
        assert!(
            paths.contains(o),
            "node {i} has origin {o:?}, not a block path"
        );
    }
    // The q projection's matmul comes from that Linear, reading its weight.
    let q = "encoder.layers.1.attn.q";
    let mm = g
        .nodes
        .iter()
        .find(|n| n.op.name() == "matmul_bias_act" && n.origin.as_deref() == Some(q));
    let mm = mm.expect("the q projection of layer 1");
    let bias = &g.values[mm.inputs[2].index()];
    assert!(matches!(bias.def, ValueDef::Input(_)));
    assert_eq!(bias.name.as_deref(), Some("encoder.layers.1.attn.q.bias"));
    // Nodes the attention block emits itself (head reshapes) carry its path.
    assert!(g.nodes.iter().any(
        |n| n.op.name() == "attention" && n.origin.as_deref() == Some("encoder.layers.1.attn")
    ));

    // The root block's own nodes carry the model name.
    let root = Model::new("solo", TransformerEncoderLayer::new(8, 2, 16, 1e-5))
        .with_input("x", f32t(&[1, 3, 8]));
    let g = lower(&root);
    assert!(g
        .nodes
        .iter()
        .any(|n| n.op.name() == "add" && n.origin.as_deref() == Some("solo")));
}

#[test]
fn outline_shows_the_tree_and_parameter_types() {
    let m = tiny_bert();
    let o = m.outline();
    assert!(
        o.starts_with("model bert (ids: i64[2,6])\nbert: Sequential(3 children)\n"),
        "{o}"
    );
    assert!(
        o.contains("\n  encoder: TransformerEncoder(layers=2, final_norm=false)\n"),
        "{o}"
    );
    assert!(
        o.contains(
            "\n    layers.0: TransformerEncoderLayer(dim=16, heads=4, hidden=32, post-norm)\n"
        ),
        "{o}"
    );
    assert!(o.contains("\n        q: Linear(in=16, out=16, bias=true, activation=none)\n          weight f32[16,16]\n          bias f32[16]\n"), "{o}");
    assert!(
        o.ends_with(&format!(
            "{} parameters in {} tensors\n",
            m.num_parameters(),
            m.parameters().len()
        )),
        "{o}"
    );
}

#[test]
fn sequential_chains_and_passes_through_when_empty() {
    let root = Sequential::new()
        .with("conv", Conv2d::new(3, 8, 3).with_padding(1))
        .with("bn", BatchNorm::new(8, 1e-5));
    let m = Model::new("stem", root).with_input("x", f32t(&[1, 3, 6, 6]));
    assert_eq!(lower(&m).output_types(), vec![f32t(&[1, 8, 6, 6])]);

    let empty = Model::new("id", Sequential::new()).with_input("x", f32t(&[2]));
    let g = lower(&empty);
    assert_eq!(g.outputs, g.inputs);
}

#[test]
fn absurd_configurations_do_not_panic() {
    let m = Model::new("big", Lstm::new(usize::MAX, usize::MAX));
    assert_eq!(m.num_parameters(), usize::MAX);
    let m = Model::new("big", Attention::new(8, 0, false).with_kv_heads(0))
        .with_input("x", f32t(&[1, 2, 8]));
    assert!(m.to_mir().unwrap_err().to_string().contains("heads = 0"));
}

#[test]
fn dtypes_propagate_to_parameters() {
    let layer = TransformerDecoderLayer::new(8, 2, 16, 1e-6).with_dtype(DType::BF16);
    let m = Model::new("bf16", layer).with_input("x", TensorType::new(DType::BF16, vec![1, 4, 8]));
    assert!(m.parameters().iter().all(|p| p.ty.dtype == DType::BF16));
    assert_eq!(
        lower(&m).output_types(),
        vec![TensorType::new(DType::BF16, vec![1, 4, 8])]
    );
}
