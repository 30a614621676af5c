//! BERT encoders as HIR blocks whose parameter names are exactly the
//! Hugging Face checkpoint's (`encoder.layer.0.attention.self.query.weight`),
//! so weights load by name with shape checks. The same code serves any
//! BERT-family `config.json` (hidden size, layers, heads, intermediate
//! size, vocabulary, positions).

use rlx_ir::hir::{Activation, Block, Embedding, LayerNorm, Linear, Lower, Model, Param};
use rlx_ir::{Attrs, DType, Graph, HostTensor, IrError, TensorType, ValueId};
use serde::Deserialize;

/// The fields of a BERT `config.json` the encoder needs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "two")]
    pub type_vocab_size: usize,
    #[serde(default = "eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "gelu")]
    pub hidden_act: String,
}

fn two() -> usize {
    2
}
fn eps() -> f64 {
    1e-12
}
fn gelu() -> String {
    "gelu".into()
}

impl BertConfig {
    /// Parse `config.json`, checking every value before anything is built
    /// (see [`crate::config`]): sizes positive, `hidden_size` a multiple of
    /// the heads, `layer_norm_eps` a positive finite f32, and the model's
    /// estimated bytes within [`rlx_ir::limits`](mod@rlx_ir::limits) (an [`IrError::Limit`]).
    pub fn from_json(s: &str) -> Result<BertConfig, IrError> {
        Ok(crate::config::parse(s, "config.json")?)
    }

    fn activation(&self) -> Activation {
        match self.hidden_act.as_str() {
            "gelu_new" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            _ => Activation::Gelu,
        }
    }
}

/// Word + position + token-type embeddings, then LayerNorm.
#[derive(Clone)]
struct Embeddings {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
}

impl Block for Embeddings {
    fn kind(&self) -> &'static str {
        "BertEmbeddings"
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("word_embeddings".into(), &self.word),
            ("position_embeddings".into(), &self.position),
            ("token_type_embeddings".into(), &self.token_type),
            ("LayerNorm".into(), &self.norm),
        ]
    }
    /// Inputs: input_ids (B, S), token_type_ids (B, S).
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (ids, types) = (inputs[0], inputs[1]);
        let s = cx.dims(ids)[1];
        if s > self.position.num {
            return Err(cx.err(format!(
                "sequence length {s} exceeds max_position_embeddings {}",
                self.position.num
            )));
        }
        let pos = cx.op1(
            "arange",
            &[],
            Attrs::new().with("len", s).with("dtype", DType::I64),
        )?;
        let w = cx.child1("word_embeddings", &self.word, &[ids])?;
        let p = cx.child1("position_embeddings", &self.position, &[pos])?;
        let t = cx.child1("token_type_embeddings", &self.token_type, &[types])?;
        let x = cx.binary("add", w, t)?;
        let x = cx.binary("add", x, p)?;
        Ok(vec![cx.child1("LayerNorm", &self.norm, &[x])?])
    }
}

/// Multi-head self-attention (`attention.self`): query/key/value.
#[derive(Clone)]
struct SelfAttention {
    query: Linear,
    key: Linear,
    value: Linear,
    heads: usize,
}

impl Block for SelfAttention {
    fn kind(&self) -> &'static str {
        "BertSelfAttention"
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("query".into(), &self.query),
            ("key".into(), &self.key),
            ("value".into(), &self.value),
        ]
    }
    /// Inputs: x (B, S, H), keep-mask (B, 1, 1, S) bool.
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, keep) = (inputs[0], inputs[1]);
        let d = cx.dims(x);
        let (b, s, h) = (d[0], d[1], d[2]);
        let hd = h / self.heads;
        let split = |cx: &mut Lower, name: &str, lin: &Linear| -> Result<ValueId, IrError> {
            let y = cx.child1(name, lin, &[x])?;
            let y = cx.reshape(y, &[b, s, self.heads, hd])?;
            cx.permute(y, &[0, 2, 1, 3])
        };
        let q = split(cx, "query", &self.query)?;
        let k = split(cx, "key", &self.key)?;
        let v = split(cx, "value", &self.value)?;
        let a = cx.op1(
            "attention",
            &[q, k, v, keep],
            Attrs::new().with("mask_kind", "custom"),
        )?;
        let a = cx.permute(a, &[0, 2, 1, 3])?;
        Ok(vec![cx.reshape(a, &[b, s, h])?])
    }
}

/// A dense projection, residual add and LayerNorm (`attention.output` and `output`).
#[derive(Clone)]
struct Output {
    dense: Linear,
    norm: LayerNorm,
}

impl Block for Output {
    fn kind(&self) -> &'static str {
        "BertOutput"
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("dense".into(), &self.dense),
            ("LayerNorm".into(), &self.norm),
        ]
    }
    /// Inputs: the branch to project, the residual.
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let y = cx.child1("dense", &self.dense, &[inputs[0]])?;
        let y = cx.binary("add", y, inputs[1])?;
        Ok(vec![cx.child1("LayerNorm", &self.norm, &[y])?])
    }
}

#[derive(Clone)]
struct Attention {
    this: SelfAttention,
    output: Output,
}

impl Block for Attention {
    fn kind(&self) -> &'static str {
        "BertAttention"
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![("self".into(), &self.this), ("output".into(), &self.output)]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let a = cx.child1("self", &self.this, inputs)?;
        cx.child("output", &self.output, &[a, inputs[0]])
    }
}

/// One encoder layer: attention, then the feed-forward with its own
/// residual and LayerNorm (post-norm, as BERT).
#[derive(Clone)]
struct Layer {
    attention: Attention,
    intermediate: Linear,
    output: Output,
}

impl Block for Layer {
    fn kind(&self) -> &'static str {
        "BertLayer"
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("attention".into(), &self.attention),
            ("intermediate.dense".into(), &self.intermediate),
            ("output".into(), &self.output),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let a = cx.child1("attention", &self.attention, inputs)?;
        let h = cx.child1("intermediate.dense", &self.intermediate, &[a])?;
        cx.child("output", &self.output, &[h, a])
    }
}

/// The encoder with the sentence-transformers head: inputs `input_ids`,
/// `attention_mask`, `token_type_ids` (all i64, (B, S)); outputs the last
/// hidden state (B, S, H) and, when `pooling` is on, the L2-normalized
/// masked mean (B, H).
#[derive(Clone)]
struct Encoder {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    pooling: bool,
}

impl Block for Encoder {
    fn kind(&self) -> &'static str {
        "BertModel"
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        let mut c: Vec<(String, &dyn Block)> = vec![("embeddings".into(), &self.embeddings)];
        for (i, l) in self.layers.iter().enumerate() {
            c.push((format!("encoder.layer.{i}"), l));
        }
        c
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (ids, mask, types) = (inputs[0], inputs[1], inputs[2]);
        let d = cx.dims(ids);
        let (b, s) = (d[0], d[1]);
        let mut x = cx.child1("embeddings", &self.embeddings, &[ids, types])?;
        // Keys where attention_mask == 0 (padding) are never attended to.
        let zero = cx.builder().constant(HostTensor::scalar(0i64))?;
        let keep = cx.binary("ne", mask, zero)?;
        let keep4 = cx.reshape(keep, &[b, 1, 1, s])?;
        for (i, l) in self.layers.iter().enumerate() {
            x = cx.child1(&format!("encoder.layer.{i}"), l, &[x, keep4])?;
        }
        if !self.pooling {
            return Ok(vec![x]);
        }
        Ok(vec![x, mean_pool_normalize(cx, x, mask)?])
    }
}

/// sentence-transformers' head: Σ(h·m) / max(Σm, 1e-9), then x / max(‖x‖, 1e-12).
fn mean_pool_normalize(cx: &mut Lower, x: ValueId, mask: ValueId) -> Result<ValueId, IrError> {
    let dt = cx.ty(x).dtype;
    let m = cx.op1("cast", &[mask], Attrs::new().with("dtype", dt))?;
    let m3 = cx.op1("unsqueeze", &[m], Attrs::new().with("axes", vec![-1i64]))?;
    let hm = cx.binary("mul", x, m3)?;
    let sum = cx.op1("reduce_sum", &[hm], Attrs::new().with("axes", vec![1i64]))?;
    let count = cx.op1("reduce_sum", &[m3], Attrs::new().with("axes", vec![1i64]))?;
    let count = cx.op1("clamp", &[count], Attrs::new().with("min", 1e-9))?;
    let mean = cx.binary("div", sum, count)?;
    let sq = cx.binary("mul", mean, mean)?;
    let ss = cx.op1(
        "reduce_sum",
        &[sq],
        Attrs::new().with("axes", vec![-1i64]).with("keepdim", true),
    )?;
    let norm = cx.op1("sqrt", &[ss], Attrs::new())?;
    let norm = cx.op1("clamp", &[norm], Attrs::new().with("min", 1e-12))?;
    cx.binary("div", mean, norm)
}

/// A BERT encoder for one config.
pub struct Bert {
    pub config: BertConfig,
    root: Encoder,
}

impl Bert {
    /// [`Bert::new`] for a config built in code rather than read by
    /// [`BertConfig::from_json`]: checks it the same way first (sizes,
    /// `layer_norm_eps`, estimated bytes against
    /// [`rlx_ir::limits`](mod@rlx_ir::limits)), so a
    /// bad config is an error before any layer is built.
    pub fn try_new(config: BertConfig, pooling: bool) -> Result<Bert, IrError> {
        crate::config::check(&config, "BertConfig", &rlx_ir::limits())?;
        Ok(Bert::new(config, pooling))
    }

    /// Build from a config; `pooling` adds the sentence-embedding head.
    /// The config is trusted: one from [`BertConfig::from_json`] has been
    /// checked; use [`Bert::try_new`] for others.
    pub fn new(config: BertConfig, pooling: bool) -> Bert {
        let c = &config;
        let (h, eps) = (c.hidden_size, c.layer_norm_eps);
        let out = |inp| Output {
            dense: Linear::new(inp, h, true),
            norm: LayerNorm::new(h, eps),
        };
        let layers = (0..c.num_hidden_layers)
            .map(|_| Layer {
                attention: Attention {
                    this: SelfAttention {
                        query: Linear::new(h, h, true),
                        key: Linear::new(h, h, true),
                        value: Linear::new(h, h, true),
                        heads: c.num_attention_heads,
                    },
                    output: out(h),
                },
                intermediate: Linear::new(h, c.intermediate_size, true)
                    .with_activation(c.activation()),
                output: out(c.intermediate_size),
            })
            .collect();
        let embeddings = Embeddings {
            word: Embedding::new(c.vocab_size, h),
            position: Embedding::new(c.max_position_embeddings, h),
            token_type: Embedding::new(c.type_vocab_size, h),
            norm: LayerNorm::new(h, eps),
        };
        Bert {
            root: Encoder {
                embeddings,
                layers,
                pooling,
            },
            config,
        }
    }

    /// Post-training weight-only quantization: every dense layer's weight
    /// (Q/K/V, attention output, intermediate, output) stored in the block
    /// type `dtype` and multiplied by `dequant_matmul`; embeddings, norms
    /// and biases stay f32. An error when a layer's input width is not a
    /// whole number of the type's blocks (MiniLM's 384 takes the 32-element
    /// types, not the 256-element k-quants).
    pub fn with_weight_dtype(mut self, dtype: DType) -> Result<Bert, IrError> {
        let rlx_ir::dtype::Storage::Block { block, .. } = dtype.storage() else {
            return Err(IrError::Msg(format!(
                "{dtype} is not a block-quantized type"
            )));
        };
        for l in &mut self.root.layers {
            let a = &mut l.attention;
            for lin in [
                &mut a.this.query,
                &mut a.this.key,
                &mut a.this.value,
                &mut a.output.dense,
                &mut l.intermediate,
                &mut l.output.dense,
            ] {
                if lin.in_features % block != 0 {
                    return Err(IrError::Msg(format!(
                        "a dense layer has {} inputs, not a whole number of {dtype} blocks of {block}; use a 32-element type (q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4)",
                        lin.in_features
                    )));
                }
                *lin = lin.clone().with_dtype(dtype);
            }
        }
        Ok(self)
    }

    /// The HIR model for a batch of `batch` sequences of `seq` tokens.
    pub fn model(&self, batch: usize, seq: usize) -> Model {
        let ids = TensorType::new(DType::I64, [batch, seq]);
        Model::new("bert", self.root.clone())
            .with_input("input_ids", ids.clone())
            .with_input("attention_mask", ids.clone())
            .with_input("token_type_ids", ids)
    }
}

impl Bert {
    /// The verified MIR graph for (batch, seq): inputs `input_ids`,
    /// `attention_mask`, `token_type_ids`, then every parameter by its
    /// checkpoint name.
    pub fn graph(&self, batch: usize, seq: usize) -> Result<Graph, IrError> {
        self.model(batch, seq).to_mir()
    }

    /// Every parameter: checkpoint name and expected type.
    pub fn parameters(&self) -> Vec<Param> {
        self.model(1, 1).parameters()
    }

    /// Load every parameter through `load(name, expected type)`, in graph
    /// input order (after the three data inputs). `load` must check shapes.
    pub fn load_parameters<E>(
        &self,
        mut load: impl FnMut(&str, &TensorType) -> Result<HostTensor, E>,
    ) -> Result<Vec<HostTensor>, E> {
        self.parameters()
            .iter()
            .map(|p| load(&p.name, &p.ty))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> BertConfig {
        BertConfig::from_json(
            r#"{"vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
                "intermediate_size": 16, "max_position_embeddings": 16, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}"#,
        )
        .unwrap()
    }

    #[test]
    fn parameter_names_match_hugging_face_checkpoints() {
        let b = Bert::new(tiny(), true);
        let names: Vec<String> = b.parameters().into_iter().map(|p| p.name).collect();
        for want in [
            "embeddings.word_embeddings.weight",
            "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight",
            "embeddings.LayerNorm.weight",
            "encoder.layer.0.attention.self.query.weight",
            "encoder.layer.0.attention.self.value.bias",
            "encoder.layer.0.attention.output.dense.weight",
            "encoder.layer.0.attention.output.LayerNorm.bias",
            "encoder.layer.1.intermediate.dense.weight",
            "encoder.layer.1.output.dense.weight",
            "encoder.layer.1.output.LayerNorm.weight",
        ] {
            assert!(names.iter().any(|n| n == want), "missing {want}: {names:?}");
        }
        // 5 embedding tensors + 16 per layer.
        assert_eq!(names.len(), 5 + 16 * 2);
    }

    #[test]
    fn graph_verifies_with_the_expected_outputs() {
        let g = Bert::new(tiny(), true).graph(3, 5).unwrap();
        let outs = g.output_types();
        assert_eq!(outs[0], TensorType::new(DType::F32, [3, 5, 8]));
        assert_eq!(outs[1], TensorType::new(DType::F32, [3, 8]));
        let text = rlx_ir::text::print(&g);
        assert_eq!(
            rlx_ir::text::print(&rlx_ir::text::parse(&text).unwrap()),
            text
        );
    }

    #[test]
    fn try_new_checks_a_config_built_in_code() {
        let mut c = tiny();
        c.num_hidden_layers = 1_000_000_000;
        c.hidden_size = 4096;
        c.num_attention_heads = 32;
        let e = Bert::try_new(c, true)
            .err()
            .expect("a huge config was built");
        assert!(
            matches!(&e, IrError::Limit(l) if l.limit == "max_arena_bytes"),
            "{e}"
        );
        let mut c = tiny();
        c.layer_norm_eps = f64::NAN;
        let e = Bert::try_new(c, true).err().expect("eps NaN was accepted");
        assert!(e.to_string().contains("`layer_norm_eps` is NaN"), "{e}");
        assert!(Bert::try_new(tiny(), true).is_ok());
    }

    #[test]
    fn bad_configs_are_typed_errors() {
        let e = BertConfig::from_json(r#"{"vocab_size": 5, "hidden_size": 10, "num_hidden_layers": 1, "num_attention_heads": 3, "intermediate_size": 4, "max_position_embeddings": 8}"#).unwrap_err();
        assert!(e.to_string().contains("must be a multiple"), "{e}");
        let e = Bert::new(tiny(), false).graph(1, 17).unwrap_err();
        assert!(
            e.to_string().contains("exceeds max_position_embeddings"),
            "{e}"
        );
    }
}
