//! Decoder LLMs as HIR blocks whose parameter names are the GGUF tensor
//! names (`blk.0.attn_q.weight`, `output_norm.weight`), so weights load by
//! name with shape checks, and the playground shows the block tree like
//! MiniLM's.
//!
//! One graph serves prefill and decode: `T` new tokens attend to `P`
//! cached positions (a capacity; the mask says which are filled) and to
//! themselves. The cache itself lives outside the graph — each layer
//! returns the keys and values of its `T` new tokens, which the runtime
//! writes into its cache — so the graph stays a pure function of its
//! inputs and every backend runs it as it runs any other.

use super::config::{Arch, LlmConfig};
use rlx_ir::hir::{Activation, Block, Linear, Lower, Model, RmsNorm};
use rlx_ir::{Attrs, DType, IrError, TensorType, ValueId};

/// Per-step inputs shared by every layer.
#[derive(Clone, Copy)]
struct StepInputs {
    /// (T, D/2) RoPE tables for global and (gemma3) sliding layers.
    cos: ValueId,
    sin: ValueId,
    cos_local: ValueId,
    sin_local: ValueId,
    /// (1, 1, 1, T, P + T) bool keep-masks.
    mask: ValueId,
    mask_local: ValueId,
}

/// Self-attention with grouped key/value heads and RoPE.
#[derive(Clone)]
struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    /// gemma3's per-head RMSNorm of queries and keys.
    q_norm: Option<RmsNorm>,
    k_norm: Option<RmsNorm>,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    interleaved: bool,
    scale: f64,
    sliding: bool,
}

impl Attention {
    fn children(&self) -> Vec<(String, &dyn Block)> {
        let mut c: Vec<(String, &dyn Block)> = vec![
            ("attn_q".into(), &self.q),
            ("attn_k".into(), &self.k),
            ("attn_v".into(), &self.v),
            ("attn_output".into(), &self.o),
        ];
        if let (Some(qn), Some(kn)) = (&self.q_norm, &self.k_norm) {
            c.push(("attn_q_norm".into(), qn));
            c.push(("attn_k_norm".into(), kn));
        }
        c
    }

    /// x (1, T, H) → (output (1, T, H), new keys, new values (1, kvh, T, D)).
    fn lower(
        &self,
        cx: &mut Lower,
        x: ValueId,
        step: &StepInputs,
        past: Option<(ValueId, ValueId)>,
    ) -> Result<[ValueId; 3], IrError> {
        let t = cx.dims(x)[1];
        let (kvh, d) = (self.kv_heads, self.head_dim);
        let g = self.heads / kvh;
        let (cos, sin, mask) = if self.sliding {
            (step.cos_local, step.sin_local, step.mask_local)
        } else {
            (step.cos, step.sin, step.mask)
        };
        let rope = Attrs::new().with("interleaved", self.interleaved);
        // Queries as (1, kvh, g, T, D): query head kv·g + j reads key/value
        // head kv, as transformers' repeat_kv lays them out.
        let q = cx.child1("attn_q", &self.q, &[x])?;
        let q = cx.reshape(q, &[1, t, kvh, g, d])?;
        let q = match &self.q_norm {
            Some(n) => cx.child1("attn_q_norm", n, &[q])?,
            None => q,
        };
        let q = cx.permute(q, &[0, 2, 3, 1, 4])?;
        let q = cx.op1("rope", &[q, cos, sin], rope.clone())?;
        let heads = |cx: &mut Lower, name: &str, lin: &Linear| -> Result<ValueId, IrError> {
            let y = cx.child1(name, lin, &[x])?;
            let y = cx.reshape(y, &[1, t, kvh, d])?;
            cx.permute(y, &[0, 2, 1, 3])
        };
        let k = heads(cx, "attn_k", &self.k)?;
        let k = match &self.k_norm {
            Some(n) => cx.child1("attn_k_norm", n, &[k])?,
            None => k,
        };
        let k_new = cx.op1("rope", &[k, cos, sin], rope)?;
        let v_new = heads(cx, "attn_v", &self.v)?;
        // Keys and values as (1, kvh, 1, S, D): every query group of a
        // kv head reads them (broadcast). With a cache, attention reads
        // the cache and the new keys where they are (`attention_cached`):
        // joining them would copy the whole cache every step.
        let unsq = Attrs::new().with("axes", vec![2i64]);
        let kv5 = |cx: &mut Lower, t: ValueId| cx.op1("unsqueeze", &[t], unsq.clone());
        let (k5, v5) = (kv5(cx, k_new)?, kv5(cx, v_new)?);
        let a = match past {
            Some((pk, pv)) => {
                let (pk5, pv5) = (kv5(cx, pk)?, kv5(cx, pv)?);
                cx.op1(
                    "attention_cached",
                    &[q, pk5, pv5, k5, v5, mask],
                    Attrs::new().with("scale", self.scale),
                )?
            }
            None => cx.op1(
                "attention",
                &[q, k5, v5, mask],
                Attrs::new()
                    .with("mask_kind", "custom")
                    .with("scale", self.scale),
            )?,
        };
        let a = cx.permute(a, &[0, 3, 1, 2, 4])?;
        let a = cx.reshape(a, &[1, t, self.heads * d])?;
        let o = cx.child1("attn_output", &self.o, &[a])?;
        Ok([o, k_new, v_new])
    }
}

/// The gated feed-forward: `down(act(gate(x)) · up(x))`.
#[derive(Clone)]
struct FeedForward {
    gate: Linear,
    up: Linear,
    down: Linear,
    activation: Activation,
}

impl FeedForward {
    fn lower(&self, cx: &mut Lower, x: ValueId) -> Result<ValueId, IrError> {
        let g = cx.child1("ffn_gate", &self.gate, &[x])?;
        let u = cx.child1("ffn_up", &self.up, &[x])?;
        let h = if self.activation == Activation::Silu {
            cx.binary("swiglu", g, u)?
        } else {
            let a = self.activation.apply(cx, g)?;
            cx.binary("mul", a, u)?
        };
        cx.child1("ffn_down", &self.down, &[h])
    }
}

/// One pre-norm decoder layer (`blk.N`); gemma3 adds post-norms.
#[derive(Clone)]
struct Layer {
    attn_norm: RmsNorm,
    attn: Attention,
    post_attn_norm: Option<RmsNorm>,
    ffn_norm: RmsNorm,
    ffn: FeedForward,
    post_ffn_norm: Option<RmsNorm>,
}

impl Block for Layer {
    fn kind(&self) -> &'static str {
        "DecoderLayer"
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        let mut c: Vec<(String, &dyn Block)> = vec![("attn_norm".into(), &self.attn_norm)];
        c.extend(self.attn.children());
        if let Some(n) = &self.post_attn_norm {
            c.push(("post_attention_norm".into(), n));
        }
        c.push(("ffn_norm".into(), &self.ffn_norm));
        c.push(("ffn_gate".into(), &self.ffn.gate));
        c.push(("ffn_up".into(), &self.ffn.up));
        c.push(("ffn_down".into(), &self.ffn.down));
        if let Some(n) = &self.post_ffn_norm {
            c.push(("post_ffw_norm".into(), n));
        }
        c
    }
    /// Inputs: x, the six step inputs, then past keys and values if any.
    /// Outputs: x, new keys, new values.
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let x = inputs[0];
        let step = StepInputs {
            cos: inputs[1],
            sin: inputs[2],
            cos_local: inputs[3],
            sin_local: inputs[4],
            mask: inputs[5],
            mask_local: inputs[6],
        };
        let past = (inputs.len() == 9).then(|| (inputs[7], inputs[8]));
        let h = cx.child1("attn_norm", &self.attn_norm, &[x])?;
        let [mut a, k, v] = self.attn.lower(cx, h, &step, past)?;
        if let Some(n) = &self.post_attn_norm {
            a = cx.child1("post_attention_norm", n, &[a])?;
        }
        let x = cx.binary("add", x, a)?;
        let h = cx.child1("ffn_norm", &self.ffn_norm, &[x])?;
        let mut f = self.ffn.lower(cx, h)?;
        if let Some(n) = &self.post_ffn_norm {
            f = cx.child1("post_ffw_norm", n, &[f])?;
        }
        Ok(vec![cx.binary("add", x, f)?, k, v])
    }
}

/// The whole decoder: layers, final norm, output projection. The token
/// embedding is looked up on the host ([`super::embed::TokenTable`]): the
/// table stays in the file's (quantized) type and only the step's rows are
/// decoded, instead of a whole f32 table (670 MB for Gemma-3's) held for a
/// gather of a few rows.
#[derive(Clone)]
struct Decoder {
    hidden: usize,
    embed_scale: Option<f64>,
    layers: Vec<Layer>,
    norm: RmsNorm,
    /// The output projection, in row slices of at most
    /// [`OUTPUT_SLICE_BYTES`] (one for most models).
    output: Vec<Linear>,
    /// The vocabulary rows of each output slice.
    output_rows: Vec<std::ops::Range<usize>>,
    softcap: f64,
    /// Cached positions the graph attends to (0: a first prefill).
    past: usize,
}

impl Block for Decoder {
    fn kind(&self) -> &'static str {
        "DecoderLM"
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        let mut c: Vec<(String, &dyn Block)> = vec![];
        for (i, l) in self.layers.iter().enumerate() {
            c.push((format!("blk.{i}"), l));
        }
        c.push(("output_norm".into(), &self.norm));
        for (i, o) in self.output.iter().enumerate() {
            c.push((output_child(i, self.output.len()), o));
        }
        c
    }
    /// Inputs: the tokens' embedding rows (1, T, hidden) f32, last (1)
    /// i64 (the row whose logits are wanted), cos, sin, cos_local,
    /// sin_local, mask, mask_local, then per layer past keys and values
    /// (1, kvh, P, D) when P > 0.
    /// Outputs: logits (1, vocab), then per layer new keys and values.
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (mut x, last) = (inputs[0], inputs[1]);
        let step = &inputs[2..8];
        if let Some(s) = self.embed_scale {
            // gemma: the embedding times √hidden, rounded to the compute type.
            let c = cx
                .builder()
                .constant(rlx_ir::HostTensor::scalar(s as f32))?;
            x = cx.binary("mul", x, c)?;
        }
        let mut outs = vec![];
        for (i, l) in self.layers.iter().enumerate() {
            let mut args = vec![x];
            args.extend_from_slice(step);
            if self.past > 0 {
                args.extend_from_slice(&inputs[8 + 2 * i..10 + 2 * i]);
            }
            let r = cx.child(&format!("blk.{i}"), l, &args)?;
            x = r[0];
            outs.extend([r[1], r[2]]);
        }
        // Only the wanted row goes through the norm and the projection.
        let x = cx.op1("index_select", &[x, last], Attrs::new().with("axis", 1i64))?;
        let x = cx.child1("output_norm", &self.norm, &[x])?;
        let n = self.output.len();
        let parts = (0..n)
            .map(|i| cx.child1(&output_child(i, n), &self.output[i], &[x]))
            .collect::<Result<Vec<_>, _>>()?;
        let mut logits = if n == 1 {
            parts[0]
        } else {
            cx.op1("concat", &parts, Attrs::new().with("axis", 2i64))?
        };
        if self.softcap > 0.0 {
            let c = cx
                .builder()
                .constant(rlx_ir::HostTensor::scalar(self.softcap as f32))?;
            let inv = cx
                .builder()
                .constant(rlx_ir::HostTensor::scalar((1.0 / self.softcap) as f32))?;
            let y = cx.binary("mul", logits, inv)?;
            let y = cx.op1("tanh", &[y], Attrs::new())?;
            logits = cx.binary("mul", y, c)?;
        }
        let v = cx.dims(logits)[2];
        let mut all = vec![cx.reshape(logits, &[1, v])?];
        all.extend(outs);
        Ok(all)
    }
}

/// The largest output-projection slice. WebGPU's default storage-buffer
/// binding limit is 128 MiB, and Gemma-3's (262144 × 640 Q8_0, 170 MiB)
/// and Qwen2.5's (151936 × 896 Q8_0, 138 MiB) projections exceed it; in
/// slices (one `dequant_matmul` each, logits concatenated) every backend
/// runs them. Smaller projections stay one `output` child.
pub const OUTPUT_SLICE_BYTES: u64 = 128 << 20;

/// The row ranges of a (vocab, hidden) output projection of `dtype`.
pub fn output_slices(vocab: usize, hidden: usize, dtype: DType) -> Vec<std::ops::Range<usize>> {
    let row = rlx_ir::limits::tensor_bytes(dtype, &[1, hidden])
        .unwrap_or(1)
        .max(1);
    let rows = ((OUTPUT_SLICE_BYTES / row) as usize).max(1);
    let parts = vocab.div_ceil(rows).max(1);
    // Equal parts (not full slices and a remainder): fewer distinct shapes.
    let per = vocab.div_ceil(parts);
    (0..parts)
        .map(|i| i * per..((i + 1) * per).min(vocab))
        .collect()
}

/// The block name of output slice `i` of `n`: `output` when whole.
fn output_child(i: usize, n: usize) -> String {
    if n == 1 {
        "output".into()
    } else {
        format!("output_slice{i}")
    }
}

/// The weight types of a decoder: each matrix's dtype (a block type stays
/// quantized and runs through `dequant_matmul`; anything else is f32).
pub trait WeightTypes {
    /// The dtype the graph takes `name` in.
    fn dtype_of(&self, name: &str) -> DType;
    /// Whether the file has tensor `name`.
    fn has(&self, name: &str) -> bool;
}

/// A decoder LLM for one config and weight layout.
#[derive(Clone)]
pub struct DecoderModel {
    pub config: LlmConfig,
    root: Decoder,
}

impl DecoderModel {
    /// Build the block tree; `types` says each matrix's dtype.
    pub fn new(config: LlmConfig, types: &dyn WeightTypes) -> DecoderModel {
        let c = &config;
        let (h, d) = (c.hidden, c.head_dim);
        let lin = |name: String, inp: usize, out: usize| {
            let bias = types.has(&name.replace(".weight", ".bias"));
            Linear::new(inp, out, bias).with_dtype(types.dtype_of(&name))
        };
        let norm = |n| RmsNorm::new(n, c.rms_eps);
        let gemma = c.arch == Arch::Gemma3;
        let layers = (0..c.layers)
            .map(|i| {
                let w = |s: &str| format!("blk.{i}.{s}.weight");
                Layer {
                    attn_norm: norm(h),
                    attn: Attention {
                        q: lin(w("attn_q"), h, c.heads * d),
                        k: lin(w("attn_k"), h, c.kv_heads * d),
                        v: lin(w("attn_v"), h, c.kv_heads * d),
                        o: lin(w("attn_output"), c.heads * d, h),
                        q_norm: gemma.then(|| norm(d)),
                        k_norm: gemma.then(|| norm(d)),
                        heads: c.heads,
                        kv_heads: c.kv_heads,
                        head_dim: d,
                        interleaved: c.arch.rope_interleaved(),
                        scale: c.attn_scale,
                        sliding: c.is_sliding(i),
                    },
                    post_attn_norm: gemma.then(|| norm(h)),
                    ffn_norm: norm(h),
                    ffn: FeedForward {
                        gate: lin(w("ffn_gate"), h, c.ffn),
                        up: lin(w("ffn_up"), h, c.ffn),
                        down: lin(w("ffn_down"), c.ffn, h),
                        activation: if gemma {
                            Activation::GeluTanh
                        } else {
                            Activation::Silu
                        },
                    },
                    post_ffn_norm: gemma.then(|| norm(h)),
                }
            })
            .collect();
        let output_name = if c.tied_embeddings {
            "token_embd.weight"
        } else {
            "output.weight"
        };
        let output_rows = output_slices(c.vocab_size, h, types.dtype_of(output_name));
        let root = Decoder {
            hidden: h,
            embed_scale: gemma.then(|| (h as f64).sqrt()),
            layers,
            norm: norm(h),
            output: output_rows
                .iter()
                .map(|r| Linear::new(h, r.len(), false).with_dtype(types.dtype_of(output_name)))
                .collect(),
            output_rows,
            softcap: c.logit_softcap,
            past: 0,
        };
        DecoderModel { config, root }
    }

    /// The HIR model for `t` new tokens over `past` cached positions.
    pub fn model(&self, t: usize, past: usize) -> Model {
        let c = &self.config;
        let half = c.head_dim / 2;
        let mut root = self.root.clone();
        root.past = past;
        let table = TensorType::new(DType::F32, [t, half]);
        let mask = TensorType::new(DType::Bool, [1, 1, 1, t, past + t]);
        let mut m = Model::new("decoder", root)
            .with_input(
                "embeddings",
                TensorType::new(DType::F32, [1, t, self.root.hidden]),
            )
            .with_input("last", TensorType::new(DType::I64, [1]))
            .with_input("cos", table.clone())
            .with_input("sin", table.clone())
            .with_input("cos_local", table.clone())
            .with_input("sin_local", table)
            .with_input("mask", mask.clone())
            .with_input("mask_local", mask);
        if past > 0 {
            let kv = TensorType::new(DType::F32, [1, c.kv_heads, past, c.head_dim]);
            for i in 0..c.layers {
                m = m
                    .with_input(format!("past_k.{i}"), kv.clone())
                    .with_input(format!("past_v.{i}"), kv.clone());
            }
        }
        m
    }

    /// Number of data inputs before the parameters.
    pub fn data_inputs(&self, past: usize) -> usize {
        8 + if past > 0 { 2 * self.config.layers } else { 0 }
    }

    /// Where parameter `name` comes from in the GGUF file: the tensor
    /// (a tied output projection reads the embedding table) and, for an
    /// output slice, its rows.
    pub fn source(&self, name: &str) -> (String, Option<std::ops::Range<usize>>) {
        let out = if self.config.tied_embeddings {
            "token_embd.weight"
        } else {
            "output.weight"
        };
        if name == "output.weight" {
            return (out.into(), None);
        }
        let slice = name
            .strip_prefix("output_slice")
            .and_then(|r| r.strip_suffix(".weight"))
            .and_then(|i| i.parse::<usize>().ok());
        match slice {
            Some(i) => (out.into(), self.root.output_rows.get(i).cloned()),
            None => (name.into(), None),
        }
    }

    /// Every parameter (GGUF name and expected type), in graph order.
    pub fn parameters(&self) -> Vec<rlx_ir::hir::Param> {
        self.model(1, 0).parameters()
    }
}
