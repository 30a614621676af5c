//! `vmap`: map a graph over an axis of some of its inputs.
//!
//! This version unrolls: the batched graph holds one copy of the body per
//! index, each fed a slice of the mapped inputs, and stacks the results
//! along the output axis. That is exact for every op (no batching rules to
//! get wrong) and composes with the other transforms (`vmap(grad(f))`,
//! `grad(vmap(f))`, `jvp(vmap(f))`), at the cost of a graph that grows with
//! the mapped size. Per-op batching rules are future work.

use crate::emit::{inline, reshape};
use crate::error::{AdError, Result};
use rlx_ir::{Attrs, Graph, GraphBuilder, TensorType, ValueId};

/// Map `g` over axis `in_axes[i]` of each input `i` (`None`: the input is
/// shared by every index). Every output gets the mapped axis at `out_axis`
/// (clamped to its rank). The batched graph's inputs have the mapped axis
/// inserted where `in_axes` says.
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
    let mut ins = vec![];
    for (i, &v) in g.inputs.iter().enumerate() {
        let mut ty: TensorType = g.ty(v).clone();
        if let Some(ax) = in_axes[i] {
            if ax > ty.rank() {
                return Err(AdError::Arg(format!(
                    "in_axes[{i}] = {ax} is past the rank {} of input {i}",
                    ty.rank()
                )));
            }
            ty.shape.0.insert(ax, size);
        }
        let name = g.values[v.index()]
            .name
            .clone()
            .unwrap_or_else(|| format!("in{i}"));
        ins.push(b.input(name, ty));
    }
    let mut per_out: Vec<Vec<ValueId>> = vec![vec![]; g.outputs.len()];
    for k in 0..size {
        let mut args = vec![];
        for (i, &v) in g.inputs.iter().enumerate() {
            args.push(match in_axes[i] {
                None => ins[i],
                Some(ax) => {
                    let s = b.op1(
                        "narrow",
                        &[ins[i]],
                        Attrs::new()
                            .with("axis", ax as i64)
                            .with("start", k as i64)
                            .with("len", 1i64),
                    )?;
                    let d = g.ty(v).dims().to_vec();
                    reshape(&mut b, s, &d)?
                }
            });
        }
        let map = inline(&mut b, g, &args)?;
        for (o, out) in g.outputs.iter().enumerate() {
            let y = map[out.index()];
            let mut d = b.shape(y).dims().to_vec();
            let at = out_axis.min(d.len());
            d.insert(at, 1);
            per_out[o].push(reshape(&mut b, y, &d)?);
        }
    }
    let mut outs = vec![];
    for (o, parts) in per_out.into_iter().enumerate() {
        let at = out_axis.min(g.ty(g.outputs[o]).rank());
        outs.push(if parts.len() == 1 {
            parts[0]
        } else {
            b.op1("concat", &parts, Attrs::new().with("axis", at as i64))?
        });
    }
    Ok(b.finish(&outs)?)
}
