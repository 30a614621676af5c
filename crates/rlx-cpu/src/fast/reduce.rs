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

simd_fn! {
    /// One outer slab, contiguous: `src` is len × inner, `o` is inner.
    fn slab(o: &mut [f32], src: &[f32], len: usize, inner: usize, r: Red) {
        o.fill(init(r));
        if inner == 1 {
            let mut acc = [init(r); 8];
            let mut it = src.chunks_exact(8);
            for c in &mut it {
                for (a, &x) in acc.iter_mut().zip(c) {
                    *a = combine(r, *a, x);
                }
            }
            let mut t = it.remainder().iter().fold(init(r), |a, &x| combine(r, a, x));
            for a in acc {
                t = combine(r, t, a);
            }
            o[0] = t;
        } else {
            for row in src.chunks_exact(inner).take(len) {
                for (a, &x) in o.iter_mut().zip(row) {
                    *a = combine(r, *a, x);
                }
            }
        }
        if r == Red::Mean {
            let s = 1.0 / len as f32;
            o.iter_mut().for_each(|a| *a *= s);
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
                        let mut t = init(r);
                        for l in 0..len {
                            t = combine(r, t, x.get(base + l * inner + i));
                        }
                        *a = if r == Red::Mean { t / len as f32 } else { t };
                    }
                }
            }
        }
    });
}
