//! Native kernels of the fused ops, written directly (not through their
//! decompositions) so that tests comparing the two are meaningful.

use super::elementwise::sigmoid;
use super::*;

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))
}
fn gelu_tanh(x: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
}
fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

fn activation(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "none" => |x| x,
        "relu" => |x: f64| if x.is_nan() { x } else { x.max(0.0) },
        "gelu" => gelu,
        "gelu_tanh" => gelu_tanh,
        "silu" => silu,
        "sigmoid" => sigmoid,
        "tanh" => f64::tanh,
        _ => return None,
    })
}

fn map1(cx: &KernelCx, f: fn(f64) -> f64) -> Result<Vec<HostTensor>, CpuError> {
    Ok(vec![from_floats(
        cx.out_type(0),
        floats(cx.input(0))?.into_iter().map(f).collect(),
    )?])
}
fn gelu_k(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    map1(cx, gelu)
}
fn gelu_tanh_k(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    map1(cx, gelu_tanh)
}
fn silu_k(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    map1(cx, silu)
}
fn swiglu(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (g, u) = (floats(cx.input(0))?, floats(cx.input(1))?);
    Ok(vec![from_floats(
        cx.out_type(0),
        g.iter().zip(&u).map(|(&g, &u)| silu(g) * u).collect(),
    )?])
}

/// Softmax / log-softmax of one strided row, in place.
fn softmax_row(v: &mut [f64], log: bool) {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = v.iter().map(|x| (x - m).exp()).sum();
    for x in v.iter_mut() {
        *x = if log {
            *x - m - s.ln()
        } else {
            (*x - m).exp() / s
        };
    }
}

fn softmax(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ax = cx.axis("axis", x.shape().rank())?;
    let (outer, len, inner) = around(x.shape().dims(), ax);
    let mut v = floats(x)?;
    let mut row = vec![0.0; len];
    for o in 0..outer {
        for i in 0..inner {
            for j in 0..len {
                row[j] = v[(o * len + j) * inner + i];
            }
            softmax_row(&mut row, cx.op == "log_softmax");
            for j in 0..len {
                v[(o * len + j) * inner + i] = row[j];
            }
        }
    }
    Ok(vec![from_floats(cx.out_type(0), v)?])
}

/// Normalize contiguous rows of `inner` elements.
fn norm_rows(v: &mut [f64], inner: usize, eps: f64, center: bool) {
    for row in v.chunks_mut(inner.max(1)) {
        let n = row.len() as f64;
        let mean = if center {
            row.iter().sum::<f64>() / n
        } else {
            0.0
        };
        let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        let r = 1.0 / (var + eps).sqrt();
        row.iter_mut().for_each(|x| *x = (*x - mean) * r);
    }
}

fn layer_norm(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let ax = cx.axis("axis", x.shape().rank())?;
    let inner: usize = x.shape().dims()[ax..].iter().product();
    let mut v = floats(x)?;
    norm_rows(&mut v, inner, cx.float("eps")?, cx.op == "layer_norm");
    let g = floats(cx.input(1))?;
    if cx.op == "layer_norm" {
        let b = floats(cx.input(2))?;
        for (k, x) in v.iter_mut().enumerate() {
            *x = *x * g[k % inner] + b[k % inner];
        }
    } else {
        // No bias term, not a bias of +0.0: that would turn a -0.0 (a zero
        // row element times a negative gain) into +0.0, which the fast
        // engine and PyTorch's `x * rsqrt(mean(x²) + eps) * weight` keep.
        for (k, x) in v.iter_mut().enumerate() {
            *x *= g[k % inner];
        }
    }
    Ok(vec![from_floats(cx.out_type(0), v)?])
}

/// Apply per-channel scale and shift to (N, C, spatial...).
fn per_channel(v: &mut [f64], dims: &[usize], scale: &[f64], shift: &[f64]) {
    let c = dims[1];
    let sp: usize = dims[2..].iter().product();
    for (k, x) in v.iter_mut().enumerate() {
        let ch = (k / sp.max(1)) % c;
        *x = *x * scale[ch] + shift[ch];
    }
}

fn group_norm(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let dims = x.shape().dims();
    let g = cx.int("groups")? as usize;
    let per_group = x.numel() / (dims[0] * g).max(1);
    let mut v = floats(x)?;
    norm_rows(&mut v, per_group, cx.float("eps")?, true);
    per_channel(&mut v, dims, &floats(cx.input(1))?, &floats(cx.input(2))?);
    Ok(vec![from_floats(cx.out_type(0), v)?])
}

fn batch_norm(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = cx.input(0);
    let eps = cx.float("eps")?;
    let [scale, bias, mean, var] = [1, 2, 3, 4].map(|k| floats(cx.input(k)));
    let (scale, bias, mean, var) = (scale?, bias?, mean?, var?);
    let s: Vec<f64> = (0..scale.len())
        .map(|c| scale[c] / (var[c] + eps).sqrt())
        .collect();
    let t: Vec<f64> = (0..scale.len()).map(|c| bias[c] - mean[c] * s[c]).collect();
    let mut v = floats(x)?;
    per_channel(&mut v, x.shape().dims(), &s, &t);
    Ok(vec![from_floats(cx.out_type(0), v)?])
}

fn attention(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (q, k, v) = (cx.input(0), cx.input(1), cx.input(2));
    let ty = cx.out_type(0);
    let r = q.shape().rank();
    let (sq, d) = (q.shape().dims()[r - 2], q.shape().dims()[r - 1]);
    let (sk, dv) = (k.shape().dims()[r - 2], v.shape().dims()[r - 1]);
    let batch = Shape(ty.shape.dims()[..r - 2].to_vec());
    let bmap = |t: &HostTensor| broadcast_map(&Shape(t.shape().dims()[..r - 2].to_vec()), &batch);
    let (bq, bk, bv) = (bmap(q), bmap(k), bmap(v));
    let (qv, kv, vv) = (floats(q)?, floats(k)?, floats(v)?);
    let scale = cx
        .attrs
        .opt_float("scale")
        .unwrap_or(1.0 / (d as f64).sqrt());
    let kind = cx.str("mask_kind")?;
    let builtin = rlx_ir::ops::fused::attention_mask(kind, sq, sk, cx.int("window")?);
    // Custom/bias masks broadcast to (batch..., Sq, Sk).
    let mut full = batch.0.clone();
    full.extend([sq, sk]);
    let extra = match cx.inputs.get(3) {
        Some(m) => Some((floats(m)?, broadcast_map(m.shape(), &Shape(full)))),
        None => None,
    };
    // Per batch: S = Q·Kᵀ and O = P·V through gemm (f64), masking and the
    // softmax row by row in between.
    let mut out = vec![0.0; ty.shape.numel()];
    let mut kt = vec![0.0; d * sk];
    let mut scores = vec![0.0; sq * sk];
    for b in 0..batch.numel() {
        let qb = &qv[bq[b] * sq * d..(bq[b] + 1) * sq * d];
        let kb = &kv[bk[b] * sk * d..(bk[b] + 1) * sk * d];
        for j in 0..sk {
            for t in 0..d {
                kt[t * sk + j] = kb[j * d + t];
            }
        }
        super::gemm::gemm_f64(sq, d, sk, qb, &kt, &mut scores);
        for i in 0..sq {
            let row = &mut scores[i * sk..(i + 1) * sk];
            for (j, x) in row.iter_mut().enumerate() {
                *x *= scale;
                if let Some(m) = &builtin {
                    if !m[i * sk + j] {
                        *x = f64::NEG_INFINITY;
                    }
                }
                if let Some((mv, mm)) = &extra {
                    let at = (b * sq + i) * sk + j;
                    match kind {
                        "custom" if mv[mm[at]] == 0.0 => *x = f64::NEG_INFINITY,
                        "bias" => *x += mv[mm[at]],
                        _ => {}
                    }
                }
            }
            softmax_row(row, false);
        }
        let vb = &vv[bv[b] * sk * dv..(bv[b] + 1) * sk * dv];
        super::gemm::gemm_f64(
            sq,
            sk,
            dv,
            &scores,
            vb,
            &mut out[b * sq * dv..(b + 1) * sq * dv],
        );
    }
    Ok(vec![from_floats(ty, out)?])
}

fn rope_values(
    x: &HostTensor,
    cos: &[f64],
    sin: &[f64],
    interleaved: bool,
) -> Result<Vec<f64>, CpuError> {
    let dims = x.shape().dims();
    let (s, d) = (dims[dims.len() - 2], dims[dims.len() - 1]);
    let h = d / 2;
    let mut v = floats(x)?;
    for (row_i, row) in v.chunks_mut(d).enumerate() {
        let pos = row_i % s;
        for i in 0..h {
            let (a, b) = if interleaved {
                (2 * i, 2 * i + 1)
            } else {
                (i, i + h)
            };
            let (c, sn) = (cos[pos * h + i], sin[pos * h + i]);
            let (x1, x2) = (row[a], row[b]);
            row[a] = x1 * c - x2 * sn;
            row[b] = x2 * c + x1 * sn;
        }
    }
    Ok(v)
}

fn rope(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let n = cx.inputs.len();
    let (cos, sin) = (floats(cx.input(n - 2))?, floats(cx.input(n - 1))?);
    let il = cx.bool("interleaved")?;
    (0..n - 2)
        .map(|k| from_floats(cx.out_type(k), rope_values(cx.input(k), &cos, &sin, il)?))
        .collect()
}

fn matmul_bias_act(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let f = activation(cx.str("activation")?).ok_or_else(|| cx.fail("unknown activation"))?;
    let ty = cx.out_type(0);
    let mm = super::linalg::matmul(&KernelCx {
        op: "matmul",
        inputs: &cx.inputs[..2],
        ..*cx
    })?
    .remove(0);
    if mm.dtype() == DType::F32 {
        // f32: epilogue in place on the product, one pass.
        let mut v = mm.to_vec::<f32>()?;
        let bias = match cx.inputs.get(2) {
            Some(b) => Some((b.to_vec::<f32>()?, broadcast_map(b.shape(), &ty.shape))),
            None => None,
        };
        for (i, x) in v.iter_mut().enumerate() {
            let y = *x as f64 + bias.as_ref().map_or(0.0, |(bv, bm)| bv[bm[i]] as f64);
            *x = f(y) as f32;
        }
        return Ok(vec![HostTensor::new(ty.dtype, ty.shape.clone(), v.into())?]);
    }
    let mut v = floats(&mm)?;
    if let Some(b) = cx.inputs.get(2) {
        let bv = floats(b)?;
        for (x, i) in v.iter_mut().zip(broadcast_map(b.shape(), &ty.shape)) {
            *x += bv[i];
        }
    }
    Ok(vec![from_floats(ty, v.into_iter().map(f).collect())?])
}

/// (M, K)·(N, K)ᵀ over f64 rows.
fn matmul_nt(a: &[f64], b: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| a[i * k + p] * b[j * k + p]).sum();
        }
    }
    out
}

#[cfg(feature = "quant")]
fn dequant_matmul(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (x, w) = (cx.input(0), cx.input(1));
    let wv = super::quant::dequantize_values(w).map_err(|e| cx.fail(e))?;
    let (n, k) = (w.shape().dims()[0], w.shape().dims()[1]);
    let m = x.numel() / k.max(1);
    Ok(vec![from_floats(
        cx.out_type(0),
        matmul_nt(&floats(x)?, &wv, m, n, k),
    )?])
}

fn scaled_matmul(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let bs = cx.int("block")? as usize;
    let scaled = |t: &HostTensor, s: &HostTensor| -> Result<Vec<f64>, CpuError> {
        let (v, sv) = (floats(t)?, floats(s)?);
        Ok(v.iter().enumerate().map(|(i, x)| x * sv[i / bs]).collect())
    };
    let a = scaled(cx.input(0), cx.input(2))?;
    let b = scaled(cx.input(1), cx.input(3))?;
    let (m, k) = (cx.input(0).shape().dims()[0], cx.input(0).shape().dims()[1]);
    let n = cx.input(1).shape().dims()[0];
    Ok(vec![from_floats(
        cx.out_type(0),
        matmul_nt(&a, &b, m, n, k),
    )?])
}

/// A fused elementwise region: its body runs as one kernel through the
/// interpreter, so the region's intermediates never reach the memory plan.
fn fused_elementwise(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let body = cx.attrs.graph("body")?;
    let args: Vec<HostTensor> = cx.inputs.iter().map(|t| (*t).clone()).collect();
    cx.runner.run(body, &args)
}

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("softmax", softmax),
    ("log_softmax", softmax),
    ("layer_norm", layer_norm),
    ("rms_norm", layer_norm),
    ("group_norm", group_norm),
    ("batch_norm", batch_norm),
    ("gelu", gelu_k),
    ("gelu_tanh", gelu_tanh_k),
    ("silu", silu_k),
    ("swiglu", swiglu),
    ("attention", attention),
    // Folds: attention then its head merge (a copy); the epilogue, rounded,
    // then the residual add.
    ("attention_merged", super::by_decomposition),
    ("attention_cached", super::by_decomposition),
    ("rope", rope),
    ("qk_rope", rope),
    ("matmul_bias_act", matmul_bias_act),
    ("matmul_residual", super::by_decomposition),
    // The convolution, rounded, then its activation.
    ("conv_act", super::by_decomposition),
    #[cfg(feature = "quant")]
    ("dequant_matmul", dequant_matmul),
    ("scaled_matmul", scaled_matmul),
    ("fused_elementwise", fused_elementwise),
];
