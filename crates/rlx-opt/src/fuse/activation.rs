//! Activations: `gelu` (erf form), `gelu_tanh`, `silu` and `swiglu`.
//!
//! The gelus are products `0.5 · x · (1 + f(x))` in any association and
//! operand order: the product is flattened through `mul` nodes used once,
//! its scalar constants multiplied out (they must give 0.5), and what is
//! left must be `x` and `1 + f(x)`. Constants must match to the rounding of
//! the dtype (1/√2 or √2 inside erf; √(2/π) and 0.044715 inside tanh).

use super::pattern::{closed, fits, near, orders, prod, scalar, vanished, with_scalar};
use crate::rules::{Candidate, Rule, RuleCx};
use rlx_ir::{Attrs, Node, ValueId};
use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// The factors of the product at the candidate (a `mul`): the non-constant
/// leaves, the product of the scalar constants, and the `mul` nodes walked
/// through (the root's operands and below, each used once).
fn factors<'a>(cx: &RuleCx<'a>, c: &Candidate) -> (Vec<ValueId>, f64, Vec<&'a Node>) {
    let (mut leaves, mut k, mut nodes) = (Vec::new(), 1.0, Vec::new());
    let mut stack: Vec<(ValueId, usize)> = c.inputs.iter().map(|&v| (v, 0)).collect();
    while let Some((v, depth)) = stack.pop() {
        if let Some(s) = scalar(cx, v) {
            k *= s;
            continue;
        }
        match prod(cx, v, "mul") {
            Some(m) if depth < 3 && cx.uses(v) == 1 => {
                nodes.push(m);
                stack.extend(m.inputs.iter().map(|&u| (u, depth + 1)));
            }
            _ => leaves.push(v),
        }
    }
    (leaves, k, nodes)
}

/// `1 + f(u)` with `f` the unary `op`: `(u, nodes)`.
fn one_plus<'a>(cx: &RuleCx<'a>, t: ValueId, op: &str) -> Option<(ValueId, Vec<&'a Node>)> {
    let (e, one, add) = with_scalar(cx, t, "add", true)?;
    let f = prod(cx, e, op).filter(|_| one == 1.0)?;
    Some((f.inputs[0], vec![add, f]))
}

/// `x · c`, `c · x` or `x / (1/c)`: `(x, c, node)`.
fn scaled<'a>(cx: &RuleCx<'a>, v: ValueId) -> Option<(ValueId, f64, &'a Node)> {
    with_scalar(cx, v, "mul", true)
        .or_else(|| with_scalar(cx, v, "div", false).map(|(x, c, n)| (x, 1.0 / c, n)))
}

/// `x³` as `pow(x, 3)`, `(x·x)·x` or `square(x)·x` (either order): `(x, nodes)`.
fn cube<'a>(cx: &RuleCx<'a>, v: ValueId) -> Option<(ValueId, Vec<&'a Node>)> {
    if let Some((x, 3.0, p)) = with_scalar(cx, v, "pow", false) {
        return Some((x, vec![p]));
    }
    let m = prod(cx, v, "mul")?;
    orders(&m.inputs).into_iter().find_map(|(sq, x)| {
        let s = prod(cx, sq, "mul")
            .filter(|s| s.inputs == [x, x])
            .or_else(|| prod(cx, sq, "square").filter(|s| s.inputs[0] == x))?;
        Some((x, vec![m, s]))
    })
}

/// Recognizes `1 + f(x)` and returns `x` with the nodes it walked.
type Term = for<'a> fn(&RuleCx<'a>, ValueId) -> Option<(ValueId, Vec<&'a Node>)>;

/// Match `0.5 · x · (1 + f(x))`, where `inner(t)` recognizes `1 + f(..)`
/// and returns its argument `x` with the nodes it walked.
fn half_x_times(cx: &RuleCx, c: &Candidate, op: &str, inner: Term) -> Option<ValueId> {
    let (leaves, k, nodes) = factors(cx, c);
    let dt = c.out_types[0].dtype;
    if leaves.len() != 2 || !near(k, 0.5, dt) {
        return None;
    }
    orders(&leaves).into_iter().find_map(|(x, t)| {
        let (x2, more) = inner(cx, t)?;
        let mut all = nodes.clone();
        all.extend(more);
        (x2 == x && closed(cx, c, &all) && fits(cx, c, op, &[x], &Attrs::new())).then_some(x)
    })
}

/// `1 + erf(x/√2)`: `(x, nodes)`.
fn erf_term<'a>(cx: &RuleCx<'a>, t: ValueId) -> Option<(ValueId, Vec<&'a Node>)> {
    let (u, mut nodes) = one_plus(cx, t, "erf")?;
    let (x, s, n) = scaled(cx, u)?;
    nodes.push(n);
    near(s, FRAC_1_SQRT_2, cx.ty(x).dtype).then_some((x, nodes))
}

/// `1 + tanh(√(2/π) · (x + 0.044715 · x³))`: `(x, nodes)`.
fn tanh_term<'a>(cx: &RuleCx<'a>, t: ValueId) -> Option<(ValueId, Vec<&'a Node>)> {
    let (w, mut nodes) = one_plus(cx, t, "tanh")?;
    let (inner, s, n) = scaled(cx, w)?;
    let dt = cx.ty(w).dtype;
    if !near(s, (2.0 / PI).sqrt(), dt) {
        return None;
    }
    nodes.push(n);
    let add = prod(cx, inner, "add")?;
    nodes.push(add);
    orders(&add.inputs).into_iter().find_map(|(x, kx3)| {
        let (x3, k, kn) = scaled(cx, kx3)?;
        let (x2, cn) = cube(cx, x3)?;
        let mut all = nodes.clone();
        all.push(kn);
        all.extend(cn);
        (x2 == x && near(k, 0.044715, dt)).then_some((x, all))
    })
}

/// `x · sigmoid(x)`: `x`.
fn silu(cx: &RuleCx, c: &Candidate) -> Option<ValueId> {
    orders(&c.inputs).into_iter().find_map(|(x, s)| {
        let sig = prod(cx, s, "sigmoid").filter(|n| n.inputs[0] == x)?;
        (closed(cx, c, &[sig]) && fits(cx, c, "silu", &[x], &Attrs::new())).then_some(x)
    })
}

/// `silu(gate) · up`: `[gate, up]`.
fn swiglu(cx: &RuleCx, c: &Candidate) -> Option<[ValueId; 2]> {
    orders(&c.inputs).into_iter().find_map(|(g, up)| {
        let s = prod(cx, g, "silu")?;
        let ins = [s.inputs[0], up];
        (closed(cx, c, &[s]) && fits(cx, c, "swiglu", &ins, &Attrs::new())).then_some(ins)
    })
}

fn gelu(cx: &RuleCx, c: &Candidate) -> Option<ValueId> {
    half_x_times(cx, c, "gelu", erf_term)
}
fn gelu_tanh(cx: &RuleCx, c: &Candidate) -> Option<ValueId> {
    half_x_times(cx, c, "gelu_tanh", tanh_term)
}

/// A rule replacing a `mul` by the unary `op` of what `find` returns.
macro_rules! unary_rule {
    ($name:literal, $find:ident, $doc:literal) => {
        Rule {
            name: $name,
            ops: &["mul"],
            matches: |cx, c| $find(cx, c).is_some(),
            replace: |em, c| {
                let x = $find(&em.cx(), c).ok_or_else(|| vanished($name))?;
                em.emit($name, &[x], Attrs::new())
            },
            doc: $doc,
        }
    };
}

/// `0.5 · x · (1 + erf(x / √2))` → `gelu`.
pub const GELU: Rule = unary_rule!("gelu", gelu, "0.5 · x · (1 + erf(x/√2)) → gelu");
/// `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 x³)))` → `gelu_tanh`.
pub const GELU_TANH: Rule = unary_rule!(
    "gelu_tanh",
    gelu_tanh,
    "0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715·x³))) → gelu_tanh"
);
/// `x · sigmoid(x)` → `silu`.
pub const SILU: Rule = unary_rule!("silu", silu, "x · sigmoid(x) → silu");

/// `silu(gate) · up` → `swiglu`.
pub const SWIGLU: Rule = Rule {
    name: "swiglu",
    ops: &["mul"],
    matches: |cx, c| swiglu(cx, c).is_some(),
    replace: |em, c| {
        let ins = swiglu(&em.cx(), c).ok_or_else(|| vanished("swiglu"))?;
        em.emit("swiglu", &ins, Attrs::new())
    },
    doc: "silu(gate) · up (one shape) → swiglu",
};
