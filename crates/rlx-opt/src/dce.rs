//! Dead-code elimination: drop every node none of whose outputs reaches a
//! graph output. Graph inputs stay as they are, used or not — they are the
//! calling convention. Sub-graphs are cleaned the same way (their inputs
//! and outputs untouched).
//!
//! Every op is pure (random ops are functions of their seed), so a dead
//! node can always go. A dropped node can no longer raise its runtime
//! error (say, an integer division by zero whose result nobody reads).

use crate::error::OptError;
use crate::pass::Pass;
use crate::rebuild::{map_subgraphs, Rebuilder};
use rlx_ir::Graph;

/// The dead-code elimination pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dce;

/// Which nodes of `g` contribute to its outputs.
pub fn live_nodes(g: &Graph) -> Vec<bool> {
    let mut live_value = vec![false; g.values.len()];
    for v in &g.outputs {
        live_value[v.index()] = true;
    }
    let mut live = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if n.outputs.iter().any(|o| live_value[o.index()]) {
            live[i] = true;
            for v in &n.inputs {
                live_value[v.index()] = true;
            }
        }
    }
    live
}

/// Remove dead nodes from `g` (and from its sub-graphs).
pub fn dce(g: &Graph) -> Result<Graph, OptError> {
    let live = live_nodes(g);
    let mut r = Rebuilder::new(g);
    for (node, _) in g.nodes.iter().zip(&live).filter(|(_, &l)| l) {
        let inputs = r.inputs_of(node)?;
        let attrs = map_subgraphs(&node.attrs, &mut dce)?;
        r.copy(node, &inputs, attrs)?;
    }
    r.finish()
}

impl Pass for Dce {
    fn name(&self) -> &str {
        "dce"
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        dce(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{Attrs, DType, GraphBuilder, TensorType};

    #[test]
    fn removes_unused_chains_keeps_inputs() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [3]));
        let unused = b.input("unused", TensorType::new(DType::F32, [3]));
        let a = b.unary("exp", x).unwrap();
        let d1 = b.unary("tanh", a).unwrap();
        let _d2 = b.unary("neg", d1).unwrap();
        let _d3 = b.unary("sin", unused).unwrap();
        let g = b.finish(&[a]).unwrap();
        let h = dce(&g).unwrap();
        assert_eq!(h.nodes.len(), 1);
        assert_eq!(h.nodes[0].op.name(), "exp");
        assert_eq!(h.inputs.len(), 2);
        assert_eq!(h.input_types(), g.input_types());
    }

    #[test]
    fn keeps_multi_output_nodes_with_one_live_output() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [4]));
        let outs = b
            .op(
                "split",
                &[x],
                Attrs::new().with("axis", 0i64).with("sizes", vec![1i64, 3]),
            )
            .unwrap();
        let g = b.finish(&[outs[1]]).unwrap();
        let h = dce(&g).unwrap();
        assert_eq!(h.nodes.len(), 1);
        assert_eq!(h.outputs.len(), 1);
        assert_eq!(h.ty(h.outputs[0]).dims(), [3]);
    }

    #[test]
    fn outputs_may_be_inputs_and_subgraphs_are_cleaned() {
        let mut body = GraphBuilder::new("body");
        let c = body.input("c", TensorType::new(DType::F32, []));
        let e = body.input("e", TensorType::new(DType::F32, []));
        let s = body.binary("add", c, e).unwrap();
        let _dead = body.unary("exp", s).unwrap();
        let body = body.finish(&[s, s]).unwrap();
        let mut b = GraphBuilder::new("g");
        let init = b.input("init", TensorType::new(DType::F32, []));
        let xs = b.input("xs", TensorType::new(DType::F32, [3]));
        let outs = b
            .op(
                "scan",
                &[init, xs],
                Attrs::new().with("body", body).with("num_carry", 1i64),
            )
            .unwrap();
        let g = b.finish(&[outs[1], xs]).unwrap();
        let h = dce(&g).unwrap();
        let sub = h.nodes[0].attrs.graph("body").unwrap();
        assert_eq!(sub.nodes.len(), 1);
        assert_eq!(h.outputs[1], h.inputs[1]);
    }
}
