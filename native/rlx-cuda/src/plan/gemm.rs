//! NumPy matmul through cuBLAS: operand layouts, batching, one call or one per batch.

use super::*;

/// A matrix operand for cuBLAS: (transposed in memory?, leading dim), or None.
pub(super) fn mat_layout(rows: usize, cols: usize, sr: i64, sc: i64) -> Option<(bool, i32)> {
    if (sc == 1 || cols == 1) && (sr >= cols as i64 || rows == 1) {
        Some((false, sr.max(cols as i64).max(1) as i32))
    } else if (sr == 1 || rows == 1) && (sc >= rows as i64 || cols == 1) {
        Some((true, sc.max(rows as i64).max(1) as i32))
    } else {
        None
    }
}

/// NumPy matmul through cuBLAS (row-major C = A·B computed as Cᵀ = Bᵀ·Aᵀ).
pub(super) fn matmul(
    p: &mut Planner,
    i: usize,
    node: &Node,
    a: Loc,
    b: Loc,
    out: &Loc,
) -> Result<(), CudaError> {
    let dtype = out.dtype;
    if !dtype.is_float() {
        return Err(unsupported(i, node, format!("matmul on {dtype}")));
    }
    // Promote 1-D operands.
    let promote = |l: Loc, front: bool| -> Loc {
        if l.dims.len() != 1 {
            return l;
        }
        let (dims, strides) = if front {
            (vec![1, l.dims[0]], vec![0, l.strides[0]])
        } else {
            (vec![l.dims[0], 1], vec![l.strides[0], 0])
        };
        Loc { dims, strides, ..l }
    };
    let mut a = promote(a, true);
    let mut b = promote(b, false);
    let (ra, rb) = (a.dims.len(), b.dims.len());
    let (m, k, n) = (a.dims[ra - 2], a.dims[ra - 1], b.dims[rb - 1]);
    // Out batch dims: broadcast of both.
    let ab: Vec<usize> = a.dims[..ra - 2].to_vec();
    let bb: Vec<usize> = b.dims[..rb - 2].to_vec();
    let nb = ab.len().max(bb.len());
    let mut batch = vec![1usize; nb];
    for kk in 0..nb {
        let x = if kk + ab.len() >= nb {
            ab[kk + ab.len() - nb]
        } else {
            1
        };
        let y = if kk + bb.len() >= nb {
            bb[kk + bb.len() - nb]
        } else {
            1
        };
        batch[kk] = x.max(y);
    }
    let bstr = |l: &Loc| -> Vec<i64> {
        let r = l.dims.len() - 2;
        let bl = Loc {
            dims: l.dims[..r].to_vec(),
            strides: l.strides[..r].to_vec(),
            ..l.clone()
        };
        broadcast_strides(&bl, &batch)
    };
    let mut la = mat_layout(m, k, a.strides[ra - 2], a.strides[ra - 1]);
    if la.is_none() {
        a = p.contiguous(node.inputs[0]).map(|c| promote(c, true))?;
        la = mat_layout(m, k, a.strides[ra - 2], a.strides[ra - 1]);
    }
    let mut lb = mat_layout(k, n, b.strides[rb - 2], b.strides[rb - 1]);
    if lb.is_none() {
        b = p.contiguous(node.inputs[1]).map(|c| promote(c, false))?;
        lb = mat_layout(k, n, b.strides[rb - 2], b.strides[rb - 1]);
    }
    let ((ta, lda), (tb, ldb)) = (la.expect("contiguous"), lb.expect("contiguous"));
    let (sa, sb) = (bstr(&a), bstr(&b));
    let nbatch: usize = batch.iter().product();
    // One strided call when each operand's batch offset is linear in the
    // flat batch index; else one call per batch element.
    let linear = |s: &[i64]| -> Option<i64> {
        let mut stride: Option<i64> = None;
        let mut inner = 1i64;
        for kk in (0..nb).rev() {
            if batch[kk] > 1 {
                let want = s[kk];
                match stride {
                    None => {
                        if want % inner != 0 {
                            return None;
                        }
                        stride = Some(want / inner);
                    }
                    Some(st) if st * inner == want => {}
                    _ => return None,
                }
            }
            inner *= batch[kk] as i64;
        }
        Some(stride.unwrap_or(0))
    };
    let es = esize(dtype) as i64;
    let call = |ap: Ptr, bp: Ptr, cp: Ptr, stride: (i64, i64), nbat: usize| Gemm {
        // C (m×n row-major) is Cᵀ (n×m col-major) = Bᵀ·Aᵀ.
        trans_a: tb,
        trans_b: ta,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        a: bp,
        lda: ldb,
        stride_a: stride.1,
        b: ap,
        ldb: lda,
        stride_b: stride.0,
        c: cp,
        ldc: n as i32,
        stride_c: (m * n) as i64,
        batch: nbat as i32,
        dtype,
        c_dtype: dtype,
        bias: None,
        residual: None,
        bias_stride: 0,
        tail: None,
    };
    match (linear(&sa), linear(&sb)) {
        (Some(x), Some(y)) => {
            let mut gemm = call(a.ptr(), b.ptr(), out.ptr(), (x, y), nbatch);
            // A shared right operand (weights) and row-major A whose batches
            // follow each other: one GEMM with the batches stacked into M.
            if nbatch > 1 && y == 0 && !ta && x == m as i64 * lda as i64 {
                gemm.n = (nbatch * m) as i32;
                gemm.batch = 1;
                gemm.stride_b = 0;
                gemm.stride_c = 0;
            }
            p.launches.push(Launch::Gemm { node: i, gemm });
            p.kernels.push((
                i,
                "cublasLt::matmul (strided batched, algorithm timed at compile)".into(),
            ));
        }
        _ => {
            for t in 0..nbatch {
                let mut r = t;
                let (mut oa, mut ob) = (0i64, 0i64);
                for kk in (0..nb).rev() {
                    let c = (r % batch[kk]) as i64;
                    r /= batch[kk];
                    oa += c * sa[kk];
                    ob += c * sb[kk];
                }
                let mut ap = a.ptr();
                ap.byte += oa * es;
                let mut bp = b.ptr();
                bp.byte += ob * es;
                let mut cp = out.ptr();
                cp.byte += (t * m * n) as i64 * es;
                let gemm = call(ap, bp, cp, (0, 0), 1);
                p.launches.push(Launch::Gemm { node: i, gemm });
            }
            p.kernels.push((i, "cublasLt::matmul (per batch)".into()));
        }
    }
    Ok(())
}
