//! Attention: a fused kernel, or batched cuBLAS GEMMs around a masked softmax.

use super::gemm::mat_layout;
use super::mask;
use super::*;
use crate::codegen::kernels::{AttentionSpec, MmaBlocks};

/// `attention`, or `attention_merged`: the same kernels writing the
/// (.., H, Sq, Dv) result through the strides of the merged output.
pub(super) fn attention(
    p: &mut Planner,
    i: usize,
    node: &Node,
    out: &Loc,
) -> Result<(), CudaError> {
    let q = p.loc(node.inputs[0])?;
    let k = p.loc(node.inputs[1])?;
    let v = p.loc(node.inputs[2])?;
    let merged;
    let out = if node.op.name() == "attention_merged" {
        merged = heads_view(out, *v.dims.last().unwrap_or(&1))
            .ok_or_else(|| unsupported(i, node, "the output is not a (.., Sq, H·Dv) buffer"))?;
        &merged
    } else {
        out
    };
    let r = out.dims.len() - 2;
    let batch = out.dims[..r].to_vec();
    let (sq, dh) = (q.dims[r], q.dims[r + 1]);
    let (sk, dv) = (k.dims[r], v.dims[r + 1]);
    let full = |l: &Loc, last: [usize; 2]| -> Vec<i64> {
        let mut d = batch.clone();
        d.extend(last);
        broadcast_strides(l, &d)
    };
    let (qs, ks, vs) = (full(&q, [sq, dh]), full(&k, [sk, dh]), full(&v, [sk, dv]));
    let kind = node.attrs.str("mask_kind").unwrap_or("none").to_string();
    let window = node.attrs.int("window").unwrap_or(0);
    let scale = node
        .attrs
        .opt_float("scale")
        .unwrap_or(1.0 / (dh as f64).sqrt());
    let mut args = vec![q.ptr(), k.ptr(), v.ptr()];
    let mask = match (kind.as_str(), node.inputs.get(3)) {
        ("custom", Some(&m)) | ("bias", Some(&m)) => {
            let l = mask::mask_loc(p, m)?;
            let strides = full(&l, [sq, sk]);
            args.push(l.ptr());
            if kind == "custom" {
                Mask::Keep {
                    dtype: l.dtype,
                    strides,
                }
            } else {
                Mask::Bias {
                    dtype: l.dtype,
                    strides,
                }
            }
        }
        ("none", None) => Mask::None,
        (builtin, None) => {
            // Causal / sliding-window masks: the IR's own definition, as a constant.
            let keep = rlx_ir::ops::fused::attention_mask(builtin, sq, sk, window)
                .ok_or_else(|| unsupported(i, node, format!("mask kind {builtin}")))?;
            let t = HostTensor::from_slice(&keep, [sq, sk])
                .map_err(|e| unsupported(i, node, e.to_string()))?;
            let l = p.const_loc(t);
            let strides = full(&l, [sq, sk]);
            args.push(l.ptr());
            Mask::Keep {
                dtype: DType::Bool,
                strides,
            }
        }
        (kind, _) => {
            return Err(unsupported(
                i,
                node,
                format!("mask kind {kind} with these inputs"),
            ))
        }
    };
    // The tensor-core kernel (below) for f16/bf16 on sm_80+.
    let nb: usize = batch.iter().product();
    let same = [&q, &k, &v].iter().all(|l| l.dtype == out.dtype);
    let mma = p.tensor_cores
        && same
        && matches!(out.dtype, DType::F16 | DType::BF16)
        && dh % 16 == 0
        && dh <= 128
        && dv % 8 == 0
        && dv <= 128
        && sk % 16 == 0
        && sk <= 128;
    let blocks = mma_blocks(p.attn_split, nb, sq);
    let os = out.strides.clone();
    args.push(out.ptr());
    if sq == 0 || nb == 0 {
        return Ok(());
    }
    // K and V rows of whole 16-byte float4s (f32, unit column stride,
    // every other stride and the offset a multiple of 4): the kernels
    // that stage a head copy them a float4 at a time.
    let rows4 = |l: &Loc, s: &[i64], cols: usize| {
        l.dtype == DType::F32
            && s[r + 1] == 1
            && cols.is_multiple_of(4)
            && s[..=r].iter().all(|x| x % 4 == 0)
            && l.offset % 4 == 0
    };
    let vec_kv = rows4(&k, &ks, dh) && rows4(&v, &vs, dv);
    let spec = AttentionSpec {
        vec_kv,
        dtype: out.dtype,
        batch: &batch,
        sq,
        sk,
        dh,
        dv,
        q: &qs,
        k: &ks,
        v: &vs,
        out: &os,
        mask: &mask,
        scale,
    };
    // A few query rows over many keys (a decoder's step over its cache),
    // too few blocks to fill the GPU one head per block: the keys split
    // over blocks, then their partials merged (`attention_split`).
    if !mma && sq <= 4 && sk >= 64 && nb * sq < kernels::SPLIT_BELOW_ROWS {
        let (chunk, splits) = kernels::attention_split_shape(nb * sq, sk);
        let part = p.scratch_loc(DType::F32, &[nb, sq, splits, dv + 2]);
        let out_ptr = args.pop().expect("the output pointer");
        args.push(part.ptr());
        let smem = kernels::attention_split_smem(&spec, chunk) as u32;
        let text = kernels::attention_split(&spec, chunk, splits);
        let threads = kernels::SPLIT_THREADS;
        p.kernel(
            text,
            (splits as u32, sq as u32, nb as u32),
            threads,
            smem,
            args,
            false,
        );
        let text = kernels::attention_split_combine(&spec, splits);
        p.kernel(
            text,
            (sq as u32, nb as u32, 1),
            threads,
            0,
            vec![part.ptr(), out_ptr],
            false,
        );
        return Ok(());
    }
    // f16/bf16 on tensor cores, scores kept in registers (they never reach
    // global memory): one launch whatever the head count.
    if mma {
        let smem = kernels::attention_mma_smem(&spec);
        let text = kernels::attention_mma(&spec, blocks);
        let warps = blocks.warps;
        let grid = ((sq as u32).div_ceil(16 * warps), nb as u32, 1);
        p.kernel(text, grid, warps * 32, smem as u32, args, false);
        return Ok(());
    }
    // f32 (f16/bf16 GEMMs have tensor cores even where our kernels have
    // none), many heads, up to 256 keys, head dims of whole float4s: 4 query
    // rows per warp, register-tiled (8 warps, or 4 when that leaves the
    // GPU's SMs short of blocks). H200, MiniLM fp32 (heads of 32 × 128
    // keys, benches/results/minilm-cuda-attn-ab.log, A/B 3): faster than
    // the batched GEMMs from 48 heads (B=4 0.650 -> 0.634 ms per forward,
    // B=8 0.945 -> 0.896); below 48 heads within noise of the tiled kernel
    // (B=1 0.400 vs 0.396), which stays there.
    let rw = kernels::ATTN_ROWS_PER_WARP as usize;
    if out.dtype == DType::F32 && nb >= ATTN_ROWS_HEADS && sk <= 256 && dh % 4 == 0 && sk % 4 == 0 {
        let warps = if nb * sq.div_ceil(8 * rw) < 264 {
            4u32
        } else {
            8
        };
        let smem = kernels::attention_rows_smem(&spec, warps);
        if smem <= 160 * 1024 {
            let text = kernels::attention_rows(&spec, warps);
            let grid = ((sq as u32).div_ceil(warps * rw as u32), nb as u32, 1);
            p.kernel(text, grid, warps * 32, smem as u32, args, false);
            return Ok(());
        }
    }
    // Many heads: two batched cuBLAS GEMMs (tensor cores for f16/bf16/TF32)
    // around a masked softmax kernel. Few heads: one fused kernel launch.
    if nb >= ATTN_GEMM_HEADS && os[r + 1] == 1 {
        let lq = mat_layout(sq, dh, qs[r], qs[r + 1]);
        let lkt = mat_layout(dh, sk, ks[r + 1], ks[r]);
        let lv = mat_layout(sk, dv, vs[r], vs[r + 1]);
        if let (Some((tq, ldq)), Some((tk, ldk)), Some((tv, ldv))) = (lq, lkt, lv) {
            let d = out.dtype;
            let scores = p.scratch_loc(DType::F32, &[nb, sq, sk]);
            let probs = p.scratch_loc(d, &[nb, sq, sk]);
            let es = esize(d) as i64;
            let boffs: Vec<(i64, i64, i64, i64)> = (0..nb)
                .map(|t| {
                    let (mut rr, mut o) = (t, (0i64, 0i64, 0i64, 0i64));
                    for kk in (0..r).rev() {
                        let c = (rr % batch[kk]) as i64;
                        rr /= batch[kk];
                        o.0 += c * qs[kk];
                        o.1 += c * ks[kk];
                        o.2 += c * vs[kk];
                        o.3 += c * os[kk];
                    }
                    o
                })
                .collect();
            let at = |l: &Loc, off: i64, e: i64| Ptr {
                root: l.root,
                byte: (l.offset + off) * e,
            };
            // S = Q·Kᵀ, as Sᵀ = (Kᵀ)ᵀ... in column-major: C(sk×sq) = op(Kᵀ)·op(Q).
            let g1 = Gemm {
                trans_a: tk,
                trans_b: tq,
                m: sk as i32,
                n: sq as i32,
                k: dh as i32,
                a: at(&k, 0, es),
                lda: ldk,
                stride_a: 0,
                b: at(&q, 0, es),
                ldb: ldq,
                stride_b: 0,
                c: scores.ptr(),
                ldc: sk as i32,
                stride_c: 0,
                batch: nb as i32,
                dtype: d,
                c_dtype: DType::F32,
                bias: None,
                residual: None,
                bias_stride: 0,
                tail: None,
            };
            let ptrs1 = boffs
                .iter()
                .enumerate()
                .map(|(t, o)| {
                    [
                        at(&k, o.1, es),
                        at(&q, o.0, es),
                        at(&scores, (t * sq * sk) as i64, 4),
                    ]
                })
                .collect();
            p.launches.push(Launch::GemmBatched {
                node: i,
                gemm: g1,
                ptrs: ptrs1,
            });
            let mut sargs = vec![scores.ptr()];
            if args.len() > 4 {
                sargs.push(args[3]);
            }
            sargs.push(probs.ptr());
            let text = kernels::attention_softmax(d, &batch, sq, sk, &mask, scale);
            p.kernel(
                text,
                ((nb * sq).div_ceil(8) as u32, 1, 1),
                256,
                0,
                sargs,
                false,
            );
            // O = P·V: C(dv×sq) = op(V)·op(P).
            let g2 = Gemm {
                trans_a: tv,
                trans_b: false,
                m: dv as i32,
                n: sq as i32,
                k: sk as i32,
                a: at(&v, 0, es),
                lda: ldv,
                stride_a: 0,
                b: probs.ptr(),
                ldb: sk as i32,
                stride_b: 0,
                c: out.ptr(),
                ldc: os[r] as i32,
                stride_c: 0,
                batch: nb as i32,
                dtype: d,
                c_dtype: d,
                bias: None,
                residual: None,
                bias_stride: 0,
                tail: None,
            };
            let ptrs2 = boffs
                .iter()
                .enumerate()
                .map(|(t, o)| {
                    [
                        at(&v, o.2, es),
                        at(&probs, (t * sq * sk) as i64, es),
                        at(out, o.3, es),
                    ]
                })
                .collect();
            p.launches.push(Launch::GemmBatched {
                node: i,
                gemm: g2,
                ptrs: ptrs2,
            });
            p.kernels.push((
                i,
                "cublas::gemm_batched(QK^T) + nvrtc masked softmax + cublas::gemm_batched(PV)"
                    .into(),
            ));
            return Ok(());
        }
    }
    // K and V of one head staged in shared memory when they fit (227 KiB
    // per block on Hopper; keep well below), else one warp per row reading
    // them from global memory.
    // Fewer rows per block when there are few heads, to fill the GPU.
    let rows = if nb * sq.div_ceil(32) < 264 {
        16u32
    } else {
        32
    };
    let warps = 8u32;
    let tiled = (sk * (dh + 1) + sk * dv + warps as usize * (dh + sk)) * 4;
    if tiled <= 160 * 1024 {
        let text = kernels::attention_tiled(&spec, warps, rows);
        let grid = ((sq as u32).div_ceil(rows), nb as u32, 1);
        p.kernel(text, grid, warps * 32, tiled as u32, args, false);
    } else {
        let warps = 4u32;
        let text = kernels::attention(&spec, warps);
        let smem = (warps as usize * (dh + sk) * 4) as u32;
        let grid = ((sq as u32).div_ceil(warps), nb as u32, 1);
        p.kernel(text, grid, warps * 32, smem, args, false);
    }
    Ok(())
}

/// Head count from which f32 attention runs the 4-rows-per-warp kernel
/// (see `attention`).
const ATTN_ROWS_HEADS: usize = 48;

/// Blocks of the tensor-core attention for `heads` heads of `sq` query
/// rows (16 per warp). The kernel is latency-bound at small batch: one
/// block of 8 warps per head left most of a 132-SM GPU idle (MiniLM at
/// B=1: 12 blocks) and put 8 warps' softmax and MMAs on one SM. So the
/// warps per block halve, down to 2, while the grid has fewer than
/// [`MMA_MIN_BLOCKS`]; every block stages the head's K and V (16 KB for
/// heads of 32 over 128 keys), so blocks are not split further than
/// that (1 warp per block measured no faster than 2 at 12–48 heads and
/// slower at 96–192).
fn mma_blocks(split: AttnSplit, heads: usize, sq: usize) -> MmaBlocks {
    let tiles = sq.div_ceil(16).max(1);
    let most = tiles.min(8) as u32;
    let warps = match split {
        AttnSplit::Warps(w) => w.min(most).max(1),
        AttnSplit::Auto => {
            let mut w = most.next_power_of_two().min(8);
            while w > 2 && heads * tiles.div_ceil(w as usize) < MMA_MIN_BLOCKS {
                w /= 2;
            }
            w.min(most)
        }
    };
    MmaBlocks { warps }
}

/// About three blocks per SM of an H100/H200 (132 SMs). Measured on the
/// H200 (MiniLM fp16, 6 attention launches, heads of 32 × 128 keys): the
/// widest blocks that still make 384 are the fastest or within 1 µs of it
/// at 12–192 heads (2 warps up to 96 heads, 4 at 192); at 384 heads 8
/// warps (0.080 ms) — minilm-cuda-split-ab.log.
const MMA_MIN_BLOCKS: usize = 384;

/// Attention's (.., H, Sq, Dv) result as a strided view of its merged
/// output (.., Sq, H·Dv): that buffer seen as (.., Sq, H, Dv), its middle
/// axes swapped.
fn heads_view(merged: &Loc, dv: usize) -> Option<Loc> {
    let d = &merged.dims;
    let r = d.len();
    if r < 2 || dv == 0 || !d[r - 1].is_multiple_of(dv) || !merged.is_contiguous() {
        return None;
    }
    let mut dims = d[..r - 1].to_vec();
    dims.extend([d[r - 1] / dv, dv]);
    let mut strides = contiguous(&dims);
    dims.swap(r - 2, r - 1);
    strides.swap(r - 2, r - 1);
    Some(Loc {
        dims,
        strides,
        ..merged.clone()
    })
}
