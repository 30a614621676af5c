//! Reductions over axis sets, and arg-reductions.

use super::*;

/// For every input element (row-major), the flat index of its output cell,
/// and the number of output cells.
fn groups(shape: &Shape, axes: &[i64]) -> Result<(Vec<usize>, usize), CpuError> {
    let r = shape.rank();
    let mut red: Vec<usize> = Vec::new();
    for &a in axes {
        red.push(rlx_ir::shape::normalize_axis(a, r)?);
    }
    if axes.is_empty() {
        red = (0..r).collect();
    }
    let kept: Vec<usize> = (0..r)
        .map(|i| if red.contains(&i) { 1 } else { shape.dims()[i] })
        .collect();
    let kept_shape = Shape(kept);
    let ks = kept_shape.strides();
    let strides: Vec<usize> = (0..r)
        .map(|i| if red.contains(&i) { 0 } else { ks[i] })
        .collect();
    Ok((strided_map(shape.dims(), &strides, 0), kept_shape.numel()))
}

fn collect<T: Copy>(vals: &[T], map: &[usize], n: usize) -> Vec<Vec<T>> {
    let mut g = vec![Vec::new(); n];
    for (k, &o) in map.iter().enumerate() {
        g[o].push(vals[k]);
    }
    g
}

fn reduce(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ty = cx.out_type(0);
    let (map, n) = groups(x.shape(), cx.ints("axes")?)?;
    if x.dtype().is_float() {
        let g = collect(&floats(x)?, &map, n);
        let mut out = Vec::with_capacity(n);
        for v in g {
            out.push(match cx.op {
                "reduce_sum" => v.iter().sum(),
                "reduce_mean" => v.iter().sum::<f64>() / v.len() as f64,
                "reduce_prod" => v.iter().product(),
                "reduce_max" | "reduce_min" => {
                    if v.is_empty() {
                        return Err(cx.fail("cannot take the max/min of an empty set"));
                    }
                    let max = cx.op == "reduce_max";
                    v.iter().copied().fold(
                        if max {
                            f64::NEG_INFINITY
                        } else {
                            f64::INFINITY
                        },
                        |a, b| {
                            if a.is_nan() || b.is_nan() {
                                f64::NAN
                            } else if max {
                                a.max(b)
                            } else {
                                a.min(b)
                            }
                        },
                    )
                }
                "reduce_logsumexp" => {
                    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    if v.iter().any(|x| x.is_nan()) {
                        f64::NAN
                    } else if m.is_infinite() {
                        m
                    } else {
                        m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
                    }
                }
                "reduce_variance" => {
                    let c = cx.int("correction")? as f64;
                    let mean = v.iter().sum::<f64>() / v.len() as f64;
                    v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (v.len() as f64 - c)
                }
                op => return Err(cx.fail(format!("`{op}` has no float form"))),
            });
        }
        return Ok(vec![from_floats(ty, out)?]);
    }
    let g = collect(&ints(x)?, &map, n);
    let mut out = Vec::with_capacity(n);
    for v in g {
        out.push(match cx.op {
            "reduce_sum" => v.iter().fold(0i64, |a, &b| a.wrapping_add(b)),
            "reduce_prod" => v.iter().fold(1i64, |a, &b| a.wrapping_mul(b)),
            "reduce_max" => *v
                .iter()
                .max()
                .ok_or_else(|| cx.fail("cannot take the max of an empty set"))?,
            "reduce_min" => *v
                .iter()
                .min()
                .ok_or_else(|| cx.fail("cannot take the min of an empty set"))?,
            "reduce_any" => v.iter().any(|&b| b != 0) as i64,
            "reduce_all" => v.iter().all(|&b| b != 0) as i64,
            op => return Err(cx.fail(format!("`{op}` has no integer form"))),
        });
    }
    Ok(vec![from_ints(ty, out)?])
}

fn arg(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ax = cx.axis("axis", x.shape().rank())?;
    let (outer, len, inner) = around(x.shape().dims(), ax);
    let v = floats(x)?;
    let want_max = cx.op == "argmax";
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| v[(o * len + j) * inner + i];
            let mut best = 0;
            // The first NaN wins outright (NumPy's rule).
            if !at(0).is_nan() {
                for j in 1..len {
                    let (c, b) = (at(j), at(best));
                    if c.is_nan() {
                        best = j;
                        break;
                    }
                    if (want_max && c > b) || (!want_max && c < b) {
                        best = j;
                    }
                }
            }
            out.push(best as i64);
        }
    }
    Ok(vec![from_ints(cx.out_type(0), out)?])
}

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("reduce_sum", reduce),
    ("reduce_mean", reduce),
    ("reduce_prod", reduce),
    ("reduce_max", reduce),
    ("reduce_min", reduce),
    ("reduce_logsumexp", reduce),
    ("reduce_variance", reduce),
    ("reduce_any", reduce),
    ("reduce_all", reduce),
    ("argmax", arg),
    ("argmin", arg),
];
