//! `dequant_matmul`: x (..., K) times the transpose of a GGUF
//! block-quantized weight (N, K) whose raw bytes are a graph input on the
//! device (`host::bytes_of` copies a packed tensor byte for byte). The
//! gemv kernel for a few rows of x (decoding a token); for more (a
//! prompt), the weight decoded into scratch and a cuBLAS GEMM when x is
//! f32, else the tiled kernel; see `codegen::kernels::quant`.

use super::*;
use crate::codegen::kernels::quant as q;

pub(super) fn dequant_matmul(
    p: &mut Planner,
    i: usize,
    node: &Node,
    out: &Loc,
) -> Result<(), CudaError> {
    let w = p.loc(node.inputs[1])?;
    let wd = w.dtype;
    if !q::decodes(wd) {
        return Err(unsupported(
            i,
            node,
            format!(
                "no CUDA kernel decodes {wd} weights ({} are decoded)",
                q::names()
            ),
        ));
    }
    // The kernels address whole rows of the uploaded bytes: the weight
    // itself (block values are never views: the memory planner keeps
    // them whole), not a strided or offset view of it.
    if w.dims.len() != 2 || !w.is_contiguous() || w.offset != 0 {
        return Err(unsupported(
            i,
            node,
            format!(
                "the {wd} weight must be a whole (N, K) tensor (dims {:?}, strides {:?}, offset {})",
                w.dims, w.strides, w.offset
            ),
        ));
    }
    let (n, k) = (w.dims[0], w.dims[1]);
    let (bl, _) = q::block(wd);
    let xd = out.dtype;
    if !k.is_multiple_of(bl) || !q::X_DTYPES.contains(&xd) {
        return Err(unsupported(
            i,
            node,
            format!("K = {k} is not whole {wd} blocks of {bl}, or x is {xd} (not f32/f16/bf16)"),
        ));
    }
    let mut x = p.contiguous(node.inputs[0])?;
    // f32 rows are read as float4s: a view starting off a 16-byte boundary
    // is copied once (arena slots and input buffers are aligned).
    if xd == DType::F32 && x.ptr().byte % 16 != 0 {
        let dst = p.scratch_loc(x.dtype, &x.dims);
        p.copy(&x, &dst);
        x = dst;
    }
    let m = x.dims.iter().product::<usize>() / k.max(1);
    if m == 0 || n == 0 {
        return Ok(());
    }
    // A prompt of f32 x: the weight decoded once into shared scratch, then
    // cuBLAS (strict f32, like every f32 GEMM here).
    if m > q::GEMV_ROWS && xd == DType::F32 && n * k * 4 <= q::DECODE_GEMM_MAX_BYTES {
        let wf = p.shared_scratch_loc(DType::F32, &[n, k]);
        let text = q::decode(wd, n, k)
            .ok_or_else(|| unsupported(i, node, format!("no decoder for {wd}")))?;
        let grid = ((n * k / 8).div_ceil(256) as u32, 1, 1);
        p.kernel(text, grid, 256, 0, vec![w.ptr(), wf.ptr()], false);
        let (k64, n64) = (k as i64, n as i64);
        let a = Loc {
            dims: vec![m, k],
            strides: vec![k64, 1],
            ..x
        };
        // wᵀ (K, N): the decoded (N, K) read column-major.
        let b = Loc {
            dims: vec![k, n],
            strides: vec![1, k64],
            ..wf
        };
        let o = Loc {
            dims: vec![m, n],
            strides: vec![n64, 1],
            ..out.clone()
        };
        return super::gemm::matmul(p, i, node, a, b, &o);
    }
    let args = vec![x.ptr(), w.ptr(), out.ptr()];
    let text = if m <= q::GEMV_ROWS {
        q::gemv(wd, xd, m, n, k)
    } else {
        q::tiled(wd, xd, m, n, k)
    }
    .ok_or_else(|| unsupported(i, node, format!("no decoder for {wd}")))?;
    if m <= q::GEMV_ROWS {
        let grid = (n.div_ceil(q::GEMV_WARPS * q::GEMV_COLS) as u32, 1, 1);
        p.kernel(text, grid, 32 * q::GEMV_WARPS as u32, 0, args, false);
    } else {
        let (gx, gy) = (n.div_ceil(q::TILE), m.div_ceil(q::TILE));
        if gy > 65535 {
            return Err(unsupported(
                i,
                node,
                format!("M = {m} rows exceed the grid's y dimension"),
            ));
        }
        let smem = q::tiled_smem(wd) as u32;
        p.kernel(
            text,
            (gx as u32, gy as u32, 1),
            q::TILED_THREADS,
            smem,
            args,
            false,
        );
    }
    Ok(())
}
