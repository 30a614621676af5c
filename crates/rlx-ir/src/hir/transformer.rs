//! Transformer encoder and decoder layers, and the encoder stack.

use super::*;

/// A BERT-style encoder layer over (B, S, D). Post-norm by default:
/// `x = ln1(x + attn(x)); x = ln2(x + mlp(x))`; with `norm_first`:
/// `x = x + attn(ln1(x)); x = x + mlp(ln2(x))`. Children `attn`, `ln1`,
/// `mlp` (gelu), `ln2`. Inputs: `x` and an optional attention mask.
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerEncoderLayer {
    pub norm_first: bool,
    pub attn: Attention,
    pub ln1: LayerNorm,
    pub mlp: Mlp,
    pub ln2: LayerNorm,
}

impl TransformerEncoderLayer {
    /// Post-norm, biased projections, gelu, f32.
    pub fn new(dim: usize, heads: usize, hidden: usize, eps: f64) -> Self {
        TransformerEncoderLayer {
            norm_first: false,
            attn: Attention::new(dim, heads, false),
            ln1: LayerNorm::new(dim, eps),
            mlp: Mlp::new(dim, hidden, Activation::Gelu),
            ln2: LayerNorm::new(dim, eps),
        }
    }
    /// Builder-style: pre-norm (true) or post-norm (false).
    pub fn with_norm_first(mut self, norm_first: bool) -> Self {
        self.norm_first = norm_first;
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.attn = self.attn.with_dtype(dtype);
        self.ln1.dtype = dtype;
        self.mlp = self.mlp.with_dtype(dtype);
        self.ln2.dtype = dtype;
        self
    }
}

/// `x` and an optional mask.
fn x_and_mask(cx: &Lower, inputs: &[ValueId]) -> Result<(ValueId, Option<ValueId>), IrError> {
    match inputs {
        [x] => Ok((*x, None)),
        [x, m] => Ok((*x, Some(*m))),
        _ => Err(cx.err(format!(
            "expects x and an optional mask, got {} inputs",
            inputs.len()
        ))),
    }
}

/// The attention child's inputs: `x` and the mask, if any.
fn with_mask(x: ValueId, mask: Option<ValueId>) -> Vec<ValueId> {
    std::iter::once(x).chain(mask).collect()
}

impl Block for TransformerEncoderLayer {
    fn kind(&self) -> &'static str {
        "TransformerEncoderLayer"
    }
    fn describe(&self) -> String {
        format!(
            "TransformerEncoderLayer(dim={}, heads={}, hidden={}, {})",
            self.attn.q.in_features,
            self.attn.heads,
            self.mlp.fc1.out_features,
            if self.norm_first {
                "pre-norm"
            } else {
                "post-norm"
            }
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("attn".into(), &self.attn),
            ("ln1".into(), &self.ln1),
            ("mlp".into(), &self.mlp),
            ("ln2".into(), &self.ln2),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, mask) = x_and_mask(cx, inputs)?;
        if self.norm_first {
            let n = cx.child1("ln1", &self.ln1, &[x])?;
            let a = cx.child1("attn", &self.attn, &with_mask(n, mask))?;
            let x = cx.binary("add", x, a)?;
            let n = cx.child1("ln2", &self.ln2, &[x])?;
            let m = cx.child1("mlp", &self.mlp, &[n])?;
            Ok(vec![cx.binary("add", x, m)?])
        } else {
            let a = cx.child1("attn", &self.attn, &with_mask(x, mask))?;
            let r = cx.binary("add", x, a)?;
            let x = cx.child1("ln1", &self.ln1, &[r])?;
            let m = cx.child1("mlp", &self.mlp, &[x])?;
            let r = cx.binary("add", x, m)?;
            Ok(vec![cx.child1("ln2", &self.ln2, &[r])?])
        }
    }
}

/// A stack of encoder layers (children `layers.0`, `layers.1`, ...) with
/// an optional final LayerNorm `norm` (pre-norm stacks have one). Inputs:
/// `x` and an optional mask shared by all layers.
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerEncoder {
    pub layers: Vec<TransformerEncoderLayer>,
    pub norm: Option<LayerNorm>,
}

impl TransformerEncoder {
    /// `num_layers` post-norm layers, no final norm (BERT).
    pub fn new(num_layers: usize, dim: usize, heads: usize, hidden: usize, eps: f64) -> Self {
        let layer = TransformerEncoderLayer::new(dim, heads, hidden, eps);
        TransformerEncoder {
            layers: vec![layer; num_layers],
            norm: None,
        }
    }
}

impl Block for TransformerEncoder {
    fn kind(&self) -> &'static str {
        "TransformerEncoder"
    }
    fn describe(&self) -> String {
        format!(
            "TransformerEncoder(layers={}, final_norm={})",
            self.layers.len(),
            self.norm.is_some()
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        let mut c: Vec<(String, &dyn Block)> = self
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| (format!("layers.{i}"), l as &dyn Block))
            .collect();
        if let Some(n) = &self.norm {
            c.push(("norm".into(), n));
        }
        c
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (mut x, mask) = x_and_mask(cx, inputs)?;
        for (i, layer) in self.layers.iter().enumerate() {
            x = cx.child1(&format!("layers.{i}"), layer, &with_mask(x, mask))?;
        }
        if let Some(n) = &self.norm {
            x = cx.child1("norm", n, &[x])?;
        }
        Ok(vec![x])
    }
}

/// A llama-style decoder layer over (B, S, D): pre-norm with RMSNorm,
/// causal self-attention with RoPE and no biases, SwiGLU feed-forward:
/// `h = x + attn(attn_norm(x)); y = h + mlp(mlp_norm(h))`. Children
/// `attn_norm`, `attn`, `mlp_norm`, `mlp`. Inputs: `x` and an optional
/// (padding) mask, combined with causality.
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerDecoderLayer {
    pub attn_norm: RmsNorm,
    pub attn: Attention,
    pub mlp_norm: RmsNorm,
    pub mlp: GatedMlp,
}

/// Llama's default RoPE base.
pub const DEFAULT_ROPE_THETA: f64 = 10000.0;

impl TransformerDecoderLayer {
    /// Multi-head (kv_heads = heads), RoPE theta 10000, f32.
    pub fn new(dim: usize, heads: usize, hidden: usize, eps: f64) -> Self {
        TransformerDecoderLayer {
            attn_norm: RmsNorm::new(dim, eps),
            attn: Attention::new(dim, heads, true)
                .with_bias(false)
                .with_rope(Some(DEFAULT_ROPE_THETA)),
            mlp_norm: RmsNorm::new(dim, eps),
            mlp: GatedMlp::new(dim, hidden),
        }
    }
    /// Builder-style: grouped-query attention.
    pub fn with_kv_heads(mut self, kv_heads: usize) -> Self {
        self.attn = self.attn.with_kv_heads(kv_heads);
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.attn_norm.dtype = dtype;
        self.attn = self.attn.with_dtype(dtype);
        self.mlp_norm.dtype = dtype;
        self.mlp = self.mlp.with_dtype(dtype);
        self
    }
}

impl Block for TransformerDecoderLayer {
    fn kind(&self) -> &'static str {
        "TransformerDecoderLayer"
    }
    fn describe(&self) -> String {
        format!(
            "TransformerDecoderLayer(dim={}, heads={}, kv_heads={}, hidden={})",
            self.attn.q.in_features,
            self.attn.heads,
            self.attn.kv_heads,
            self.mlp.gate.out_features
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("attn_norm".into(), &self.attn_norm),
            ("attn".into(), &self.attn),
            ("mlp_norm".into(), &self.mlp_norm),
            ("mlp".into(), &self.mlp),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, mask) = x_and_mask(cx, inputs)?;
        let n = cx.child1("attn_norm", &self.attn_norm, &[x])?;
        let a = cx.child1("attn", &self.attn, &with_mask(n, mask))?;
        let h = cx.binary("add", x, a)?;
        let n = cx.child1("mlp_norm", &self.mlp_norm, &[h])?;
        let m = cx.child1("mlp", &self.mlp, &[n])?;
        Ok(vec![cx.binary("add", h, m)?])
    }
}
