//! Fusions across nodes that the planner decides when it sees the
//! node pattern and the buffer layout allows it: a residual `add` folded
//! into a GEMM epilogue, attention written in a following permute+reshape
//! layout.

use super::*;

/// If node `i`'s output feeds only a `permute` view that feeds only a
/// (copying) `reshape` right after it, node `i` can write its result in the
/// reshape's layout directly: returns the location to write (the reshape's
/// buffer seen through the inverse permutation) and marks the reshape done.
///
/// An input overlapping that buffer refuses the fusion, unless `in_place`
/// is set and the input is exactly the write location (same buffer, offset,
/// dims and strides): a kernel whose every element is read by the thread
/// block that writes it, before it writes it, may then run in place.
pub(super) fn fuse_permute_reshape(
    p: &mut Planner,
    i: usize,
    node: &Node,
    reads: &[Loc],
    in_place: bool,
) -> Result<Option<Loc>, CudaError> {
    let out = node.outputs[0];
    let users = &p.users[out.index()];
    if users.len() != 1 || p.g.outputs.contains(&out) {
        return Ok(None);
    }
    let j = users[0];
    let perm_node = &p.g.nodes[j];
    let w = perm_node.outputs[0];
    if perm_node.op.name() != "permute" || !p.views.contains(&w) || p.g.outputs.contains(&w) {
        return Ok(None);
    }
    let wu = &p.users[w.index()];
    if wu.len() != 1 {
        return Ok(None);
    }
    let k = wu[0];
    let rs = &p.g.nodes[k];
    if rs.op.name() != "reshape" || p.views.contains(&rs.outputs[0]) {
        return Ok(None);
    }
    if (i + 1..k).any(|m| !p.views.contains(&p.g.nodes[m].outputs[0])) {
        return Ok(None);
    }
    let dst = p.out_loc(rs.outputs[0])?;
    let perm = perm_node
        .attrs
        .ints("perm")
        .map_err(|e| unsupported(j, perm_node, e.to_string()))?;
    let wdims = p.ty(w).dims().to_vec();
    let cs = contiguous(&wdims);
    let r = wdims.len() as i64;
    let mut strides = vec![0i64; wdims.len()];
    for (kk, &a) in perm.iter().enumerate() {
        let a = (if a < 0 { a + r } else { a }) as usize;
        strides[a] = cs[kk];
    }
    let ty = p.ty(out);
    let write = Loc {
        root: dst.root,
        offset: dst.offset,
        strides,
        dtype: ty.dtype,
        dims: ty.dims().to_vec(),
    };
    let same = |l: &Loc| {
        l.root == write.root
            && l.offset == write.offset
            && l.dims == write.dims
            && l.strides == write.strides
            && l.dtype == write.dtype
    };
    if reads
        .iter()
        .any(|l| overlap(l, &dst) && !(in_place && same(l)))
    {
        return Ok(None);
    }
    p.done.insert(k);
    p.locs[rs.outputs[0].index()] = Some(dst.clone());
    Ok(Some(write))
}

/// If the only user of node `i`'s output is an `add` with a contiguous
/// operand of the same type, right after it (only views in between), fuse
/// that add into the GEMM: returns (the other operand, the add's output),
/// and marks the add as done. Refused when the add's output memory overlaps
/// the GEMM's inputs (the planner may reuse their buffers after node `i`).
pub(super) fn fuse_residual(
    p: &mut Planner,
    i: usize,
    node: &Node,
    gemm_inputs: &[&Loc],
) -> Result<Option<(Loc, Loc)>, CudaError> {
    let out = node.outputs[0];
    let users = &p.users[out.index()];
    if users.len() != 1 || p.g.outputs.contains(&out) {
        return Ok(None);
    }
    let j = users[0];
    let add = &p.g.nodes[j];
    if add.op.name() != "add" || add.inputs.len() != 2 || add.inputs[0] == add.inputs[1] {
        return Ok(None);
    }
    if (i + 1..j).any(|k| !p.views.contains(&p.g.nodes[k].outputs[0])) {
        return Ok(None);
    }
    let other = if add.inputs[0] == out {
        add.inputs[1]
    } else {
        add.inputs[0]
    };
    let Some(r) = p.locs[other.index()].clone() else {
        return Ok(None);
    };
    let o = p.out_loc(add.outputs[0])?;
    if r.dims != o.dims
        || r.dtype != o.dtype
        || !r.is_contiguous()
        || p.g.ty(out) != p.g.ty(add.outputs[0])
    {
        return Ok(None);
    }
    let (orr, olo, ohi) = span(&o);
    let overlaps = |l: &Loc| {
        let (rr, lo, hi) = span(l);
        rr == orr && lo < ohi && olo < hi
    };
    let mut reads: Vec<&Loc> = gemm_inputs.to_vec();
    if let Some(&bv) = node.inputs.get(2) {
        if let Some(l) = p.locs[bv.index()].as_ref() {
            reads.push(l);
        }
    }
    if reads.iter().any(|l| overlaps(l)) {
        return Ok(None);
    }
    // R and D may be the same buffer (in place), but not partly overlap.
    if overlaps(&r) && !(r.root == o.root && r.offset == o.offset) {
        return Ok(None);
    }
    p.done.insert(j);
    p.locs[add.outputs[0].index()] = Some(o.clone());
    Ok(Some((r, o)))
}
