//! Lowering one node: the kernel or cuBLAS launches each op becomes, in
//! the planner's schedule (families with more to decide have their own
//! module: attention, gemm, reduce, elementwise, movement, gather).

use super::*;

/// Ops whose node output is a plain strided copy of input 0.
const COPY_OPS: &[&str] = &[
    "reshape",
    "squeeze",
    "unsqueeze",
    "identity",
    "stop_gradient",
    "transfer",
    "permute",
    "broadcast",
];
/// Movement ops whose index map comes from the reference kernel run on an iota.
const TABLE_OPS: &[&str] = &[
    "narrow", "slice", "concat", "pad", "flip", "roll", "tile", "split",
];

pub(super) fn lower(p: &mut Planner, i: usize, node: &Node) -> Result<(), CudaError> {
    let op = node.op.name();
    let out = p.loc(node.outputs[0])?;
    let n_out: usize = out.dims.iter().product();
    let attrs = &node.attrs;
    let in_dtype = node
        .inputs
        .first()
        .map(|&v| p.ty(v).dtype)
        .unwrap_or(out.dtype);
    match op {
        "constant" => {
            let t = attrs
                .tensor("value")
                .map_err(|e| unsupported(i, node, e.to_string()))?
                .clone();
            let l = p.const_loc(t);
            p.locs[node.outputs[0].index()] = Some(l);
        }
        "arange" => {
            let (start, step) = (
                attrs.float("start").unwrap_or(0.0),
                attrs.float("step").unwrap_or(1.0),
            );
            let v: Vec<f64> = (0..n_out).map(|k| start + step * k as f64).collect();
            let t = HostTensor::from_f64(out.dtype, out.dims.clone(), v)
                .map_err(|e| unsupported(i, node, e.to_string()))?;
            let l = p.const_loc(t);
            p.locs[node.outputs[0].index()] = Some(l);
        }
        _ if is_elementwise(node, in_dtype) => {
            // A padding mask read only by attention, which reads its source.
            if mask::fold_nonzero_mask(p, i, node)? {
                return Ok(());
            }
            let parts = elementwise_parts(p, i, node, &out.dims)?;
            // Computed inside the reduction or norm that reads it, if one does.
            if n_out > 0 && reduce::defer_into_reduction(p, i, node, &parts)? {
                return Ok(());
            }
            // Recomputed by each of its readers, if they all can.
            if parts.idx.is_empty() && inline::defer_to_readers(p, i, node)? {
                return Ok(());
            }
            let ElementwiseParts {
                ins,
                mut args,
                idx,
                stmts,
                results,
                ..
            } = parts;
            let mut outs = Vec::new();
            let mut out_ptrs = Vec::new();
            for &o in &node.outputs {
                let l = p.loc(o)?;
                outs.push((l.dtype, l.strides.clone()));
                out_ptrs.push(l.ptr());
            }
            let vec = vector_width(&out.dims, &ins, &args, &outs, &out_ptrs);
            args.extend(out_ptrs);
            let text = kernels::elementwise_vec(&out.dims, &ins, &outs, &stmts, &results, vec);
            // Gathered operands' index arrays, then the error flag.
            let err = !idx.is_empty();
            args.extend(idx);
            if n_out > 0 {
                p.kernel(text, grid_for(n_out / vec), 256, 0, args, err);
            }
        }
        _ if COPY_OPS.contains(&op) => {
            let src = p.loc(node.inputs[0])?;
            let src = match op {
                "permute" => {
                    let perm = attrs
                        .ints("perm")
                        .map_err(|e| unsupported(i, node, e.to_string()))?;
                    let r = src.dims.len() as i64;
                    let idx: Vec<usize> = perm
                        .iter()
                        .map(|&a| (if a < 0 { a + r } else { a }) as usize)
                        .collect();
                    Loc {
                        strides: idx.iter().map(|&a| src.strides[a]).collect(),
                        dims: out.dims.clone(),
                        ..src
                    }
                }
                "broadcast" => Loc {
                    strides: broadcast_strides(&src, &out.dims),
                    dims: out.dims.clone(),
                    ..src
                },
                // Same element order: copy over the source's own dims into
                // the contiguous output.
                _ => {
                    let dst = Loc {
                        strides: contiguous(&src.dims),
                        dims: src.dims.clone(),
                        ..out.clone()
                    };
                    p.copy(&src, &dst);
                    return Ok(());
                }
            };
            p.copy(&src, &out);
        }
        _ if TABLE_OPS.contains(&op) => table_copy(p, i, node)?,
        _ if Reduce::parse(op, 0).is_some() => reduce::reduction(p, i, node, &out)?,
        "softmax" | "log_softmax" => {
            let src = p.contiguous(node.inputs[0])?;
            let r = src.dims.len();
            let a = attrs.int("axis").unwrap_or(-1);
            let ax = (if a < 0 { a + r as i64 } else { a }) as usize;
            let nn = src.dims[ax];
            let inner: usize = src.dims[ax + 1..].iter().product();
            let rows = n_out / nn.max(1);
            let text = kernels::softmax(src.dtype, nn, inner, op == "log_softmax");
            if rows > 0 {
                p.kernel(
                    text,
                    (rows as u32, 1, 1),
                    ROW_THREADS,
                    0,
                    vec![src.ptr(), out.ptr()],
                    false,
                );
            }
        }
        "layer_norm" | "rms_norm" => {
            let (ax, nn) = norm_axis(p, node);
            let ty = p.ty(node.inputs[0]).clone();
            let (dtype, dims) = (ty.dtype, ty.dims().to_vec());
            let rms = op == "rms_norm";
            // The input computed in the kernel by the elementwise node
            // left for it (`reduce::defer_into_reduction`), or loaded.
            let fused = p.deferred.remove(&node.inputs[0]);
            let mut args = match &fused {
                Some(d) => d.args.clone(),
                None => vec![p.contiguous(node.inputs[0])?.ptr()],
            };
            for &v in &node.inputs[1..] {
                // gamma/beta broadcast to the normalized shape, contiguous.
                let l = p.loc(v)?;
                let full = Loc {
                    strides: broadcast_strides(&l, &dims[ax..]),
                    dims: dims[ax..].to_vec(),
                    ..l
                };
                let c = if full.is_contiguous() {
                    full
                } else {
                    let dst = p.scratch_loc(full.dtype, &full.dims);
                    p.copy(&full, &dst);
                    dst
                };
                args.push(c.ptr());
            }
            args.push(out.ptr());
            let rows = n_out / nn.max(1);
            let grid = (rows.div_ceil(8) as u32, 1, 1);
            if let Some(d) = &fused {
                if !norm_takes_producer(dtype, nn, rows) {
                    return Err(CudaError::Input(format!(
                        "node {i}: a fused norm input the warp kernel cannot take (planner bug)"
                    )));
                }
                let f = kernels::NormSrc {
                    dims: &dims,
                    axis: ax,
                    ins: &d.ins,
                    stmts: &d.stmts,
                    result: &d.result,
                };
                let text = kernels::norm_warp(dtype, nn, rows, eps_of(node), rms, Some(&f));
                // Gathered operands' index arrays, then the error flag.
                args.extend(d.idx.iter().copied());
                p.kernel(text, grid, 256, 0, args, !d.idx.is_empty());
            } else if norm_takes_producer(dtype, nn, rows) {
                // Single precision rows of up to 1024: one warp per row.
                let text = kernels::norm_warp(dtype, nn, rows, eps_of(node), rms, None);
                p.kernel(text, grid, 256, 0, args, false);
            } else if rows > 0 {
                let text = kernels::norm(dtype, nn, eps_of(node), rms);
                p.kernel(text, (rows as u32, 1, 1), ROW_THREADS, 0, args, false);
            }
        }
        "conv" | "conv_act" | "conv_transpose" | "max_pool" | "avg_pool" => {
            conv(p, i, node, &out)?;
        }
        "gather" | "embedding" | "index_select" => {
            let (xv, iv, axis) = if op == "embedding" {
                (node.inputs[0], node.inputs[1], 0)
            } else {
                let r = p.ty(node.inputs[0]).rank() as i64;
                let a = attrs.int("axis").unwrap_or(0);
                (
                    node.inputs[0],
                    node.inputs[1],
                    (if a < 0 { a + r } else { a }) as usize,
                )
            };
            // Read where it is used, if its one reader can (see `gather.rs`).
            let (xl, il) = (p.loc(xv)?, p.loc(iv)?);
            if n_out > 0 && gather::defer_gather(p, i, node, &xl, &il, axis)? {
                return Ok(());
            }
            let x = p.contiguous(xv)?;
            let idx = p.contiguous(iv)?;
            if !matches!(idx.dtype, DType::I32 | DType::I64) {
                return Err(unsupported(
                    i,
                    node,
                    format!("indices of dtype {}", idx.dtype),
                ));
            }
            let outer: usize = x.dims[..axis].iter().product();
            let len = x.dims[axis];
            let inner: usize = x.dims[axis + 1..].iter().product();
            let n_idx: usize = idx.dims.iter().product();
            let text = kernels::gather(x.dtype, idx.dtype, outer, len, inner, n_idx, i as i32 + 1);
            if n_out > 0 {
                p.kernel(
                    text,
                    grid_for(n_out),
                    256,
                    0,
                    vec![x.ptr(), idx.ptr(), out.ptr()],
                    true,
                );
            }
        }
        "matmul" | "matmul_bias_act" => {
            if fuse::sibling_gemms(p, i, node)? {
                return Ok(());
            }
            let a = p.loc(node.inputs[0])?;
            let b = p.loc(node.inputs[1])?;
            let before = p.launches.len();
            matmul(p, i, node, a.clone(), b.clone(), &out)?;
            let act = attrs.str("activation").unwrap_or("none").to_string();
            let single = p.launches.len() == before + 1;
            // The cuBLASLt bias epilogue (a contiguous vector over the
            // last axis).
            if single && act == "none" {
                if let Some(bias) = bias_vector(p, node.inputs.get(2).copied(), &out)? {
                    if let Some(Launch::Gemm { gemm, .. }) = p.launches.last_mut() {
                        gemm.bias = bias;
                    }
                    if bias.is_some() || op == "matmul" {
                        return Ok(());
                    }
                }
            }
            if op == "matmul_bias_act" {
                if node.inputs.len() > 2 || act != "none" {
                    let bias = node.inputs.get(2).copied();
                    epilogue(p, i, node, &out, bias, &act, None, &out)?;
                }
                // The kernel just added is the GEMM's tail, which our own
                // GEMM kernels can fold into their epilogue (`hgemm.rs`).
                if single && act != "none" && p.launches.len() == before + 2 {
                    let e = expr::unary(&act, out.dtype, "y");
                    let bias = bias_vector(p, node.inputs.get(2).copied(), &out)?;
                    if let (Some(bias), Some(act)) = (bias, e) {
                        if let Some(Launch::Gemm { gemm, .. }) = p.launches.get_mut(before) {
                            if gemm.bias.is_none() && gemm.residual.is_none() {
                                gemm.tail = Some(Tail { bias, act });
                                if let Some((_, k)) =
                                    p.kernels.iter_mut().rev().find(|(n, _)| *n == i)
                                {
                                    k.push_str(
                                        "; then its bias + activation kernel (with RLX_CUDA_HGEMM=auto, nvrtc::rlx_hgemm with them in its epilogue where timed faster)",
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
        "matmul_residual" => matmul_residual(p, i, node, &out)?,
        "attention" | "attention_merged" => attention(p, i, node, &out)?,
        "dequant_matmul" => super::quant::dequant_matmul(p, i, node, &out)?,
        "rope" => super::rope::rope(p, i, node, &out)?,
        _ => return Err(unsupported(i, node, "no CUDA lowering")),
    }
    Ok(())
}

/// The bias of a matmul node (its third input) when it is one vector
/// along the output's last axis, as GEMM epilogues take it: `Some(None)`
/// without a bias, `None` when the bias is shaped otherwise.
fn bias_vector(
    p: &Planner,
    bias: Option<ValueId>,
    out: &Loc,
) -> Result<Option<Option<Ptr>>, CudaError> {
    let Some(bv) = bias else {
        return Ok(Some(None));
    };
    let bl = p.loc(bv)?;
    let st = broadcast_strides(&bl, &out.dims);
    let r = st.len();
    let vector = st[r - 1] == 1 && st[..r - 1].iter().all(|&x| x == 0);
    Ok(vector.then(|| Some(bl.ptr())))
}

/// `matmul_residual(a, b, r, [bias])`, the fold rlx-opt decided:
/// act(a·b + bias) + r. Without an activation, one cuBLASLt GEMM whose
/// epilogue adds the bias vector and r (D = A·B + bias + R, beta = 1),
/// where D may be R itself — the memory plan's in-place residual stream.
/// Otherwise (an activation, a bias that is not a vector, a product of
/// several launches) the product goes to scratch and one elementwise
/// kernel writes act(y + bias) + r, reading each element of r before
/// writing it.
fn matmul_residual(p: &mut Planner, i: usize, node: &Node, out: &Loc) -> Result<(), CudaError> {
    let act = node.attrs.str("activation").unwrap_or("none").to_string();
    let (a, b, r) = (
        p.loc(node.inputs[0])?,
        p.loc(node.inputs[1])?,
        p.loc(node.inputs[2])?,
    );
    let bias = node.inputs.get(3).copied();
    let in_gemm = act == "none" && r.is_contiguous() && r.dims == out.dims && r.dtype == out.dtype;
    if let (true, Some(bias_ptr)) = (in_gemm, bias_vector(p, bias, out)?) {
        // Try the one-GEMM form; the launches (and any operand copies
        // cached for later nodes) are undone if the product needs more.
        let mark = (
            p.launches.len(),
            p.kernels.len(),
            p.contiguous_cache.clone(),
        );
        matmul(p, i, node, a.clone(), b.clone(), out)?;
        if p.launches.len() == mark.0 + 1 {
            if let Some(Launch::Gemm { gemm, .. }) = p.launches.last_mut() {
                gemm.bias = bias_ptr;
                gemm.residual = Some(r.ptr());
                return Ok(());
            }
        }
        p.launches.truncate(mark.0);
        p.kernels.truncate(mark.1);
        p.contiguous_cache = mark.2;
    }
    let y = p.scratch_loc(out.dtype, &out.dims);
    matmul(p, i, node, a, b, &y)?;
    epilogue(p, i, node, &y, bias, &act, Some(&r), out)
}

/// One elementwise kernel finishing product `y` into `out`:
/// act(y + bias), plus `residual` when given. `y` may be `out` itself:
/// each element is read before it is written.
#[allow(clippy::too_many_arguments)]
fn epilogue(
    p: &mut Planner,
    i: usize,
    node: &Node,
    y: &Loc,
    bias: Option<ValueId>,
    act: &str,
    residual: Option<&Loc>,
    out: &Loc,
) -> Result<(), CudaError> {
    let mut ins = vec![Operand::plain(y.dtype, y.strides.clone())];
    let mut args = vec![y.ptr()];
    let mut e = "x0".to_string();
    if let Some(bv) = bias {
        let bl = p.loc(bv)?;
        ins.push(Operand::plain(bl.dtype, broadcast_strides(&bl, &out.dims)));
        args.push(bl.ptr());
        e = "(x0 + x1)".into();
    }
    if act != "none" {
        let s = expr::unary(act, out.dtype, "y")
            .ok_or_else(|| unsupported(i, node, format!("activation {act}")))?;
        e = format!(
            "([&]() {{ {} y = {e}; return {s}; }}())",
            ctype::compute(out.dtype)
        );
    }
    if let Some(r) = residual {
        let k = ins.len();
        ins.push(Operand::plain(r.dtype, broadcast_strides(r, &out.dims)));
        args.push(r.ptr());
        e = format!("({e} + x{k})");
    }
    args.push(out.ptr());
    let outs = [(out.dtype, out.strides.clone())];
    let n_in = args.len() - 1;
    let n_out: usize = out.dims.iter().product();
    let vec = vector_width(&out.dims, &ins, &args[..n_in], &outs, &args[n_in..]);
    let text = kernels::elementwise_vec(&out.dims, &ins, &outs, "", &[e], vec);
    if n_out > 0 {
        p.kernel(text, grid_for(n_out / vec), 256, 0, args, false);
    }
    Ok(())
}

/// A norm node's first normalized axis and the elements per row.
pub(super) fn norm_axis(p: &Planner, node: &Node) -> (usize, usize) {
    let dims = p.ty(node.inputs[0]).dims();
    let r = dims.len();
    let a = node.attrs.int("axis").unwrap_or(-1);
    let ax = (if a < 0 { a + r as i64 } else { a }) as usize;
    (ax, dims[ax.min(r)..].iter().product())
}

fn eps_of(node: &Node) -> f64 {
    node.attrs.float("eps").unwrap_or(1e-5)
}

/// Whether the norm over `rows` rows of `nn` elements of `dtype` runs the
/// warp-per-row kernel (single precision, rows of up to 1024), the one
/// that can compute its input itself.
pub(super) fn norm_takes_producer(dtype: DType, nn: usize, rows: usize) -> bool {
    rows > 0 && nn <= 1024 && ctype::is_single(dtype)
}

/// A direct conv, transposed conv or pool over contiguous operands (see
/// `codegen/kernels/conv.rs`).
fn conv(p: &mut Planner, i: usize, node: &Node, out: &Loc) -> Result<(), CudaError> {
    use rlx_ir::ops::linalg::Window;
    let op = node.op.name();
    if !out.is_contiguous() {
        return Err(unsupported(i, node, "a strided output"));
    }
    let attrs = &node.attrs;
    let x = p.contiguous(node.inputs[0])?;
    let kernel: Vec<usize> = if op.ends_with("pool") {
        attrs
            .ints("kernel")
            .map_err(|e| unsupported(i, node, e.to_string()))?
            .iter()
            .map(|&k| k.max(0) as usize)
            .collect()
    } else {
        p.ty(node.inputs[1]).dims()[2..].to_vec()
    };
    let win = Window::read(attrs, kernel).map_err(|e| unsupported(i, node, e))?;
    let mut args = vec![x.ptr()];
    let text = if op.ends_with("pool") {
        let include = attrs.bool("count_include_pad").unwrap_or(false);
        kernels::pool(op, x.dtype, &x.dims, &out.dims, &win, include)
    } else {
        let w = p.contiguous(node.inputs[1])?;
        args.push(w.ptr());
        if let Some(&b) = node.inputs.get(2) {
            args.push(p.contiguous(b)?.ptr());
        }
        let groups = attrs.int("groups").unwrap_or(1).max(1) as usize;
        let act = attrs.str("activation").unwrap_or("none");
        kernels::conv(
            op,
            x.dtype,
            &x.dims,
            &w.dims,
            node.inputs.len() > 2,
            &out.dims,
            &win,
            groups,
            act,
        )
        .ok_or_else(|| unsupported(i, node, format!("activation `{act}` has no CUDA form")))?
    };
    args.push(out.ptr());
    let n: usize = out.dims.iter().product();
    if n > 0 {
        p.kernel(text, grid_for(n), 256, 0, args, false);
    }
    Ok(())
}
