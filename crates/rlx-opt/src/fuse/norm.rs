//! `rms_norm` and `layer_norm`, recognized in small steps that each leave
//! a fused op behind:
//!
//! 1. `rms_normalize`: `x · rsqrt(mean(x²) + eps)` or `x / sqrt(mean(x²) +
//!    eps)` over trailing axes → `rms_norm(x, ones)`;
//! 2. `rms_norm_scale`: `rms_norm(x, ones) · gamma` → `rms_norm(x, gamma)`;
//! 3. `layer_norm_center`: `rms_norm(x − mean(x), gamma)` over the same
//!    axes → `layer_norm(x, gamma, zeros)` (exactly the same function);
//! 4. `layer_norm_shift`: `layer_norm(x, gamma, zeros) + beta` →
//!    `layer_norm(x, gamma, beta)`.
//!
//! `x²` may be `x·x`, `square(x)` or `pow(x, 2)`. This covers what
//! `layer_norm`'s and `rms_norm`'s decompositions emit and the common
//! importer form with `sqrt` and `div`. Step 3 needs the centred value to
//! be read only by the normalization, which holds once the nodes of step 1
//! are gone: the `Fuse` pass runs the rules again after DCE.

use super::pattern::{
    closed, filled, fits, keep_tail, orders, prod, scalar, snap, vanished, with_scalar,
};
use crate::error::OptError;
use crate::rules::{Candidate, Emitter, Rule, RuleCx};
use rlx_ir::{Attrs, Node, ValueId};

/// `mean(x²)` over trailing axes `[axis, rank)`: `(x, axis, nodes)`.
fn mean_square<'a>(cx: &RuleCx<'a>, v: ValueId) -> Option<(ValueId, usize, Vec<&'a Node>)> {
    let mean = prod(cx, v, "reduce_mean")?;
    let axis = keep_tail(cx, mean)?;
    let sq_v = mean.inputs[0];
    let x = if let Some(m) = prod(cx, sq_v, "mul").filter(|n| n.inputs[0] == n.inputs[1]) {
        m.inputs[0]
    } else if let Some(s) = prod(cx, sq_v, "square") {
        s.inputs[0]
    } else {
        let (x, p, _) = with_scalar(cx, sq_v, "pow", false)?;
        (p == 2.0).then_some(x)?
    };
    let sq = cx.producer(sq_v)?;
    Some((x, axis, vec![mean, sq]))
}

/// `mean(x²) + eps`: `(x, axis, eps, nodes)`.
fn variance_eps<'a>(cx: &RuleCx<'a>, v: ValueId) -> Option<(ValueId, usize, f64, Vec<&'a Node>)> {
    let (ms, eps, add) = with_scalar(cx, v, "add", true)?;
    let (x, axis, mut nodes) = mean_square(cx, ms)?;
    nodes.push(add);
    Some((x, axis, snap(eps, cx.ty(v).dtype), nodes))
}

/// The normalization at the candidate (a `mul` or `div`): `(x, axis, eps)`.
fn normalized(cx: &RuleCx, c: &Candidate) -> Option<(ValueId, usize, f64)> {
    let (op, pairs) = if c.op.name() == "mul" {
        ("rsqrt", orders(&c.inputs).to_vec())
    } else {
        ("sqrt", vec![(c.inputs[0], c.inputs[1])])
    };
    pairs.into_iter().find_map(|(x, r)| {
        let root = prod(cx, r, op)?;
        let (x2, axis, eps, mut nodes) = variance_eps(cx, root.inputs[0])?;
        nodes.push(root);
        (x2 == x && closed(cx, c, &nodes)).then_some((x, axis, eps))
    })
}

fn norm_attrs(axis: usize, eps: f64) -> Attrs {
    Attrs::new().with("axis", axis as i64).with("eps", eps)
}

fn rms_normalize(cx: &RuleCx, c: &Candidate) -> Option<(ValueId, usize, f64)> {
    let (x, axis, eps) = normalized(cx, c)?;
    // The replacement's gamma (ones) has x's trailing shape: check with x itself.
    let ty = cx.ty(x);
    (ty.dtype.is_float() && c.out_types == [ty.clone()]).then_some((x, axis, eps))
}

fn rms_normalize_replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let (x, axis, eps) = rms_normalize(&em.cx(), c).ok_or_else(|| vanished("rms_normalize"))?;
    let ty = em.cx().ty(x).clone();
    let ones = filled(em, 1.0, ty.dtype, &ty.dims()[axis..])?;
    em.emit("rms_norm", &[x, ones], norm_attrs(axis, eps))
}

/// A fused normalization `op` used once, whose input `k` is all `fill`.
fn fused_with<'a>(cx: &RuleCx<'a>, v: ValueId, op: &str, k: usize, fill: f64) -> Option<&'a Node> {
    let n = prod(cx, v, op)?;
    (cx.uses(v) == 1 && scalar(cx, n.inputs[k]) == Some(fill)).then_some(n)
}

/// `rms_norm(x, ones) · gamma`: `(x, gamma, attrs)`.
fn rms_norm_scale(cx: &RuleCx, c: &Candidate) -> Option<(ValueId, ValueId, Attrs)> {
    orders(&c.inputs).into_iter().find_map(|(n, gamma)| {
        let rms = fused_with(cx, n, "rms_norm", 1, 1.0)?;
        let x = rms.inputs[0];
        fits(cx, c, "rms_norm", &[x, gamma], &rms.attrs).then(|| (x, gamma, rms.attrs.clone()))
    })
}

/// `rms_norm(x − mean(x), gamma)` over the same axes: `(x, gamma, attrs)`.
fn layer_norm_center(cx: &RuleCx, c: &Candidate) -> Option<(ValueId, ValueId, Attrs)> {
    let d = c.inputs[0];
    let sub = prod(cx, d, "sub")?;
    let x = sub.inputs[0];
    let mean = prod(cx, sub.inputs[1], "reduce_mean").filter(|m| m.inputs[0] == x)?;
    let rank = cx.ty(x).rank() as i64;
    let axis = c.attrs.int("axis").ok()?;
    let axis = if axis < 0 { axis + rank } else { axis };
    let ok = keep_tail(cx, mean) == Some(axis as usize) && closed(cx, c, &[sub, mean]);
    ok.then(|| (x, c.inputs[1], c.attrs.clone()))
}

fn layer_norm_center_replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let (x, gamma, attrs) =
        layer_norm_center(&em.cx(), c).ok_or_else(|| vanished("layer_norm_center"))?;
    let ty = em.cx().ty(gamma).clone();
    let zeros = filled(em, 0.0, ty.dtype, ty.dims())?;
    em.emit("layer_norm", &[x, gamma, zeros], attrs)
}

/// `layer_norm(x, gamma, zeros) + beta`: `(x, gamma, beta, attrs)`.
fn layer_norm_shift(cx: &RuleCx, c: &Candidate) -> Option<([ValueId; 3], Attrs)> {
    orders(&c.inputs).into_iter().find_map(|(n, beta)| {
        let ln = fused_with(cx, n, "layer_norm", 2, 0.0)?;
        let ins = [ln.inputs[0], ln.inputs[1], beta];
        fits(cx, c, "layer_norm", &ins, &ln.attrs).then(|| (ins, ln.attrs.clone()))
    })
}

/// `x · rsqrt(mean(x²) + eps)` or `x / sqrt(mean(x²) + eps)` → `rms_norm(x, ones)`.
pub const RMS_NORMALIZE: Rule = Rule {
    name: "rms_normalize",
    ops: &["mul", "div"],
    matches: |cx, c| rms_normalize(cx, c).is_some(),
    replace: rms_normalize_replace,
    doc: "x · rsqrt(mean(x²) + eps) (or x / sqrt(..)) over trailing axes → rms_norm(x, ones)",
};

/// `rms_norm(x, ones) · gamma` → `rms_norm(x, gamma)`.
pub const RMS_NORM_SCALE: Rule = Rule {
    name: "rms_norm_scale",
    ops: &["mul"],
    matches: |cx, c| rms_norm_scale(cx, c).is_some(),
    replace: |em, c| {
        let (x, g, a) = rms_norm_scale(&em.cx(), c).ok_or_else(|| vanished("rms_norm_scale"))?;
        em.emit("rms_norm", &[x, g], a)
    },
    doc: "rms_norm(x, ones) · gamma (gamma of the normalized shape) → rms_norm(x, gamma)",
};

/// `rms_norm(x − mean(x), gamma)` → `layer_norm(x, gamma, zeros)`.
pub const LAYER_NORM_CENTER: Rule = Rule {
    name: "layer_norm_center",
    ops: &["rms_norm"],
    matches: |cx, c| layer_norm_center(cx, c).is_some(),
    replace: layer_norm_center_replace,
    doc: "rms_norm(x − mean(x), gamma) over the same axes → layer_norm(x, gamma, zeros)",
};

/// `layer_norm(x, gamma, zeros) + beta` → `layer_norm(x, gamma, beta)`.
pub const LAYER_NORM_SHIFT: Rule = Rule {
    name: "layer_norm_shift",
    ops: &["add"],
    matches: |cx, c| layer_norm_shift(cx, c).is_some(),
    replace: |em, c| {
        let (ins, a) = layer_norm_shift(&em.cx(), c).ok_or_else(|| vanished("layer_norm_shift"))?;
        em.emit("layer_norm", &ins, a)
    },
    doc: "layer_norm(x, gamma, zeros) + beta (beta of the normalized shape) → layer_norm(x, gamma, beta)",
};
