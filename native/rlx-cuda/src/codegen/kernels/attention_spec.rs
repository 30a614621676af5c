//! What the attention kernels share: the problem ([`AttentionSpec`]), its
//! mask, and the strides every kernel bakes into its text.

use super::{offset, st, unravel};
use crate::ctype::{lit, load};
use rlx_ir::DType;

/// Where a score is masked or biased in attention.
#[derive(Clone, Debug)]
pub enum Mask {
    None,
    /// Keep where the mask is non-zero (bool or numeric), strides over (batch..., sq, sk).
    Keep {
        dtype: DType,
        strides: Vec<i64>,
    },
    /// Add the mask.
    Bias {
        dtype: DType,
        strides: Vec<i64>,
    },
}

/// The mask's kernel parameter (input slot `slot`) and the statement that
/// applies it to score `var` of query row `row` and key `j`: −inf where a
/// keep-mask is false, or the additive bias. One definition for the three
/// attention kernels.
pub(super) fn mask_source(
    mask: &Mask,
    batch: &[usize],
    slot: usize,
    row: &str,
    var: &str,
) -> (String, String) {
    let r = batch.len();
    match mask {
        Mask::None => (String::new(), String::new()),
        Mask::Keep { dtype, strides } | Mask::Bias { dtype, strides } => {
            let param = format!(", const {}* __restrict__ in{slot}", st(*dtype));
            let moff = format!(
                "{} + {row} * {}LL + j * {}LL",
                offset(batch, &strides[..r]),
                strides[r],
                strides[r + 1]
            );
            let m = load(*dtype, &format!("in{slot}[{moff}]"));
            let code = if matches!(mask, Mask::Keep { .. }) {
                format!("if (!({m} != 0)) {var} = -__int_as_float(0x7f800000);")
            } else {
                format!("{var} += (float)({m});")
            };
            (param, code)
        }
    }
}

/// One attention problem, as the three attention kernels take it:
/// softmax(q·kᵀ·scale + mask)·v over `batch` heads. Strides are in
/// elements over (batch..., rows, cols) of q (sq × dh), k (sk × dh),
/// v (sk × dv) and the output (sq × dv).
#[derive(Clone, Copy, Debug)]
pub struct AttentionSpec<'a> {
    /// K and V rows are whole float4s, 16-byte aligned (f32): staged a
    /// float4 at a time.
    pub vec_kv: bool,
    pub dtype: DType,
    pub batch: &'a [usize],
    pub sq: usize,
    pub sk: usize,
    pub dh: usize,
    pub dv: usize,
    pub q: &'a [i64],
    pub k: &'a [i64],
    pub v: &'a [i64],
    pub out: &'a [i64],
    pub mask: &'a Mask,
    pub scale: f64,
}

/// The per-head base offsets and the row/column strides every attention
/// kernel bakes into its text.
pub(super) struct AttentionStrides {
    /// Head base offsets of q, k, v and out (C expressions over `c0..`).
    pub(super) qb: String,
    pub(super) kb: String,
    pub(super) vb: String,
    pub(super) ob: String,
    /// (row, column) strides.
    pub(super) q: (i64, i64),
    pub(super) k: (i64, i64),
    pub(super) v: (i64, i64),
    pub(super) o: (i64, i64),
    /// Code that sets `c0..` from the head index `b`.
    pub(super) unravel: String,
    /// The scale as an f32 literal.
    pub(super) scale: String,
}

impl AttentionSpec<'_> {
    pub(super) fn strides(&self) -> AttentionStrides {
        let r = self.batch.len();
        let boff = |s: &[i64]| offset(self.batch, &s[..r]);
        let rc = |s: &[i64]| (s[r], s[r + 1]);
        AttentionStrides {
            qb: boff(self.q),
            kb: boff(self.k),
            vb: boff(self.v),
            ob: boff(self.out),
            q: rc(self.q),
            k: rc(self.k),
            v: rc(self.v),
            o: rc(self.out),
            unravel: unravel(self.batch, "b"),
            scale: lit(DType::F32, self.scale as f32 as f64),
        }
    }

    pub(super) fn heads(&self) -> usize {
        self.batch.iter().product()
    }
}
