//! Rebuilding a graph through [`GraphBuilder`] with a map from old values
//! to new ones — the approach of `rlx_ir::decompose`, shared by every pass.
//!
//! A pass walks the old graph's nodes in order and, for each, either copies
//! it ([`Rebuilder::copy`]), binds its outputs to values that already exist
//! in the new graph ([`Rebuilder::bind`]), or emits something else through
//! [`Rebuilder::builder`]. [`Rebuilder::finish`] maps the outputs and
//! verifies the result. Graph inputs are recreated first, with the same
//! names and types, in the same order.

use crate::error::OptError;
use rlx_ir::{Attr, Attrs, Graph, GraphBuilder, IrError, Node, Op, ValueId};

/// A new graph under construction from an old one.
pub struct Rebuilder<'g> {
    old: &'g Graph,
    builder: GraphBuilder,
    map: Vec<Option<ValueId>>,
}

impl<'g> Rebuilder<'g> {
    /// Start a copy of `old`: its inputs are recreated, nothing else.
    pub fn new(old: &'g Graph) -> Self {
        let mut builder = GraphBuilder::new(old.name.clone());
        let mut map = vec![None; old.values.len()];
        for &v in &old.inputs {
            let val = &old.values[v.index()];
            let name = val.name.clone().unwrap_or_else(|| v.0.to_string());
            map[v.index()] = Some(builder.input(name, val.ty.clone()));
        }
        Rebuilder { old, builder, map }
    }

    /// The graph being rebuilt.
    pub fn old(&self) -> &'g Graph {
        self.old
    }

    /// The new graph so far.
    pub fn graph(&self) -> &Graph {
        self.builder.graph()
    }

    /// The builder of the new graph (to emit nodes directly).
    pub fn builder(&mut self) -> &mut GraphBuilder {
        &mut self.builder
    }

    /// The new value an old value maps to.
    pub fn get(&self, old: ValueId) -> Result<ValueId, OptError> {
        self.map.get(old.index()).copied().flatten().ok_or_else(|| {
            OptError::Ir(IrError::msg(format!(
                "value %{} is used before it is defined",
                old.0
            )))
        })
    }

    /// The new values of `node`'s inputs.
    pub fn inputs_of(&self, node: &Node) -> Result<Vec<ValueId>, OptError> {
        node.inputs.iter().map(|&v| self.get(v)).collect()
    }

    /// Record that old value `old` is `new` in the new graph. The types
    /// must be equal; the old value's name moves to `new` if it has none.
    pub fn bind(&mut self, old: ValueId, new: ValueId) -> Result<(), OptError> {
        let (want, got) = (self.old.ty(old), self.builder.ty(new));
        if want != got {
            return Err(OptError::Ir(IrError::msg(format!(
                "value %{} of type {want} was replaced by a value of type {got}",
                old.0
            ))));
        }
        if let Some(name) = &self.old.values[old.index()].name {
            if self.builder.graph().values[new.index()].name.is_none() {
                self.builder.name_value(new, name.clone());
            }
        }
        self.map[old.index()] = Some(new);
        Ok(())
    }

    /// Bind every output of `node` to the matching value of `new`.
    pub fn bind_all(&mut self, node: &Node, new: &[ValueId]) -> Result<(), OptError> {
        if new.len() != node.outputs.len() {
            return Err(OptError::Ir(IrError::msg(format!(
                "`{}` has {} outputs, its replacement {}",
                node.op.name(),
                node.outputs.len(),
                new.len()
            ))));
        }
        for (&o, &n) in node.outputs.iter().zip(new) {
            self.bind(o, n)?;
        }
        Ok(())
    }

    /// Append a node (with `origin`) to the new graph; returns its outputs.
    pub fn push(
        &mut self,
        op: Op,
        inputs: &[ValueId],
        attrs: Attrs,
        origin: Option<String>,
    ) -> Result<Vec<ValueId>, OptError> {
        self.builder.set_origin(origin);
        let outs = self.builder.push(op, inputs, attrs);
        self.builder.set_origin(None);
        Ok(outs?)
    }

    /// Copy `node` with new `inputs` and `attrs`, binding its outputs.
    pub fn copy(
        &mut self,
        node: &Node,
        inputs: &[ValueId],
        attrs: Attrs,
    ) -> Result<Vec<ValueId>, OptError> {
        let outs = self.push(node.op, inputs, attrs, node.origin.clone())?;
        self.bind_all(node, &outs)?;
        Ok(outs)
    }

    /// Map the old graph's outputs and verify the new graph.
    pub fn finish(self) -> Result<Graph, OptError> {
        let outs: Vec<ValueId> = self
            .old
            .outputs
            .iter()
            .map(|&v| self.get(v))
            .collect::<Result<_, _>>()?;
        Ok(self.builder.finish(&outs)?)
    }
}

/// A copy of `attrs` with every graph-valued attribute replaced by `f` of
/// it. Sub-graphs are not copied first (that copied every nested region
/// once per level: quadratic in the nesting depth); each is one level of
/// [`rlx_ir::nesting`], so a region nested past the limit is an error, not
/// a stack overflow.
pub fn map_subgraphs(
    attrs: &Attrs,
    f: &mut dyn FnMut(&Graph) -> Result<Graph, OptError>,
) -> Result<Attrs, OptError> {
    let mut out = Attrs::new();
    for (name, a) in &attrs.0 {
        let a = match a {
            Attr::Graph(g) => {
                let _level =
                    rlx_ir::nesting::enter(&format!("sub-graph `{name}` in an optimizer pass"))
                        .map_err(IrError::from)?;
                Attr::Graph(Box::new(f(g)?))
            }
            a => a.clone(),
        };
        out.0.insert(name.clone(), a);
    }
    Ok(out)
}

/// Number of nodes in `g`, counting the nodes of sub-graphs too.
pub fn count_nodes(g: &Graph) -> usize {
    g.nodes
        .iter()
        .map(|n| {
            1 + n
                .attrs
                .0
                .values()
                .map(|a| match a {
                    Attr::Graph(sg) => count_nodes(sg),
                    _ => 0,
                })
                .sum::<usize>()
        })
        .sum()
}

/// How many times each value of `g` is read (node inputs and graph outputs).
pub fn use_counts(g: &Graph) -> Vec<usize> {
    let mut uses = vec![0; g.values.len()];
    for n in &g.nodes {
        for v in &n.inputs {
            uses[v.index()] += 1;
        }
    }
    for v in &g.outputs {
        uses[v.index()] += 1;
    }
    uses
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{DType, TensorType};

    #[test]
    fn copy_keeps_names_origins_and_inputs() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [2]));
        b.set_origin(Some("blk".into()));
        let y = b.unary("exp", x).unwrap();
        b.name_value(y, "y");
        let g = b.finish(&[y]).unwrap();

        let mut r = Rebuilder::new(&g);
        for n in &g.nodes {
            let ins = r.inputs_of(n).unwrap();
            r.copy(n, &ins, n.attrs.clone()).unwrap();
        }
        let h = r.finish().unwrap();
        assert_eq!(h, g);
    }

    #[test]
    fn bind_rejects_a_type_change() {
        let mut b = GraphBuilder::new("g");
        let x = b.input("x", TensorType::new(DType::F32, [2]));
        let s = b.op1("reduce_sum", &[x], Attrs::new()).unwrap();
        let g = b.finish(&[s]).unwrap();
        let mut r = Rebuilder::new(&g);
        let nx = r.get(x).unwrap();
        assert!(r.bind(s, nx).is_err());
    }

    #[test]
    fn counts_include_subgraphs() {
        let mut body = GraphBuilder::new("body");
        let c = body.input("c", TensorType::new(DType::F32, []));
        let e = body.input("e", TensorType::new(DType::F32, []));
        let s = body.binary("add", c, e).unwrap();
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
        let g = b.finish(&outs).unwrap();
        assert_eq!(count_nodes(&g), 2);
        assert_eq!(use_counts(&g)[init.index()], 1);
    }
}
