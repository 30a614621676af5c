//! Elementwise ops: unary derivatives, binary ops with broadcasting,
//! `where`, `clamp`, `cast`, `identity`, `transfer`.

use super::{Jvp, NodeCx, Rule};
use crate::emit::*;
use crate::error::Result;
use rlx_ir::{Attrs, ValueId};
use std::f64::consts::{LN_2, PI};

type R = Result<ValueId>;

fn d_abs(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = un(b, "sign", x)?;
    stop(b, s)
}
fn d_neg(b: &mut B, x: ValueId, _: ValueId) -> R {
    let m = sc(b, -1.0, x)?;
    zeros_plus(b, x, m)
}
/// A constant broadcast to x's shape (so `g * c` keeps g's shape).
fn zeros_plus(b: &mut B, x: ValueId, c: ValueId) -> R {
    let dims = b.shape(x).dims().to_vec();
    broadcast_to(b, c, &dims)
}
fn d_square(b: &mut B, x: ValueId, _: ValueId) -> R {
    scale(b, x, 2.0)
}
/// 1 where x > 0 else 0, read off the output as sign(relu(x)) (one
/// elementwise op instead of compare + cast); piecewise constant, so it is
/// cut from higher derivatives.
fn d_relu(b: &mut B, _: ValueId, y: ValueId) -> R {
    let s = un(b, "sign", y)?;
    stop(b, s)
}
fn d_exp(_: &mut B, _: ValueId, y: ValueId) -> R {
    Ok(y)
}
fn d_exp2(b: &mut B, _: ValueId, y: ValueId) -> R {
    scale(b, y, LN_2)
}
fn d_expm1(b: &mut B, _: ValueId, y: ValueId) -> R {
    let one = sc(b, 1.0, y)?;
    add(b, y, one)
}
fn d_log(b: &mut B, x: ValueId, _: ValueId) -> R {
    un(b, "reciprocal", x)
}
fn d_log2(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = scale(b, x, LN_2)?;
    un(b, "reciprocal", s)
}
fn d_log1p(b: &mut B, x: ValueId, _: ValueId) -> R {
    let one = sc(b, 1.0, x)?;
    let s = add(b, x, one)?;
    un(b, "reciprocal", s)
}
fn d_sqrt(b: &mut B, _: ValueId, y: ValueId) -> R {
    let r = un(b, "reciprocal", y)?;
    scale(b, r, 0.5)
}
/// d x^-1/2 = -1/2 x^-3/2 = -y / (2x)
fn d_rsqrt(b: &mut B, x: ValueId, y: ValueId) -> R {
    let q = div(b, y, x)?;
    scale(b, q, -0.5)
}
fn d_reciprocal(b: &mut B, _: ValueId, y: ValueId) -> R {
    let s = mul(b, y, y)?;
    neg(b, s)
}
fn d_sin(b: &mut B, x: ValueId, _: ValueId) -> R {
    un(b, "cos", x)
}
fn d_cos(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = un(b, "sin", x)?;
    neg(b, s)
}
fn one_plus_sq(b: &mut B, v: ValueId, sign: f64) -> R {
    let s = mul(b, v, v)?;
    let s = if sign < 0.0 { neg(b, s)? } else { s };
    let one = sc(b, 1.0, v)?;
    add(b, one, s)
}
fn d_tan(b: &mut B, _: ValueId, y: ValueId) -> R {
    one_plus_sq(b, y, 1.0)
}
fn d_asin(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = one_plus_sq(b, x, -1.0)?;
    un(b, "rsqrt", s)
}
fn d_acos(b: &mut B, x: ValueId, y: ValueId) -> R {
    let d = d_asin(b, x, y)?;
    neg(b, d)
}
fn d_atan(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = one_plus_sq(b, x, 1.0)?;
    un(b, "reciprocal", s)
}
fn d_sinh(b: &mut B, x: ValueId, _: ValueId) -> R {
    un(b, "cosh", x)
}
fn d_cosh(b: &mut B, x: ValueId, _: ValueId) -> R {
    un(b, "sinh", x)
}
fn d_tanh(b: &mut B, _: ValueId, y: ValueId) -> R {
    one_plus_sq(b, y, -1.0)
}
fn d_asinh(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = one_plus_sq(b, x, 1.0)?;
    un(b, "rsqrt", s)
}
fn d_acosh(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = mul(b, x, x)?;
    let one = sc(b, 1.0, x)?;
    let s = sub(b, s, one)?;
    un(b, "rsqrt", s)
}
fn d_atanh(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = one_plus_sq(b, x, -1.0)?;
    un(b, "reciprocal", s)
}
fn d_erf(b: &mut B, x: ValueId, _: ValueId) -> R {
    let s = mul(b, x, x)?;
    let s = neg(b, s)?;
    let e = un(b, "exp", s)?;
    scale(b, e, 2.0 / PI.sqrt())
}
fn d_sigmoid(b: &mut B, _: ValueId, y: ValueId) -> R {
    let one = sc(b, 1.0, y)?;
    let c = sub(b, one, y)?;
    mul(b, y, c)
}
fn d_softplus(b: &mut B, x: ValueId, _: ValueId) -> R {
    un(b, "sigmoid", x)
}

fn vjp_pass(_: &mut B, _: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    Ok(vec![g[0]])
}

fn vjp_cast(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let dt = b.dtype(n.inputs[0]);
    Ok(vec![Some(b.op1(
        "cast",
        &[g],
        Attrs::new().with("dtype", dt),
    )?)])
}

/// 1 inside [min, max], 0 outside (open bounds are absent).
fn vjp_clamp(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let x = n.inputs[0];
    let mut m: Option<ValueId> = None;
    for (bound, cmp) in [("min", "ge"), ("max", "le")] {
        if let Some(v) = n.attrs.opt_float(bound) {
            let c = sc(b, v, x)?;
            let t = b.binary(cmp, x, c)?;
            m = Some(match m {
                Some(p) => b.binary("and", p, t)?,
                None => t,
            });
        }
    }
    Ok(vec![Some(match m {
        Some(m) => select(b, m, g)?,
        None => g,
    })])
}

fn shape_of(b: &B, v: ValueId) -> Vec<usize> {
    b.shape(v).dims().to_vec()
}

/// Unbroadcast each requested operand's cotangent.
fn finish(b: &mut B, n: &NodeCx, gs: Vec<Option<ValueId>>) -> Result<Vec<Option<ValueId>>> {
    gs.into_iter()
        .enumerate()
        .map(
            |(i, g)| match (g, n.wants.get(i).copied().unwrap_or(false)) {
                (Some(g), true) => {
                    let d = shape_of(b, n.inputs[i]);
                    Ok(Some(unbroadcast(b, g, &d)?))
                }
                _ => Ok(None),
            },
        )
        .collect()
}

fn vjp_add(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    finish(b, n, vec![g[0], g[0]])
}
fn vjp_sub(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let ng = if n.wants[1] { Some(neg(b, g)?) } else { None };
    finish(b, n, vec![Some(g), ng])
}
fn vjp_mul(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (n.inputs[0], n.inputs[1]);
    let gx = if n.wants[0] {
        Some(mul(b, g, y)?)
    } else {
        None
    };
    let gy = if n.wants[1] {
        Some(mul(b, g, x)?)
    } else {
        None
    };
    finish(b, n, vec![gx, gy])
}
fn vjp_div(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (n.inputs[0], n.inputs[1]);
    let gx = if n.wants[0] {
        Some(div(b, g, y)?)
    } else {
        None
    };
    let gy = if n.wants[1] {
        // d(x/y)/dy = -x/y²
        let q = div(b, x, y)?;
        let q = div(b, q, y)?;
        let t = mul(b, g, q)?;
        Some(neg(b, t)?)
    } else {
        None
    };
    finish(b, n, vec![gx, gy])
}
fn vjp_pow(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (n.inputs[0], n.inputs[1]);
    let gx = if n.wants[0] {
        // y * x^(y-1)
        let one = sc(b, 1.0, y)?;
        let ym1 = sub(b, y, one)?;
        let p = b.binary("pow", x, ym1)?;
        let d = mul(b, y, p)?;
        Some(mul(b, g, d)?)
    } else {
        None
    };
    let gy = if n.wants[1] {
        // x^y * ln x
        let p = b.binary("pow", x, y)?;
        let l = un(b, "log", x)?;
        let d = mul(b, p, l)?;
        Some(mul(b, g, d)?)
    } else {
        None
    };
    finish(b, n, vec![gx, gy])
}
/// The winner gets the gradient; ties go to the first operand.
fn vjp_minmax(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let (x, y) = (n.inputs[0], n.inputs[1]);
    let cmp = if n.op == "max" { "ge" } else { "le" };
    let first = b.binary(cmp, x, y)?;
    let dims = shape_of(b, n.outputs[0]);
    let gx = select(b, first, g)?;
    let gx = broadcast_to(b, gx, &dims)?;
    let second = b.unary("not", first)?;
    let gy = select(b, second, g)?;
    let gy = broadcast_to(b, gy, &dims)?;
    finish(b, n, vec![Some(gx), Some(gy)])
}
fn vjp_atan2(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let (y, x) = (n.inputs[0], n.inputs[1]);
    let yy = mul(b, y, y)?;
    let xx = mul(b, x, x)?;
    let r = add(b, yy, xx)?;
    let gr = div(b, g, r)?;
    let gy = mul(b, gr, x)?;
    let gx = mul(b, gr, y)?;
    let gx = neg(b, gx)?;
    finish(b, n, vec![Some(gy), Some(gx)])
}
fn vjp_where(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let Some(g) = g[0] else {
        return Ok(vec![None, None, None]);
    };
    let c = n.inputs[0];
    let ga = select(b, c, g)?;
    let nc = b.unary("not", c)?;
    let gb = select(b, nc, g)?;
    let dims = shape_of(b, n.outputs[0]);
    let ga = broadcast_to(b, ga, &dims)?;
    let gb = broadcast_to(b, gb, &dims)?;
    finish(b, n, vec![None, Some(ga), Some(gb)])
}

pub static RULES: &[(&str, Rule)] = &[
    ("abs", Rule::Unary(d_abs)),
    ("neg", Rule::Unary(d_neg)),
    ("square", Rule::Unary(d_square)),
    ("relu", Rule::Unary(d_relu)),
    ("exp", Rule::Unary(d_exp)),
    ("exp2", Rule::Unary(d_exp2)),
    ("expm1", Rule::Unary(d_expm1)),
    ("log", Rule::Unary(d_log)),
    ("log2", Rule::Unary(d_log2)),
    ("log1p", Rule::Unary(d_log1p)),
    ("sqrt", Rule::Unary(d_sqrt)),
    ("rsqrt", Rule::Unary(d_rsqrt)),
    ("reciprocal", Rule::Unary(d_reciprocal)),
    ("sin", Rule::Unary(d_sin)),
    ("cos", Rule::Unary(d_cos)),
    ("tan", Rule::Unary(d_tan)),
    ("asin", Rule::Unary(d_asin)),
    ("acos", Rule::Unary(d_acos)),
    ("atan", Rule::Unary(d_atan)),
    ("sinh", Rule::Unary(d_sinh)),
    ("cosh", Rule::Unary(d_cosh)),
    ("tanh", Rule::Unary(d_tanh)),
    ("asinh", Rule::Unary(d_asinh)),
    ("acosh", Rule::Unary(d_acosh)),
    ("atanh", Rule::Unary(d_atanh)),
    ("erf", Rule::Unary(d_erf)),
    ("sigmoid", Rule::Unary(d_sigmoid)),
    ("softplus", Rule::Unary(d_softplus)),
    (
        "identity",
        Rule::General {
            vjp: vjp_pass,
            jvp: Jvp::Linear,
        },
    ),
    (
        "transfer",
        Rule::General {
            vjp: vjp_pass,
            jvp: Jvp::Linear,
        },
    ),
    (
        "cast",
        Rule::General {
            vjp: vjp_cast,
            jvp: Jvp::Linear,
        },
    ),
    (
        "clamp",
        Rule::General {
            vjp: vjp_clamp,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "add",
        Rule::General {
            vjp: vjp_add,
            jvp: Jvp::Linear,
        },
    ),
    (
        "sub",
        Rule::General {
            vjp: vjp_sub,
            jvp: Jvp::Linear,
        },
    ),
    (
        "mul",
        Rule::General {
            vjp: vjp_mul,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "div",
        Rule::General {
            vjp: vjp_div,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "pow",
        Rule::General {
            vjp: vjp_pow,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "max",
        Rule::General {
            vjp: vjp_minmax,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "min",
        Rule::General {
            vjp: vjp_minmax,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "atan2",
        Rule::General {
            vjp: vjp_atan2,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "where",
        Rule::General {
            vjp: vjp_where,
            jvp: Jvp::Linear,
        },
    ),
];
