//! Fused ops. Each has a CPU kernel of its own and a registered
//! decomposition into primitives: the "common-IR" path a backend takes when
//! it does not claim the fused op. Decompositions must agree with the fused
//! kernels (property-tested in rlx-cpu).

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::error::IrError;
use crate::graph::{GraphBuilder, ValueId};
use crate::op::{Arity::*, Category as C, Grad::*};
use crate::tensor::HostTensor;

type B<'a> = &'a mut GraphBuilder;
type Out = Result<Vec<ValueId>, IrError>;

fn c(b: B, v: f64, like: ValueId) -> Result<ValueId, IrError> {
    let dt = b.dtype(like);
    b.scalar(v, dt)
}

/// Axes [from, rank) as a list.
fn tail_axes(rank: usize, from: usize) -> Vec<i64> {
    (from as i64..rank as i64).collect()
}

// ---- softmax family ----

fn softmax_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let ax = a.int("axis")?;
    let m = b.reduce_keep("reduce_max", x[0], &[ax])?;
    let m = b.unary("stop_gradient", m)?;
    let d = b.binary("sub", x[0], m)?;
    let e = b.unary("exp", d)?;
    let s = b.reduce_keep("reduce_sum", e, &[ax])?;
    Ok(vec![b.binary("div", e, s)?])
}

fn log_softmax_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let ax = a.int("axis")?;
    let m = b.reduce_keep("reduce_max", x[0], &[ax])?;
    let m = b.unary("stop_gradient", m)?;
    let d = b.binary("sub", x[0], m)?;
    let e = b.unary("exp", d)?;
    let s = b.reduce_keep("reduce_sum", e, &[ax])?;
    let l = b.unary("log", s)?;
    Ok(vec![b.binary("sub", d, l)?])
}

// ---- normalizations ----

fn norm_axes(cx: &InferCx) -> Result<usize, String> {
    axis_of(cx, "axis", cx.inputs[0].rank())
}

fn layer_norm(cx: &InferCx) -> R {
    let ax = norm_axes(cx)?;
    let tail = &cx.inputs[0].dims()[ax..];
    for k in 1..cx.inputs.len() {
        expect_same_dtype(cx, k)?;
        if cx.inputs[k].dims() != tail {
            return Err(format!(
                "input {k} must have the normalized shape {tail:?}, got {}",
                cx.inputs[k].shape
            ));
        }
    }
    same(cx)
}

fn normalize(b: B, x: ValueId, axes: &[i64], eps: f64, center: bool) -> Result<ValueId, IrError> {
    let d = if center {
        let mean = b.reduce_keep("reduce_mean", x, axes)?;
        b.binary("sub", x, mean)?
    } else {
        x
    };
    let sq = b.binary("mul", d, d)?;
    let var = b.reduce_keep("reduce_mean", sq, axes)?;
    let e = c(b, eps, x)?;
    let ve = b.binary("add", var, e)?;
    let r = b.unary("rsqrt", ve)?;
    b.binary("mul", d, r)
}

fn layer_norm_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let rank = b.shape(x[0]).rank();
    let ax = normalize_axis(a.int("axis")?, rank)?;
    let n = normalize(b, x[0], &tail_axes(rank, ax), a.float("eps")?, true)?;
    let g = b.binary("mul", n, x[1])?;
    Ok(vec![b.binary("add", g, x[2])?])
}

fn rms_norm_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let rank = b.shape(x[0]).rank();
    let ax = normalize_axis(a.int("axis")?, rank)?;
    let n = normalize(b, x[0], &tail_axes(rank, ax), a.float("eps")?, false)?;
    Ok(vec![b.binary("mul", n, x[1])?])
}

/// Per-channel parameters of (N, C, ...) inputs.
fn channel_params(cx: &InferCx, first: usize) -> R {
    let x = &cx.inputs[0];
    if x.rank() < 2 {
        return Err(format!("expects (N, C, ...), got {}", x.shape));
    }
    for k in first..cx.inputs.len() {
        expect_same_dtype(cx, k)?;
        if cx.inputs[k].dims() != [x.dims()[1]] {
            return Err(format!(
                "input {k} must be ({}), got {}",
                x.dims()[1],
                cx.inputs[k].shape
            ));
        }
    }
    same(cx)
}

fn group_norm(cx: &InferCx) -> R {
    let g = int(cx, "groups")?;
    let ch = cx.inputs[0].dims().get(1).copied().unwrap_or(0);
    if g < 1 || ch % g as usize != 0 {
        return Err(format!("groups = {g} must divide the {ch} channels"));
    }
    channel_params(cx, 1)
}

/// Reshape a (C) parameter to (C, 1, ...) so it broadcasts against (N, C, ...).
fn per_channel(b: B, p: ValueId, rank: usize) -> Result<ValueId, IrError> {
    let ch = b.shape(p).dims()[0] as i64;
    let mut s = vec![ch];
    s.extend(std::iter::repeat_n(1, rank - 2));
    b.op1("reshape", &[p], Attrs::new().with("shape", s))
}

fn group_norm_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let dims: Vec<i64> = b.shape(x[0]).dims().iter().map(|&d| d as i64).collect();
    let g = a.int("groups")?;
    let grouped = b.op1(
        "reshape",
        &[x[0]],
        Attrs::new().with("shape", vec![dims[0], g, -1]),
    )?;
    let n = normalize(b, grouped, &[2], a.float("eps")?, true)?;
    let n = b.op1("reshape", &[n], Attrs::new().with("shape", dims.clone()))?;
    let gamma = per_channel(b, x[1], dims.len())?;
    let beta = per_channel(b, x[2], dims.len())?;
    let y = b.binary("mul", n, gamma)?;
    Ok(vec![b.binary("add", y, beta)?])
}

fn batch_norm_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let rank = b.shape(x[0]).rank();
    let [scale, bias, mean, var] = [x[1], x[2], x[3], x[4]].map(|p| per_channel(b, p, rank));
    let e = c(b, a.float("eps")?, x[0])?;
    let ve = b.binary("add", var?, e)?;
    let r = b.unary("rsqrt", ve)?;
    let d = b.binary("sub", x[0], mean?)?;
    let n = b.binary("mul", d, r)?;
    let y = b.binary("mul", n, scale?)?;
    Ok(vec![b.binary("add", y, bias?)?])
}

// ---- activations ----

fn gelu_d(b: B, x: &[ValueId], _: &Attrs) -> Out {
    let s = c(b, std::f64::consts::FRAC_1_SQRT_2, x[0])?;
    let xs = b.binary("mul", x[0], s)?;
    let e = b.unary("erf", xs)?;
    let one_ = c(b, 1.0, x[0])?;
    let e1 = b.binary("add", e, one_)?;
    let half = c(b, 0.5, x[0])?;
    let hx = b.binary("mul", x[0], half)?;
    Ok(vec![b.binary("mul", hx, e1)?])
}

fn gelu_tanh_d(b: B, x: &[ValueId], _: &Attrs) -> Out {
    let x = x[0];
    let x3 = b.binary("mul", x, x)?;
    let x3 = b.binary("mul", x3, x)?;
    let k = c(b, 0.044715, x)?;
    let kx3 = b.binary("mul", x3, k)?;
    let inner = b.binary("add", x, kx3)?;
    let s = c(b, (2.0 / std::f64::consts::PI).sqrt(), x)?;
    let t = b.binary("mul", inner, s)?;
    let t = b.unary("tanh", t)?;
    let one_ = c(b, 1.0, x)?;
    let t1 = b.binary("add", t, one_)?;
    let half = c(b, 0.5, x)?;
    let hx = b.binary("mul", x, half)?;
    Ok(vec![b.binary("mul", hx, t1)?])
}

fn silu_d(b: B, x: &[ValueId], _: &Attrs) -> Out {
    let s = b.unary("sigmoid", x[0])?;
    Ok(vec![b.binary("mul", x[0], s)?])
}

fn swiglu(cx: &InferCx) -> R {
    expect_same_dtype(cx, 1)?;
    if cx.inputs[0].shape != cx.inputs[1].shape {
        return Err(format!(
            "gate {} and up {} must have one shape",
            cx.inputs[0].shape, cx.inputs[1].shape
        ));
    }
    same(cx)
}

fn swiglu_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let s = silu_d(b, &x[..1], a)?;
    Ok(vec![b.binary("mul", s[0], x[1])?])
}

// ---- attention ----

/// The boolean keep-mask of the built-in mask kinds, as a (Sq, Sk) constant.
/// Query i sits at position i + (Sk − Sq), so the mask is bottom-right
/// aligned when keys include a cached prefix.
pub fn attention_mask(kind: &str, sq: usize, sk: usize, window: i64) -> Option<Vec<bool>> {
    let off = sk as i64 - sq as i64;
    let keep = |i: usize, j: usize| -> bool {
        let qpos = i as i64 + off;
        let j = j as i64;
        match kind {
            "causal" => j <= qpos,
            "sliding_window" => j <= qpos && qpos - j < window,
            _ => true,
        }
    };
    matches!(kind, "causal" | "sliding_window").then(|| {
        (0..sq)
            .flat_map(|i| (0..sk).map(move |j| keep(i, j)))
            .collect()
    })
}

fn attention(cx: &InferCx) -> R {
    let (q, k, v) = (&cx.inputs[0], &cx.inputs[1], &cx.inputs[2]);
    expect_same_dtype(cx, 1)?;
    expect_same_dtype(cx, 2)?;
    if q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank() {
        return Err(format!(
            "q, k, v must be (..., S, D) of one rank; got {}, {}, {}",
            q.shape, k.shape, v.shape
        ));
    }
    let r = q.rank();
    let (sq, d, sk) = (q.dims()[r - 2], q.dims()[r - 1], k.dims()[r - 2]);
    if k.dims()[r - 1] != d || v.dims()[r - 2] != sk {
        return Err(format!(
            "k must be (..., Sk, {d}) and v (..., Sk, Dv); got {} and {}",
            k.shape, v.shape
        ));
    }
    let batch = broadcast_shapes(
        &Shape(q.dims()[..r - 2].to_vec()),
        &Shape(k.dims()[..r - 2].to_vec()),
    )
    .and_then(|s| broadcast_shapes(&s, &Shape(v.dims()[..r - 2].to_vec())))
    .map_err(|e| format!("batch axes: {e}"))?;
    let kind = string(cx, "mask_kind")?;
    let has_mask = cx.inputs.len() == 4;
    match (kind, has_mask) {
        ("none" | "causal", false) => {}
        ("sliding_window", false) if int(cx, "window")? > 0 => {}
        ("sliding_window", false) => return Err("sliding_window needs window > 0".into()),
        ("custom" | "bias", true) => {
            let m = &cx.inputs[3];
            let want = if kind == "custom" { DType::Bool } else { q.dtype };
            if m.dtype != want {
                return Err(format!("a {kind} mask must be {want}, got {}", m.dtype));
            }
            let mut full = batch.0.clone();
            full.extend([sq, sk]);
            let bs = broadcast_shapes(&m.shape, &Shape(full.clone())).map_err(|e| e.to_string())?;
            if bs.0 != full {
                return Err(format!("mask {} does not broadcast to the scores {full:?}", m.shape));
            }
        }
        (k, m) => {
            return Err(format!(
                "mask_kind {k:?} {} a mask input (none/causal/sliding_window take none; custom/bias take one)",
                if m { "does not take" } else { "needs" }
            ))
        }
    }
    let mut dims = batch.0;
    dims.extend([sq, v.dims()[r - 1]]);
    one(TensorType::new(q.dtype, dims))
}

fn attention_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let (q, k, v) = (x[0], x[1], x[2]);
    let r = b.shape(q).rank();
    let d = b.shape(q).dims()[r - 1];
    let (sq, sk) = (b.shape(q).dims()[r - 2], b.shape(k).dims()[r - 2]);
    let mut perm: Vec<i64> = (0..r as i64).collect();
    perm.swap(r - 2, r - 1);
    let kt = b.op1("permute", &[k], Attrs::new().with("perm", perm))?;
    let s = b.binary("matmul", q, kt)?;
    let scale = a.opt_float("scale").unwrap_or(1.0 / (d as f64).sqrt());
    let sc = c(b, scale, q)?;
    let mut s = b.binary("mul", s, sc)?;
    let kind = a.str("mask_kind")?;
    let keep = match kind {
        "custom" => Some(x[3]),
        "bias" => {
            s = b.binary("add", s, x[3])?;
            None
        }
        _ => match attention_mask(kind, sq, sk, a.int("window")?) {
            Some(m) => Some(b.constant(HostTensor::from_slice(&m, [sq, sk])?)?),
            None => None,
        },
    };
    if let Some(keep) = keep {
        let ninf = c(b, f64::NEG_INFINITY, q)?;
        s = b.op1("where", &[keep, s, ninf], Attrs::new())?;
    }
    let p = softmax_d(b, &[s], &Attrs::new().with("axis", -1i64))?[0];
    Ok(vec![b.binary("matmul", p, v)?])
}

/// `attention_cached`: attention over a key/value cache and the step's
/// new keys and values, (q, k_cache, v_cache, k_new, v_new, keep): the
/// type of `attention` with k = k_cache ++ k_new (and v alike) along the
/// sequence axis and a custom bool mask.
fn attention_cached(cx: &InferCx) -> R {
    let i = cx.inputs;
    let joined = |a: &TensorType, b: &TensorType, what: &str| -> Result<TensorType, String> {
        let r = a.rank();
        if r < 2
            || b.rank() != r
            || a.dtype != b.dtype
            || a.dims()[..r - 2] != b.dims()[..r - 2]
            || a.dims()[r - 1] != b.dims()[r - 1]
        {
            return Err(format!(
                "the cached and new {what} must agree but in the sequence axis (..., S, D); got {a} and {b}"
            ));
        }
        let mut d = a.dims().to_vec();
        d[r - 2] += b.dims()[r - 2];
        Ok(TensorType::new(a.dtype, d))
    };
    let k = joined(&i[1], &i[3], "keys")?;
    let v = joined(&i[2], &i[4], "values")?;
    let inputs = [i[0].clone(), k, v, i[5].clone()];
    let attrs = cx.attrs.clone().with("mask_kind", "custom");
    attention(&InferCx {
        op: cx.op,
        inputs: &inputs,
        attrs: &attrs,
    })
}

/// The cache and the new keys (and values) joined, then `attention`.
fn attention_cached_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let axis = Attrs::new().with("axis", b.shape(x[1]).rank() as i64 - 2);
    let k = b.op1("concat", &[x[1], x[3]], axis.clone())?;
    let v = b.op1("concat", &[x[2], x[4]], axis)?;
    let mut at = Attrs::new().with("mask_kind", "custom");
    if let Some(s) = a.opt_float("scale") {
        at = at.with("scale", s);
    }
    Ok(vec![b.op1("attention", &[x[0], k, v, x[5]], at)?])
}

/// `attention_merged`: attention's type with the heads merged, (..., H,
/// Sq, Dv) → (..., Sq, H·Dv).
fn attention_merged(cx: &InferCx) -> R {
    let t = attention(cx)?.remove(0);
    let d = t.dims();
    let r = d.len();
    if r < 3 {
        return Err(format!(
            "merging heads needs q, k, v of rank >= 3 (..., H, S, D); the scores are {}",
            t.shape
        ));
    }
    let mut dims = d[..r - 3].to_vec();
    dims.extend([d[r - 2], d[r - 3] * d[r - 1]]);
    one(TensorType::new(t.dtype, dims))
}

/// The head merge after attention: `reshape(permute(attention(..)))`,
/// heads and rows swapped, then heads and features joined.
fn attention_merged_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let y = attention_d(b, x, a)?[0];
    let d = b.shape(y).dims().to_vec();
    let r = d.len();
    let mut perm: Vec<i64> = (0..r as i64).collect();
    perm.swap(r - 3, r - 2);
    let p = b.op1("permute", &[y], Attrs::new().with("perm", perm))?;
    let mut to: Vec<i64> = d[..r - 3].iter().map(|&n| n as i64).collect();
    to.extend([d[r - 2] as i64, (d[r - 3] * d[r - 1]) as i64]);
    Ok(vec![b.op1(
        "reshape",
        &[p],
        Attrs::new().with("shape", to),
    )?])
}

// ---- rotary embeddings ----

fn rope_check(cx: &InferCx, x: usize) -> Result<TensorType, String> {
    let t = &cx.inputs[x];
    let (cos, sin) = (
        &cx.inputs[cx.inputs.len() - 2],
        &cx.inputs[cx.inputs.len() - 1],
    );
    let r = t.rank();
    if r < 2 || !t.dims()[r - 1].is_multiple_of(2) {
        return Err(format!(
            "input {x} must be (..., S, D) with even D, got {}",
            t.shape
        ));
    }
    let want = [t.dims()[r - 2], t.dims()[r - 1] / 2];
    if cos.dims() != want || sin.dims() != want || cos.dtype != t.dtype || sin.dtype != t.dtype {
        return Err(format!(
            "cos and sin must be {}{:?}, got {cos} and {sin}",
            t.dtype, want
        ));
    }
    Ok(t.clone())
}

fn rope(cx: &InferCx) -> R {
    one(rope_check(cx, 0)?)
}

fn qk_rope(cx: &InferCx) -> R {
    Ok(vec![rope_check(cx, 0)?, rope_check(cx, 1)?])
}

fn rope_one(
    b: B,
    x: ValueId,
    cos: ValueId,
    sin: ValueId,
    interleaved: bool,
) -> Result<ValueId, IrError> {
    let dims: Vec<i64> = b.shape(x).dims().iter().map(|&d| d as i64).collect();
    let r = dims.len();
    let half = dims[r - 1] / 2;
    // Split the last axis into two halves (x1, x2): contiguous halves, or
    // even/odd lanes when interleaved.
    let (x1, x2, split_axis) = if interleaved {
        let mut s = dims[..r - 1].to_vec();
        s.extend([half, 2]);
        let p = b.op1("reshape", &[x], Attrs::new().with("shape", s))?;
        let parts = b.op(
            "split",
            &[p],
            Attrs::new()
                .with("axis", -1i64)
                .with("sizes", vec![1i64, 1]),
        )?;
        let sq = |b: B, v| b.op1("squeeze", &[v], Attrs::new().with("axes", vec![-1i64]));
        (sq(b, parts[0])?, sq(b, parts[1])?, -1i64)
    } else {
        let parts = b.op(
            "split",
            &[x],
            Attrs::new()
                .with("axis", -1i64)
                .with("sizes", vec![half, half]),
        )?;
        (parts[0], parts[1], -1i64)
    };
    let a1 = b.binary("mul", x1, cos)?;
    let a2 = b.binary("mul", x2, sin)?;
    let y1 = b.binary("sub", a1, a2)?;
    let b1 = b.binary("mul", x2, cos)?;
    let b2 = b.binary("mul", x1, sin)?;
    let y2 = b.binary("add", b1, b2)?;
    if interleaved {
        let u = |b: B, v| b.op1("unsqueeze", &[v], Attrs::new().with("axes", vec![-1i64]));
        let (y1, y2) = (u(b, y1)?, u(b, y2)?);
        let cat = b.op1("concat", &[y1, y2], Attrs::new().with("axis", split_axis))?;
        b.op1("reshape", &[cat], Attrs::new().with("shape", dims))
    } else {
        b.op1("concat", &[y1, y2], Attrs::new().with("axis", split_axis))
    }
}

fn rope_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    Ok(vec![rope_one(b, x[0], x[1], x[2], a.bool("interleaved")?)?])
}

fn qk_rope_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let il = a.bool("interleaved")?;
    Ok(vec![
        rope_one(b, x[0], x[2], x[3], il)?,
        rope_one(b, x[1], x[2], x[3], il)?,
    ])
}

// ---- matmul epilogues and quantized matmuls ----

pub const ACTIVATIONS: &[&str] = &[
    "none",
    "relu",
    "gelu",
    "gelu_tanh",
    "silu",
    "sigmoid",
    "tanh",
];

fn matmul_bias_act(cx: &InferCx) -> R {
    let act = string(cx, "activation")?;
    if !ACTIVATIONS.contains(&act) {
        return Err(format!(
            "activation must be one of {ACTIVATIONS:?}, got {act:?}"
        ));
    }
    let mm = crate::graph::infer(
        crate::op::Op::named("matmul").map_err(|e| e.to_string())?,
        &cx.inputs[..2],
        &Attrs::new(),
    )?;
    if let Some(bias) = cx.inputs.get(2) {
        expect_same_dtype(cx, 2)?;
        let s = broadcast_shapes(&mm[0].shape, &bias.shape).map_err(|e| e.to_string())?;
        if s != mm[0].shape {
            return Err(format!(
                "bias {} must broadcast to the product {}",
                bias.shape, mm[0].shape
            ));
        }
    }
    Ok(mm)
}

fn matmul_bias_act_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let mut y = b.binary("matmul", x[0], x[1])?;
    if let Some(&bias) = x.get(2) {
        y = b.binary("add", y, bias)?;
    }
    let act = a.str("activation")?;
    if act != "none" {
        y = b.unary(act, y)?;
    }
    Ok(vec![y])
}

/// `matmul_residual`: inputs (a, b, r, [bias]); the product's type, which
/// `r` must have exactly (a residual is never broadcast).
fn matmul_residual(cx: &InferCx) -> R {
    let mut ins = cx.inputs[..2].to_vec();
    ins.extend(cx.inputs.get(3).cloned());
    let t = crate::graph::infer(
        crate::op::Op::named("matmul_bias_act").map_err(|e| e.to_string())?,
        &ins,
        cx.attrs,
    )?
    .remove(0);
    let r = &cx.inputs[2];
    if *r != t {
        return Err(format!(
            "the residual must be {t} (the product's type), got {r}"
        ));
    }
    one(t)
}

/// `act(a @ b + bias) + r`: the epilogue, then the residual added.
fn matmul_residual_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let mut ins = vec![x[0], x[1]];
    ins.extend(x.get(3));
    let y = matmul_bias_act_d(b, &ins, a)?[0];
    Ok(vec![b.binary("add", y, x[2])?])
}

/// `conv_act`: the convolution's type, once `activation` is one the
/// epilogue knows.
fn conv_act(cx: &InferCx) -> R {
    let act = string(cx, "activation")?;
    if !ACTIVATIONS.contains(&act) {
        return Err(format!(
            "activation must be one of {ACTIVATIONS:?}, got {act:?}"
        ));
    }
    crate::graph::infer(
        crate::op::Op::named("conv").map_err(|e| e.to_string())?,
        cx.inputs,
        cx.attrs,
    )
}

/// `act(conv(x, w, [bias]))`.
fn conv_act_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let mut conv = a.clone();
    conv.0.remove("activation");
    let y = b.op1("conv", x, conv)?;
    match a.str("activation")? {
        "none" => Ok(vec![y]),
        act => Ok(vec![b.unary(act, y)?]),
    }
}

fn dequant_matmul(cx: &InferCx) -> R {
    let (x, w) = (&cx.inputs[0], &cx.inputs[1]);
    if !x.dtype.is_float() || !w.dtype.is_quantized() || w.rank() != 2 {
        return Err(format!(
            "expects float x (..., K) and a quantized (N, K) weight; got {x} and {w}"
        ));
    }
    let k = *x.dims().last().ok_or("x must have rank >= 1")?;
    if w.dtype.storage_bytes(w.dims()[1]).is_none() {
        return Err(format!(
            "the weight {w} has rows of {} values, not a whole number of {} blocks",
            w.dims()[1],
            w.dtype
        ));
    }
    if w.dims()[1] != k {
        return Err(format!(
            "x has K = {k}, the weight {} has K = {}",
            w.shape,
            w.dims()[1]
        ));
    }
    let mut d = x.dims().to_vec();
    *d.last_mut().expect("rank >= 1") = w.dims()[0];
    one(TensorType::new(x.dtype, d))
}

fn dequant_matmul_d(b: B, x: &[ValueId], _: &Attrs) -> Out {
    let dt = b.dtype(x[0]);
    let w = b.op1("dequantize", &[x[1]], Attrs::new().with("dtype", dt))?;
    let wt = b.op1("permute", &[w], Attrs::new().with("perm", vec![1i64, 0]))?;
    Ok(vec![b.binary("matmul", x[0], wt)?])
}

fn scaled_matmul(cx: &InferCx) -> R {
    let bs = int(cx, "block")?;
    let (a, w) = (&cx.inputs[0], &cx.inputs[1]);
    for k in 1..4 {
        expect_same_dtype(cx, k)?;
    }
    if a.rank() != 2
        || w.rank() != 2
        || a.dims()[1] != w.dims()[1]
        || bs < 1
        || a.dims()[1] % bs as usize != 0
    {
        return Err(format!(
            "expects a (M, K), b (N, K) with K a multiple of block={bs}; got {} and {}",
            a.shape, w.shape
        ));
    }
    let kb = a.dims()[1] / bs as usize;
    if cx.inputs[2].dims() != [a.dims()[0], kb] || cx.inputs[3].dims() != [w.dims()[0], kb] {
        return Err(format!(
            "scales must be ({}, {kb}) and ({}, {kb})",
            a.dims()[0],
            w.dims()[0]
        ));
    }
    one(TensorType::new(a.dtype, vec![a.dims()[0], w.dims()[0]]))
}

fn scaled_matmul_d(b: B, x: &[ValueId], a: &Attrs) -> Out {
    let bs = a.int("block")?;
    let scale = |b: B, v: ValueId, s: ValueId| -> Result<ValueId, IrError> {
        let d = b.shape(v).dims().to_vec();
        let blocks = b.op1(
            "reshape",
            &[v],
            Attrs::new().with("shape", vec![d[0] as i64, -1, bs]),
        )?;
        let s = b.op1("unsqueeze", &[s], Attrs::new().with("axes", vec![-1i64]))?;
        let m = b.binary("mul", blocks, s)?;
        b.op1(
            "reshape",
            &[m],
            Attrs::new().with("shape", vec![d[0] as i64, d[1] as i64]),
        )
    };
    let lhs = scale(b, x[0], x[2])?;
    let rhs = scale(b, x[1], x[3])?;
    let rt = b.op1("permute", &[rhs], Attrs::new().with("perm", vec![1i64, 0]))?;
    Ok(vec![b.binary("matmul", lhs, rt)?])
}

const AXIS: &[AttrSpec] = &[attr("axis", K::Int, D::Int(-1))];
const fn fused(
    name: &'static str,
    arity: crate::op::Arity,
    dtypes: &'static [DType],
    attrs: &'static [AttrSpec],
    infer: InferFn,
    decompose: DecomposeFn,
    doc: &'static str,
) -> OpDef {
    def(
        name,
        C::Fused,
        arity,
        dtypes,
        attrs,
        infer,
        Some(decompose),
        Differentiable,
        doc,
    )
}

/// softmax and log_softmax: the input's type, once `axis` is one of its axes.
fn along_axis(cx: &InferCx) -> R {
    axis_of(cx, "axis", cx.inputs[0].rank())?;
    same(cx)
}

pub static FUSED: &[OpDef] = &[
    fused("softmax", Exact(1), FLOAT, AXIS, along_axis, softmax_d, "exp(x − max) / Σ exp(x − max) along axis"),
    fused("log_softmax", Exact(1), FLOAT, AXIS, along_axis, log_softmax_d, "x − max − log Σ exp(x − max) along axis"),
    fused("layer_norm", Exact(3), FLOAT, &[attr("axis", K::Int, D::Int(-1)), attr("eps", K::Float, D::Float(1e-5))],
        layer_norm, layer_norm_d, "normalize over axes [axis, rank) then scale by gamma and shift by beta"),
    fused("rms_norm", Exact(2), FLOAT, &[attr("axis", K::Int, D::Int(-1)), attr("eps", K::Float, D::Float(1e-6))],
        layer_norm, rms_norm_d, "x / sqrt(mean(x²) + eps) · gamma over axes [axis, rank)"),
    fused("group_norm", Exact(3), FLOAT, &[attr("groups", K::Int, D::Required), attr("eps", K::Float, D::Float(1e-5))],
        group_norm, group_norm_d, "normalize (N, C, ...) within channel groups, then per-channel gamma, beta"),
    fused("batch_norm", Exact(5), FLOAT, &[attr("eps", K::Float, D::Float(1e-5))], |cx| channel_params(cx, 1),
        batch_norm_d, "inference batch norm: (x − mean) / sqrt(var + eps) · scale + bias; inputs x, scale, bias, mean, var"),
    fused("gelu", Exact(1), FLOAT, &[], same, gelu_d, "x · Φ(x) with the exact erf"),
    fused("gelu_tanh", Exact(1), FLOAT, &[], same, gelu_tanh_d, "tanh approximation of gelu"),
    fused("silu", Exact(1), FLOAT, &[], same, silu_d, "x · sigmoid(x)"),
    fused("swiglu", Exact(2), FLOAT, &[], swiglu, swiglu_d, "silu(gate) · up"),
    fused("attention", Between(3, 4), FLOAT,
        &[attr("mask_kind", K::Str, D::Str("none")), attr("window", K::Int, D::Int(0)), attr("scale", K::Float, D::Optional)],
        attention, attention_d,
        "softmax(q·kᵀ·scale + mask)·v; mask none / causal / sliding_window / custom (bool keep) / bias (additive); fully masked rows give NaN"),
    fused("attention_merged", Between(3, 4), FLOAT,
        &[attr("mask_kind", K::Str, D::Str("none")), attr("window", K::Int, D::Int(0)), attr("scale", K::Float, D::Optional)],
        attention_merged, attention_merged_d,
        "attention written with its heads merged: q, k, v (..., H, S, D) give (..., Sq, H·Dv), the layout the output projection reads"),
    fused("attention_cached", Exact(6), FLOAT, &[attr("scale", K::Float, D::Optional)],
        attention_cached, attention_cached_d,
        "attention over a key/value cache and the step's new keys/values, (q, k_cache, v_cache, k_new, v_new, keep): \
         attention(q, k_cache ++ k_new, v_cache ++ v_new, keep) along the sequence axis without joining them; keep is a custom bool mask"),
    fused("rope", Exact(3), FLOAT, &[attr("interleaved", K::Bool, D::Bool(false))], rope, rope_d,
        "rotary embedding of (..., S, D) with cos, sin of (S, D/2): halves (NeoX) or even/odd pairs (interleaved)"),
    fused("qk_rope", Exact(4), FLOAT, &[attr("interleaved", K::Bool, D::Bool(false))], qk_rope, qk_rope_d,
        "rope applied to q and k with shared cos, sin; outputs q', k'"),
    fused("matmul_bias_act", Between(2, 3), FLOAT, &[attr("activation", K::Str, D::Str("none"))], matmul_bias_act,
        matmul_bias_act_d, "act(a @ b + bias): the matmul epilogue"),
    // The output may take over the residual (a transformer's residual stream).
    with_in_place(fused("matmul_residual", Between(3, 4), FLOAT, &[attr("activation", K::Str, D::Str("none"))], matmul_residual,
        matmul_residual_d, "act(a @ b + bias) + r, inputs (a, b, r, [bias]): a residual add folded into the matmul epilogue"),
        crate::op::InPlace::Operand(2)),
    fused("conv_act", Between(2, 3), FLOAT,
        &[attr("strides", K::Ints, D::Ints(&[])), attr("pads", K::Ints, D::Ints(&[])), attr("dilations", K::Ints, D::Ints(&[])),
          attr("groups", K::Int, D::Int(1)), attr("activation", K::Str, D::Str("none"))],
        conv_act, conv_act_d, "act(conv(x, w, [bias])): an activation applied as the convolution writes its rows"),
    fused("dequant_matmul", Exact(2), FLOAT, &[], dequant_matmul, dequant_matmul_d,
        "x (..., K) times the transpose of a quantized (N, K) weight"),
    fused("scaled_matmul", Exact(4), FLOAT, &[attr("block", K::Int, D::Int(32))], scaled_matmul, scaled_matmul_d,
        "MX block-scaled (a ⊙ sa) @ (b ⊙ sb)ᵀ with one scale per `block` elements of K"),
];
