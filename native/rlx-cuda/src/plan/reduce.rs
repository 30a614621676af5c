//! Reductions, with the elementwise nodes around them fused in: the node
//! that produces a reduction's input (computed at each reduced element,
//! never stored: `reduce_sum(x * mask)`, `reduce_sum(x * x)`), and the one
//! that consumes its output (run on each reduced value before it is
//! stored: `max(sqrt(s), eps)`, `max(count, 1e-9)`), and one over the
//! input's shape that reads that value broadcast per row (`x / norm`).
//! Each fused node
//! saves a launch and a round trip through memory. Values are rounded to
//! the fused node's dtype where the unfused kernel would have stored them,
//! so the results are the same as unfused.

use super::*;
use crate::codegen::kernels::{
    Reduce, ReduceConsumer, ReduceEpilogue, ReduceLayout, ReduceSrc, REDUCE_COLUMNS,
};

/// An elementwise node left for the reduction (or norm) that reads its
/// output.
pub(super) struct Deferred {
    /// Its operands (strides over its output dims), their addresses and
    /// memory, and the index arrays of gathered operands (norms only).
    pub ins: Vec<Operand>,
    pub args: Vec<Ptr>,
    locs: Vec<Loc>,
    pub idx: Vec<Ptr>,
    pub stmts: String,
    pub result: String,
}

/// The node after `i` that is not a view, if every node between is one.
fn next_kernel_node(p: &Planner, i: usize) -> Option<usize> {
    (i + 1..p.g.nodes.len()).find(|&k| !p.views.contains(&p.g.nodes[k].outputs[0]))
}

/// The one node reading `v`, if it is the next non-view node after `i`
/// and `v` is not a graph output.
fn sole_next_user(p: &Planner, i: usize, v: ValueId) -> Option<usize> {
    let users = &p.users[v.index()];
    if users.len() != 1 || p.g.outputs.contains(&v) {
        return None;
    }
    (next_kernel_node(p, i) == Some(users[0])).then_some(users[0])
}

/// Elementwise node `i` (its operands, addresses and body in `parts`):
/// if the next kernel node is a reduction whose only input is this
/// output, or a norm whose row input it is (run by the warp-per-row
/// kernel), and the output has no other reader, skip the kernel and let
/// that node compute it. Nothing writes memory in between (only views),
/// so the operands are intact when it runs; refused when that node's
/// output would overwrite an operand. Gathered operands (`gather.rs`)
/// only go into norms.
pub(super) fn defer_into_reduction(
    p: &mut Planner,
    i: usize,
    node: &Node,
    parts: &ElementwiseParts,
) -> Result<bool, CudaError> {
    if node.outputs.len() != 1 || parts.results.len() != 1 {
        return Ok(false);
    }
    let v = node.outputs[0];
    let Some(j) = sole_next_user(p, i, v) else {
        return Ok(false);
    };
    let r = &p.g.nodes[j];
    let reduction = Reduce::parse(r.op.name(), 0).is_some() && r.inputs.as_slice() == [v];
    let norm = matches!(r.op.name(), "layer_norm" | "rms_norm")
        && r.inputs[0] == v
        && !r.inputs[1..].contains(&v)
        && {
            let (_, nn) = norm_axis(p, r);
            let ty = p.ty(v);
            let rows = ty.shape.numel() / nn.max(1);
            norm_takes_producer(ty.dtype, nn, rows)
        };
    if !(norm || (reduction && parts.idx.is_empty())) {
        return Ok(false);
    }
    // Operand memory (a gathered operand reads its table and indices).
    let mut locs = Vec::new();
    for &u in &node.inputs {
        match p.gathers.get(&u) {
            Some(g) => locs.extend([g.table.clone(), g.idx.clone()]),
            None => locs.extend(inline::operand_locs(p, u).ok_or_else(|| {
                CudaError::Input(format!("value %{} has no location (planner bug)", u.0))
            })?),
        }
    }
    let rout = p.out_loc(r.outputs[0])?;
    if locs.iter().any(|l| overlap(l, &rout)) {
        return Ok(false);
    }
    p.unstored.insert(v);
    p.deferred.insert(
        v,
        Deferred {
            ins: parts.ins.clone(),
            args: parts.args.clone(),
            locs,
            idx: parts.idx.clone(),
            stmts: parts.stmts.clone(),
            result: parts.results[0].clone(),
        },
    );
    Ok(true)
}

/// A reduction node: one block per output element.
pub(super) fn reduction(
    p: &mut Planner,
    i: usize,
    node: &Node,
    out: &Loc,
) -> Result<(), CudaError> {
    let op = node.op.name();
    let attrs = &node.attrs;
    let x = node.inputs[0];
    let ty = p.ty(x).clone();
    let (din, dims) = (ty.dtype, ty.dims().to_vec());
    let r = dims.len();
    let axes: Vec<usize> = if op == "argmax" || op == "argmin" {
        let a = attrs.int("axis").unwrap_or(-1);
        vec![(if a < 0 { a + r as i64 } else { a }) as usize]
    } else {
        let a = attrs.ints("axes").map(|a| a.to_vec()).unwrap_or_default();
        if a.is_empty() {
            (0..r).collect()
        } else {
            a.iter()
                .map(|&a| (if a < 0 { a + r as i64 } else { a }) as usize)
                .collect()
        }
    };
    let kind = Reduce::parse(op, attrs.int("correction").unwrap_or(0))
        .ok_or_else(|| unsupported(i, node, "not a reduction"))?;
    let kd: Vec<usize> = (0..r)
        .filter(|k| !axes.contains(k))
        .map(|k| dims[k])
        .collect();
    let rd: Vec<usize> = axes.iter().map(|&k| dims[k]).collect();
    // Strides over the input dims → (kept, reduced) strides.
    let split = |s: &[i64]| -> (Vec<i64>, Vec<i64>) {
        (
            (0..r).filter(|k| !axes.contains(k)).map(|k| s[k]).collect(),
            axes.iter().map(|&k| s[k]).collect(),
        )
    };
    let (src, mut args, reads) = match p.deferred.remove(&x) {
        Some(d) => {
            let ins = d
                .ins
                .iter()
                .map(|o| {
                    let (ks, rs) = split(&o.strides);
                    (o.dtype, ks, rs)
                })
                .collect();
            let body = Some((d.stmts, d.result));
            (ReduceSrc { ins, body }, d.args, d.locs)
        }
        // A value its readers recompute: its producer's operands, read at
        // each reduced element.
        None if p.inline.contains_key(&x) => {
            let src = &p.inline[&x];
            let map = src.axis_map(&dims).ok_or_else(|| {
                unsupported(i, node, "a recomputed input it cannot index (planner bug)")
            })?;
            let pn = &p.g.nodes[src.node];
            let parts = elementwise_parts(p, src.node, pn, &src.dims)?;
            let ins = parts
                .ins
                .iter()
                .map(|o| {
                    let (ks, rs) = split(&src.compose(&map, &o.strides));
                    (o.dtype, ks, rs)
                })
                .collect();
            let body = Some((parts.stmts, parts.results[0].clone()));
            (ReduceSrc { ins, body }, parts.args, src.locs.clone())
        }
        None => {
            let l = p.loc(x)?;
            let (ks, rs) = split(&l.strides);
            let src = ReduceSrc {
                ins: vec![(l.dtype, ks, rs)],
                body: None,
            };
            (src, vec![l.ptr()], vec![l])
        }
    };
    let n_out: usize = out.dims.iter().product();
    if n_out == 0 {
        return Ok(());
    }
    let epi = epilogue(p, i, node, &reads)?;
    // The row's value: the reduction's output, or its epilogue's.
    let (last, value) = match &epi {
        Some(e) => (e.node, p.g.nodes[e.node].outputs[0]),
        None => (i, node.outputs[0]),
    };
    let mut reads = reads;
    if let Some(e) = &epi {
        reads.extend(e.others.iter().cloned());
    }
    let bcast = consumer(p, last, value, &dims, &axes, &kd, &reads)?;
    // Fused values this kernel computes but does not store.
    if epi.is_some() || bcast.is_some() {
        p.unstored.insert(node.outputs[0]);
    }
    if bcast.is_some() {
        p.unstored.insert(value);
    }
    // Outputs whose innermost axis is contiguous in the input (a sum over
    // a middle axis): 32 neighbouring outputs per block, so a warp's loads
    // are neighbours, when there are enough outputs to fill the GPU.
    let inner_contiguous = kd.last().is_some_and(|&d| d > 1)
        && src
            .ins
            .iter()
            .all(|(_, ks, _)| matches!(ks.last(), Some(0 | 1)))
        && src.ins.iter().any(|(_, ks, _)| ks.last() == Some(&1));
    let layout = if bcast.is_none()
        && matches!(
            kind,
            Reduce::Sum | Reduce::Mean | Reduce::Prod | Reduce::Max | Reduce::Min
        )
        && inner_contiguous
        && n_out >= 1024
    {
        ReduceLayout::Columns
    } else {
        ReduceLayout::Block
    };
    let text = kernels::reduce(
        kind,
        (din, out.dtype),
        (&kd, &rd),
        &src,
        (epi.as_ref().map(|e| &e.epi), bcast.as_ref().map(|b| &b.0)),
        layout,
    );
    let mut dst = out.ptr();
    if let Some(e) = epi {
        args.extend(e.extra);
        dst = e.dst;
    }
    if let Some((_, extra, d)) = bcast {
        args.extend(extra);
        dst = d;
    }
    args.push(dst);
    let blocks = match layout {
        ReduceLayout::Block => n_out,
        ReduceLayout::Columns => n_out.div_ceil(REDUCE_COLUMNS),
    };
    p.kernel(
        text,
        ((blocks as u32).max(1), 1, 1),
        ROW_THREADS,
        0,
        args,
        false,
    );
    Ok(())
}

/// If the next kernel node after `last` is elementwise over the
/// reduction's input `dims`, reads the row value `value` (only it does)
/// broadcast along the reduced `axes`, and its other operands exist: that
/// node as the reduction's broadcast consumer (its extra operand
/// addresses and output address), marked done. `value` is then never
/// stored. Refused when its output overlaps memory the kernel reads,
/// unless in place over an operand of the same layout.
#[allow(clippy::type_complexity)]
fn consumer(
    p: &mut Planner,
    last: usize,
    value: ValueId,
    dims: &[usize],
    axes: &[usize],
    kd: &[usize],
    reads: &[Loc],
) -> Result<Option<(ReduceConsumer, Vec<Ptr>, Ptr)>, CudaError> {
    let Some(c) = sole_next_user(p, last, value) else {
        return Ok(None);
    };
    let cn = &p.g.nodes[c];
    let in_dtype = p.ty(cn.inputs[0]).dtype;
    if !is_elementwise(cn, in_dtype) || cn.outputs.len() != 1 {
        return Ok(None);
    }
    let co = cn.outputs[0];
    if p.ty(co).dims() != dims {
        return Ok(None);
    }
    // The value must broadcast to (kept index, any reduced index) → its
    // row: stride 0 along reduced axes, its own contiguous strides along
    // the kept ones.
    let vl = p.loc(value)?;
    let vs = broadcast_strides(&vl, dims);
    let ks = contiguous(kd);
    let mut kept = 0;
    for (k, &d) in dims.iter().enumerate() {
        if axes.contains(&k) {
            if vs[k] != 0 && d != 1 {
                return Ok(None);
            }
        } else {
            if vs[k] != ks[kept] && d != 1 {
                return Ok(None);
            }
            kept += 1;
        }
    }
    let mut others = Vec::new();
    for &u in &cn.inputs {
        if u == value {
            continue;
        }
        match inline::operand_locs(p, u) {
            Some(l) if !p.deferred.contains_key(&u) && !p.gathers.contains_key(&u) => {
                others.extend(l)
            }
            _ => return Ok(None),
        }
    }
    let dst = p.out_loc(co)?;
    // Block b reads and writes only row b: an operand laid out exactly
    // like the output (written in place over it) is safe.
    let same = |l: &Loc| {
        l.root == dst.root
            && l.offset == dst.offset
            && esize(l.dtype) == esize(dst.dtype)
            && broadcast_strides(l, dims) == dst.strides
    };
    if reads
        .iter()
        .chain(&others)
        .any(|l| overlap(l, &dst) && !same(l))
    {
        return Ok(None);
    }
    let split = |s: &[i64]| -> (Vec<i64>, Vec<i64>) {
        (
            (0..dims.len())
                .filter(|k| !axes.contains(k))
                .map(|k| s[k])
                .collect(),
            axes.iter().map(|&k| s[k]).collect(),
        )
    };
    let ElementwiseParts {
        ins,
        args,
        stmts,
        results,
        of,
        ..
    } = elementwise_parts(p, c, cn, dims)?;
    let mut c_ins = Vec::new();
    let mut extra = Vec::new();
    for ((k, o), a) in of.iter().zip(ins).zip(args) {
        if k.is_some_and(|k| cn.inputs[k] == value) {
            c_ins.push(None);
        } else {
            let (k, r) = split(&o.strides);
            c_ins.push(Some((o.dtype, k, r)));
            extra.push(a);
        }
    }
    let (out_kept, out_red) = split(&dst.strides);
    let b = ReduceConsumer {
        ins: c_ins,
        stmts,
        result: results[0].clone(),
        dtype: dst.dtype,
        out_kept,
        out_red,
    };
    p.done.insert(c);
    p.locs[co.index()] = Some(dst.clone());
    Ok(Some((b, extra, dst.ptr())))
}

/// An epilogue node (see [`epilogue`]).
struct Epilogue {
    node: usize,
    epi: ReduceEpilogue,
    /// Its operands other than the reduced value, their addresses, and
    /// its output address.
    others: Vec<Loc>,
    extra: Vec<Ptr>,
    dst: Ptr,
}

/// If the next kernel node after reduction `i` is elementwise, reads the
/// reduction's output (only it does) at the same shape, and its other
/// operands exist already: that node as the reduction's epilogue (its
/// extra operand addresses, its output address), marked done. Refused
/// when its output overlaps memory the reduction or it reads.
fn epilogue(
    p: &mut Planner,
    i: usize,
    node: &Node,
    reads: &[Loc],
) -> Result<Option<Epilogue>, CudaError> {
    let v = node.outputs[0];
    let Some(c) = sole_next_user(p, i, v) else {
        return Ok(None);
    };
    let cn = &p.g.nodes[c];
    let in_dtype = p.ty(cn.inputs[0]).dtype;
    if !is_elementwise(cn, in_dtype) || cn.outputs.len() != 1 {
        return Ok(None);
    }
    let co = cn.outputs[0];
    let dims = p.ty(co).dims().to_vec();
    if dims != p.ty(v).dims() {
        return Ok(None);
    }
    let mut others = Vec::new();
    for &u in &cn.inputs {
        if u == v {
            continue;
        }
        match inline::operand_locs(p, u) {
            Some(l) if !p.deferred.contains_key(&u) && !p.gathers.contains_key(&u) => {
                others.extend(l)
            }
            _ => return Ok(None),
        }
    }
    let dst = p.out_loc(co)?;
    if reads.iter().chain(&others).any(|l| overlap(l, &dst)) {
        return Ok(None);
    }
    let ElementwiseParts {
        ins,
        args,
        stmts,
        results,
        of,
        ..
    } = elementwise_parts(p, c, cn, &dims)?;
    let mut epi_ins = Vec::new();
    let mut extra = Vec::new();
    for ((k, o), a) in of.iter().zip(ins).zip(args) {
        if k.is_some_and(|k| cn.inputs[k] == v) {
            epi_ins.push(None);
        } else {
            epi_ins.push(Some(o));
            extra.push(a);
        }
    }
    let epi = ReduceEpilogue {
        dims,
        ins: epi_ins,
        stmts,
        result: results[0].clone(),
        dtype: dst.dtype,
        out_strides: dst.strides.clone(),
    };
    p.done.insert(c);
    p.locs[co.index()] = Some(dst.clone());
    Ok(Some(Epilogue {
        node: c,
        epi,
        others,
        extra,
        dst: dst.ptr(),
    }))
}
