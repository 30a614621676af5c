//! Following nodes that a kernel computes while writing its output, so
//! that they run nothing: an activation after a conv. (The residual add
//! after a matmul and the head merge after attention are decided once, in
//! rlx-opt: `matmul_residual` and `attention_merged`.)

use super::convert::Fmt;
use super::layout::{Loc, Root};
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
