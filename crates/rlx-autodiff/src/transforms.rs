//! The user-facing transforms. Each takes a MIR graph and returns a new MIR
//! graph (inputs first as in the original), so the result goes through
//! `rlx::compile` — optimizer, fusion, dispatch, any backend — and can be
//! transformed again (grad of grad, jvp of grad, vmap of grad, ...).

use crate::core::{backprop, push_tangents};
use crate::emit::{self, inline, B};
use crate::error::{AdError, Result};
use crate::rules::{rule, Rule};
use rlx_ir::{decompose, Graph, GraphBuilder, HostTensor, Shape, ValueId};
use std::collections::{HashMap, HashSet};

/// Expand fused ops that have no direct rule into their primitives, and
/// rewrite ops whose rule is [`Rule::Expand`].
fn prepare(g: &Graph) -> Result<Graph> {
    g.verify()?;
    let g = decompose::expand_fused(g, &|d| rule(d.name).is_none())?;
    if !g
        .nodes
        .iter()
        .any(|n| matches!(rule(n.op.name()), Some(Rule::Expand(_))))
    {
        return Ok(g);
    }
    let mut b = GraphBuilder::new(g.name.clone());
    let mut map = vec![ValueId(u32::MAX); g.values.len()];
    for &v in &g.inputs {
        let val = &g.values[v.index()];
        map[v.index()] = b.input(
            val.name.clone().unwrap_or_else(|| format!("in{}", v.0)),
            val.ty.clone(),
        );
    }
    for n in &g.nodes {
        let ins: Vec<ValueId> = n.inputs.iter().map(|v| map[v.index()]).collect();
        b.set_origin(n.origin.clone());
        let outs = match rule(n.op.name()) {
            Some(Rule::Expand(f)) => f(&mut b, &ins, &n.attrs)?,
            _ => b.push(n.op, &ins, n.attrs.clone())?,
        };
        for (o, v) in n.outputs.iter().zip(outs) {
            map[o.index()] = v;
        }
    }
    let outs: Vec<ValueId> = g.outputs.iter().map(|v| map[v.index()]).collect();
    Ok(b.finish(&outs)?)
}

fn check_wrt(g: &Graph, wrt: &[usize]) -> Result<()> {
    for &i in wrt {
        let Some(&v) = g.inputs.get(i) else {
            return Err(AdError::Arg(format!(
                "input {i} does not exist (graph `{}` has {} inputs)",
                g.name,
                g.inputs.len()
            )));
        };
        if !g.ty(v).dtype.is_float() {
            return Err(AdError::Arg(format!(
                "input {i} is {}; only real floating-point inputs can be differentiated",
                g.ty(v)
            )));
        }
    }
    Ok(())
}

/// A builder holding a copy of `g`: its inputs, then the replayed nodes.
struct Replay {
    b: B,
    inputs: Vec<ValueId>,
    map: Vec<ValueId>,
    range: std::ops::Range<usize>,
}

fn replay(g: &Graph, name: &str) -> Result<Replay> {
    let mut b = GraphBuilder::new(name);
    let inputs: Vec<ValueId> = g
        .inputs
        .iter()
        .map(|&v| {
            let val = &g.values[v.index()];
            b.input(
                val.name.clone().unwrap_or_else(|| format!("in{}", v.0)),
                val.ty.clone(),
            )
        })
        .collect();
    let start = b.graph().nodes.len();
    let map = inline(&mut b, g, &inputs)?;
    let end = b.graph().nodes.len();
    Ok(Replay {
        b,
        inputs,
        map,
        range: start..end,
    })
}

fn zero_or(b: &mut B, g: Option<ValueId>, like: ValueId) -> Result<ValueId> {
    match g {
        Some(g) => Ok(g),
        None => emit::zeros_like(b, like),
    }
}

/// Reverse mode. The result takes the original inputs, then one cotangent
/// per output (same type), and returns the original outputs, then the
/// cotangent of each input in `wrt`.
pub fn vjp(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    check_wrt(g, wrt)?;
    let g = prepare(g)?;
    let Replay {
        mut b,
        inputs,
        map,
        range,
    } = replay(&g, &format!("vjp_{}", g.name))?;
    let outs: Vec<ValueId> = g.outputs.iter().map(|v| map[v.index()]).collect();
    let mut seeds = vec![];
    for (k, &o) in outs.iter().enumerate() {
        let ty = b.ty(o).clone();
        let c = b.input(format!("cot{k}"), ty);
        seeds.push((o, c));
    }
    let vars: HashSet<ValueId> = wrt.iter().map(|&i| inputs[i]).collect();
    let cot = backprop(&mut b, range, &vars, &seeds)?;
    let mut res = outs.clone();
    for &i in wrt {
        res.push(zero_or(&mut b, cot.get(&inputs[i]).copied(), inputs[i])?);
    }
    Ok(b.finish(&res)?)
}

fn grad_impl(g: &Graph, wrt: &[usize], keep_value: bool) -> Result<Graph> {
    check_wrt(g, wrt)?;
    if g.outputs.len() != 1 || !g.ty(g.outputs[0]).dtype.is_float() {
        return Err(AdError::Arg(format!(
            "grad needs exactly one floating-point output; graph `{}` has {}",
            g.name,
            g.outputs.len()
        )));
    }
    let g = prepare(g)?;
    let Replay {
        mut b,
        inputs,
        map,
        range,
    } = replay(&g, &format!("grad_{}", g.name))?;
    let out = map[g.outputs[0].index()];
    let ty = b.ty(out).clone();
    let one = b.constant(HostTensor::from_f64(ty.dtype, Shape::scalar(), vec![1.0])?)?;
    let seed = emit::broadcast_to(&mut b, one, ty.dims())?;
    let vars: HashSet<ValueId> = wrt.iter().map(|&i| inputs[i]).collect();
    let cot = backprop(&mut b, range, &vars, &[(out, seed)])?;
    let mut res = if keep_value { vec![out] } else { vec![] };
    for &i in wrt {
        res.push(zero_or(&mut b, cot.get(&inputs[i]).copied(), inputs[i])?);
    }
    Ok(b.finish(&res)?)
}

/// The gradient of the single output with respect to the inputs in `wrt`
/// (for a non-scalar output: the gradient of the sum of its elements).
/// The result has the same inputs and one output per `wrt` entry.
pub fn grad(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    grad_impl(g, wrt, false)
}

/// Like [`grad`], with the value first: outputs are `[value, grads...]`.
pub fn value_and_grad(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    grad_impl(g, wrt, true)
}

/// Forward mode. The result takes the original inputs, then one tangent
/// per input in `wrt`, and returns the original outputs, then the tangent
/// of each output.
pub fn jvp(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    check_wrt(g, wrt)?;
    let g = prepare(g)?;
    let Replay {
        mut b,
        inputs,
        map,
        range,
    } = replay(&g, &format!("jvp_{}", g.name))?;
    let mut seeds = HashMap::new();
    for &i in wrt {
        let ty = b.ty(inputs[i]).clone();
        let t = b.input(format!("tan{i}"), ty);
        seeds.insert(inputs[i], t);
    }
    let tan = push_tangents(&mut b, range, &seeds)?;
    let outs: Vec<ValueId> = g.outputs.iter().map(|v| map[v.index()]).collect();
    let mut res = outs.clone();
    for &o in &outs {
        if b.dtype(o).is_float() || b.dtype(o).is_complex() {
            res.push(zero_or(&mut b, tan.get(&o).copied(), o)?);
        }
    }
    Ok(b.finish(&res)?)
}

/// Hessian-vector product of a scalar function, forward-over-reverse
/// (`jvp(grad(f))`). Inputs: the original inputs, then one vector per
/// `wrt` entry; outputs: `H·v` for each `wrt` entry.
pub fn hvp(g: &Graph, wrt: &[usize]) -> Result<Graph> {
    let gr = grad(g, wrt)?;
    let j = jvp(&gr, wrt)?;
    // Keep only the tangent outputs (the second half).
    let n = wrt.len();
    let outs = j.outputs[n..].to_vec();
    let mut j = j;
    j.outputs = outs;
    j.name = format!("hvp_{}", g.name);
    j.verify()?;
    Ok(j)
}
