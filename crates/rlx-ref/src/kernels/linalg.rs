//! matmul and dot_general, accumulated in f64 (floats, through the `gemm`
//! crate) or wrapping i64.

use super::*;
use rlx_ir::Element;

/// Batched (m×k)·(k×n) over broadcast batch axes. Shapes were checked by
/// the type rule; 1-D operands are promoted here the same way.
pub(crate) fn matmul(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (a, b) = (cx.input(0), cx.input(1));
    let ad: Vec<usize> = if a.shape().rank() == 1 {
        vec![1, a.shape().dims()[0]]
    } else {
        a.shape().dims().to_vec()
    };
    let bd: Vec<usize> = if b.shape().rank() == 1 {
        vec![b.shape().dims()[0], 1]
    } else {
        b.shape().dims().to_vec()
    };
    let (m, k, n) = (ad[ad.len() - 2], ad[ad.len() - 1], bd[bd.len() - 1]);
    let (ab, bb) = (
        Shape(ad[..ad.len() - 2].to_vec()),
        Shape(bd[..bd.len() - 2].to_vec()),
    );
    let batch = rlx_ir::shape::broadcast_shapes(&ab, &bb)?;
    let (ia, ib) = (broadcast_map(&ab, &batch), broadcast_map(&bb, &batch));
    let nb = batch.numel();
    let ty = cx.out_type(0);
    if let (Some(av), Some(bv)) = (f32::unwrap(a.data()), f32::unwrap(b.data())) {
        // f32 tensors: f32 GEMM straight on the stored elements, no widening.
        let mut out = vec![0.0f32; nb * m * n];
        for (bi, c) in out.chunks_mut((m * n).max(1)).enumerate().take(nb) {
            let (pa, pb) = (ia[bi] * m * k, ib[bi] * k * n);
            super::gemm::sgemm(m, k, n, &av[pa..pa + m * k], &bv[pb..pb + k * n], c);
        }
        return Ok(vec![HostTensor::new(
            ty.dtype,
            ty.shape.clone(),
            out.into(),
        )?]);
    }
    if a.dtype().is_float() {
        let (av, bv) = (floats(a)?, floats(b)?);
        let mut out = vec![0.0; nb * m * n];
        for (bi, c) in out.chunks_mut((m * n).max(1)).enumerate().take(nb) {
            let (pa, pb) = (ia[bi] * m * k, ib[bi] * k * n);
            super::gemm::gemm_f64(m, k, n, &av[pa..pa + m * k], &bv[pb..pb + k * n], c);
        }
        return Ok(vec![from_floats(ty, out)?]);
    }
    let (av, bv) = (ints(a)?, ints(b)?);
    let mut out = vec![0i64; nb * m * n];
    for bi in 0..nb {
        let (pa, pb) = (ia[bi] * m * k, ib[bi] * k * n);
        for i in 0..m {
            for j in 0..n {
                out[(bi * m + i) * n + j] = (0..k).fold(0i64, |s, p| {
                    s.wrapping_add(av[pa + i * k + p].wrapping_mul(bv[pb + p * n + j]))
                });
            }
        }
    }
    Ok(vec![from_ints(ty, out)?])
}

fn resolve(cx: &KernelCx, name: &str, rank: usize) -> Result<Vec<usize>, CpuError> {
    cx.ints(name)?
        .iter()
        .map(|&a| Ok(rlx_ir::shape::normalize_axis(a, rank)?))
        .collect()
}

/// General contraction: output coordinates are (batch, lhs free, rhs free).
fn dot_general(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (a, b) = (cx.input(0), cx.input(1));
    let (ar, br) = (a.shape().rank(), b.shape().rank());
    let (lb, rb) = (resolve(cx, "lhs_batch", ar)?, resolve(cx, "rhs_batch", br)?);
    let (lc, rc) = (
        resolve(cx, "lhs_contract", ar)?,
        resolve(cx, "rhs_contract", br)?,
    );
    let lf: Vec<usize> = (0..ar)
        .filter(|i| !lb.contains(i) && !lc.contains(i))
        .collect();
    let rf: Vec<usize> = (0..br)
        .filter(|i| !rb.contains(i) && !rc.contains(i))
        .collect();
    let cdims: Vec<usize> = lc.iter().map(|&i| a.shape().dims()[i]).collect();
    let ncon: usize = cdims.iter().product();
    let (sa, sb) = (a.shape().strides(), b.shape().strides());
    let ty = cx.out_type(0);
    let n = ty.shape.numel();
    let float = a.dtype().is_float();
    let (af, bf) = if float {
        (floats(a)?, floats(b)?)
    } else {
        (vec![], vec![])
    };
    let (ai, bi) = if float {
        (vec![], vec![])
    } else {
        (ints(a)?, ints(b)?)
    };
    let (mut of, mut oi) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for o in 0..n {
        let c = unravel(o, ty.shape.dims());
        let (mut pa, mut pb) = (0usize, 0usize);
        for (k, (&x, &y)) in lb.iter().zip(&rb).enumerate() {
            pa += c[k] * sa[x];
            pb += c[k] * sb[y];
        }
        for (k, &x) in lf.iter().enumerate() {
            pa += c[lb.len() + k] * sa[x];
        }
        for (k, &y) in rf.iter().enumerate() {
            pb += c[lb.len() + lf.len() + k] * sb[y];
        }
        let (mut sf, mut si) = (0.0f64, 0i64);
        for t in 0..ncon {
            let cc = unravel(t, &cdims);
            let qa = pa + lc.iter().zip(&cc).map(|(&x, &v)| v * sa[x]).sum::<usize>();
            let qb = pb + rc.iter().zip(&cc).map(|(&y, &v)| v * sb[y]).sum::<usize>();
            if float {
                sf += af[qa] * bf[qb];
            } else {
                si = si.wrapping_add(ai[qa].wrapping_mul(bi[qb]));
            }
        }
        of.push(sf);
        oi.push(si);
    }
    Ok(vec![if float {
        from_floats(ty, of)?
    } else {
        from_ints(ty, oi)?
    }])
}

/// (a − a_zp)·(b − b_zp) of `matmul_integer`'s inputs, exact in i64 and
/// wrapped to i32 (as a hardware int32 accumulator would; K < 2^16 cannot
/// wrap), with the output's column count.
fn integer_product(cx: &KernelCx) -> Result<(Vec<i32>, usize), CpuError> {
    let (a, b) = (ints(cx.input(0))?, ints(cx.input(1))?);
    let ad = cx.input(0).shape().dims();
    let (k, n) = (cx.input(1).shape().dims()[0], cx.input(1).shape().dims()[1]);
    let m = if ad.len() >= 2 { ad[ad.len() - 2] } else { 1 };
    let zero = |i: usize| -> Result<Vec<i64>, CpuError> {
        match cx.inputs.get(i) {
            Some(z) => ints(z),
            None => Ok(vec![0]),
        }
    };
    let (za, zb) = (zero(2)?, zero(3)?);
    let rows = a.len() / k.max(1);
    let mut out = vec![0i32; rows * n];
    for (r, o) in out.chunks_mut(n.max(1)).enumerate().take(rows) {
        let z = za[if za.len() == 1 { 0 } else { r % m }];
        for (j, y) in o.iter_mut().enumerate() {
            let zj = zb[if zb.len() == 1 { 0 } else { j }];
            *y = (0..k)
                .map(|p| (a[r * k + p] - z) * (b[p * n + j] - zj))
                .sum::<i64>() as i32;
        }
    }
    Ok((out, n))
}

fn matmul_integer(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (y, _) = integer_product(cx)?;
    Ok(vec![from_ints(
        cx.out_type(0),
        y.into_iter().map(i64::from).collect(),
    )?])
}

/// `matmul_integer_scaled`: the exact product, then — in f32, each step
/// rounded as its decomposition does — the cast, the scale, the bias.
/// (The decomposition itself multiplies in f32, exact only while partial
/// sums stay below 2^24; this kernel is exact for every K.)
fn matmul_integer_scaled(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let (y, n) = integer_product(cx)?;
    let col = |i: usize| -> Result<Option<Vec<f32>>, CpuError> {
        cx.inputs
            .get(i)
            .map(|t| Ok(floats(t)?.into_iter().map(|v| v as f32).collect()))
            .transpose()
    };
    let scale = col(4)?.unwrap_or_else(|| vec![1.0]);
    let bias = col(5)?;
    let at = |v: &[f32], j: usize| v[if v.len() == 1 { 0 } else { j }];
    let out: Vec<f32> = y
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let j = i % n.max(1);
            let v = d as f32 * at(&scale, j);
            bias.as_ref().map_or(v, |b| v + at(b, j))
        })
        .collect();
    let ty = cx.out_type(0);
    Ok(vec![HostTensor::new(
        ty.dtype,
        ty.shape.clone(),
        out.into(),
    )?])
}

/// `dynamic_quantize_linear` by its decomposition, after checking that
/// every value is finite: a NaN would otherwise vanish into the range
/// (IEEE min/max skip it) and come out as some level — a silently wrong
/// number where the input is broken.
fn dynamic_quantize_linear(cx: &KernelCx) -> Result<Vec<HostTensor>, CpuError> {
    let x = floats(cx.input(0))?;
    if let Some((i, v)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(cx.fail(format!(
            "element {i} is {v}: a quantization range needs finite values"
        )));
    }
    super::by_decomposition(cx)
}

pub(crate) const KERNELS: &[(&str, Kernel)] = &[
    ("matmul", matmul),
    ("dot_general", dot_general),
    ("matmul_integer", matmul_integer),
    ("matmul_integer_scaled", matmul_integer_scaled),
    ("dynamic_quantize_linear", dynamic_quantize_linear),
];
