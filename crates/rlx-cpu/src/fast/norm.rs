//! Row-wise kernels in f32: layer_norm / rms_norm (statistics in one pass
//! over the row, accumulated in f64 as the reference does, then one
//! normalize-scale-shift pass) and softmax / log_softmax along any axis.

use super::attention::softmax_row;
use super::layout::View;
use super::par::{chunk_len, for_chunks, Scratch};
use super::simd::{self, simd_fn};

/// Σ over 8 lanes (so the loop vectorizes), then across them.
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 8];
    let mut it = xs.chunks_exact(8);
    for c in &mut it {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += f(x);
        }
    }
    let tail: f32 = it.remainder().iter().map(|&x| f(x)).sum();
    acc.iter().sum::<f32>() + tail
}

simd_fn! {
    /// One row: two passes for the statistics (mean, then the mean square
    /// deviation — no cancellation), one for normalize-scale-shift.
    fn norm_row(o: &mut [f32], src: &[f32], g: &[f32], b: Option<&[f32]>, eps: f32, centered: bool) {
        let n = src.len() as f32;
        let mean = if centered { lane_sum(src, |x| x) / n } else { 0.0 };
        let var = lane_sum(src, |x| (x - mean) * (x - mean)) / n;
        let r = 1.0 / (var + eps).sqrt();
        match b {
            Some(b) => {
                for (((d, &v), &gg), &bb) in o.iter_mut().zip(src).zip(g).zip(b) {
                    *d = (v - mean) * r * gg + bb;
                }
            }
            None => {
                for ((d, &v), &gg) in o.iter_mut().zip(src).zip(g) {
                    *d = (v - mean) * r * gg;
                }
            }
        }
    }
}

/// `out` rows of `inner` elements: (x − mean)/sqrt(var + eps)·g + b
/// (`centered` = layer_norm) or x/sqrt(mean(x²) + eps)·g (rms_norm).
/// `x` is read through its view; `g`/`b` are contiguous `inner` vectors.
#[allow(clippy::too_many_arguments)]
pub fn norm(
    out: &mut [f32],
    x: &View,
    g: &[f32],
    b: Option<&[f32]>,
    inner: usize,
    eps: f64,
    centered: bool,
    pool: &Scratch,
) {
    let contiguous = x.contiguous();
    let chunk = chunk_len(out.len(), inner, 8 * 1024);
    for_chunks(out, chunk, |ci, oc| {
        pool.with(|row_buf| {
            for (ri, o) in oc.chunks_mut(inner.max(1)).enumerate() {
                let start = ci * chunk + ri * inner;
                let src: &[f32] = match contiguous {
                    Some(c) => &c[start..start + inner],
                    None => {
                        let buf = &mut row_buf[..inner];
                        for (j, d) in buf.iter_mut().enumerate() {
                            *d = x.get(start + j);
                        }
                        buf
                    }
                };
                norm_row(o, src, g, b, eps as f32, centered);
            }
        })
    });
}

/// softmax (or log_softmax) of `x` along an axis of extent `len` with
/// `inner` elements after it, into contiguous `out`. Along the last axis
/// of a contiguous `x`, the SIMD-dispatched row kernel; otherwise strided
/// gathers, not a vectorized loop (its math multiply-adds plainly).
pub fn softmax(out: &mut [f32], x: &View, len: usize, inner: usize, log: bool, pool: &Scratch) {
    // Along the last axis of contiguous x: rows copied, then each row in
    // place by the SIMD-dispatched row kernel (as attention's scores).
    if let (false, 1, Some(src)) = (log, inner, x.contiguous()) {
        out.copy_from_slice(&src[..out.len()]);
        let chunk = chunk_len(out.len(), len.max(1), 8 * 1024);
        for_chunks(out, chunk, |_, rows| {
            super::attention::softmax_rows(rows, len, None)
        });
        return;
    }
    let group = len * inner;
    let chunk = chunk_len(out.len(), group.max(1), 8 * 1024);
    for_chunks(out, chunk, |ci, oc| {
        pool.with(|row| {
            for (gi, o) in oc.chunks_mut(group.max(1)).enumerate() {
                let g0 = ci * chunk + gi * group;
                for i in 0..inner {
                    let r = &mut row[..len];
                    for (j, d) in r.iter_mut().enumerate() {
                        *d = x.get(g0 + j * inner + i);
                    }
                    if log {
                        let m = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let s: f64 = r
                            .iter()
                            .map(|&v| simd::exp::<simd::Plain>(v - m) as f64)
                            .sum();
                        let ls = s.ln() as f32;
                        r.iter_mut().for_each(|v| *v = *v - m - ls);
                    } else {
                        softmax_row::<simd::Plain>(r);
                    }
                    for (j, &v) in r.iter().enumerate() {
                        o[j * inner + i] = v;
                    }
                }
            }
        })
    });
}

/// softmax over an axis that is not the last, on contiguous `x` (`len`
/// ≥ 1): per
/// group of `len` rows of `inner` values, the max, the exponentials and
/// their sum run along whole rows (vectorizable), not element by element
/// down each column. One group per task.
pub fn softmax_columns(out: &mut [f32], x: &[f32], len: usize, inner: usize) {
    let group = len * inner;
    for_chunks(out, group.max(1), |gi, o| {
        let xs = &x[gi * group..(gi + 1) * group];
        // The running max of each column, in the output's first row.
        let (first, rest) = o.split_at_mut(inner);
        first.copy_from_slice(&xs[..inner]);
        for j in 1..len {
            super::conv::max_into(first, &xs[j * inner..(j + 1) * inner]);
        }
        // exp(x − max) into rows 1.., then row 0 (over the maxima).
        for j in (1..len).rev() {
            let row = &mut rest[(j - 1) * inner..j * inner];
            exp_minus(row, &xs[j * inner..(j + 1) * inner], first);
        }
        exp_minus_in_place(first, &xs[..inner]);
        SUMS.with(|sums| {
            let mut sums = sums.borrow_mut();
            sums.clear();
            sums.extend_from_slice(&o[..inner]);
            for j in 1..len {
                col_add(&mut sums, &o[j * inner..(j + 1) * inner]);
            }
            sums.iter_mut().for_each(|s| *s = 1.0 / *s);
            for row in o.chunks_mut(inner) {
                col_mul(row, &sums);
            }
        });
    });
}

// The column loops of [`softmax_columns`], compiled per SIMD level (the
// exponential is written to vectorize: 16 lanes on AVX-512).
simd_fn! {
    /// `d[i] = exp(v[i] − m[i])`.
    fn exp_minus(d: &mut [f32], v: &[f32], m: &[f32]) {
        for ((d, &v), &m) in d.iter_mut().zip(v).zip(m) {
            *d = simd::exp::<M>(v - m);
        }
    }
}

simd_fn! {
    /// `m[i] = exp(v[i] − m[i])`.
    fn exp_minus_in_place(m: &mut [f32], v: &[f32]) {
        for (m, &v) in m.iter_mut().zip(v) {
            *m = simd::exp::<M>(v - *m);
        }
    }
}

simd_fn! {
    /// `s[i] += e[i]`.
    fn col_add(s: &mut [f32], e: &[f32]) {
        for (s, &e) in s.iter_mut().zip(e) {
            *s += e;
        }
    }
}

simd_fn! {
    /// `d[i] *= f[i]`.
    fn col_mul(d: &mut [f32], f: &[f32]) {
        for (d, &f) in d.iter_mut().zip(f) {
            *d *= f;
        }
    }
}

thread_local! {
    /// Column sums of [`softmax_columns`], kept between runs.
    static SUMS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}
