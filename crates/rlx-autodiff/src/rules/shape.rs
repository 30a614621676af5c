//! Shape ops: all linear, so each VJP moves the cotangent back to where
//! the elements came from (zeros where they did not come from anywhere).

use super::{Jvp, NodeCx, Rule};
use crate::emit::*;
use crate::error::{AdError, Result};
use rlx_ir::{Attrs, ValueId};

type Out = Result<Vec<Option<ValueId>>>;

fn in_dims(b: &B, n: &NodeCx, k: usize) -> Vec<usize> {
    b.shape(n.inputs[k]).dims().to_vec()
}
fn norm(a: i64, rank: usize) -> usize {
    if a < 0 {
        (a + rank as i64) as usize
    } else {
        a as usize
    }
}

fn vjp_reshape(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let d = in_dims(b, n, 0);
    Ok(vec![Some(reshape(b, g, &d)?)])
}
fn vjp_permute(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let rank = b.shape(g).rank();
    let perm: Vec<usize> = n
        .attrs
        .ints("perm")?
        .iter()
        .map(|&p| norm(p, rank))
        .collect();
    Ok(vec![Some(permute(b, g, &inverse_perm(&perm))?)])
}
fn vjp_broadcast(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let d = in_dims(b, n, 0);
    Ok(vec![Some(unbroadcast(b, g, &d)?)])
}

/// Zero-pad `g` on one axis.
fn pad_axis(b: &mut B, g: ValueId, axis: usize, before: usize, after: usize) -> Result<ValueId> {
    if before == 0 && after == 0 {
        return Ok(g);
    }
    let rank = b.shape(g).rank();
    let mut pads = vec![0i64; 2 * rank];
    pads[axis] = before as i64;
    pads[rank + axis] = after as i64;
    Ok(b.op1("pad", &[g], Attrs::new().with("pads", pads))?)
}
fn narrow(b: &mut B, g: ValueId, axis: usize, start: usize, len: usize) -> Result<ValueId> {
    if start == 0 && b.shape(g).dims()[axis] == len {
        return Ok(g);
    }
    Ok(b.op1(
        "narrow",
        &[g],
        Attrs::new()
            .with("axis", axis as i64)
            .with("start", start as i64)
            .with("len", len as i64),
    )?)
}

fn vjp_narrow(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let d = in_dims(b, n, 0);
    let ax = norm(n.attrs.int("axis")?, d.len());
    let start = n.attrs.int("start")? as usize;
    let len = n.attrs.int("len")? as usize;
    Ok(vec![Some(pad_axis(b, g, ax, start, d[ax] - start - len)?)])
}

/// ONNX Slice bounds of one axis: (first index, step, count).
fn slice_axis(d: usize, start: i64, end: i64, step: i64) -> (i64, i64, usize) {
    let d = d as i64;
    let fix = |v: i64| if v < 0 { v + d } else { v };
    if step > 0 {
        let s = fix(start).clamp(0, d);
        let e = fix(end).clamp(0, d);
        let c = if e > s { (e - s + step - 1) / step } else { 0 };
        (s, step, c as usize)
    } else {
        let s = fix(start).clamp(0, d - 1);
        let e = fix(end).clamp(-1, d - 1);
        let c = if s > e {
            (s - e + (-step) - 1) / (-step)
        } else {
            0
        };
        (s, step, c as usize)
    }
}

fn vjp_slice(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(mut g) = g[0] else {
        return Ok(vec![None]);
    };
    let d = in_dims(b, n, 0);
    let rank = d.len();
    let starts = n.attrs.ints("starts")?.to_vec();
    let ends = n.attrs.ints("ends")?.to_vec();
    let axes: Vec<usize> = match n.attrs.ints("axes")? {
        [] => (0..starts.len()).collect(),
        a => a.iter().map(|&a| norm(a, rank)).collect(),
    };
    let steps = match n.attrs.ints("steps")? {
        [] => vec![1; starts.len()],
        s => s.to_vec(),
    };
    for (i, &ax) in axes.iter().enumerate() {
        let (s, step, c) = slice_axis(d[ax], starts[i], ends[i], steps[i]);
        if c == 0 {
            let mut ty = b.ty(n.inputs[0]).clone();
            ty.shape = rlx_ir::Shape(d.clone());
            return Ok(vec![Some(zeros(b, &ty)?)]);
        }
        // Put the elements in ascending position order.
        let (lo, st) = if step < 0 {
            g = b.op1("flip", &[g], Attrs::new().with("axes", vec![ax as i64]))?;
            ((s + (c as i64 - 1) * step) as usize, (-step) as usize)
        } else {
            (s as usize, step as usize)
        };
        if st > 1 {
            // Interleave st-1 zeros after each element, then trim.
            let mut gd = b.shape(g).dims().to_vec();
            let mut split = gd.clone();
            split.insert(ax + 1, 1);
            let r = reshape(b, g, &split)?;
            let r = pad_axis(b, r, ax + 1, 0, st - 1)?;
            gd[ax] = c * st;
            let r = reshape(b, r, &gd)?;
            g = narrow(b, r, ax, 0, (c - 1) * st + 1)?;
        }
        let span = (c - 1) * st + 1;
        g = pad_axis(b, g, ax, lo, d[ax] - lo - span)?;
    }
    Ok(vec![Some(g)])
}

fn vjp_concat(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else {
        return Ok(vec![None; n.inputs.len()]);
    };
    let rank = b.shape(g).rank();
    let ax = norm(n.attrs.int("axis")?, rank);
    let mut start = 0;
    let mut out = vec![];
    for (k, &x) in n.inputs.iter().enumerate() {
        let len = b.shape(x).dims()[ax];
        out.push(if n.wants[k] {
            Some(narrow(b, g, ax, start, len)?)
        } else {
            None
        });
        start += len;
    }
    Ok(out)
}
fn vjp_split(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let rank = b.shape(n.inputs[0]).rank();
    let ax = norm(n.attrs.int("axis")?, rank);
    let mut parts = vec![];
    for (k, &o) in n.outputs.iter().enumerate() {
        parts.push(match g[k] {
            Some(g) => g,
            None => zeros_like(b, o)?,
        });
    }
    Ok(vec![Some(b.op1(
        "concat",
        &parts,
        Attrs::new().with("axis", ax as i64),
    )?)])
}
fn vjp_pad(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(mut g) = g[0] else {
        return Ok(vec![None]);
    };
    let mode = n.attrs.str("mode")?;
    if mode != "constant" {
        return Err(AdError::Unsupported {
            op: "pad".into(),
            msg: format!("no gradient rule for mode `{mode}` yet (only `constant`)"),
        });
    }
    let d = in_dims(b, n, 0);
    let pads = n.attrs.ints("pads")?;
    for (ax, &len) in d.iter().enumerate() {
        g = narrow(b, g, ax, pads[ax] as usize, len)?;
    }
    Ok(vec![Some(g)])
}
fn vjp_flip(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    Ok(vec![Some(b.op1("flip", &[g], n.attrs.clone())?)])
}
fn vjp_roll(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let shifts: Vec<i64> = n.attrs.ints("shifts")?.iter().map(|s| -s).collect();
    let a = n.attrs.clone().with("shifts", shifts);
    Ok(vec![Some(b.op1("roll", &[g], a)?)])
}
/// Tile repeats the whole tensor: sum the copies.
fn vjp_tile(b: &mut B, n: &NodeCx, g: &[Option<ValueId>]) -> Out {
    let Some(g) = g[0] else { return Ok(vec![None]) };
    let d = in_dims(b, n, 0);
    let reps = n.attrs.ints("repeats")?;
    let mut split = vec![];
    for (i, &di) in d.iter().enumerate() {
        split.push(reps[i] as usize);
        split.push(di);
    }
    let r = reshape(b, g, &split)?;
    let axes: Vec<usize> = (0..d.len()).map(|i| 2 * i).collect();
    let s = sum(b, r, &axes, false)?;
    Ok(vec![Some(reshape(b, s, &d)?)])
}

pub static RULES: &[(&str, Rule)] = &[
    (
        "reshape",
        Rule::General {
            vjp: vjp_reshape,
            jvp: Jvp::Linear,
        },
    ),
    (
        "squeeze",
        Rule::General {
            vjp: vjp_reshape,
            jvp: Jvp::Linear,
        },
    ),
    (
        "unsqueeze",
        Rule::General {
            vjp: vjp_reshape,
            jvp: Jvp::Linear,
        },
    ),
    (
        "permute",
        Rule::General {
            vjp: vjp_permute,
            jvp: Jvp::Linear,
        },
    ),
    (
        "broadcast",
        Rule::General {
            vjp: vjp_broadcast,
            jvp: Jvp::Linear,
        },
    ),
    (
        "narrow",
        Rule::General {
            vjp: vjp_narrow,
            jvp: Jvp::Linear,
        },
    ),
    (
        "slice",
        Rule::General {
            vjp: vjp_slice,
            jvp: Jvp::Linear,
        },
    ),
    (
        "concat",
        Rule::General {
            vjp: vjp_concat,
            jvp: Jvp::Linear,
        },
    ),
    (
        "split",
        Rule::General {
            vjp: vjp_split,
            jvp: Jvp::Linear,
        },
    ),
    (
        "pad",
        Rule::General {
            vjp: vjp_pad,
            jvp: Jvp::Transpose,
        },
    ),
    (
        "flip",
        Rule::General {
            vjp: vjp_flip,
            jvp: Jvp::Linear,
        },
    ),
    (
        "roll",
        Rule::General {
            vjp: vjp_roll,
            jvp: Jvp::Linear,
        },
    ),
    (
        "tile",
        Rule::General {
            vjp: vjp_tile,
            jvp: Jvp::Linear,
        },
    ),
];
