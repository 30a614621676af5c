//! `compile_pipeline` on BERT-like encoder layers built from primitives:
//! the HIR layer expanded to primitives (what an importer of a decomposed
//! model gives), and a hand-written importer-style layer (packed QKV,
//! `sqrt`/`div` layer norms, erf gelu, additive mask). The fused graph must
//! compute what the original did; kernel counts are printed
//! (`cargo test -p rlx-opt --test pipeline -- --nocapture`).

mod common;

use common::{close_results, cpu, inputs_for};
use rlx_ir::decompose::expand_all;
use rlx_ir::hir::{Model, TransformerEncoderLayer};
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, TensorType, ValueId};
use rlx_opt::{compile_pipeline, kernel_count, Fuse};

fn f32t(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims.to_vec())
}

/// Run the pipeline, check the result numerically, print the numbers.
fn run(name: &str, g: &Graph) -> (Graph, rlx_opt::PipelineReport) {
    let (h, rep) = compile_pipeline(g, cpu).unwrap();
    let inputs = inputs_for(g, 3);
    let want = cpu(g, &inputs).unwrap();
    close_results(&want, &cpu(&h, &inputs).unwrap(), 1e-4, 1e-5)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    println!(
        "{name}: {} nodes, {} kernels unoptimized\n{rep}\nops before fusion: {:?}\nops after: {:?}\n",
        g.nodes.len(),
        kernel_count(g).unwrap(),
        rep.ops_before,
        rep.ops_after
    );
    (h, rep)
}

fn count(rep: &std::collections::BTreeMap<&'static str, usize>, op: &str) -> usize {
    rep.get(op).copied().unwrap_or(0)
}

#[test]
fn hir_encoder_layer_expanded_to_primitives_fuses_back() {
    let m = Model::new("bert_layer", TransformerEncoderLayer::new(32, 4, 64, 1e-12))
        .with_input("x", f32t(&[2, 8, 32]))
        .with_input("mask", f32t(&[2, 1, 8, 8]));
    let fused = m.to_mir().unwrap();
    let g = expand_all(&fused).unwrap();
    let (_, rep) = run("BERT layer (HIR, expanded)", &g);
    let after = &rep.ops_after;
    // Attention writes its heads merged; the o and fc2 products add the
    // residual stream in their epilogues.
    assert_eq!(count(after, "attention_merged"), 1);
    assert_eq!(count(after, "layer_norm"), 2);
    assert_eq!(count(after, "matmul_bias_act"), 4); // q, k, v, fc1 (gelu)
    assert_eq!(count(after, "matmul_residual"), 2); // o, fc2
    assert_eq!(count(after, "softmax") + count(after, "gelu"), 0);
    assert!(rep.kernels_after * 3 <= rep.kernels_before, "{rep}");
    // As many kernels as the HIR's own fused lowering after cleanup.
    let (_, direct) = compile_pipeline(&fused, cpu).unwrap();
    assert_eq!(rep.kernels_after, direct.kernels_after);
}

/// An importer's BERT layer: everything spelled out in primitives.
fn importer_layer(b: usize, s: usize, d: usize, heads: usize, hidden: usize) -> Graph {
    let mut g = GraphBuilder::new("bert_importer");
    let hd = d / heads;
    let x = g.input("x", f32t(&[b, s, d]));
    let mask = g.input("mask", f32t(&[b, 1, 1, s]));
    let param = |g: &mut GraphBuilder, name: &str, dims: &[usize]| g.input(name, f32t(dims));
    let w_qkv = param(&mut g, "qkv.weight", &[d, 3 * d]);
    let b_qkv = param(&mut g, "qkv.bias", &[3 * d]);
    let w_o = param(&mut g, "o.weight", &[d, d]);
    let b_o = param(&mut g, "o.bias", &[d]);
    let ln1 = [
        param(&mut g, "ln1.weight", &[d]),
        param(&mut g, "ln1.bias", &[d]),
    ];
    let w1 = param(&mut g, "fc1.weight", &[d, hidden]);
    let b1 = param(&mut g, "fc1.bias", &[hidden]);
    let w2 = param(&mut g, "fc2.weight", &[hidden, d]);
    let b2 = param(&mut g, "fc2.bias", &[d]);
    let ln2 = [
        param(&mut g, "ln2.weight", &[d]),
        param(&mut g, "ln2.bias", &[d]),
    ];
    let c = |g: &mut GraphBuilder, v: f64| g.scalar(v, DType::F32).unwrap();
    let op = |g: &mut GraphBuilder, op: &str, ins: &[ValueId], a: Attrs| g.op1(op, ins, a).unwrap();
    let bin = |g: &mut GraphBuilder, o: &str, a: ValueId, b: ValueId| g.binary(o, a, b).unwrap();

    let qkv = bin(&mut g, "matmul", x, w_qkv);
    let qkv = bin(&mut g, "add", qkv, b_qkv);
    let heads_of = |g: &mut GraphBuilder, i: i64| {
        let a = Attrs::new()
            .with("axis", 2i64)
            .with("start", i * d as i64)
            .with("len", d as i64);
        let t = op(g, "narrow", &[qkv], a);
        let shape = vec![b as i64, s as i64, heads as i64, hd as i64];
        let t = op(g, "reshape", &[t], Attrs::new().with("shape", shape));
        op(
            g,
            "permute",
            &[t],
            Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
        )
    };
    let (q, k, v) = (
        heads_of(&mut g, 0),
        heads_of(&mut g, 1),
        heads_of(&mut g, 2),
    );
    let kt = op(
        &mut g,
        "permute",
        &[k],
        Attrs::new().with("perm", vec![0i64, 1, 3, 2]),
    );
    let sc = bin(&mut g, "matmul", q, kt);
    let root = c(&mut g, (hd as f64).sqrt());
    let sc = bin(&mut g, "div", sc, root);
    let sc = bin(&mut g, "add", sc, mask);
    let mx = g.reduce_keep("reduce_max", sc, &[-1]).unwrap();
    let df = bin(&mut g, "sub", sc, mx);
    let e = g.unary("exp", df).unwrap();
    let sm = g.reduce_keep("reduce_sum", e, &[-1]).unwrap();
    let p = bin(&mut g, "div", e, sm);
    let ctx = bin(&mut g, "matmul", p, v);
    let ctx = op(
        &mut g,
        "permute",
        &[ctx],
        Attrs::new().with("perm", vec![0i64, 2, 1, 3]),
    );
    let ctx = op(
        &mut g,
        "reshape",
        &[ctx],
        Attrs::new().with("shape", vec![b as i64, s as i64, d as i64]),
    );
    let o = bin(&mut g, "matmul", ctx, w_o);
    let o = bin(&mut g, "add", o, b_o);
    let r = bin(&mut g, "add", x, o);
    let layer_norm = |g: &mut GraphBuilder, x: ValueId, [w, bias]: [ValueId; 2]| {
        let mean = g.reduce_keep("reduce_mean", x, &[-1]).unwrap();
        let df = bin(g, "sub", x, mean);
        let two = c(g, 2.0);
        let sq = bin(g, "pow", df, two);
        let var = g.reduce_keep("reduce_mean", sq, &[-1]).unwrap();
        let eps = c(g, 1e-12);
        let ve = bin(g, "add", var, eps);
        let sd = g.unary("sqrt", ve).unwrap();
        let n = bin(g, "div", df, sd);
        let y = bin(g, "mul", n, w);
        bin(g, "add", y, bias)
    };
    let h = layer_norm(&mut g, r, ln1);
    let f = bin(&mut g, "matmul", h, w1);
    let f = bin(&mut g, "add", f, b1);
    let k2 = c(&mut g, std::f64::consts::SQRT_2);
    let u = bin(&mut g, "div", f, k2);
    let erf = g.unary("erf", u).unwrap();
    let one = c(&mut g, 1.0);
    let t = bin(&mut g, "add", erf, one);
    let fx = bin(&mut g, "mul", f, t);
    let half = c(&mut g, 0.5);
    let f = bin(&mut g, "mul", fx, half);
    let f = bin(&mut g, "matmul", f, w2);
    let f = bin(&mut g, "add", f, b2);
    let r = bin(&mut g, "add", h, f);
    let y = layer_norm(&mut g, r, ln2);
    g.finish(&[y]).unwrap()
}

#[test]
fn importer_style_bert_layer_fuses() {
    let g = importer_layer(2, 8, 32, 4, 64);
    let (h, rep) = run("BERT layer (importer style)", &g);
    let after = &rep.ops_after;
    assert_eq!(count(after, "attention_merged"), 1);
    assert_eq!(count(after, "layer_norm"), 2);
    assert_eq!(count(after, "matmul_bias_act"), 2); // qkv, fc1 (gelu)
    assert_eq!(count(after, "matmul_residual"), 2); // o, fc2
    assert_eq!(count(after, "narrow"), 3); // now leading-axis views
    assert_eq!(rep.fusion.fired.get("packed_qkv_attention"), Some(&1));
    // Every kernel left: the four matmuls (two adding the residual),
    // attention writing its heads merged, two layer norms. The narrows,
    // head splits, transposes and the reshape after attention are views.
    let p = rlx_opt::plan(h).unwrap();
    let mut kernels: Vec<&str> = p.steps.iter().map(|s| s.kernel.as_str()).collect();
    kernels.sort_unstable();
    assert_eq!(
        kernels,
        [
            "attention_merged",
            "layer_norm",
            "layer_norm",
            "matmul_bias_act",
            "matmul_bias_act",
            "matmul_residual",
            "matmul_residual",
        ]
    );
    assert_eq!(rep.kernels_after, 7);
}

#[test]
fn the_report_lists_every_pass_and_fusion_is_the_last_change() {
    let g = importer_layer(1, 4, 8, 2, 16);
    let (h, rep) = compile_pipeline(&g, cpu).unwrap();
    let names: Vec<&str> = rep.passes.stats.iter().map(|s| s.pass.as_str()).collect();
    assert_eq!(&names[names.len() - 2..], ["fuse", "dce"]);
    assert!(names.contains(&"simplify") && names.contains(&"const_fold"));
    let fuse = &rep.passes.stats[names.len() - 2];
    assert!(fuse.changed && fuse.nodes_after < fuse.nodes_before);
    assert_eq!(rep.passes.nodes_after, h.nodes.len());
    let text = rep.to_string();
    assert!(
        text.contains("kernels:") && text.contains("fusion:"),
        "{text}"
    );
    // Fusing the result again changes nothing.
    let (again, _) = Fuse::new().apply(&h).unwrap();
    assert!(rlx_opt::equiv::graphs_identical(&h, &again));
}
