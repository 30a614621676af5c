//! Constant folding: a node whose inputs are all `constant`s is evaluated
//! once, at compile time, and replaced by `constant` nodes holding its
//! results.
//!
//! * The evaluation is delegated to an [`Evaluator`] (in practice
//!   `rlx_ref::run_graph`), so this crate does not depend on a backend.
//!   The evaluator gets a one-node graph whose inputs are the constants.
//! * A node is folded only when its outputs hold at most `max_elements`
//!   elements in total (default [`ConstFold::DEFAULT_MAX_ELEMENTS`]), or
//!   no more than its inputs hold (a weight's dequantization or cast), so
//!   folding never blows a compact expression (a `broadcast`, a `tile`)
//!   up into a huge literal.
//! * Nodes without inputs (`arange`, `random_*`, `constant`) are left
//!   alone: they are already as compact as the literal would be.
//! * When the evaluator fails (an integer division by zero, say) the node
//!   stays, so the error still happens at run time, as before.
//! * Sub-graphs are folded too (with their own constants).

use crate::error::OptError;
use crate::pass::Pass;
use crate::rebuild::{map_subgraphs, Rebuilder};
use rlx_ir::{Attrs, Graph, GraphBuilder, HostTensor, Node, Op, ValueId};
use std::collections::HashMap;

/// Evaluates a graph on host tensors. Implemented for every
/// `Fn(&Graph, &[HostTensor]) -> Result<Vec<HostTensor>, String>`, so
/// `|g, x| rlx_ref::run_graph(g, x).map_err(|e| e.to_string())` is one.
pub trait Evaluator {
    /// The graph's outputs for these inputs.
    fn eval(&self, g: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String>;
}

impl<F> Evaluator for F
where
    F: Fn(&Graph, &[HostTensor]) -> Result<Vec<HostTensor>, String>,
{
    fn eval(&self, g: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
        self(g, inputs)
    }
}

/// The constant-folding pass.
pub struct ConstFold {
    evaluator: Box<dyn Evaluator>,
    max_elements: usize,
}

impl ConstFold {
    /// The default cap on the elements a folded node may produce.
    pub const DEFAULT_MAX_ELEMENTS: usize = 1 << 16;

    /// Fold with `evaluator`, outputs capped at the default size.
    pub fn new(evaluator: impl Evaluator + 'static) -> Self {
        ConstFold {
            evaluator: Box::new(evaluator),
            max_elements: Self::DEFAULT_MAX_ELEMENTS,
        }
    }

    /// Change the cap on output elements per folded node.
    pub fn max_elements(mut self, n: usize) -> Self {
        self.max_elements = n;
        self
    }

    /// Fold `g` (and its sub-graphs).
    pub fn fold(&self, g: &Graph) -> Result<Graph, OptError> {
        let mut r = Rebuilder::new(g);
        // Constant values of the new graph.
        let mut known: HashMap<ValueId, HostTensor> = HashMap::new();
        for node in &g.nodes {
            let inputs = r.inputs_of(node)?;
            let attrs = map_subgraphs(&node.attrs, &mut |sg| self.fold(sg))?;
            if node.op.name() == "constant" {
                let outs = r.copy(node, &inputs, attrs.clone())?;
                if let Ok(t) = attrs.tensor("value") {
                    known.insert(outs[0], t.clone());
                }
                continue;
            }
            if let Some(results) = self.try_fold(g, node, &inputs, &attrs, &known) {
                let constant = Op::named("constant")?;
                let mut outs = Vec::with_capacity(results.len());
                for t in results {
                    let o = r.push(
                        constant,
                        &[],
                        Attrs::new().with("value", t.clone()),
                        node.origin.clone(),
                    )?[0];
                    known.insert(o, t);
                    outs.push(o);
                }
                r.bind_all(node, &outs)?;
                continue;
            }
            r.copy(node, &inputs, attrs)?;
        }
        r.finish()
    }

    /// The folded results of `node`, when it can and should be folded.
    fn try_fold(
        &self,
        g: &Graph,
        node: &Node,
        inputs: &[ValueId],
        attrs: &Attrs,
        known: &HashMap<ValueId, HostTensor>,
    ) -> Option<Vec<HostTensor>> {
        if inputs.is_empty() {
            return None;
        }
        let args: Vec<HostTensor> = inputs
            .iter()
            .map(|v| known.get(v).cloned())
            .collect::<Option<_>>()?;
        let out_elems: usize = node
            .outputs
            .iter()
            .map(|&o| g.ty(o).shape.numel())
            .fold(0usize, |a, n| a.saturating_add(n));
        // A result no larger than its inputs never blows up the graph's
        // literals (a weight's dequantization, a cast of a table): those
        // fold whatever their size — else they ran again on every run.
        let in_elems = args
            .iter()
            .map(|t| t.shape().numel())
            .fold(0usize, |a, n| a.saturating_add(n));
        if out_elems > self.max_elements.max(in_elems) {
            return None;
        }
        let mut b = GraphBuilder::new(format!("fold_{}", node.op.name()));
        let ins: Vec<ValueId> = args
            .iter()
            .enumerate()
            .map(|(k, t)| {
                b.input(
                    format!("c{k}"),
                    rlx_ir::TensorType::new(t.dtype(), t.shape().clone()),
                )
            })
            .collect();
        let outs = b.push(node.op, &ins, attrs.clone()).ok()?;
        let one = b.finish(&outs).ok()?;
        let results = self.evaluator.eval(&one, &args).ok()?;
        // Trust but verify: the evaluator must produce the inferred types.
        let ok = results.len() == node.outputs.len()
            && results.iter().zip(&node.outputs).all(|(t, &o)| {
                let ty = g.ty(o);
                t.dtype() == ty.dtype && t.shape() == &ty.shape
            });
        ok.then_some(results)
    }
}

impl Pass for ConstFold {
    fn name(&self) -> &str {
        "const_fold"
    }
    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        self.fold(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{DType, TensorType};

    /// A tiny evaluator for the tests: elementwise add/mul/neg of f32
    /// tensors of equal shape (rlx-cpu is used by the integration tests).
    fn mini(g: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
        let n = &g.nodes[0];
        let v: Vec<Vec<f32>> = inputs
            .iter()
            .map(|t| t.to_vec::<f32>().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let out: Vec<f32> = match n.op.name() {
            "add" => v[0].iter().zip(&v[1]).map(|(a, b)| a + b).collect(),
            "mul" => v[0].iter().zip(&v[1]).map(|(a, b)| a * b).collect(),
            "neg" => v[0].iter().map(|a| -a).collect(),
            op => return Err(format!("mini evaluator: no `{op}`")),
        };
        let shape = g.ty(n.outputs[0]).shape.clone();
        Ok(vec![
            HostTensor::from_slice(&out, shape).map_err(|e| e.to_string())?
        ])
    }

    fn consts(b: &mut GraphBuilder, v: &[f32]) -> ValueId {
        b.constant(HostTensor::from_slice(v, [v.len()]).unwrap())
            .unwrap()
    }

    #[test]
    fn folds_chains_of_constants() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [2]));
        let c1 = consts(&mut b, &[1.0, 2.0]);
        let c2 = consts(&mut b, &[10.0, 20.0]);
        let s = b.binary("add", c1, c2).unwrap();
        let n = b.unary("neg", s).unwrap();
        let y = b.binary("mul", x, n).unwrap();
        let g = b.finish(&[y]).unwrap();
        let h = crate::dce::dce(&ConstFold::new(mini).fold(&g).unwrap()).unwrap();
        let ops: Vec<_> = h.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["constant", "mul"]);
        let t = h.nodes[0].attrs.tensor("value").unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [-11.0, -22.0]);
    }

    #[test]
    fn respects_the_size_cap_and_evaluator_failures() {
        let mut b = GraphBuilder::new("g");
        let c1 = consts(&mut b, &[1.0, 2.0, 3.0]);
        let s = b.binary("add", c1, c1).unwrap();
        let big = b
            .op1("broadcast", &[s], Attrs::new().with("shape", vec![2i64, 3]))
            .unwrap();
        let e = b.unary("exp", c1).unwrap(); // the mini evaluator refuses exp
        let g = b.finish(&[big, e]).unwrap();
        // Over the cap: the add folds (no larger than its inputs), the
        // broadcast (6 elements from 3) does not.
        let capped = ConstFold::new(mini).max_elements(2).fold(&g).unwrap();
        let ops: Vec<_> = capped.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["constant", "constant", "broadcast", "exp"]);
    }

    #[test]
    fn generators_are_not_folded() {
        let mut b = GraphBuilder::new("g");
        let a = b
            .op1("arange", &[], Attrs::new().with("len", 4i64))
            .unwrap();
        let g = b.finish(&[a]).unwrap();
        let h = ConstFold::new(
            |_: &Graph, _: &[HostTensor]| -> Result<Vec<HostTensor>, String> {
                panic!("must not be called")
            },
        )
        .fold(&g)
        .unwrap();
        assert_eq!(h.nodes[0].op.name(), "arange");
    }
}
