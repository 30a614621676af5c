//! Following nodes that a kernel computes while writing its output, so
//! that they run nothing: a residual `add` after a matmul, the head-merging
//! copy after attention, an activation after a conv.

use super::convert::Fmt;
use super::layout::{row_major, Loc, Root};
use super::step::Home;
use rlx_ir::Graph;

/// A following node that a kernel computes while writing its output: it
/// writes that node's slot `out` instead of its own, which nobody reads.
#[derive(Clone, Debug)]
pub struct Fold {
    pub out: Loc,
    pub kind: FoldKind,
}

#[derive(Clone, Debug)]
pub enum FoldKind {
    /// `add(matmul(..), r)`: the matmul writes the add's slot — `r` copied
    /// there first (`from`), or already there when the memory plan put the
    /// add in place over `r`, as it does for a transformer's residual
    /// stream — and adds `a·b + bias` onto it.
    Residual { from: Option<Loc> },
    /// `reshape(permute(attention(..)))` merging the heads — (.., H, S, D)
    /// to (.., S, H·D): attention writes that layout directly
    /// ([`attention::run_merged`]), so the copy is not made.
    MergeHeads,
    /// `act(conv(..))`: the conv applies the activation to its rows as it
    /// writes them (while they are in cache).
    Act(super::matmul::Act),
}

/// The node after `after` that reads `v`, when that is `v`'s only use
/// and `v` is not a graph output (so nobody else needs it stored).
fn sole_user(g: &Graph, uses: &[usize], v: rlx_ir::ValueId, after: usize) -> Option<usize> {
    if uses[v.index()] != 1 || g.outputs.contains(&v) {
        return None;
    }
    (after + 1..g.nodes.len()).find(|&j| g.nodes[j].inputs.contains(&v))
}

/// The one node that reads node `i`'s output, when only nodes that run
/// nothing (views) come between: a kernel may compute it as it writes.
fn next_user(g: &Graph, i: usize, no_op: &[bool], uses: &[usize]) -> Option<usize> {
    let j = sole_user(g, uses, g.nodes[i].outputs[0], i)?;
    (i + 1..j).all(|k| no_op[k]).then_some(j)
}

/// The reshape that merges attention node `i`'s heads, if attention can
/// write that layout itself: its output (.., H, S, D) is read only through
/// one view that swaps H and S, and that view only by a reshape (a copy).
/// The reshape's memory-plan slot may reuse q's, k's or v's memory, so
/// attention writes its own slot, merged, and the reshape's value is
/// moved there — which needs that slot untouched until the value's last
/// use (the plan freed it after the reshape). Returns the reshape's node
/// index, the fold, and the reshape value's new home.
pub fn merge_heads(
    g: &Graph,
    i: usize,
    homes: &[Home],
    uses: &[usize],
) -> Option<(usize, Fold, Loc)> {
    let v = g.nodes[i].outputs[0];
    let w_node = sole_user(g, uses, v, i)?;
    let w = *g.nodes[w_node].outputs.first()?;
    let j = sole_user(g, uses, w, w_node)?;
    let copy = &g.nodes[j];
    if copy.op.name() != "reshape" || copy.inputs.len() != 1 || copy.outputs.len() != 1 {
        return None;
    }
    let y = copy.outputs[0];
    let (Home::Mem(vl, Fmt::F32), Home::Mem(wl, Fmt::F32), Home::Mem(yl, Fmt::F32)) =
        (&homes[v.index()], &homes[w.index()], &homes[y.index()])
    else {
        return None;
    };
    let r = vl.dims.len();
    if r < 3 || vl.root != Root::Arena || !vl.is_contiguous() || yl.numel() != vl.numel() {
        return None;
    }
    // The view: v's axes r-3 (heads) and r-2 (rows) swapped, nothing else.
    let mut want_dims = vl.dims.clone();
    let mut want_strides = vl.strides.clone();
    want_dims.swap(r - 3, r - 2);
    want_strides.swap(r - 3, r - 2);
    if wl.root != vl.root
        || wl.offset != vl.offset
        || wl.dims != want_dims
        || wl.strides != want_strides
    {
        return None;
    }
    // Nothing after the reshape may write v's slot while y lives there.
    let last = if g.outputs.contains(&y) {
        g.nodes.len()
    } else {
        (j + 1..g.nodes.len())
            .rev()
            .find(|&k| g.nodes[k].inputs.contains(&y))
            .map_or(j + 1, |k| k + 1)
    };
    let clobbers = |k: usize| {
        g.nodes[k].outputs.iter().any(|o| match &homes[o.index()] {
            Home::Mem(l, _) => l.overlaps_in_arena(vl),
            Home::Host(_) => false,
        })
    };
    if (j + 1..last).any(clobbers) {
        return None;
    }
    let moved = Loc {
        root: Root::Arena,
        offset: vl.offset,
        dims: yl.dims.clone(),
        strides: row_major(&yl.dims),
    };
    Some((
        j,
        Fold {
            out: vl.clone(),
            kind: FoldKind::MergeHeads,
        },
        moved,
    ))
}

/// The residual `add` that matmul node `i` (f32, no activation, arena
/// output) can fold in: its output's one use, after nothing but views,
/// is an `add` with a same-typed f32 value `r`, and the add's slot does
/// not overlap what the product reads (`reads`). Returns the add's node
/// index and the plan.
pub fn residual_add(
    g: &Graph,
    i: usize,
    homes: &[Home],
    no_op: &[bool],
    uses: &[usize],
    reads: &[Option<Loc>],
) -> Option<(usize, Fold)> {
    let v = g.nodes[i].outputs[0];
    let j = next_user(g, i, no_op, uses)?;
    let add = &g.nodes[j];
    if add.op.name() != "add" || add.inputs.len() != 2 || add.outputs.len() != 1 {
        return None;
    }
    let r = if add.inputs[0] == v {
        add.inputs[1]
    } else {
        add.inputs[0]
    };
    if r == v || g.ty(r) != g.ty(v) || g.ty(add.outputs[0]) != g.ty(v) {
        return None;
    }
    let (Home::Mem(o, Fmt::F32), Home::Mem(rl, Fmt::F32)) =
        (&homes[add.outputs[0].index()], &homes[r.index()])
    else {
        return None;
    };
    if o.root != Root::Arena || !o.is_contiguous() || !rl.is_contiguous() {
        return None;
    }
    if reads.iter().flatten().any(|l| l.overlaps_in_arena(o)) {
        return None;
    }
    let from = if rl.root == Root::Arena && rl.offset == o.offset {
        None
    } else if rl.overlaps_in_arena(o) {
        return None;
    } else {
        Some(rl.clone())
    };
    Some((
        j,
        Fold {
            out: o.clone(),
            kind: FoldKind::Residual { from },
        },
    ))
}

/// The activation that conv node `i` can fold in: its output's one use,
/// after nothing but views, is a unary activation the matmul epilogue
/// knows, of the same type, whose slot (f32, arena, contiguous) does not
/// overlap what the conv reads. Returns that node's index and the plan.
pub fn activation_after(
    g: &Graph,
    i: usize,
    homes: &[Home],
    no_op: &[bool],
    uses: &[usize],
    reads: &[Option<Loc>],
) -> Option<(usize, Fold)> {
    let v = g.nodes[i].outputs[0];
    let j = next_user(g, i, no_op, uses)?;
    let n = &g.nodes[j];
    if n.inputs.len() != 1 || n.outputs.len() != 1 {
        return None;
    }
    let act = match n.op.name() {
        "none" => return None,
        name => super::matmul::activation(name)?,
    };
    if g.ty(n.outputs[0]) != g.ty(v) {
        return None;
    }
    let Home::Mem(o, Fmt::F32) = &homes[n.outputs[0].index()] else {
        return None;
    };
    if o.root != Root::Arena || !o.is_contiguous() {
        return None;
    }
    if reads.iter().flatten().any(|l| l.overlaps_in_arena(o)) {
        return None;
    }
    Some((
        j,
        Fold {
            out: o.clone(),
            kind: FoldKind::Act(act),
        },
    ))
}
