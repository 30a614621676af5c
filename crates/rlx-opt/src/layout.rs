//! Canonicalization, so that equal computations look equal (and CSE
//! merges them), as a table of [`Rule`]s ([`RULES`]):
//!
//! * `commutative_order`: the operands of `add mul max min eq ne and or
//!   xor bitwise_and bitwise_or bitwise_xor` are sorted — non-constants
//!   first, then by value id — so `a + b` and `b + a` become the same node
//!   and constants end up second (where `simplify`'s rules look first).
//!   (`max`/`min` of `-0.0` and `+0.0` may then return the other zero:
//!   numerically equal.)
//! * `permute_noop`: `permute` by the identity permutation is dropped.
//! * `reduce_axes`: reduction axes become non-negative and sorted, and a
//!   list naming every axis becomes `[]` (which means all axes).
//! * `axis_nonnegative`: a negative `axis` becomes non-negative for ops
//!   whose `axis` indexes input 0 (`narrow concat split softmax
//!   log_softmax argmax argmin layer_norm rms_norm`).
//! * `split_parts`: `split` becomes one `narrow` per part — one op for
//!   "a piece of x" everywhere, so fusions and CSE see a single form, and
//!   the memory plan makes a part over leading unit axes a view (no copy)
//!   where a multi-output split was always copied.
//! * `slice_unit_steps`: a `slice` whose steps are all 1 becomes one
//!   `narrow` per axis it cuts (none: the input itself) — the same form,
//!   which the memory plan can make a view where a slice was a copy.

use crate::error::OptError;
use crate::pass::Pass;
use crate::rules::{Candidate, Emitter, Rule, RuleCx, RuleSet};
use crate::simplify::permute_noop;
use rlx_ir::shape::normalize_axis;
use rlx_ir::{Attr, Graph, ValueId};

const COMMUTATIVE: &[&str] = &[
    "add",
    "mul",
    "max",
    "min",
    "eq",
    "ne",
    "and",
    "or",
    "xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
];

const REDUCTIONS: &[&str] = &[
    "reduce_sum",
    "reduce_mean",
    "reduce_prod",
    "reduce_max",
    "reduce_min",
    "reduce_logsumexp",
    "reduce_variance",
    "reduce_any",
    "reduce_all",
];

const AXIS_OPS: &[&str] = &[
    "narrow",
    "concat",
    "split",
    "softmax",
    "log_softmax",
    "argmax",
    "argmin",
    "layer_norm",
    "rms_norm",
];

/// Sort key of an operand: non-constants first, then by id.
fn operand_key(cx: &RuleCx, v: ValueId) -> (bool, u32) {
    (cx.constant(v).is_some(), v.0)
}

fn unordered(cx: &RuleCx, c: &Candidate) -> bool {
    c.inputs.len() == 2 && operand_key(cx, c.inputs[0]) > operand_key(cx, c.inputs[1])
}
fn swap(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    em.emit(c.op.name(), &[c.inputs[1], c.inputs[0]], c.attrs.clone())
}

/// The canonical axes list of a reduction over a tensor of `rank`.
fn canonical_axes(axes: &[i64], rank: usize) -> Option<Vec<i64>> {
    let mut out: Vec<i64> = axes
        .iter()
        .map(|&a| normalize_axis(a, rank).ok().map(|a| a as i64))
        .collect::<Option<_>>()?;
    out.sort_unstable();
    out.dedup();
    if out.len() != axes.len() {
        return None; // duplicates: leave the node for the verifier to explain
    }
    if out.len() == rank {
        out.clear();
    }
    Some(out)
}

fn reduce_axes(cx: &RuleCx, c: &Candidate) -> bool {
    let rank = cx.ty(c.inputs[0]).rank();
    c.attrs
        .ints("axes")
        .ok()
        .and_then(|a| Some((a, canonical_axes(a, rank)?)))
        .is_some_and(|(a, canon)| a != canon.as_slice())
}
fn reduce_axes_replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let rank = em.cx().ty(c.inputs[0]).rank();
    let axes = c
        .attrs
        .ints("axes")
        .ok()
        .and_then(|a| canonical_axes(a, rank))
        .ok_or_else(|| OptError::pass("layout", "axes changed under the rule"))?;
    let mut attrs = c.attrs.clone();
    attrs.set("axes", axes);
    em.emit(c.op.name(), &c.inputs, attrs)
}

fn negative_axis(cx: &RuleCx, c: &Candidate) -> bool {
    let rank = cx.ty(c.inputs[0]).rank();
    matches!(c.attrs.get("axis"), Some(Attr::Int(a)) if *a < 0 && normalize_axis(*a, rank).is_ok())
}
fn negative_axis_replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let rank = em.cx().ty(c.inputs[0]).rank();
    let a = c.attrs.int("axis")?;
    let mut attrs = c.attrs.clone();
    attrs.set("axis", normalize_axis(a, rank)? as i64);
    em.emit(c.op.name(), &c.inputs, attrs)
}

/// `split(x)` → `narrow(x)` per part, in order along the axis.
fn split_parts(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let rank = em.cx().ty(c.inputs[0]).rank();
    let axis = normalize_axis(c.attrs.int("axis")?, rank)?;
    let mut start = 0i64;
    let mut out = Vec::with_capacity(c.out_types.len());
    for t in &c.out_types {
        let len = t.dims()[axis] as i64;
        let attrs = rlx_ir::Attrs::new()
            .with("axis", axis as i64)
            .with("start", start)
            .with("len", len);
        out.push(em.emit1("narrow", &c.inputs, attrs)?);
        start += len;
    }
    Ok(out)
}

/// The (start, step, len) of each axis of a `slice`, when every step is 1.
fn unit_step_plan(cx: &RuleCx, c: &Candidate) -> Option<Vec<(i64, i64, usize)>> {
    let plan = rlx_ir::ops::shape::slice_plan(&cx.ty(c.inputs[0]).shape, &c.attrs).ok()?;
    plan.iter().all(|p| p.1 == 1).then_some(plan)
}

/// `slice(x)` with unit steps → `narrow(x)` along each axis it cuts.
fn slice_narrows(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let plan = unit_step_plan(&em.cx(), c)
        .ok_or_else(|| OptError::pass("layout", "slice plan vanished"))?;
    let mut v = c.inputs[0];
    let dims = em.cx().ty(v).dims().to_vec();
    for (axis, &(start, _, len)) in plan.iter().enumerate() {
        if start == 0 && len == dims[axis] {
            continue;
        }
        let attrs = rlx_ir::Attrs::new()
            .with("axis", axis as i64)
            .with("start", start)
            .with("len", len as i64);
        v = em.emit1("narrow", &[v], attrs)?;
    }
    Ok(vec![v])
}

/// The canonicalization rules, tried in this order.
pub static RULES: &[Rule] = &[
    Rule {
        name: "commutative_order",
        ops: COMMUTATIVE,
        matches: unordered,
        replace: swap,
        doc: "sort the operands of commutative ops (constants second)",
    },
    Rule {
        name: "permute_noop",
        ops: &["permute"],
        matches: permute_noop,
        replace: |_, c| Ok(vec![c.inputs[0]]),
        doc: "permute(x, identity) → x",
    },
    Rule {
        name: "reduce_axes",
        ops: REDUCTIONS,
        matches: reduce_axes,
        replace: reduce_axes_replace,
        doc: "reduction axes non-negative and sorted; all axes → []",
    },
    Rule {
        name: "split_parts",
        ops: &["split"],
        matches: |_, c| c.inputs.len() == 1,
        replace: split_parts,
        doc: "split(x) → one narrow(x) per part",
    },
    Rule {
        name: "slice_unit_steps",
        ops: &["slice"],
        matches: |cx, c| c.inputs.len() == 1 && unit_step_plan(cx, c).is_some(),
        replace: slice_narrows,
        doc: "slice(x) with steps of 1 → one narrow(x) per axis it cuts",
    },
    Rule {
        name: "axis_nonnegative",
        ops: AXIS_OPS,
        matches: negative_axis,
        replace: negative_axis_replace,
        doc: "axis = -k → rank - k",
    },
];

/// The canonicalization pass ([`RULES`] as a [`RuleSet`] named `layout`).
#[derive(Clone, Debug)]
pub struct Layout {
    rules: RuleSet,
}

impl Default for Layout {
    fn default() -> Self {
        Self::new()
    }
}

impl Layout {
    /// The standard rules.
    pub fn new() -> Self {
        Layout {
            rules: RuleSet::new("layout", RULES.to_vec()),
        }
    }
    /// Canonicalize `g`; also returns how often each rule fired.
    pub fn apply(
        &self,
        g: &Graph,
    ) -> Result<(Graph, std::collections::BTreeMap<&'static str, usize>), OptError> {
        self.rules.apply(g)
    }
}

impl Pass for Layout {
    fn name(&self) -> &str {
        "layout"
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        self.rules.run(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cse::cse;
    use crate::dce::dce;
    use rlx_ir::{Attrs, DType, GraphBuilder, HostTensor, TensorType};

    fn f32t(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    #[test]
    fn commutative_operands_are_sorted_so_cse_merges() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", f32t(&[3]));
        let y = b.input("y", f32t(&[3]));
        let c = b.constant(HostTensor::scalar(2.0f32)).unwrap();
        let s1 = b.binary("add", x, y).unwrap();
        let s2 = b.binary("add", y, x).unwrap();
        let m = b.binary("mul", c, x).unwrap();
        let d1 = b.binary("sub", x, y).unwrap(); // not commutative: kept as is
        let d2 = b.binary("sub", y, x).unwrap();
        let g = b.finish(&[s1, s2, m, d1, d2]).unwrap();
        let (h, fired) = Layout::new().apply(&g).unwrap();
        assert_eq!(fired["commutative_order"], 2);
        let mul = h.nodes.iter().find(|n| n.op.name() == "mul").unwrap();
        assert_eq!(mul.inputs[0], h.inputs[0]); // constant second
        let h = dce(&cse(&h).unwrap()).unwrap();
        assert_eq!(h.outputs[0], h.outputs[1]);
        assert_ne!(h.outputs[3], h.outputs[4]);
    }

    #[test]
    fn axes_are_canonical() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", f32t(&[2, 3, 4]));
        let r = |b: &mut GraphBuilder, axes: Vec<i64>| {
            b.op1("reduce_sum", &[x], Attrs::new().with("axes", axes))
                .unwrap()
        };
        let a = r(&mut b, vec![-1, 0]);
        let a2 = r(&mut b, vec![0, 2]);
        let all = r(&mut b, vec![2, 0, 1]);
        let all2 = r(&mut b, vec![]);
        let s1 = b
            .op1("softmax", &[x], Attrs::new().with("axis", -1i64))
            .unwrap();
        let s2 = b
            .op1("softmax", &[x], Attrs::new().with("axis", 2i64))
            .unwrap();
        let g = b.finish(&[a, a2, all, all2, s1, s2]).unwrap();
        let (h, _) = Layout::new().apply(&g).unwrap();
        let h = dce(&cse(&h).unwrap()).unwrap();
        assert_eq!(h.nodes.len(), 3);
        assert_eq!(h.outputs[0], h.outputs[1]);
        assert_eq!(h.outputs[2], h.outputs[3]);
        assert_eq!(h.outputs[4], h.outputs[5]);
        assert_eq!(h.nodes[0].attrs.ints("axes").unwrap(), [0, 2]);
    }

    #[test]
    fn identity_permutes_go() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", f32t(&[2, 3]));
        let p = b
            .op1("permute", &[x], Attrs::new().with("perm", vec![0i64, -1]))
            .unwrap();
        let g = b.finish(&[p]).unwrap();
        let h = dce(&Layout::new().run(&g).unwrap()).unwrap();
        assert!(h.nodes.is_empty());
        // Canonical graphs are a fixpoint.
        let again = Layout::new().run(&h).unwrap();
        assert!(crate::equiv::graphs_identical(&h, &again));
    }
}
