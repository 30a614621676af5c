//! Attention in f32, one (batch, head) per task: blocks of query rows get
//! their scores (a block × Sk tile in per-thread scratch — the full
//! Sq × Sk scores tensor is never materialized), scale, mask and softmax
//! in one pass over the tile, then P·V straight into the output rows.
//! q, k and v are read through their strides, so the head-split permutes
//! in front of attention cost nothing.

use super::layout::View;
use super::par::{for_chunks, Scratch};
use super::simd;
use crate::kernels::gemm::{gemm_into, Mat};

/// Query rows per block.
pub const BLOCK: usize = 64;

/// The mask, resolved at compile time where it can be.
pub enum Mask<'a> {
    None,
    /// causal / sliding window: Sq × Sk, true = keep.
    Builtin(&'a [bool]),
    /// A bool mask; `strides` broadcast it over (batch..., Sq, Sk).
    Custom { data: &'a [bool], strides: &'a [usize] },
    /// An additive f32 mask, already broadcast to (batch..., Sq, Sk).
    Bias(View<'a, 'a>),
}

pub struct Dims<'a> {
    pub batch: &'a [usize],
    pub sq: usize,
    pub sk: usize,
    pub d: usize,
    pub dv: usize,
    pub scale: f32,
}

fn mat<'a>(v: &View<'a, '_>, off: usize, rows: usize, cols: usize) -> Mat<'a, f32> {
    let r = v.loc.dims.len();
    Mat {
        data: &v.data[off - v.shift..],
        rows,
        cols,
        row_stride: v.loc.strides[r - 2],
        col_stride: v.loc.strides[r - 1],
    }
}

/// Offset of batch `bi` of `dims`/`strides` broadcast over `batch`
/// (leading axes beyond the last two).
fn batch_offset(dims: &[usize], strides: &[usize], batch: &[usize], mut bi: usize) -> usize {
    let vb = dims.len() - 2;
    let pad = batch.len() - vb;
    let mut off = 0;
    for ax in (0..batch.len()).rev() {
        let c = bi % batch[ax];
        bi /= batch[ax];
        if ax >= pad && dims[ax - pad] != 1 {
            off += c * strides[ax - pad];
        }
    }
    off
}

pub fn scratch(sk: usize) -> usize {
    BLOCK * sk
}

pub fn run(out: &mut [f32], q: &View, k: &View, v: &View, mask: &Mask, dm: &Dims, pool: &Scratch) {
    let Dims { batch, sq, sk, d, dv, scale } = *dm;
    if sq == 0 || dv == 0 {
        return;
    }
    let full_len = batch.len() + 2;
    for_chunks(out, sq * dv, |bi, ob| {
        let qo = q.loc.offset + batch_offset(&q.loc.dims, &q.loc.strides, batch, bi);
        let ko = k.loc.offset + batch_offset(&k.loc.dims, &k.loc.strides, batch, bi);
        let vo = v.loc.offset + batch_offset(&v.loc.dims, &v.loc.strides, batch, bi);
        let km = mat(k, ko, sk, d).t();
        let vm = mat(v, vo, sk, dv);
        pool.with(|scores| {
            simd::dispatch(|| {
                for i0 in (0..sq).step_by(BLOCK) {
                    let rows = BLOCK.min(sq - i0);
                    let qm = mat(q, qo + i0 * q.loc.strides[q.loc.dims.len() - 2], rows, d);
                    let s = &mut scores[..rows * sk];
                    gemm_into(qm, km, s, sk, false, false);
                    for (ri, row) in s.chunks_mut(sk.max(1)).enumerate() {
                        let i = i0 + ri;
                        row.iter_mut().for_each(|x| *x *= scale);
                        match mask {
                            Mask::None => {}
                            Mask::Builtin(m) => {
                                for (x, &keep) in row.iter_mut().zip(&m[i * sk..(i + 1) * sk]) {
                                    if !keep {
                                        *x = f32::NEG_INFINITY;
                                    }
                                }
                            }
                            Mask::Custom { data, strides } => {
                                let (si, sj) = (strides[full_len - 2], strides[full_len - 1]);
                                let base = mask_base(strides, batch, bi) + i * si;
                                for (j, x) in row.iter_mut().enumerate() {
                                    if !data[base + j * sj] {
                                        *x = f32::NEG_INFINITY;
                                    }
                                }
                            }
                            Mask::Bias(b) => {
                                let at = (bi * sq + i) * sk;
                                for (j, x) in row.iter_mut().enumerate() {
                                    *x += b.get(at + j);
                                }
                            }
                        }
                        softmax_row(row);
                    }
                    let pm = Mat::row_major(&s[..], rows, sk);
                    gemm_into(pm, vm, &mut ob[i0 * dv..(i0 + rows) * dv], dv, false, false);
                }
            })
        })
    });
}

fn mask_base(strides: &[usize], batch: &[usize], mut bi: usize) -> usize {
    let mut off = 0;
    for ax in (0..batch.len()).rev() {
        off += (bi % batch[ax]) * strides[ax];
        bi /= batch[ax];
    }
    off
}

/// Softmax of one row in place; a fully masked row gives NaN, as the
/// reference does.
#[inline(always)]
pub fn softmax_row(row: &mut [f32]) {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for x in row.iter_mut() {
        *x = simd::exp(*x - m);
        sum += *x;
    }
    let r = 1.0 / sum;
    row.iter_mut().for_each(|x| *x *= r);
}
