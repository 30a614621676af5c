//! `vmap`: map a graph over an axis of some of its inputs.
//!
//! Mapped inputs get their mapped axis moved to the front; values that
//! depend on them are "batched" (batch axis 0). Each node with a batched
//! input is rewritten by a batching rule where one exists — elementwise
//! ops and broadcasting binaries (operands aligned to the output rank),
//! reductions and axis-taking ops (axes shifted by one), reshape, permute,
//! broadcast, matmul — and otherwise unrolled for that node alone: one
//! copy per index on slices, stacked again. Either way the result is exact
//! for every op, and composes with the other transforms (`vmap(grad(f))`,
//! `grad(vmap(f))`, `jvp(vmap(f))`).

use crate::emit::{broadcast_to, permute, reshape, B};
use crate::error::{AdError, Result};
use rlx_ir::{Attrs, Category, Graph, GraphBuilder, Node, TensorType, ValueId};

/// Map `g` over axis `in_axes[i]` of each input `i` (`None`: the input is
/// shared by every index), `size` indices. Every output gets the mapped
/// axis at `out_axis` (clamped to its rank). The batched graph's inputs
/// have the mapped axis inserted where `in_axes` says.
pub fn vmap(g: &Graph, in_axes: &[Option<usize>], out_axis: usize, size: usize) -> Result<Graph> {
    g.verify()?;
    if in_axes.len() != g.inputs.len() {
        return Err(AdError::Arg(format!(
            "in_axes has {} entries for {} inputs",
            in_axes.len(),
            g.inputs.len()
        )));
    }
    if size == 0 {
        return Err(AdError::Arg("cannot vmap over an empty axis".into()));
    }
    let mut b = GraphBuilder::new(format!("vmap_{}", g.name));
    // (value in b, batched at axis 0?)
    let mut map: Vec<(ValueId, bool)> = vec![(ValueId(u32::MAX), false); g.values.len()];
    for (i, &v) in g.inputs.iter().enumerate() {
        let mut ty: TensorType = g.ty(v).clone();
        let name = g.values[v.index()]
            .name
            .clone()
            .unwrap_or_else(|| format!("in{i}"));
        match in_axes[i] {
            None => map[v.index()] = (b.input(name, ty), false),
            Some(ax) => {
                if ax > ty.rank() {
                    return Err(AdError::Arg(format!(
                        "in_axes[{i}] = {ax} is past the rank {} of input {i}",
                        ty.rank()
                    )));
                }
                ty.shape.0.insert(ax, size);
                let x = b.input(name, ty.clone());
                let mut perm: Vec<usize> = vec![ax];
                perm.extend((0..ty.rank()).filter(|&a| a != ax));
                map[v.index()] = (permute(&mut b, x, &perm)?, true);
            }
        }
    }
    for n in &g.nodes {
        let ins: Vec<(ValueId, bool)> = n.inputs.iter().map(|v| map[v.index()]).collect();
        let outs: Vec<(ValueId, bool)> = if !ins.iter().any(|i| i.1) {
            b.push(
                n.op,
                &ins.iter().map(|i| i.0).collect::<Vec<_>>(),
                n.attrs.clone(),
            )?
            .into_iter()
            .map(|v| (v, false))
            .collect()
        } else {
            match batched(&mut b, g, n, &ins, size)? {
                Some(o) => o.into_iter().map(|v| (v, true)).collect(),
                None => unrolled(&mut b, g, n, &ins, size)?,
            }
        };
        for (o, v) in n.outputs.iter().zip(outs) {
            map[o.index()] = v;
        }
    }
    let mut outs = vec![];
    for &o in &g.outputs {
        let (v, bat) = map[o.index()];
        let d = g.ty(o).dims().to_vec();
        let mut full = vec![size];
        full.extend(&d);
        let v = if bat {
            v
        } else {
            let r = reshape(&mut b, v, &[vec![1], d.clone()].concat())?;
            broadcast_to(&mut b, r, &full)?
        };
        let at = out_axis.min(d.len());
        let mut perm: Vec<usize> = (1..=d.len()).collect();
        perm.insert(at, 0);
        outs.push(permute(&mut b, v, &perm)?);
    }
    Ok(b.finish(&outs)?)
}

/// A batched operand with its unbatched dims padded by ones to `rank`
/// (so NumPy broadcasting lines it up with the other operands).
fn align(
    b: &mut B,
    g: &Graph,
    n: &Node,
    k: usize,
    v: (ValueId, bool),
    rank: usize,
) -> Result<ValueId> {
    if !v.1 {
        return Ok(v.0);
    }
    let d = g.ty(n.inputs[k]).dims();
    let mut s = vec![b.shape(v.0).dims()[0]];
    s.extend(std::iter::repeat_n(1, rank - d.len()));
    s.extend(d);
    reshape(b, v.0, &s)
}

fn shift(a: i64, rank: usize) -> i64 {
    (if a < 0 { a + rank as i64 } else { a }) + 1
}

/// The batched node, or `None` when there is no batching rule for it.
fn batched(
    b: &mut B,
    g: &Graph,
    n: &Node,
    ins: &[(ValueId, bool)],
    size: usize,
) -> Result<Option<Vec<ValueId>>> {
    let out_rank = g.ty(n.outputs[0]).rank();
    let in_rank = g.ty(n.inputs[0]).rank();
    let name = n.op.name();
    let cat = n.op.category;
    let mut attrs = n.attrs.clone();
    let vals: Vec<ValueId> = match (cat, name) {
        (Category::Unary, _) | (_, "cast" | "identity" | "stop_gradient") => vec![ins[0].0],
        (Category::Binary | Category::Ternary, _) => {
            let mut v = vec![];
            for (k, &i) in ins.iter().enumerate() {
                v.push(align(b, g, n, k, i, out_rank)?);
            }
            v
        }
        _ => match name {
            "matmul" => {
                let (ra, rb) = (g.ty(n.inputs[0]).rank(), g.ty(n.inputs[1]).rank());
                if ra < 2 || rb < 2 {
                    return Ok(None);
                }
                let r = ra.max(rb);
                vec![align(b, g, n, 0, ins[0], r)?, align(b, g, n, 1, ins[1], r)?]
            }
            "reduce_sum" | "reduce_mean" | "reduce_max" | "reduce_min" | "reduce_prod"
            | "reduce_logsumexp" | "reduce_variance" => {
                let axes = n.attrs.ints("axes")?;
                let new: Vec<i64> = if axes.is_empty() {
                    (1..=in_rank as i64).collect()
                } else {
                    axes.iter().map(|&a| shift(a, in_rank)).collect()
                };
                attrs.set("axes", new);
                vec![ins[0].0]
            }
            "softmax" | "log_softmax" | "cumsum" | "cumprod" | "argmax" | "argmin" => {
                attrs.set("axis", shift(n.attrs.int("axis")?, in_rank));
                vec![ins[0].0]
            }
            "flip" | "unsqueeze" => {
                let r = if name == "unsqueeze" {
                    out_rank
                } else {
                    in_rank
                };
                let a: Vec<i64> = n.attrs.ints("axes")?.iter().map(|&a| shift(a, r)).collect();
                attrs.set("axes", a);
                vec![ins[0].0]
            }
            "reshape" | "broadcast" => {
                let mut s = vec![size as i64];
                s.extend(g.ty(n.outputs[0]).dims().iter().map(|&d| d as i64));
                attrs.set("shape", s);
                vec![align(
                    b,
                    g,
                    n,
                    0,
                    ins[0],
                    if name == "broadcast" {
                        out_rank
                    } else {
                        in_rank
                    },
                )?]
            }
            "squeeze" => {
                // Reshape to the known output shape instead.
                let mut s = vec![size];
                s.extend(g.ty(n.outputs[0]).dims());
                return Ok(Some(vec![reshape(b, ins[0].0, &s)?]));
            }
            "permute" => {
                let mut p = vec![0i64];
                p.extend(n.attrs.ints("perm")?.iter().map(|&a| shift(a, in_rank)));
                attrs.set("perm", p);
                vec![ins[0].0]
            }
            _ => return Ok(None),
        },
    };
    Ok(Some(b.push(n.op, &vals, attrs)?))
}

/// One copy of the node per index on slices of the batched inputs, stacked.
fn unrolled(
    b: &mut B,
    g: &Graph,
    n: &Node,
    ins: &[(ValueId, bool)],
    size: usize,
) -> Result<Vec<(ValueId, bool)>> {
    let mut per_out: Vec<Vec<ValueId>> = vec![vec![]; n.outputs.len()];
    for k in 0..size {
        let mut args = vec![];
        for (i, &(v, bat)) in ins.iter().enumerate() {
            args.push(if bat {
                let s = b.op1(
                    "narrow",
                    &[v],
                    Attrs::new()
                        .with("axis", 0i64)
                        .with("start", k as i64)
                        .with("len", 1i64),
                )?;
                reshape(b, s, g.ty(n.inputs[i]).dims())?
            } else {
                v
            });
        }
        let outs = b.push(n.op, &args, n.attrs.clone())?;
        for (o, y) in outs.into_iter().enumerate() {
            let mut d = vec![1];
            d.extend(b.shape(y).dims());
            per_out[o].push(reshape(b, y, &d)?);
        }
    }
    per_out
        .into_iter()
        .map(|parts| {
            Ok((
                if parts.len() == 1 {
                    parts[0]
                } else {
                    b.op1("concat", &parts, Attrs::new().with("axis", 0i64))?
                },
                true,
            ))
        })
        .collect()
}
