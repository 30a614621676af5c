//! Matching helpers shared by the fusion rules: producers, scalar
//! constants, reduction axes, the "closed pattern" use check, and a type
//! check of the replacement before a rule commits to it.

use crate::error::OptError;
use crate::rules::{Candidate, Emitter, RuleCx};
use rlx_ir::shape::normalize_axis;
use rlx_ir::{Attrs, DType, HostTensor, Node, Op, TensorType, ValueId};
use std::collections::HashMap;

/// The single-output node of op `op` that defines `v`.
pub fn prod<'a>(cx: &RuleCx<'a>, v: ValueId, op: &str) -> Option<&'a Node> {
    cx.producer_if(v, op).filter(|n| n.outputs.len() == 1)
}

/// The value of a constant whose elements are all equal (a scalar in
/// effect, whatever its shape).
pub fn scalar(cx: &RuleCx, v: ValueId) -> Option<f64> {
    let t = cx.constant(v)?;
    if !t.dtype().is_float() && !t.dtype().is_int() {
        return None;
    }
    let xs = t.to_f64_vec().ok()?;
    let first = *xs.first()?;
    xs.iter()
        .all(|&x| x == first || (x.is_nan() && first.is_nan()))
        .then_some(first)
}

/// `x op c` (or `c op x` when `commutes`) with `c` a scalar constant:
/// returns `(x, c, node)`.
pub fn with_scalar<'a>(
    cx: &RuleCx<'a>,
    v: ValueId,
    op: &str,
    commutes: bool,
) -> Option<(ValueId, f64, &'a Node)> {
    let n = prod(cx, v, op)?;
    let [a, b] = [n.inputs[0], n.inputs[1]];
    if let Some(c) = scalar(cx, b) {
        return Some((a, c, n));
    }
    if commutes {
        if let Some(c) = scalar(cx, a) {
            return Some((b, c, n));
        }
    }
    None
}

/// Both orders of a binary node's operands.
pub fn orders(inputs: &[ValueId]) -> [(ValueId, ValueId); 2] {
    [(inputs[0], inputs[1]), (inputs[1], inputs[0])]
}

/// The unit roundoff of a float dtype (f64's for the others).
fn epsilon(dt: DType) -> f64 {
    match dt {
        DType::F16 => 9.8e-4,
        DType::BF16 => 7.9e-3,
        DType::F32 => 1.2e-7,
        _ => 2.3e-16,
    }
}

/// `got` is `want` up to the rounding of `dt` (a constant written in the
/// graph's dtype, or with a few more digits than it holds).
pub fn near(got: f64, want: f64, dt: DType) -> bool {
    (got - want).abs() <= epsilon(dt).max(1e-7) * want.abs()
}

/// `v` rounded to `dt`, as f64.
pub fn round_to(v: f64, dt: DType) -> f64 {
    HostTensor::from_f64(dt, [], vec![v])
        .ok()
        .and_then(|t| t.to_f64_vec().ok())
        .and_then(|x| x.first().copied())
        .unwrap_or(v)
}

/// A constant read back from a narrow float dtype, as the shortest decimal
/// that rounds to the same value (`1e-5` rather than `9.99999974737875e-6`
/// for an f32 epsilon), so re-fused attributes read like the originals.
pub fn snap(v: f64, dt: DType) -> f64 {
    if dt == DType::F64 || !v.is_finite() {
        return v;
    }
    let short: f64 = format!("{}", v as f32).parse().unwrap_or(v);
    if round_to(short, dt) == round_to(v, dt) {
        short
    } else {
        v
    }
}

/// The axes of a reduction node (sorted, `[]` resolved to all) and keepdim.
pub fn reduce_axes(cx: &RuleCx, n: &Node) -> Option<(Vec<usize>, bool)> {
    let rank = cx.ty(n.inputs[0]).rank();
    let list = n.attrs.ints("axes").ok()?;
    let mut axes: Vec<usize> = if list.is_empty() {
        (0..rank).collect()
    } else {
        list.iter()
            .map(|&a| normalize_axis(a, rank).ok())
            .collect::<Option<_>>()?
    };
    axes.sort_unstable();
    axes.dedup();
    Some((axes, n.attrs.bool("keepdim").ok()?))
}

/// The one axis a keepdim reduction `n` (of op `op`) runs over.
pub fn keep_axis(cx: &RuleCx, n: &Node) -> Option<usize> {
    match reduce_axes(cx, n)? {
        (axes, true) if axes.len() == 1 => Some(axes[0]),
        _ => None,
    }
}

/// The first of the trailing axes `[a, rank)` a keepdim reduction runs
/// over (`None` when its axes are not a non-empty tail).
pub fn keep_tail(cx: &RuleCx, n: &Node) -> Option<usize> {
    let rank = cx.ty(n.inputs[0]).rank();
    match reduce_axes(cx, n)? {
        (axes, true) if !axes.is_empty() && axes.iter().copied().eq(axes[0]..rank) => Some(axes[0]),
        _ => None,
    }
}

/// Whether the pattern made of the root and `interior` nodes is closed:
/// every value an interior node defines is read only inside the pattern
/// (by interior nodes or the root, the candidate), so fusing it leaves
/// nothing behind that would have to be computed twice.
pub fn closed(cx: &RuleCx, c: &Candidate, interior: &[&Node]) -> bool {
    let mut seen: Vec<ValueId> = Vec::new();
    let mut reads: HashMap<ValueId, usize> = HashMap::new();
    for &v in &c.inputs {
        *reads.entry(v).or_default() += 1;
    }
    for n in interior {
        if n.outputs.len() != 1 {
            return false;
        }
        if seen.contains(&n.outputs[0]) {
            continue;
        }
        seen.push(n.outputs[0]);
        for &v in &n.inputs {
            *reads.entry(v).or_default() += 1;
        }
    }
    seen.iter()
        .all(|v| cx.uses(*v) == reads.get(v).copied().unwrap_or(0))
}

/// The types `op(inputs) {attrs}` infers.
pub fn infer(op: &str, inputs: &[TensorType], attrs: &Attrs) -> Option<Vec<TensorType>> {
    let op = Op::named(op).ok()?;
    let attrs = attrs.clone().normalize(op.name(), op.attrs).ok()?;
    rlx_ir::graph::infer(op, inputs, &attrs).ok()
}

/// Whether `op(inputs) {attrs}` is valid and has exactly the types the
/// candidate must keep (so the engine's type check cannot fail).
pub fn fits(cx: &RuleCx, c: &Candidate, op: &str, inputs: &[ValueId], attrs: &Attrs) -> bool {
    let types: Vec<TensorType> = inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    infer(op, &types, attrs).is_some_and(|t| t == c.out_types)
}

/// The error of a replacement whose pattern no longer matches (cannot
/// happen: `matches` and `replace` see the same graph).
pub fn vanished(rule: &str) -> OptError {
    OptError::pass("fuse", format!("rule `{rule}`: the pattern vanished"))
}

/// A constant filled with `v`, of `x`'s dtype and shape `dims`.
pub fn filled(em: &mut Emitter, v: f64, dt: DType, dims: &[usize]) -> Result<ValueId, OptError> {
    let n = dims.iter().product();
    let t = HostTensor::from_f64(dt, dims.to_vec(), vec![v; n])?;
    em.emit1("constant", &[], Attrs::new().with("value", t))
}
