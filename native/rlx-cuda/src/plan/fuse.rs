//! Sibling GEMMs (the Q, K and V projections of one input) run as one
//! strided-batched GEMM over weights the executable allocates back to
//! back. (The residual add in a GEMM epilogue and attention writing merged
//! heads are decided in rlx-opt: `matmul_residual`, `attention_merged`.)

use super::*;

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
