//! Fused regions: a chain (or tree) of elementwise ops run as one kernel.
//!
//! `fused_elementwise` carries its computation as a sub-graph attribute
//! `body` over the region's inputs. Its type rule is the body's outputs;
//! its decomposition inlines the body, so `expand_fused` (unfuse) and the
//! common-IR dispatch path work like for any other fused op. The body may
//! hold only elementwise ops ([`is_elementwise`]) and constants, all its
//! outputs share one shape (the region's iteration space), and every input
//! broadcasts to that shape — what a backend needs to emit one loop.

use super::*;
use crate::attr::{attr, AttrDefault as D, AttrKind as K};
use crate::error::IrError;
use crate::graph::{Graph, GraphBuilder, ValueId};
use crate::op::{Arity::*, Category as C, Grad::*};

/// Whether `op` may appear in a fused region: unary, binary and ternary
/// elementwise ops (`clamp` and `where` included) and `cast`.
pub fn is_elementwise(op: &OpDef) -> bool {
    matches!(op.category, C::Unary | C::Binary | C::Ternary) || op.name == "cast"
}

fn fused_elementwise(cx: &InferCx) -> R {
    let body = sub_graph(cx, "body")?;
    if body.input_types() != cx.inputs {
        return Err(format!(
            "the body takes {} inputs of types {:?}, the node gives {:?}",
            body.inputs.len(),
            body.input_types(),
            cx.inputs
        ));
    }
    if let Some(n) = body
        .nodes
        .iter()
        .find(|n| !is_elementwise(n.op.def()) && n.op.name() != "constant")
    {
        return Err(format!(
            "the body may hold only elementwise ops and constants, not `{}`",
            n.op.name()
        ));
    }
    let outs = body.output_types();
    let Some(first) = outs.first() else {
        return Err("the body returns nothing".into());
    };
    if let Some(o) = outs.iter().find(|o| o.shape != first.shape) {
        return Err(format!(
            "the body's outputs must share one shape: {} and {}",
            first.shape, o.shape
        ));
    }
    for (k, t) in cx.inputs.iter().enumerate() {
        if broadcast_shapes(&t.shape, &first.shape).ok().as_ref() != Some(&first.shape) {
            return Err(format!(
                "input {k} {} does not broadcast to the region's shape {}",
                t.shape, first.shape
            ));
        }
    }
    Ok(outs)
}

/// Append the nodes of `g` to `b`, reading `inputs` for `g`'s inputs;
/// returns the values of `g`'s outputs.
pub fn inline(
    b: &mut GraphBuilder,
    g: &Graph,
    inputs: &[ValueId],
) -> Result<Vec<ValueId>, IrError> {
    if inputs.len() != g.inputs.len() {
        return Err(IrError::msg(format!(
            "graph `{}` takes {} inputs, given {}",
            g.name,
            g.inputs.len(),
            inputs.len()
        )));
    }
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for (&v, &x) in g.inputs.iter().zip(inputs) {
        map[v.index()] = Some(x);
    }
    let get = |map: &[Option<ValueId>], v: ValueId| {
        map[v.index()].ok_or_else(|| IrError::msg("value used before definition"))
    };
    for node in &g.nodes {
        let ins: Vec<ValueId> = node
            .inputs
            .iter()
            .map(|&v| get(&map, v))
            .collect::<Result<_, _>>()?;
        let outs = b.push(node.op, &ins, node.attrs.clone())?;
        for (&o, n) in node.outputs.iter().zip(outs) {
            map[o.index()] = Some(n);
        }
    }
    g.outputs.iter().map(|&v| get(&map, v)).collect()
}

fn fused_elementwise_d(
    b: &mut GraphBuilder,
    x: &[ValueId],
    a: &Attrs,
) -> Result<Vec<ValueId>, IrError> {
    inline(b, a.graph("body")?, x)
}

// One elementwise loop: its output may take over any input.
pub static REGION: &[OpDef] = &[with_in_place(def(
    "fused_elementwise",
    C::Fused,
    AtLeast(0),
    &[],
    &[attr("body", K::Graph, D::Required)],
    fused_elementwise,
    Some(fused_elementwise_d),
    Differentiable,
    "a region of elementwise ops run as one kernel: `body` (a sub-graph over the inputs, whose outputs share one shape) inlined",
), crate::op::InPlace::Elementwise)];

#[cfg(test)]
mod tests {
    use crate::decompose::expand_all;
    use crate::{Attrs, DType, Graph, GraphBuilder, TensorType};

    fn t(dims: &[usize]) -> TensorType {
        TensorType::new(DType::F32, dims.to_vec())
    }

    /// A body over (2,3) and (3): exp(a) + b, or `op` on b alone.
    fn body(op: Option<&str>) -> Graph {
        let mut b = GraphBuilder::new("region");
        let x = b.input("a", t(&[2, 3]));
        let y = b.input("b", t(&[3]));
        let out = match op {
            None => {
                let e = b.unary("exp", x).unwrap();
                b.binary("add", e, y).unwrap()
            }
            Some(op) => b.op1(op, &[y], Attrs::new()).unwrap(),
        };
        b.finish(&[out]).unwrap()
    }

    fn region(body: Graph, dims: [&[usize]; 2]) -> Result<Graph, crate::IrError> {
        let mut b = GraphBuilder::new("g");
        let x = b.input("a", t(dims[0]));
        let y = b.input("b", t(dims[1]));
        let r = b.op1(
            "fused_elementwise",
            &[x, y],
            Attrs::new().with("body", body),
        )?;
        b.finish(&[r])
    }

    #[test]
    fn regions_type_check_print_and_inline() {
        let g = region(body(None), [&[2, 3], &[3]]).unwrap();
        assert_eq!(g.ty(g.outputs[0]), &t(&[2, 3]));
        let text = crate::text::print(&g);
        assert_eq!(crate::text::parse(&text).unwrap(), g);
        let flat = expand_all(&g).unwrap();
        let ops: Vec<_> = flat.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["exp", "add"]);
    }

    #[test]
    fn bad_regions_are_rejected() {
        // Inputs of other types than the body's.
        let e = region(body(None), [&[2, 3], &[2, 3]]).unwrap_err();
        assert!(e.to_string().contains("the body takes"), "{e}");
        // A non-elementwise op in the body.
        let e = region(body(Some("softmax")), [&[2, 3], &[3]]).unwrap_err();
        assert!(e.to_string().contains("not `softmax`"), "{e}");
        // An input that does not broadcast to the region's shape (3).
        let e = region(body(Some("exp")), [&[2, 3], &[3]]).unwrap_err();
        assert!(e.to_string().contains("does not broadcast"), "{e}");
    }
}
