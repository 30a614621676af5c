//! The two sweeps every transform is made of, over a range of nodes of a
//! builder's graph: reverse accumulation of cotangents ([`backprop`]) and
//! forward propagation of tangents ([`push_tangents`]).

use crate::emit::{self, B};
use crate::error::{AdError, Result};
use crate::rules::{rule, Jvp, NodeCx, Rule};
use rlx_ir::{Grad, Node, ValueId};
use std::collections::{HashMap, HashSet};
use std::ops::Range;

fn is_float(b: &B, v: ValueId) -> bool {
    let d = b.dtype(v);
    d.is_float() || d.is_complex()
}

/// Values in `range` that depend on `vars` through differentiable paths
/// (float values not cut by `stop_gradient`), plus `vars` themselves.
fn activity(b: &B, nodes: &[Node], vars: &HashSet<ValueId>) -> HashSet<ValueId> {
    let mut act = vars.clone();
    for n in nodes {
        if n.op.name() == "stop_gradient" || !n.inputs.iter().any(|v| act.contains(v)) {
            continue;
        }
        for &o in &n.outputs {
            if is_float(b, o) {
                act.insert(o);
            }
        }
    }
    act
}

fn accumulate(
    b: &mut B,
    cot: &mut HashMap<ValueId, ValueId>,
    v: ValueId,
    g: ValueId,
) -> Result<()> {
    let g = match cot.get(&v) {
        // `add` has no complex kernel: add the parts.
        Some(&prev) if b.dtype(g).is_complex() => {
            let (pr, gr) = (b.unary("real", prev)?, b.unary("real", g)?);
            let (pi, gi) = (b.unary("imag", prev)?, b.unary("imag", g)?);
            let r = emit::add(b, pr, gr)?;
            let i = emit::add(b, pi, gi)?;
            b.binary("complex", r, i)?
        }
        Some(&prev) => emit::add(b, prev, g)?,
        None => g,
    };
    cot.insert(v, g);
    Ok(())
}

fn missing_rule(n: &Node, index: usize) -> AdError {
    if n.op.grad == Grad::NotDifferentiable {
        AdError::NotDifferentiable {
            op: n.op.name().into(),
            node: index,
        }
    } else {
        AdError::NoRule {
            op: n.op.name().into(),
            node: index,
        }
    }
}

/// Reverse sweep over `range`: seed cotangents on some values, return the
/// cotangent reaching each of `vars` (absent = zero).
pub fn backprop(
    b: &mut B,
    range: Range<usize>,
    vars: &HashSet<ValueId>,
    seeds: &[(ValueId, ValueId)],
) -> Result<HashMap<ValueId, ValueId>> {
    let nodes: Vec<Node> = b.graph().nodes[range.clone()].to_vec();
    let act = activity(b, &nodes, vars);
    let mut cot: HashMap<ValueId, ValueId> = HashMap::new();
    for &(v, g) in seeds {
        if act.contains(&v) {
            accumulate(b, &mut cot, v, g)?;
        }
    }
    for (k, n) in nodes.iter().enumerate().rev() {
        let gs: Vec<Option<ValueId>> = n.outputs.iter().map(|o| cot.get(o).copied()).collect();
        if gs.iter().all(Option::is_none) || n.op.name() == "stop_gradient" {
            continue;
        }
        let wants: Vec<bool> = n.inputs.iter().map(|v| act.contains(v)).collect();
        if !wants.iter().any(|&w| w) {
            continue;
        }
        let Some(r) = rule(n.op.name()) else {
            return Err(missing_rule(n, range.start + k));
        };
        let cx = NodeCx {
            op: n.op.name(),
            inputs: &n.inputs,
            outputs: &n.outputs,
            attrs: &n.attrs,
            wants: &wants,
        };
        b.set_origin(n.origin.as_ref().map(|o| format!("{o}/grad")));
        let gi = match r {
            Rule::Unary(_) | Rule::Derivative(_) => {
                let g = gs[0].expect("unary op with a cotangent");
                let dx = r.derivative(b, n.inputs[0], n.outputs[0])?;
                vec![Some(emit::mul(b, g, dx)?)]
            }
            Rule::General { vjp, .. } => vjp(b, &cx, &gs)?,
            Rule::Expand(_) => {
                return Err(AdError::NoRule {
                    op: n.op.name().into(),
                    node: range.start + k,
                })
            }
        };
        b.set_origin(None);
        for (i, g) in gi.into_iter().enumerate() {
            if let (Some(g), true) = (g, wants[i]) {
                accumulate(b, &mut cot, n.inputs[i], g)?;
            }
        }
    }
    Ok(vars
        .iter()
        .filter_map(|v| cot.get(v).map(|&g| (*v, g)))
        .collect())
}

/// Forward sweep over `range`: tangents of some values in, the tangent of
/// every value they reach out (absent = zero).
pub fn push_tangents(
    b: &mut B,
    range: Range<usize>,
    seeds: &HashMap<ValueId, ValueId>,
) -> Result<HashMap<ValueId, ValueId>> {
    let nodes: Vec<Node> = b.graph().nodes[range.clone()].to_vec();
    let mut tan = seeds.clone();
    for (k, n) in nodes.iter().enumerate() {
        let ts: Vec<Option<ValueId>> = n
            .inputs
            .iter()
            .map(|v| {
                if is_float(b, *v) {
                    tan.get(v).copied()
                } else {
                    None
                }
            })
            .collect();
        if ts.iter().all(Option::is_none) || n.op.name() == "stop_gradient" {
            continue;
        }
        if !n.outputs.iter().any(|&o| is_float(b, o)) {
            continue;
        }
        let Some(r) = rule(n.op.name()) else {
            return Err(missing_rule(n, range.start + k));
        };
        let wants: Vec<bool> = ts.iter().map(Option::is_some).collect();
        let cx = NodeCx {
            op: n.op.name(),
            inputs: &n.inputs,
            outputs: &n.outputs,
            attrs: &n.attrs,
            wants: &wants,
        };
        let outs = match r {
            Rule::Unary(_) | Rule::Derivative(_) => {
                let dx = r.derivative(b, n.inputs[0], n.outputs[0])?;
                vec![Some(emit::mul(b, ts[0].unwrap(), dx)?)]
            }
            Rule::General {
                jvp: Jvp::Linear, ..
            } => linear(b, n, &ts)?,
            Rule::General {
                jvp: Jvp::Custom(f),
                ..
            } => f(b, &cx, &ts)?,
            Rule::General {
                vjp,
                jvp: Jvp::Transpose,
            } => transpose(b, &cx, vjp, &ts)?,
            // Expanded by the transforms before any sweep.
            Rule::Expand(_) => {
                return Err(AdError::NoRule {
                    op: n.op.name().into(),
                    node: range.start + k,
                })
            }
        };
        for (o, t) in n.outputs.iter().zip(outs) {
            if let Some(t) = t {
                if is_float(b, *o) {
                    tan.insert(*o, t);
                }
            }
        }
    }
    Ok(tan)
}

/// The op applied to the tangents (primal values for non-float inputs such
/// as indices and masks, zeros for float inputs without a tangent).
fn linear(b: &mut B, n: &Node, ts: &[Option<ValueId>]) -> Result<Vec<Option<ValueId>>> {
    let mut ins = vec![];
    for (i, &v) in n.inputs.iter().enumerate() {
        ins.push(match ts[i] {
            Some(t) => t,
            None if is_float(b, v) => emit::zeros_like(b, v)?,
            None => v,
        });
    }
    Ok(b.push(n.op, &ins, n.attrs.clone())?
        .into_iter()
        .map(Some)
        .collect())
}

/// JVP from the VJP rule: u ↦ VJP(u) is linear, and its own VJP with
/// cotangent t is J·t.
fn transpose(
    b: &mut B,
    cx: &NodeCx,
    vjp: crate::rules::VjpFn,
    ts: &[Option<ValueId>],
) -> Result<Vec<Option<ValueId>>> {
    let mut us = vec![];
    for &o in cx.outputs {
        us.push(if is_float(b, o) {
            Some(emit::zeros_like(b, o)?)
        } else {
            None
        });
    }
    let start = b.graph().nodes.len();
    let vs = vjp(b, cx, &us)?;
    let end = b.graph().nodes.len();
    let vars: HashSet<ValueId> = us.iter().flatten().copied().collect();
    let seeds: Vec<(ValueId, ValueId)> = vs
        .iter()
        .zip(ts)
        .filter_map(|(v, t)| Some(((*v)?, (*t)?)))
        .collect();
    let res = backprop(b, start..end, &vars, &seeds)?;
    Ok(us
        .iter()
        .map(|u| u.and_then(|u| res.get(&u).copied()))
        .collect())
}
