//! Reductions and running (cumulative) ops.

use super::{Jvp, NodeCx, Rule};
use crate::emit::*;
use crate::error::Result;
use rlx_ir::{Attrs, ValueId};

type Out = Result<Vec<Option<ValueId>>>;

/// The reduced axes of a reduce node (sorted, non-negative).
pub fn reduced_axes(rank: usize, axes: &[i64]) -> Vec<usize> {
    if axes.is_empty() {
        return (0..rank).collect();
    }
    let mut v: Vec<usize> = axes
        .iter()
        .map(|&a| {
            if a < 0 {
                (a + rank as i64) as usize
            } else {
                a as usize
            }
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Bring a reduced value (output or cotangent) back to the input's shape.
pub fn expand_back(b: &mut B, v: ValueId, x: ValueId, axes: &[usize]) -> Result<ValueId> {
    let xd = b.shape(x).dims().to_vec();
    let kd: Vec<usize> = xd
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    let r = reshape(b, v, &kd)?;
    broadcast_to(b, r, &xd)
}

fn axes_of(b: &B, n: &NodeCx) -> Result<Vec<usize>> {
    let rank = b.shape(n.inputs[0]).rank();
    Ok(reduced_axes(rank, n.attrs.ints("axes")?))
}

fn count(b: &B, x: ValueId, axes: &[usize]) -> f64 {
    let d = b.shape(x).dims();
    axes.iter().map(|&a| d[a]).product::<usize>() as f64
}

fn vjp_sum(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let ax = axes_of(b, n)?;
    Ok(vec![Some(expand_back(b, g, n.inputs[0], &ax)?)])
}
fn vjp_mean(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let ax = axes_of(b, n)?;
    let c = count(b, n.inputs[0], &ax);
    let g = scale(b, g, 1.0 / c)?;
    Ok(vec![Some(expand_back(b, g, n.inputs[0], &ax)?)])
}
/// d prod / dx_i = prod / x_i (inputs with zeros are not handled: they give NaN).
fn vjp_prod(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let x = n.inputs[0];
    let ax = axes_of(b, n)?;
    let gy = mul(b, g, n.outputs[0])?;
    let gy = expand_back(b, gy, x, &ax)?;
    Ok(vec![Some(div(b, gy, x)?)])
}
/// The gradient is shared equally by the elements that attain the extremum.
fn vjp_extremum(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let x = n.inputs[0];
    let ax = axes_of(b, n)?;
    let y = expand_back(b, n.outputs[0], x, &ax)?;
    let hit = b.binary("eq", x, y)?;
    let dt = b.dtype(x);
    let m = b.op1("cast", &[hit], Attrs::new().with("dtype", dt))?;
    let cnt = sum(b, m, &ax, true)?;
    let m = div(b, m, cnt)?;
    let m = stop(b, m)?;
    let g = expand_back(b, g, x, &ax)?;
    Ok(vec![Some(mul(b, g, m)?)])
}
fn vjp_logsumexp(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let x = n.inputs[0];
    let ax = axes_of(b, n)?;
    let y = expand_back(b, n.outputs[0], x, &ax)?;
    let d = sub(b, x, y)?;
    let p = un(b, "exp", d)?;
    let g = expand_back(b, g, x, &ax)?;
    Ok(vec![Some(mul(b, g, p)?)])
}
/// d var / dx = 2 (x - mean) / (N - correction)
fn vjp_variance(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let x = n.inputs[0];
    let ax = axes_of(b, n)?;
    let c = count(b, x, &ax) - n.attrs.int("correction")? as f64;
    let ai: Vec<i64> = ax.iter().map(|&a| a as i64).collect();
    let mean = b.reduce_keep("reduce_mean", x, &ai)?;
    let d = sub(b, x, mean)?;
    let d = scale(b, d, 2.0 / c)?;
    let g = expand_back(b, g, x, &ax)?;
    Ok(vec![Some(mul(b, g, d)?)])
}

/// The transpose of a running sum is the running sum in the other direction.
fn vjp_cumsum(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let mut a = n.attrs.clone();
    let rev = n.attrs.bool("reverse")?;
    a.set("reverse", !rev);
    Ok(vec![Some(b.op1("cumsum", &[g], a)?)])
}
/// y_j = prod_{i<=j} x_i: dL/dx_i = sum_{j>=i} g_j y_j / x_i (no zeros in x).
fn vjp_cumprod(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let gy = mul(b, g, n.outputs[0])?;
    let mut a = n.attrs.clone();
    let rev = n.attrs.bool("reverse")?;
    a.set("reverse", !rev);
    let s = b.op1("cumsum", &[gy], a)?;
    Ok(vec![Some(div(b, s, n.inputs[0])?)])
}

pub static RULES: &[(&str, Rule)] = &[
    (
        "reduce_sum",
        Rule::General {
            vjp: vjp_sum,
            jvp: Jvp::Linear,
        },
    ),
    (
        "reduce_mean",
        Rule::General {
            vjp: vjp_mean,
            jvp: Jvp::Linear,
        },
    ),
    (
        "reduce_prod",
        Rule::General {
            vjp: vjp_prod,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "reduce_max",
        Rule::General {
            vjp: vjp_extremum,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "reduce_min",
        Rule::General {
            vjp: vjp_extremum,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "reduce_logsumexp",
        Rule::General {
            vjp: vjp_logsumexp,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "reduce_variance",
        Rule::General {
            vjp: vjp_variance,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "cumsum",
        Rule::General {
            vjp: vjp_cumsum,
            jvp: Jvp::Linear,
        },
    ),
    (
        "cumprod",
        Rule::General {
            vjp: vjp_cumprod,
            jvp: Jvp::Transpose,
        },
    ),
];
