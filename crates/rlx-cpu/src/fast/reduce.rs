//! reduce_sum / mean / max / min in f32 over one run of consecutive axes:
//! the input is seen as (outer, len, inner) and each output element
//! reduces `len` values. With inner > 1 the accumulators are a whole
//! inner row (the loop vectorizes across it); with inner = 1 each row is
//! reduced in 8 lanes.

use super::layout::View;
use super::par::{chunk_len, for_chunks};
use super::simd::simd_fn;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Red {
    Sum,
    Mean,
    Max,
    Min,
}

pub fn reduction(op: &str) -> Option<Red> {
    Some(match op {
        "reduce_sum" => Red::Sum,
        "reduce_mean" => Red::Mean,
        "reduce_max" => Red::Max,
        "reduce_min" => Red::Min,
        _ => return None,
    })
}

/// (outer, len, inner) when `axes` (sorted, normalized) are consecutive.
pub fn split(dims: &[usize], axes: &[usize]) -> Option<(usize, usize, usize)> {
    let (&a0, &a1) = (axes.first()?, axes.last()?);
    (a1 - a0 + 1 == axes.len()).then(|| {
        (
            dims[..a0].iter().product(),
            dims[a0..=a1].iter().product(),
            dims[a1 + 1..].iter().product(),
        )
    })
}

#[inline(always)]
fn combine(r: Red, a: f32, x: f32) -> f32 {
    match r {
        Red::Sum | Red::Mean => a + x,
        // NaN propagates, as in the reference.
        Red::Max => {
            if a.is_nan() || x.is_nan() {
                f32::NAN
            } else {
                a.max(x)
            }
        }
        Red::Min => {
            if a.is_nan() || x.is_nan() {
                f32::NAN
            } else {
                a.min(x)
            }
        }
    }
}

fn init(r: Red) -> f32 {
    match r {
        Red::Sum | Red::Mean => 0.0,
        Red::Max => f32::NEG_INFINITY,
        Red::Min => f32::INFINITY,
    }
}

/// The largest (`MAX`) or smallest value of `src`, NaN if any is: the
/// comparison is a select and NaN is tracked apart, so the loop vectorizes
/// (a branch per element on NaN did not).
#[inline(always)]
fn extreme<const MAX: bool>(src: &[f32]) -> f32 {
    let pick = |a: f32, x: f32| {
        let better = if MAX { x > a } else { x < a };
        if better {
            x
        } else {
            a
        }
    };
    let start = if MAX {
        f32::NEG_INFINITY
    } else {
        f32::INFINITY
    };
    let mut acc = [start; 16];
    let mut nan = [false; 16];
    let mut it = src.chunks_exact(16);
    for c in &mut it {
        for ((a, n), &x) in acc.iter_mut().zip(&mut nan).zip(c) {
            *n |= x.is_nan();
            *a = pick(*a, x);
        }
    }
    let mut t = start;
    for &x in it.remainder().iter().chain(&acc) {
        if x.is_nan() {
            return f32::NAN;
        }
        t = pick(t, x);
    }
    if nan.iter().any(|&n| n) {
        return f32::NAN;
    }
    t
}

simd_fn! {
    /// The smallest and largest value of `x` (NaN if any is).
    pub(super) fn min_max(x: &[f32]) -> (f32, f32) {
        (extreme::<false>(x), extreme::<true>(x))
    }
}

simd_fn! {
    /// One outer slab, contiguous: `src` is len × inner, `o` is inner.
    /// Sums accumulate in f64 (as the reference does): a gradient summed
    /// over a large batch often nearly cancels, and f32 partial sums would
    /// lose most of its digits. Max/min are exact in f32.
    fn slab(o: &mut [f32], src: &[f32], len: usize, inner: usize, r: Red) {
        if matches!(r, Red::Sum | Red::Mean) {
            let scale = if r == Red::Mean { 1.0 / len as f64 } else { 1.0 };
            if inner == 1 {
                let mut acc = [0f64; 8];
                let mut it = src.chunks_exact(8);
                for c in &mut it {
                    for (a, &x) in acc.iter_mut().zip(c) {
                        *a += x as f64;
                    }
                }
                let t = it.remainder().iter().map(|&x| x as f64).sum::<f64>() + acc.iter().sum::<f64>();
                o[0] = (t * scale) as f32;
            } else {
                // Column blocks of 256 f64 accumulators on the stack.
                const B: usize = 256;
                let mut acc = [0f64; B];
                for c0 in (0..inner).step_by(B) {
                    let w = B.min(inner - c0);
                    acc[..w].fill(0.0);
                    for row in src.chunks_exact(inner).take(len) {
                        for (a, &x) in acc[..w].iter_mut().zip(&row[c0..c0 + w]) {
                            *a += x as f64;
                        }
                    }
                    for (d, &a) in o[c0..c0 + w].iter_mut().zip(&acc[..w]) {
                        *d = (a * scale) as f32;
                    }
                }
            }
            return;
        }
        o.fill(init(r));
        if inner == 1 {
            o[0] = if r == Red::Max { extreme::<true>(src) } else { extreme::<false>(src) };
        } else {
            for row in src.chunks_exact(inner).take(len) {
                for (a, &x) in o.iter_mut().zip(row) {
                    *a = combine(r, *a, x);
                }
            }
        }
    }
}

pub fn run(out: &mut [f32], x: &View, outer: usize, len: usize, inner: usize, r: Red) {
    let _ = outer;
    let contiguous = x.contiguous();
    let chunk = chunk_len(out.len(), inner.max(1), 4096);
    for_chunks(out, chunk, |ci, oc| {
        for (k, o) in oc.chunks_mut(inner.max(1)).enumerate() {
            let ob = (ci * chunk) / inner.max(1) + k;
            let base = ob * len * inner;
            match contiguous {
                Some(c) => slab(o, &c[base..base + len * inner], len, inner, r),
                None => {
                    for (i, a) in o.iter_mut().enumerate() {
                        let at = |l: usize| x.get(base + l * inner + i);
                        *a = match r {
                            Red::Sum => (0..len).map(|l| at(l) as f64).sum::<f64>() as f32,
                            Red::Mean => {
                                ((0..len).map(|l| at(l) as f64).sum::<f64>() / len as f64) as f32
                            }
                            _ => (0..len).fold(init(r), |t, l| combine(r, t, at(l))),
                        };
                    }
                }
            }
        }
    });
}
