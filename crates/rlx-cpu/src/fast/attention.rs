//! Attention in f32, one (batch, head) per task: blocks of query rows get
//! their scores (a block × Sk tile in per-thread scratch — the full
//! Sq × Sk scores tensor is never materialized), scale, mask and softmax
//! in one pass over the tile, then P·V straight into the output rows.
//! q, k and v are read through their strides, so the head-split permutes
//! in front of attention cost nothing.
//!
//! The two products run on the `gemm` crate natively and on
//! [`crate::kernels::gemm128`] in the wasm32 build (faster there at these
//! shapes too: `benches/results/wasm-vs-native.md`).

use super::layout::View;
use super::par::{for_chunks, Scratch};
use super::simd::{self, simd_fn, Mad};
use crate::kernels::gemm::Mat;

/// `c (row stride ldc) = scale · a · b` on this thread (`+=` with
/// `accumulate`).
fn product(a: Mat<f32>, b: Mat<f32>, c: &mut [f32], ldc: usize, scale: f32, accumulate: bool) {
    #[cfg(target_arch = "wasm32")]
    {
        crate::kernels::gemm128::gemm_scaled_acc(a, b, c, ldc, scale, accumulate)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        crate::kernels::gemm::gemm_scaled(a, b, c, ldc, accumulate, false, scale)
    }
}

/// Query rows per block.
pub const BLOCK: usize = 128;

/// The mask, resolved at compile time where it can be.
pub enum Mask<'a> {
    None,
    /// causal / sliding window: Sq × Sk, true = keep.
    Builtin(&'a [bool]),
    /// A bool mask; `strides` broadcast it over (batch..., Sq, Sk).
    Custom {
        data: &'a [bool],
        strides: &'a [usize],
    },
    /// An additive f32 mask, already broadcast to (batch..., Sq, Sk).
    Bias(View<'a, 'a>),
}

pub struct Dims<'a> {
    pub batch: &'a [usize],
    pub sq: usize,
    /// Keys attended, in all.
    pub sk: usize,
    /// Of which in `Kv::k` (the rest in `Kv::new`).
    pub sc: usize,
    pub d: usize,
    pub dv: usize,
    pub scale: f32,
}

/// The keys and values: one tensor each, or (`attention_cached`) a
/// cache's and the step's new ones, read where they are — joining them
/// would copy the whole cache every step.
pub struct Kv<'v, 'a, 'b> {
    pub k: &'v View<'a, 'b>,
    pub v: &'v View<'a, 'b>,
    pub new: Option<(&'v View<'a, 'b>, &'v View<'a, 'b>)>,
}

/// Scratch floats one thread needs: a block of scores and a mask row.
pub fn scratch(sk: usize) -> usize {
    BLOCK * sk + sk
}

pub fn run(out: &mut [f32], q: &View, kv: &Kv, mask: &Mask, dm: &Dims, pool: &Scratch) {
    let (sq, dv) = (dm.sq, dm.dv);
    if sq == 0 || dv == 0 {
        return;
    }
    for_chunks(out, sq * dv, |bi, ob| {
        pool.with(|buf| {
            for i0 in (0..sq).step_by(BLOCK) {
                let rows = BLOCK.min(sq - i0);
                attend(&mut ob[i0 * dv..], dv, q, kv, mask, dm, bi, i0, rows, buf);
            }
        })
    });
}

/// The dims attention computes, (.., H, Sq, Dv), from its output's: the
/// same, or when `merged`, (.., Sq, H·Dv) with the heads split off again.
pub fn unmerged(out: &[usize], dv: usize, merged: bool) -> Vec<usize> {
    let r = out.len();
    if !merged || r < 2 {
        return out.to_vec();
    }
    let mut d = out[..r - 2].to_vec();
    d.extend([out[r - 1] / dv.max(1), out[r - 2], dv]);
    d
}

/// [`run`] with the output written with its heads merged: for `q` of
/// (outer..., H, Sq, D), `out` is (outer..., Sq, H·Dv) row-major — the
/// layout `reshape(permute(attention, (.., Sq, H, Dv)))` copies it into,
/// so that copy is not made. Tasks are blocks of query rows of one outer
/// index, all heads each: a contiguous piece of `out`.
#[allow(clippy::too_many_arguments)]
pub fn run_merged(out: &mut [f32], q: &View, kv: &Kv, mask: &Mask, dm: &Dims, pool: &Scratch) {
    let (sq, dv) = (dm.sq, dm.dv);
    let heads = *dm.batch.last().unwrap_or(&1);
    if sq == 0 || dv == 0 || heads == 0 {
        return;
    }
    // Rows per task: the largest divisor of Sq up to BLOCK, halved while
    // that leaves fewer tasks than threads (a batch-1 forward).
    let mut rows = (1..=BLOCK.min(sq)).rev().find(|r| sq % r == 0).unwrap_or(1);
    let outer = out.len() / (sq * heads * dv);
    while rows % 2 == 0 && outer * (sq / rows) < super::par::threads() {
        rows /= 2;
    }
    let blocks = sq / rows;
    let ldo = heads * dv;
    for_chunks(out, rows * ldo, |t, ob| {
        let (o, i0) = (t / blocks, (t % blocks) * rows);
        pool.with(|buf| {
            for h in 0..heads {
                attend(
                    &mut ob[h * dv..],
                    ldo,
                    q,
                    kv,
                    mask,
                    dm,
                    o * heads + h,
                    i0,
                    rows,
                    buf,
                );
            }
        })
    });
}

/// Query rows `i0..i0 + rows` of (batch, head) `bi`: scores against every
/// key (a rows × Sk tile in `buf`), scale, mask, softmax, then P·V into
/// `out` (row stride `ldo`).
#[allow(clippy::too_many_arguments)]
fn attend(
    out: &mut [f32],
    ldo: usize,
    q: &View,
    kv: &Kv,
    mask: &Mask,
    dm: &Dims,
    bi: usize,
    i0: usize,
    rows: usize,
    buf: &mut [f32],
) {
    let Dims {
        batch,
        sq,
        sk,
        sc,
        d,
        dv,
        scale,
    } = *dm;
    let full_len = batch.len() + 2;
    let qo = q.loc.batch_offset(batch, bi);
    // The keys (transposed) and values of each part: [0, sc) and [sc, sk).
    let first = part(kv.k, kv.v, batch, bi, sc, d, dv);
    let second = kv.new.map(|(k, v)| part(k, v, batch, bi, sk - sc, d, dv));
    let qrs = q.loc.strides[q.loc.dims.len() - 2];
    let (scores, mrow) = buf.split_at_mut(BLOCK * sk);
    let mrow = &mut mrow[..sk];
    // A key-padding mask (the same for every query row) becomes one
    // additive row (0 / −inf, or the additive mask's values), applied
    // with the softmax.
    let row_mask = match mask {
        Mask::Custom { data, strides } if strides[full_len - 2] == 0 => {
            let base = mask_base(strides, batch, bi);
            let sj = strides[full_len - 1];
            for (j, m) in mrow.iter_mut().enumerate() {
                *m = if data[base + j * sj] {
                    0.0
                } else {
                    f32::NEG_INFINITY
                };
            }
            true
        }
        // An additive mask broadcast over the query rows (MiniLM's
        // (B, 1, 1, S) padding mask): its row read once, not through
        // strided indexing for every score.
        Mask::Bias(b)
            if b.loc.dims.len() == full_len && (b.loc.strides[full_len - 2] == 0 || sq == 1) =>
        {
            let at = bi * sq * sk;
            for (j, m) in mrow.iter_mut().enumerate() {
                *m = b.get(at + j);
            }
            true
        }
        _ => false,
    };
    let qm = q.mat(qo + i0 * qrs, rows, d);
    let s = &mut scores[..rows * sk];
    product(qm, first.0, s, sk, scale, false);
    if let Some((km, _)) = second {
        product(qm, km, &mut s[sc..], sk, scale, false);
    }
    if !row_mask {
        for (ri, row) in s.chunks_mut(sk.max(1)).enumerate() {
            apply_mask(row, mask, i0 + ri, bi, dm);
        }
    }
    softmax_rows(s, sk, if row_mask { Some(&mrow[..]) } else { None });
    let p_of = |c0: usize, n: usize| Mat {
        data: &s[c0..],
        rows,
        cols: n,
        row_stride: sk,
        col_stride: 1,
    };
    product(p_of(0, sc), first.1, out, ldo, 1.0, false);
    if let Some((_, vm)) = second {
        product(p_of(sc, sk - sc), vm, out, ldo, 1.0, true);
    }
}

/// (batch, head) `bi`'s keys, transposed (D × n), and values (n × Dv).
fn part<'a>(
    k: &View<'a, '_>,
    v: &View<'a, '_>,
    batch: &[usize],
    bi: usize,
    n: usize,
    d: usize,
    dv: usize,
) -> (Mat<'a, f32>, Mat<'a, f32>) {
    let (ko, vo) = (k.loc.batch_offset(batch, bi), v.loc.batch_offset(batch, bi));
    (k.mat(ko, n, d).t(), v.mat(vo, n, dv))
}

/// Any mask other than a key-padding row, element by element.
fn apply_mask(row: &mut [f32], mask: &Mask, i: usize, bi: usize, dm: &Dims) {
    let (sq, sk) = (dm.sq, dm.sk);
    let full_len = dm.batch.len() + 2;
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
            let base = mask_base(strides, dm.batch, bi) + i * si;
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
}

fn mask_base(strides: &[usize], batch: &[usize], mut bi: usize) -> usize {
    let mut off = 0;
    for ax in (0..batch.len()).rev() {
        off += (bi % batch[ax]) * strides[ax];
        bi /= batch[ax];
    }
    off
}

simd_fn! {
    /// Softmax of each row of `sk` in `s`, after adding `add` (a mask row)
    /// when given.
    pub(super) fn softmax_rows(s: &mut [f32], sk: usize, add: Option<&[f32]>) {
        for row in s.chunks_mut(sk.max(1)) {
            match add {
                Some(a) => softmax_row_add::<M, true>(row, a),
                None => softmax_row_add::<M, false>(row, &[]),
            }
        }
    }
}

/// Softmax of one row in place; a fully masked row gives NaN, as the
/// reference does.
#[inline(always)]
pub fn softmax_row<M: Mad>(row: &mut [f32]) {
    softmax_row_add::<M, false>(row, &[])
}

/// Lanes of the partial maxima and sums: one AVX-512 vector (two AVX2
/// ones, four of wasm's), so the reductions vectorize at full width.
const LANES: usize = 16;

/// [`softmax_row`] of `row + add` when `ADD` (the mask row added in the
/// max pass, not in a pass of its own).
#[inline(always)]
fn softmax_row_add<M: Mad, const ADD: bool>(row: &mut [f32], add: &[f32]) {
    let mut mv = [f32::NEG_INFINITY; LANES];
    let mut m = f32::NEG_INFINITY;
    let mut chunks = row.chunks_exact_mut(LANES);
    let mut adds = add.chunks_exact(LANES);
    for c in &mut chunks {
        if ADD {
            let a = adds.next().unwrap_or(&[0.0; LANES]);
            for (x, &y) in c.iter_mut().zip(a) {
                *x += y;
            }
        }
        for (m, &x) in mv.iter_mut().zip(c.iter()) {
            // A compare and select, not `f32::max`: the same result here
            // (NaNs are skipped either way, and the row's NaN comes back
            // through exp), but it stays a vector max on wasm32
            // (`f32x4.pmax`), where `f32::max`'s semantics were
            // scalarized — the pass then ran element by element.
            *m = if x > *m { x } else { *m };
        }
    }
    let rest = chunks.into_remainder();
    if ADD {
        for (x, &y) in rest.iter_mut().zip(adds.remainder()) {
            *x += y;
        }
    }
    m = rest.iter().copied().fold(m, f32::max);
    m = mv.iter().copied().fold(m, f32::max);
    let mut sv = [0f32; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for (s, x) in sv.iter_mut().zip(c.iter_mut()) {
            *x = simd::exp_nonpos::<M>(*x - m);
            *s += *x;
        }
    }
    let mut sum: f32 = sv.iter().sum();
    for x in chunks.into_remainder() {
        *x = simd::exp_nonpos::<M>(*x - m);
        sum += *x;
    }
    let r = 1.0 / sum;
    row.iter_mut().for_each(|x| *x *= r);
}
