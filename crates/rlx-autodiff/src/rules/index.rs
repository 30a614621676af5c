//! Gathers, scatters, and the value outputs of sort/topk.

use super::{Jvp, NodeCx, Rule};
use crate::emit::*;
use crate::error::{AdError, Result};
use rlx_ir::{Attrs, ValueId};

type Out = Result<Vec<Option<ValueId>>>;

fn norm(a: i64, rank: usize) -> usize {
    if a < 0 {
        (a + rank as i64) as usize
    } else {
        a as usize
    }
}

/// dx of `take(x, idx, axis)`: one_hot(idx) contracted with G over the
/// index axes — a dense, differentiable transpose of the gather.
fn take_grad(b: &mut B, x: ValueId, idx: ValueId, g: ValueId, axis: usize) -> Result<ValueId> {
    let xd = b.shape(x).dims().to_vec();
    let depth = xd[axis];
    // NumPy allows negative indices; one_hot would drop them.
    let zero = b.scalar(0.0, b.dtype(idx))?;
    let neg = b.binary("lt", idx, zero)?;
    let dep = b.scalar(depth as f64, b.dtype(idx))?;
    let wrapped = b.binary("add", idx, dep)?;
    let idx = b.op1("where", &[neg, wrapped, idx], Attrs::new())?;
    let dt = b.dtype(x);
    let oh = b.op1(
        "one_hot",
        &[idx],
        Attrs::new()
            .with("depth", depth as i64)
            .with("axis", -1i64)
            .with("dtype", dt),
    )?;
    let ri = b.shape(idx).rank();
    let g_idx: Vec<i64> = (axis..axis + ri).map(|a| a as i64).collect();
    let oh_idx: Vec<i64> = (0..ri).map(|a| a as i64).collect();
    let r = b.op1(
        "dot_general",
        &[g, oh],
        Attrs::new()
            .with("lhs_batch", Vec::<i64>::new())
            .with("rhs_batch", Vec::<i64>::new())
            .with("lhs_contract", g_idx)
            .with("rhs_contract", oh_idx),
    )?;
    // r is [x axes before, x axes after, depth]: move depth to `axis`.
    let rank = xd.len();
    let mut src: Vec<usize> = (0..rank).filter(|&a| a != axis).collect();
    src.push(axis);
    permute(b, r, &inverse_perm(&src))
}

fn vjp_gather(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let x = n.inputs[0];
    let axis = norm(n.attrs.int("axis")?, b.shape(x).rank());
    Ok(vec![Some(take_grad(b, x, n.inputs[1], g, axis)?), None])
}
fn vjp_embedding(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    Ok(vec![
        Some(take_grad(b, n.inputs[0], n.inputs[1], g, 0)?),
        None,
    ])
}

fn scatter_add(b: &mut B, base: ValueId, idx: ValueId, upd: ValueId, axis: i64) -> Result<ValueId> {
    Ok(b.op1(
        "scatter_add",
        &[base, idx, upd],
        Attrs::new().with("axis", axis),
    )?)
}
fn gather_elements(b: &mut B, x: ValueId, idx: ValueId, axis: i64) -> Result<ValueId> {
    Ok(b.op1(
        "gather_elements",
        &[x, idx],
        Attrs::new().with("axis", axis),
    )?)
}

fn vjp_gather_elements(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    let z = zeros_like(b, n.inputs[0])?;
    let axis = n.attrs.int("axis")?;
    Ok(vec![Some(scatter_add(b, z, n.inputs[1], g, axis)?), None])
}
/// Last write wins: with duplicate indices every duplicate update gets the
/// gradient of the written element (exact when indices are distinct).
fn vjp_scatter(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None; 3]);
    };
    let (idx, upd) = (n.inputs[1], n.inputs[2]);
    let axis = n.attrs.int("axis")?;
    let gx = if n.wants[0] {
        let z = zeros_like(b, upd)?;
        Some(b.op1("scatter", &[g, idx, z], n.attrs.clone())?)
    } else {
        None
    };
    let gu = if n.wants[2] {
        Some(gather_elements(b, g, idx, axis)?)
    } else {
        None
    };
    Ok(vec![gx, None, gu])
}
fn vjp_scatter_add(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None; 3]);
    };
    let axis = n.attrs.int("axis")?;
    let gu = if n.wants[2] {
        Some(gather_elements(b, g, n.inputs[1], axis)?)
    } else {
        None
    };
    Ok(vec![Some(g), None, gu])
}
fn vjp_gather_nd(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None, None]);
    };
    if n.attrs.int("batch_dims")? != 0 {
        return Err(AdError::Unsupported {
            op: n.op.into(),
            msg: "gradient only for batch_dims = 0 so far".into(),
        });
    }
    let z = zeros_like(b, n.inputs[0])?;
    let gx = b.op1(
        "scatter_nd",
        &[z, n.inputs[1], g],
        Attrs::new().with("reduction", "add"),
    )?;
    Ok(vec![Some(gx), None])
}
fn vjp_scatter_nd(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None; 3]);
    };
    let (idx, upd) = (n.inputs[1], n.inputs[2]);
    let red = n.attrs.str("reduction")?;
    let gx = match red {
        "none" => {
            let z = zeros_like(b, upd)?;
            b.op1(
                "scatter_nd",
                &[g, idx, z],
                Attrs::new().with("reduction", "none"),
            )?
        }
        "add" => g,
        r => {
            return Err(AdError::Unsupported {
                op: n.op.into(),
                msg: format!("no gradient for reduction `{r}` yet"),
            })
        }
    };
    let gu = b.op1("gather_nd", &[g, idx], Attrs::new())?;
    Ok(vec![Some(gx), None, Some(gu)])
}
/// sort/topk values: route G back to where each value came from.
fn vjp_sorted(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let axis = n.attrs.int("axis")?;
    let z = zeros_like(b, n.inputs[0])?;
    // sort returns values only: its permutation is argsort's.
    let idx = match n.outputs.get(1) {
        Some(&i) => i,
        None => b.op1("argsort", &[n.inputs[0]], n.attrs.clone())?,
    };
    Ok(vec![Some(scatter_add(b, z, idx, g, axis)?)])
}

pub static RULES: &[(&str, Rule)] = &[
    (
        "gather",
        Rule::General {
            vjp: vjp_gather,
            jvp: Jvp::Linear,
        },
    ),
    (
        "index_select",
        Rule::General {
            vjp: vjp_gather,
            jvp: Jvp::Linear,
        },
    ),
    (
        "embedding",
        Rule::General {
            vjp: vjp_embedding,
            jvp: Jvp::Linear,
        },
    ),
    (
        "gather_elements",
        Rule::General {
            vjp: vjp_gather_elements,
            jvp: Jvp::Linear,
        },
    ),
    (
        "gather_nd",
        Rule::General {
            vjp: vjp_gather_nd,
            jvp: Jvp::Linear,
        },
    ),
    (
        "scatter",
        Rule::General {
            vjp: vjp_scatter,
            jvp: Jvp::Linear,
        },
    ),
    (
        "scatter_add",
        Rule::General {
            vjp: vjp_scatter_add,
            jvp: Jvp::Linear,
        },
    ),
    (
        "scatter_nd",
        Rule::General {
            vjp: vjp_scatter_nd,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "sort",
        Rule::General {
            vjp: vjp_sorted,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "topk",
        Rule::General {
            vjp: vjp_sorted,
            jvp: Jvp::Transpose,
        },
    ),
];
