//! Common-subexpression elimination: a node with the same op, the same
//! (already merged) inputs and identical attributes as an earlier node is
//! dropped and its outputs are the earlier node's.
//!
//! * Attributes compare exactly ([`crate::equiv`]): floats by bit pattern,
//!   so constants `0.0` and `-0.0` stay apart and `NaN` matches `NaN`;
//!   graph-valued attributes (loop and branch bodies) must be identical
//!   node for node.
//! * Random ops (`random_uniform`, `random_normal`, `bernoulli`) ARE
//!   merged: their results are a function of their inputs and `seed`
//!   (a counter-based generator, see rlx-ref's `kernels/random.rs`), so two
//!   nodes with equal seeds already compute the same tensor. A program
//!   that wants two independent draws must give them different seeds.
//! * Sub-graphs are processed on their own (no merging across the
//!   boundary: a body cannot refer to outer values).

use crate::equiv::{attrs_identical, fingerprint};
use crate::error::OptError;
use crate::pass::Pass;
use crate::rebuild::{map_subgraphs, Rebuilder};
use rlx_ir::{Graph, ValueId};
use std::collections::HashMap;

/// The common-subexpression elimination pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cse;

type Key = (&'static str, Vec<ValueId>, u64);

/// Merge duplicate nodes of `g` (and inside its sub-graphs).
pub fn cse(g: &Graph) -> Result<Graph, OptError> {
    let mut r = Rebuilder::new(g);
    // Candidates are nodes of the new graph, by index: their attributes are
    // compared where they are, never copied (a copy per node of a branch
    // body made CSE quadratic in the nesting depth).
    let mut seen: HashMap<Key, Vec<usize>> = HashMap::new();
    for node in &g.nodes {
        let inputs = r.inputs_of(node)?;
        let attrs = map_subgraphs(&node.attrs, &mut cse)?;
        let key = (node.op.name(), inputs.clone(), fingerprint(&attrs));
        let bucket = seen.entry(key).or_default();
        let new = r.graph();
        if let Some(&k) = bucket
            .iter()
            .find(|&&k| attrs_identical(&new.nodes[k].attrs, &attrs))
        {
            let outs = new.nodes[k].outputs.clone();
            r.bind_all(node, &outs)?;
            continue;
        }
        let k = new.nodes.len();
        r.copy(node, &inputs, attrs)?;
        bucket.push(k);
    }
    r.finish()
}

impl Pass for Cse {
    fn name(&self) -> &str {
        "cse"
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        cse(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{Attrs, DType, GraphBuilder, HostTensor, TensorType};

    fn ops(g: &Graph) -> Vec<&'static str> {
        g.nodes.iter().map(|n| n.op.name()).collect()
    }

    #[test]
    fn merges_chains_of_duplicates() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [3]));
        let a1 = b.unary("exp", x).unwrap();
        let a2 = b.unary("exp", x).unwrap();
        let t1 = b.unary("tanh", a1).unwrap();
        let t2 = b.unary("tanh", a2).unwrap();
        let s = b.binary("add", t1, t2).unwrap();
        let g = b.finish(&[s, t2]).unwrap();
        let h = cse(&g).unwrap();
        assert_eq!(ops(&h), ["exp", "tanh", "add"]);
        assert_eq!(h.nodes[2].inputs[0], h.nodes[2].inputs[1]);
        assert_eq!(h.outputs[1], h.nodes[1].outputs[0]);
    }

    #[test]
    fn attributes_must_be_identical() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [2, 3]));
        let r = |b: &mut GraphBuilder, axes: Vec<i64>| {
            b.op1("reduce_sum", &[x], Attrs::new().with("axes", axes))
                .unwrap()
        };
        let s0 = r(&mut b, vec![0]);
        let s1 = r(&mut b, vec![1]);
        let s0b = r(&mut b, vec![0]);
        // Constants: equal values merge, 0.0 and -0.0 do not.
        let z = b.constant(HostTensor::scalar(0.0f32)).unwrap();
        let nz = b.constant(HostTensor::scalar(-0.0f32)).unwrap();
        let z2 = b.constant(HostTensor::scalar(0.0f32)).unwrap();
        let g = b.finish(&[s0, s1, s0b, z, nz, z2]).unwrap();
        let h = cse(&g).unwrap();
        assert_eq!(h.nodes.len(), 4);
        assert_eq!(h.outputs[0], h.outputs[2]);
        assert_ne!(h.outputs[0], h.outputs[1]);
        assert_eq!(h.outputs[3], h.outputs[5]);
        assert_ne!(h.outputs[3], h.outputs[4]);
    }

    #[test]
    fn seeded_random_ops_merge_only_with_equal_seeds() {
        let mut b = GraphBuilder::new("g");
        let u = |b: &mut GraphBuilder, seed: i64| {
            b.op1(
                "random_uniform",
                &[],
                Attrs::new().with("shape", vec![4i64]).with("seed", seed),
            )
            .unwrap()
        };
        let a = u(&mut b, 1);
        let a2 = u(&mut b, 1);
        let c = u(&mut b, 2);
        let g = b.finish(&[a, a2, c]).unwrap();
        let h = cse(&g).unwrap();
        assert_eq!(h.nodes.len(), 2);
        assert_eq!(h.outputs[0], h.outputs[1]);
    }

    #[test]
    fn graph_attributes_merge_only_when_identical() {
        let body = |op: &str| {
            let mut b = GraphBuilder::new("body");
            let c = b.input("c", TensorType::new(DType::F32, []));
            let e = b.input("e", TensorType::new(DType::F32, []));
            let s = b.binary(op, c, e).unwrap();
            b.finish(&[s, s]).unwrap()
        };
        let mut b = GraphBuilder::new("g");
        let init = b.input("init", TensorType::new(DType::F32, []));
        let xs = b.input("xs", TensorType::new(DType::F32, [3]));
        let scan = |b: &mut GraphBuilder, op: &str| {
            b.op(
                "scan",
                &[init, xs],
                Attrs::new().with("body", body(op)).with("num_carry", 1i64),
            )
            .unwrap()
        };
        let a = scan(&mut b, "add");
        let a2 = scan(&mut b, "add");
        let m = scan(&mut b, "mul");
        let g = b.finish(&[a[1], a2[1], m[1]]).unwrap();
        let h = cse(&g).unwrap();
        assert_eq!(h.nodes.len(), 2);
        assert_eq!(h.outputs[0], h.outputs[1]);
        assert_ne!(h.outputs[0], h.outputs[2]);
    }
}
