//! Multi-head attention (with GQA and RoPE options).

use super::*;

/// Multi-head self-attention over (B, S, D) inputs. Children `q`, `k`, `v`,
/// `o` (Linear). With `kv_heads < heads` it is grouped-query attention:
/// query head h reads key/value head h / (heads / kv_heads), as in llama.
///
/// Inputs: `x`, optionally a mask: bool (keep where true) or additive
/// float, shaped (S, S) or (B|1, heads|1, S, S). A causal block combines a
/// given mask with causality. Optional rotary embeddings (NeoX halves,
/// positions 0..S) are applied to q and k.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub heads: usize,
    pub kv_heads: usize,
    pub causal: bool,
    /// RoPE base frequency (theta) when rotary embeddings are used.
    pub rope_theta: Option<f64>,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
}

/// The head layout of one attention application.
#[derive(Clone, Copy, Debug)]
struct Heads {
    batch: usize,
    seq: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl Heads {
    /// Grouped-query layouts need a group axis; MHA and MQA (one kv head)
    /// broadcast as they are.
    fn grouped(&self) -> bool {
        self.kv_heads > 1 && self.kv_heads < self.heads
    }
    fn group(&self) -> usize {
        self.heads / self.kv_heads
    }
}

impl Attention {
    /// Multi-head attention with biased projections, f32, no RoPE.
    pub fn new(dim: usize, heads: usize, causal: bool) -> Self {
        Attention {
            heads,
            kv_heads: heads,
            causal,
            rope_theta: None,
            q: Linear::new(dim, dim, true),
            k: Linear::new(dim, dim, true),
            v: Linear::new(dim, dim, true),
            o: Linear::new(dim, dim, true),
        }
    }
    /// Builder-style: grouped-query attention with `kv_heads` key/value
    /// heads (resizes the k and v projections).
    pub fn with_kv_heads(mut self, kv_heads: usize) -> Self {
        // A zero head count is reported by `lower`; here it must not divide by zero.
        let head_dim = self.q.out_features.checked_div(self.heads).unwrap_or(0);
        self.kv_heads = kv_heads;
        self.k.out_features = kv_heads.saturating_mul(head_dim);
        self.v.out_features = kv_heads.saturating_mul(head_dim);
        self
    }
    /// Builder-style: biases on all four projections.
    pub fn with_bias(mut self, bias: bool) -> Self {
        for l in [&mut self.q, &mut self.k, &mut self.v, &mut self.o] {
            l.bias = bias;
        }
        self
    }
    /// Builder-style: rotary embeddings with base `theta` (None: off).
    pub fn with_rope(mut self, theta: Option<f64>) -> Self {
        self.rope_theta = theta;
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        for l in [&mut self.q, &mut self.k, &mut self.v, &mut self.o] {
            l.dtype = dtype;
        }
        self
    }

    /// Check the configuration against x (B, S, D); returns the layout.
    fn heads_of(&self, cx: &Lower, x: ValueId) -> Result<Heads, IrError> {
        let dims = cx.dims(x);
        let d = self.q.in_features;
        if dims.len() != 3 || dims[2] != d {
            return Err(cx.err(format!("expects x as (B, S, {d}), got {}", cx.ty(x))));
        }
        let (h, kh) = (self.heads, self.kv_heads);
        if h == 0 || kh == 0 || !h.is_multiple_of(kh) || !self.q.out_features.is_multiple_of(h) {
            return Err(cx.err(format!(
                "heads = {h} must be positive, divide the q width {} and be a multiple of kv_heads = {kh}",
                self.q.out_features
            )));
        }
        let hd = self.q.out_features / h;
        if self.k.out_features != kh * hd
            || self.v.out_features != kh * hd
            || self.o.in_features != h * hd
        {
            return Err(cx.err(format!(
                "k and v must produce kv_heads·head_dim = {} features and o take {}; got k {}, v {}, o {}",
                kh * hd,
                h * hd,
                self.k.out_features,
                self.v.out_features,
                self.o.in_features
            )));
        }
        if self.k.in_features != d || self.v.in_features != d {
            return Err(cx.err(format!("k and v must take {d} features")));
        }
        if self.rope_theta.is_some() && !hd.is_multiple_of(2) {
            return Err(cx.err(format!("rotary embeddings need an even head_dim, got {hd}")));
        }
        Ok(Heads {
            batch: dims[0],
            seq: dims[1],
            heads: h,
            kv_heads: kh,
            head_dim: hd,
        })
    }

    /// The mask input and `mask_kind` for the attention op.
    fn mask(
        &self,
        cx: &mut Lower,
        mask: Option<ValueId>,
        hs: &Heads,
        dtype: DType,
    ) -> Result<(Option<ValueId>, &'static str), IrError> {
        let Some(m) = mask else {
            return Ok((None, if self.causal { "causal" } else { "none" }));
        };
        let custom = cx.ty(m).dtype == DType::Bool;
        let mut m = mask_layout(cx, m, hs)?;
        if self.causal {
            // The op takes one mask kind, so causality is folded into the given mask.
            let keep: Vec<bool> = (0..hs.seq)
                .flat_map(|i| (0..hs.seq).map(move |j| j <= i))
                .collect();
            let keep = cx
                .builder()
                .constant(HostTensor::from_slice(&keep, [hs.seq, hs.seq])?)?;
            m = if custom {
                cx.binary("and", m, keep)?
            } else {
                let ninf = cx.builder().scalar(f64::NEG_INFINITY, dtype)?;
                cx.op1("where", &[keep, m, ninf], Attrs::new())?
            };
        }
        Ok((Some(m), if custom { "custom" } else { "bias" }))
    }
}

/// (B, S, H·hd) → (B, H, S, hd).
fn split_heads(cx: &mut Lower, x: ValueId, hs: &Heads, heads: usize) -> Result<ValueId, IrError> {
    let r = cx.reshape(x, &[hs.batch, hs.seq, heads, hs.head_dim])?;
    cx.permute(r, &[0, 2, 1, 3])
}

/// (B, H, S, hd) → (B, S, H·hd).
fn merge_heads(cx: &mut Lower, y: ValueId, hs: &Heads) -> Result<ValueId, IrError> {
    let p = cx.permute(y, &[0, 2, 1, 3])?;
    cx.reshape(p, &[hs.batch, hs.seq, hs.heads * hs.head_dim])
}

/// A user mask in the layout of the scores: for grouped heads the head axis
/// is split into (kv_heads, group) like the queries.
fn mask_layout(cx: &mut Lower, m: ValueId, hs: &Heads) -> Result<ValueId, IrError> {
    let d = cx.dims(m);
    let ok = match d.len() {
        2 => true,
        4 => d[1] == 1 || d[1] == hs.heads,
        _ => false,
    };
    if !ok {
        return Err(cx.err(format!(
            "mask must be (S, S) or (B|1, {}|1, S, S), got {}",
            hs.heads,
            cx.ty(m)
        )));
    }
    if d.len() == 2 || !hs.grouped() {
        return Ok(m);
    }
    let heads = if d[1] == 1 {
        [1, 1]
    } else {
        [hs.kv_heads, hs.group()]
    };
    cx.reshape(m, &[d[0], heads[0], heads[1], d[2], d[3]])
}

/// The (S, hd/2) cos and sin tables of rotary embeddings at positions 0..S.
fn rope_tables(
    cx: &mut Lower,
    seq: usize,
    head_dim: usize,
    theta: f64,
    dtype: DType,
) -> Result<(ValueId, ValueId), IrError> {
    let half = head_dim / 2;
    let angles: Vec<f64> = (0..seq)
        .flat_map(|p| {
            (0..half).map(move |i| p as f64 * theta.powf(-2.0 * i as f64 / head_dim as f64))
        })
        .collect();
    let table = |f: fn(f64) -> f64| {
        HostTensor::from_f64(dtype, [seq, half], angles.iter().map(|&a| f(a)).collect())
    };
    let cos = cx.builder().constant(table(f64::cos)?)?;
    let sin = cx.builder().constant(table(f64::sin)?)?;
    Ok((cos, sin))
}

impl Block for Attention {
    fn kind(&self) -> &'static str {
        "Attention"
    }
    fn describe(&self) -> String {
        let rope = self
            .rope_theta
            .map(|t| format!(", rope_theta={t}"))
            .unwrap_or_default();
        format!(
            "Attention(dim={}, heads={}, kv_heads={}, causal={}{rope})",
            self.q.in_features, self.heads, self.kv_heads, self.causal
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("q".into(), &self.q),
            ("k".into(), &self.k),
            ("v".into(), &self.v),
            ("o".into(), &self.o),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, mask) = match inputs {
            [x] => (*x, None),
            [x, m] => (*x, Some(*m)),
            _ => {
                return Err(cx.err(format!(
                    "expects x and an optional mask, got {} inputs",
                    inputs.len()
                )))
            }
        };
        let hs = self.heads_of(cx, x)?;
        let dtype = cx.ty(x).dtype;
        let q = cx.child1("q", &self.q, &[x])?;
        let k = cx.child1("k", &self.k, &[x])?;
        let v = cx.child1("v", &self.v, &[x])?;
        let mut q = split_heads(cx, q, &hs, hs.heads)?;
        let mut k = split_heads(cx, k, &hs, hs.kv_heads)?;
        let mut v = split_heads(cx, v, &hs, hs.kv_heads)?;
        if let Some(theta) = self.rope_theta {
            let (cos, sin) = rope_tables(cx, hs.seq, hs.head_dim, theta, dtype)?;
            let qk = cx.op("qk_rope", &[q, k, cos, sin], Attrs::new())?;
            (q, k) = (qk[0], qk[1]);
        }
        if hs.grouped() {
            // (B, KH, g, S, hd) queries against (B, KH, 1, S, hd) keys and
            // values: the batch axes broadcast, so kv heads are never copied.
            let (b, s, hd) = (hs.batch, hs.seq, hs.head_dim);
            q = cx.reshape(q, &[b, hs.kv_heads, hs.group(), s, hd])?;
            k = cx.reshape(k, &[b, hs.kv_heads, 1, s, hd])?;
            v = cx.reshape(v, &[b, hs.kv_heads, 1, s, hd])?;
        }
        let (mask, kind) = self.mask(cx, mask, &hs, dtype)?;
        let mut args = vec![q, k, v];
        args.extend(mask);
        let mut y = cx.op1("attention", &args, Attrs::new().with("mask_kind", kind))?;
        if hs.grouped() {
            y = cx.reshape(y, &[hs.batch, hs.heads, hs.seq, hs.head_dim])?;
        }
        let y = merge_heads(cx, y, &hs)?;
        Ok(vec![cx.child1("o", &self.o, &[y])?])
    }
}
