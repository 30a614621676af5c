//! `batch_norm` after a `conv` of constant weights, folded into the
//! conv's weight and bias (the rule `batch_norm_into_conv` of
//! [`crate::simplify`]):
//!
//! `bn(conv(x, w, b), s, β, μ, σ²)` = `conv(x, w · k, (b − μ) · k + β)`,
//! `k = s / √(σ² + eps)` per output channel.
//!
//! The new weight and bias are written as ops on the constants, which the
//! constant folder of the same cleanup rounds turns into constants: the
//! model then runs one conv where it ran a conv and a normalization (as
//! ONNX Runtime does at session start). Exact up to f32 rounding of the
//! folded weights. Only for constants: a trained-in-place model (weights
//! as inputs) keeps its batch_norm.

use crate::error::OptError;
use crate::rules::{Candidate, Emitter, Rule, RuleCx};
use rlx_ir::{Attrs, HostTensor, Shape, ValueId};

/// The conv under the batch_norm, when the fold applies: read only by
/// the batch_norm, its weight (and bias) and the batch_norm's four
/// parameters constants of one element per output channel.
fn conv_under<'a>(cx: &RuleCx<'a>, c: &Candidate) -> Option<&'a rlx_ir::Node> {
    let conv = cx.producer_if(c.inputs[0], "conv")?;
    let w = *conv.inputs.get(1)?;
    let m = *cx.ty(w).dims().first()?;
    let per_channel = |v: ValueId| cx.constant(v).is_some() && cx.ty(v).dims() == [m];
    let ok = cx.uses(c.inputs[0]) == 1
        && cx.constant(w).is_some()
        && conv.inputs.get(2).is_none_or(|&b| per_channel(b))
        && c.inputs[1..].iter().all(|&v| per_channel(v))
        && cx.ty(c.inputs[0]).dims().get(1) == Some(&m)
        && cx.ty(w).dtype == c.out_types[0].dtype;
    ok.then_some(conv)
}

fn matches(cx: &RuleCx, c: &Candidate) -> bool {
    conv_under(cx, c).is_some()
}

fn replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let cx = em.cx();
    let conv = conv_under(&cx, c).ok_or_else(|| OptError::pass("simplify", "conv vanished"))?;
    let (x, w, b) = (conv.inputs[0], conv.inputs[1], conv.inputs.get(2).copied());
    let attrs = conv.attrs.clone();
    let wty = cx.ty(w).clone();
    let (m, dtype) = (wty.dims()[0], wty.dtype);
    let [scale, shift, mean, var] = [c.inputs[1], c.inputs[2], c.inputs[3], c.inputs[4]];
    let eps = c.attrs.float("eps")?;
    let constant =
        |em: &mut Emitter, t: HostTensor| em.emit1("constant", &[], Attrs::new().with("value", t));
    let filled = |v: f64, dims: Vec<usize>| {
        let n: usize = dims.iter().product();
        HostTensor::from_f64(dtype, Shape::from(dims), vec![v; n])
    };
    let eps = constant(em, filled(eps, vec![m])?)?;
    let sd = em.emit1("add", &[var, eps], Attrs::new())?;
    let sd = em.emit1("sqrt", &[sd], Attrs::new())?;
    let k = em.emit1("div", &[scale, sd], Attrs::new())?;
    let mut kdims = vec![1i64; wty.rank()];
    kdims[0] = m as i64;
    let kw = em.emit1("reshape", &[k], Attrs::new().with("shape", kdims))?;
    let w2 = em.emit1("mul", &[w, kw], Attrs::new())?;
    let b0 = match b {
        Some(b) => b,
        None => constant(em, filled(0.0, vec![m])?)?,
    };
    let b2 = em.emit1("sub", &[b0, mean], Attrs::new())?;
    let b2 = em.emit1("mul", &[b2, k], Attrs::new())?;
    let b2 = em.emit1("add", &[b2, shift], Attrs::new())?;
    em.emit("conv", &[x, w2, b2], attrs)
}

/// The rule (listed in [`crate::simplify::RULES`]).
pub(crate) const BATCH_NORM_INTO_CONV: Rule = Rule {
    name: "batch_norm_into_conv",
    ops: &["batch_norm"],
    matches,
    replace,
    doc: "batch_norm(conv(x, w, b)) → conv(x, w·k, (b − μ)·k + β), k = s/√(σ²+eps), for constants",
};

/// The batch_norm's four parameters are constants of one element per
/// channel (axis 1 of an input of rank ≥ 2).
fn constant_params(cx: &RuleCx, c: &Candidate) -> bool {
    let x = cx.ty(c.inputs[0]);
    let Some(&ch) = x.dims().get(1) else {
        return false;
    };
    c.inputs[1..]
        .iter()
        .all(|&v| cx.constant(v).is_some() && cx.ty(v).dims() == [ch])
}

/// `bn(x)` = `x · k + (β − μ·k)`, the two per-channel constants shaped
/// (C, 1, …) to broadcast along the channel axis.
fn affine(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let cx = em.cx();
    let x = c.inputs[0];
    let (rank, ch, dtype) = (cx.ty(x).rank(), cx.ty(x).dims()[1], cx.ty(x).dtype);
    let [scale, shift, mean, var] = [c.inputs[1], c.inputs[2], c.inputs[3], c.inputs[4]];
    let eps = c.attrs.float("eps")?;
    let eps = HostTensor::from_f64(dtype, Shape::from(vec![ch]), vec![eps; ch])?;
    let eps = em.emit1("constant", &[], Attrs::new().with("value", eps))?;
    let sd = em.emit1("add", &[var, eps], Attrs::new())?;
    let sd = em.emit1("sqrt", &[sd], Attrs::new())?;
    let k = em.emit1("div", &[scale, sd], Attrs::new())?;
    let mk = em.emit1("mul", &[mean, k], Attrs::new())?;
    let b = em.emit1("sub", &[shift, mk], Attrs::new())?;
    let mut dims = vec![1i64; rank - 1];
    dims[0] = ch as i64;
    let k = em.emit1("reshape", &[k], Attrs::new().with("shape", dims.clone()))?;
    let b = em.emit1("reshape", &[b], Attrs::new().with("shape", dims))?;
    let y = em.emit1("mul", &[x, k], Attrs::new())?;
    em.emit("add", &[y, b], Attrs::new())
}

/// The rule after [`BATCH_NORM_INTO_CONV`]: any other batch_norm of
/// constant parameters becomes a per-channel multiply-add, which fuses
/// with its neighbours into one elementwise kernel.
pub(crate) const BATCH_NORM_AFFINE: Rule = Rule {
    name: "batch_norm_affine",
    ops: &["batch_norm"],
    matches: constant_params,
    replace: affine,
    doc: "batch_norm(x) → x·k + (β − μ·k), k = s/√(σ²+eps), for constant parameters",
};
