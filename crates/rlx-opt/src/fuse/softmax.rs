//! `softmax` and `log_softmax` from their max-subtracted primitive forms
//! (the max through an optional `stop_gradient`), over any one axis.

use super::pattern::{closed, fits, keep_axis, prod, vanished};
use crate::error::OptError;
use crate::rules::{Candidate, Emitter, Rule, RuleCx};
use rlx_ir::{Attrs, Node, ValueId};

/// `x − max(x)` over one axis (keepdim): `(x, axis, nodes)`.
fn centered<'a>(cx: &RuleCx<'a>, d: ValueId) -> Option<(ValueId, usize, Vec<&'a Node>)> {
    let sub = prod(cx, d, "sub")?;
    let (x, mut m) = (sub.inputs[0], sub.inputs[1]);
    let mut nodes = vec![sub];
    if let Some(sg) = prod(cx, m, "stop_gradient") {
        nodes.push(sg);
        m = sg.inputs[0];
    }
    let max = prod(cx, m, "reduce_max").filter(|n| n.inputs[0] == x)?;
    nodes.push(max);
    Some((x, keep_axis(cx, max)?, nodes))
}

/// `Σ exp(d)` over `axis` (keepdim), the sum node and the exp node.
fn sum_exp<'a>(cx: &RuleCx<'a>, s: ValueId, axis: usize) -> Option<[&'a Node; 2]> {
    let sum = prod(cx, s, "reduce_sum").filter(|n| keep_axis(cx, n) == Some(axis))?;
    let exp = prod(cx, sum.inputs[0], "exp")?;
    Some([sum, exp])
}

/// `exp(x − max) / Σ exp(x − max)`: `(x, axis)`.
fn softmax(cx: &RuleCx, c: &Candidate) -> Option<(ValueId, usize)> {
    let [e, s] = [c.inputs[0], c.inputs[1]];
    let exp = prod(cx, e, "exp")?;
    let (x, axis, mut nodes) = centered(cx, exp.inputs[0])?;
    let [sum, exp2] = sum_exp(cx, s, axis)?;
    if exp2.outputs[0] != e {
        return None;
    }
    nodes.extend([sum, exp]);
    let attrs = Attrs::new().with("axis", axis as i64);
    (closed(cx, c, &nodes) && fits(cx, c, "softmax", &[x], &attrs)).then_some((x, axis))
}

/// `(x − max) − log Σ exp(x − max)`: `(x, axis)`.
fn log_softmax(cx: &RuleCx, c: &Candidate) -> Option<(ValueId, usize)> {
    let [d, l] = [c.inputs[0], c.inputs[1]];
    let (x, axis, mut nodes) = centered(cx, d)?;
    let log = prod(cx, l, "log")?;
    let [sum, exp] = sum_exp(cx, log.inputs[0], axis)?;
    if exp.inputs[0] != d {
        return None;
    }
    nodes.extend([log, sum, exp]);
    let attrs = Attrs::new().with("axis", axis as i64);
    (closed(cx, c, &nodes) && fits(cx, c, "log_softmax", &[x], &attrs)).then_some((x, axis))
}

fn emit_axis(
    em: &mut Emitter,
    c: &Candidate,
    op: &'static str,
    find: fn(&RuleCx, &Candidate) -> Option<(ValueId, usize)>,
) -> Result<Vec<ValueId>, OptError> {
    let (x, axis) = find(&em.cx(), c).ok_or_else(|| vanished(op))?;
    em.emit(op, &[x], Attrs::new().with("axis", axis as i64))
}

/// `exp(x − max x) / Σ exp(x − max x)` → `softmax`.
pub const SOFTMAX: Rule = Rule {
    name: "softmax",
    ops: &["div"],
    matches: |cx, c| softmax(cx, c).is_some(),
    replace: |em, c| emit_axis(em, c, "softmax", softmax),
    doc: "exp(x − max x) / Σ exp(x − max x) over one axis → softmax",
};

/// `(x − max x) − log Σ exp(x − max x)` → `log_softmax`.
pub const LOG_SOFTMAX: Rule = Rule {
    name: "log_softmax",
    ops: &["sub"],
    matches: |cx, c| log_softmax(cx, c).is_some(),
    replace: |em, c| emit_axis(em, c, "log_softmax", log_softmax),
    doc: "(x − max x) − log Σ exp(x − max x) over one axis → log_softmax",
};
