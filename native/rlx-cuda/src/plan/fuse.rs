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
/// is set for it (by position in `reads`) and it is exactly the write location (same buffer, offset,
/// dims and strides): a kernel whose every element is read by the thread
/// block that writes it, before it writes it, may then run in place.
pub(super) fn fuse_permute_reshape(
    p: &mut Planner,
    i: usize,
    node: &Node,
    reads: &[Loc],
    in_place: &[bool],
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
        .enumerate()
        .any(|(n, l)| overlap(l, &dst) && !(in_place.get(n).copied().unwrap_or(false) && same(l)))
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

/// The graph input behind value `v` — the input itself, or reached
/// through `transfer` (an alias) and `permute` views (MiniLM's weights
/// are `permute(W)`) — with the ops on the way as a signature: two values
/// with the same signature are the same view of their inputs.
fn input_behind(p: &Planner, v: ValueId) -> Option<(usize, String)> {
    let mut v = v;
    let mut sig = String::new();
    for _ in 0..4 {
        if let Some(k) = p.g.inputs.iter().position(|&x| x == v) {
            return Some((k, sig));
        }
        let n = p.g.nodes.iter().find(|n| n.outputs.contains(&v))?;
        match n.op.name() {
            "transfer" => {}
            "permute" => sig += &format!("permute{:?};", n.attrs.ints("perm").ok()?),
            _ => return None,
        }
        v = *n.inputs.first()?;
    }
    None
}

/// Sibling GEMMs (the Q, K and V projections): node `i` and the later
/// `matmul_bias_act` nodes without activation that read the same `x`, with
/// weights and biases that are graph inputs of the same types, become one
/// strided-batched cuBLASLt GEMM (bias epilogue with a per-batch bias).
/// The executable allocates those weights (and biases) back to back
/// ([`Plan::input_groups`]); the results go to one scratch buffer, a slice
/// per node. Computing the later nodes early is safe: they read only `x`
/// and inputs, and their outputs are not read before they are defined.
/// Returns whether node `i` was lowered this way.
pub(super) fn sibling_gemms(p: &mut Planner, i: usize, node: &Node) -> Result<bool, CudaError> {
    let plain = |n: &Node| {
        n.op.name() == "matmul_bias_act"
            && n.inputs.len() == 3
            && n.attrs.str("activation").unwrap_or("none") == "none"
    };
    if !plain(node) {
        return Ok(false);
    }
    let g = p.g;
    let (wt, bt, ot) = (
        g.ty(node.inputs[1]).clone(),
        g.ty(node.inputs[2]).clone(),
        g.ty(node.outputs[0]).clone(),
    );
    if wt.shape.rank() != 2 || bt.shape.rank() != 1 || bt.dtype != ot.dtype {
        return Ok(false);
    }
    let grouped = |p: &Planner, k: usize| p.input_groups.iter().any(|gr| gr.contains(&k));
    let (Some((_, wsig)), Some((_, bsig))) = (
        input_behind(p, node.inputs[1]),
        input_behind(p, node.inputs[2]),
    ) else {
        return Ok(false);
    };
    let mut members: Vec<(usize, usize, usize)> = Vec::new();
    for (j, n) in g.nodes.iter().enumerate().skip(i) {
        if (j > i && p.done.contains(&j)) || !plain(n) || n.inputs[0] != node.inputs[0] {
            continue;
        }
        if g.ty(n.inputs[1]) != &wt || g.ty(n.inputs[2]) != &bt || g.ty(n.outputs[0]) != &ot {
            continue;
        }
        let (Some((w, ws)), Some((b, bs))) =
            (input_behind(p, n.inputs[1]), input_behind(p, n.inputs[2]))
        else {
            continue;
        };
        if ws != wsig || bs != bsig {
            continue;
        }
        if grouped(p, w)
            || grouped(p, b)
            || w == b
            || members
                .iter()
                .any(|m| [m.1, m.2].contains(&w) || [m.1, m.2].contains(&b))
        {
            continue;
        }
        members.push((j, w, b));
    }
    if members.len() < 2 || members[0].0 != i {
        return Ok(false);
    }
    // The activation must be a plain matrix (or batches stacked into M)
    // so the GEMM below needs no copy of it.
    let a = p.loc(node.inputs[0])?;
    let r = a.dims.len();
    if r < 2 || a.strides[r - 1] != 1 || !a.is_contiguous() {
        return Ok(false);
    }
    let out = p.loc(node.outputs[0])?;
    let numel: usize = out.dims.iter().product();
    let n = members.len();
    let scratch = p.scratch_loc(out.dtype, &[n * numel]);
    let slice = |t: usize| Loc {
        root: scratch.root,
        offset: (t * numel) as i64,
        strides: contiguous(&out.dims),
        dtype: out.dtype,
        dims: out.dims.clone(),
    };
    let (nl, nk) = (p.launches.len(), p.kernels.len());
    // Node i's weight view (already placed: its producers come before i);
    // the siblings' weights are the same view of the next group members.
    let w = p.loc(node.inputs[1])?;
    let bl = p.loc(node.inputs[2])?;
    if w.root != Root::Input(members[0].1)
        || w.offset != 0
        || bl.root != Root::Input(members[0].2)
        || bl.offset != 0
        || !bl.is_contiguous()
    {
        return Ok(false);
    }
    super::gemm::matmul(p, i, node, a, w, &slice(0))?;
    let one_gemm = p.launches.len() == nl + 1
        && matches!(p.launches.last(), Some(Launch::Gemm { gemm, .. })
            if gemm.batch == 1 && gemm.a.root == Root::Input(members[0].1) && gemm.c_dtype == gemm.dtype);
    if !one_gemm {
        // Nothing but this node's launches was added (no copies: `a` is
        // contiguous, the weight an input): undo them.
        p.launches.truncate(nl);
        p.kernels.truncate(nk);
        p.scratch.pop();
        return Ok(false);
    }
    let wstride = (group_stride(&wt) / esize(wt.dtype)) as i64;
    let bstride = (group_stride(&bt) / esize(bt.dtype)) as i64;
    if let Some(Launch::Gemm { gemm, .. }) = p.launches.last_mut() {
        gemm.batch = n as i32;
        gemm.stride_a = wstride;
        gemm.stride_b = 0;
        gemm.stride_c = numel as i64;
        gemm.bias = Some(Ptr {
            root: Root::Input(members[0].2),
            byte: 0,
        });
        gemm.bias_stride = bstride;
    }
    let nodes: Vec<String> = members.iter().map(|m| m.0.to_string()).collect();
    let name = format!(
        "cublasLt::matmul + bias, {n} sibling GEMMs batched (nodes {})",
        nodes.join(", ")
    );
    p.kernels[nk].1 = name.clone();
    p.input_groups.push(members.iter().map(|m| m.1).collect());
    p.input_groups.push(members.iter().map(|m| m.2).collect());
    for (t, &(j, _, _)) in members.iter().enumerate() {
        p.locs[g.nodes[j].outputs[0].index()] = Some(slice(t));
        if t > 0 {
            p.done.insert(j);
            p.kernels.push((j, name.clone()));
        }
    }
    Ok(true)
}
