//! Structured control flow with sub-graphs held as attributes.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::graph::Graph;
use crate::op::{Arity::*, Category as C, Grad::*};

fn sub<'a>(cx: &'a InferCx, name: &str) -> Result<&'a Graph, String> {
    sub_graph(cx, name)
}

fn check_inputs(g: &Graph, want: &[TensorType], what: &str) -> Result<(), String> {
    let have = g.input_types();
    if have != want {
        let f = |v: &[TensorType]| {
            v.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(format!(
            "{what} takes ({}), but is given ({})",
            f(&have),
            f(want)
        ));
    }
    Ok(())
}

fn if_(cx: &InferCx) -> R {
    let c = &cx.inputs[0];
    if c.dtype != DType::Bool || c.shape.numel() != 1 {
        return Err(format!("the condition must be one bool, got {c}"));
    }
    let (t, e) = (sub(cx, "then_branch")?, sub(cx, "else_branch")?);
    check_inputs(t, &cx.inputs[1..], "then_branch")?;
    check_inputs(e, &cx.inputs[1..], "else_branch")?;
    if t.output_types() != e.output_types() {
        return Err("then_branch and else_branch must return the same types".into());
    }
    Ok(t.output_types())
}

fn while_(cx: &InferCx) -> R {
    let (c, b) = (sub(cx, "cond")?, sub(cx, "body")?);
    check_inputs(c, cx.inputs, "cond")?;
    check_inputs(b, cx.inputs, "body")?;
    let co = c.output_types();
    if co.len() != 1 || co[0].dtype != DType::Bool || co[0].shape.numel() != 1 {
        return Err("cond must return one bool".into());
    }
    if b.output_types() != cx.inputs {
        return Err("body must return the loop state's types".into());
    }
    if int(cx, "max_iterations")? < 0 {
        return Err("max_iterations must be >= 0".into());
    }
    Ok(cx.inputs.to_vec())
}

fn scan(cx: &InferCx) -> R {
    let body = sub(cx, "body")?;
    let nc = int(cx, "num_carry")?;
    if nc < 0 || nc as usize >= cx.inputs.len() {
        return Err(format!(
            "num_carry = {nc} must leave at least one scanned input of {}",
            cx.inputs.len()
        ));
    }
    let nc = nc as usize;
    let (carry, xs) = cx.inputs.split_at(nc);
    let len = xs[0]
        .dims()
        .first()
        .copied()
        .ok_or("scanned inputs need rank >= 1")?;
    let mut want = carry.to_vec();
    for (k, x) in xs.iter().enumerate() {
        if x.dims().first() != Some(&len) {
            return Err(format!(
                "scanned input {k} has {} steps on axis 0, the first has {len}",
                x.dims().first().unwrap_or(&0)
            ));
        }
        want.push(TensorType::new(x.dtype, x.dims()[1..].to_vec()));
    }
    check_inputs(body, &want, "body")?;
    let outs = body.output_types();
    if outs.len() < nc || outs[..nc] != *carry {
        return Err("body must return the carry's types first".into());
    }
    let mut result = carry.to_vec();
    for y in &outs[nc..] {
        let mut d = vec![len];
        d.extend_from_slice(y.dims());
        result.push(TensorType::new(y.dtype, d));
    }
    Ok(result)
}

pub static CONTROL: &[OpDef] = &[
    def("if", C::Control, AtLeast(1), &[DType::Bool],
        &[attr("then_branch", K::Graph, D::Required), attr("else_branch", K::Graph, D::Required)],
        if_, None, Differentiable, "run then_branch or else_branch on the remaining inputs"),
    def("while", C::Control, AtLeast(1), &[],
        &[attr("cond", K::Graph, D::Required), attr("body", K::Graph, D::Required),
          attr("max_iterations", K::Int, D::Int(1 << 20))],
        // Not differentiable: its trip count depends on the data, so a
        // reverse pass would need a tape of unknown length. A loop of
        // static length is `scan`, which is differentiable.
        while_, None, NotDifferentiable,
        "state = body(state) while cond(state); exceeding max_iterations is a runtime error, never a hang; not differentiable (use scan for a loop of static length)"),
    def("scan", C::Control, AtLeast(1), &[],
        &[attr("body", K::Graph, D::Required), attr("num_carry", K::Int, D::Required)],
        scan, None, Differentiable,
        "fold body over axis 0 of the scanned inputs: outputs are the final carry, then the per-step outputs stacked"),
];
