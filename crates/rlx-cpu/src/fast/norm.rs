//! Row-wise kernels in f32: layer_norm / rms_norm (statistics in one pass
//! over the row, accumulated in f64 as the reference does, then one
//! normalize-scale-shift pass) and softmax / log_softmax along any axis.

use super::attention::softmax_row;
use super::layout::View;
use super::par::{chunk_len, for_chunks, Scratch};
use super::simd;

/// `out` rows of `inner` elements: (x − mean)/sqrt(var + eps)·g + b
/// (`centered` = layer_norm) or x/sqrt(mean(x²) + eps)·g (rms_norm).
/// `x` is read through its view; `g`/`b` are contiguous `inner` vectors.
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
            simd::dispatch(|| {
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
                    // One pass: sum and sum of squares in f64 lanes.
                    let (mut s, mut s2) = (0f64, 0f64);
                    for &v in src {
                        let v = v as f64;
                        s += v;
                        s2 += v * v;
                    }
                    let n = inner as f64;
                    let mean = if centered { s / n } else { 0.0 };
                    let var = (s2 / n - mean * mean).max(0.0);
                    let r = (1.0 / (var + eps).sqrt()) as f32;
                    let mf = mean as f32;
                    match b {
                        Some(b) => {
                            for (((d, &v), &gg), &bb) in o.iter_mut().zip(src).zip(g).zip(b) {
                                *d = (v - mf) * r * gg + bb;
                            }
                        }
                        None => {
                            for ((d, &v), &gg) in o.iter_mut().zip(src).zip(g) {
                                *d = (v - mf) * r * gg;
                            }
                        }
                    }
                }
            })
        })
    });
}

/// softmax (or log_softmax) of `x` along an axis of extent `len` with
/// `inner` elements after it, into contiguous `out`.
pub fn softmax(out: &mut [f32], x: &View, len: usize, inner: usize, log: bool, pool: &Scratch) {
    let group = len * inner;
    let chunk = chunk_len(out.len(), group.max(1), 8 * 1024);
    for_chunks(out, chunk, |ci, oc| {
        pool.with(|row| {
            simd::dispatch(|| {
                for (gi, o) in oc.chunks_mut(group.max(1)).enumerate() {
                    let g0 = ci * chunk + gi * group;
                    for i in 0..inner {
                        let r = &mut row[..len];
                        for (j, d) in r.iter_mut().enumerate() {
                            *d = x.get(g0 + j * inner + i);
                        }
                        if log {
                            let m = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                            let s: f64 = r.iter().map(|&v| simd::exp(v - m) as f64).sum();
                            let ls = s.ln() as f32;
                            r.iter_mut().for_each(|v| *v = *v - m - ls);
                        } else {
                            softmax_row(r);
                        }
                        for (j, &v) in r.iter().enumerate() {
                            o[j * inner + i] = v;
                        }
                    }
                }
            })
        })
    });
}
