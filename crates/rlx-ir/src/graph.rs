//! MIR: an SSA graph of op nodes over typed values, kept in topological
//! order in one arena. Built with [`GraphBuilder`], checked by
//! [`Graph::verify`], printed and parsed by `text`, serialized as JSON.

use crate::attr::{Attr, Attrs};
use crate::dtype::DType;
use crate::error::IrError;
use crate::op::{InferCx, Op};
use crate::shape::{Shape, TensorType};
use crate::tensor::HostTensor;
use serde::{Deserialize, Serialize};

/// An SSA value: a graph input or one output of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueDef {
    Input(usize),
    Node { node: usize, output: usize },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Value {
    pub ty: TensorType,
    /// A user-facing name (graph inputs always have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub def: ValueDef,
}

/// One op application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub op: Op,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    #[serde(default, skip_serializing_if = "Attrs::is_empty")]
    pub attrs: Attrs,
    /// Where this node came from (an HIR block path), for diagnostics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// A MIR graph. Nodes are in topological order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub name: String,
    pub values: Vec<Value>,
    pub nodes: Vec<Node>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
}

impl Graph {
    pub fn ty(&self, v: ValueId) -> &TensorType {
        &self.values[v.index()].ty
    }
    pub fn input_types(&self) -> Vec<TensorType> {
        self.inputs.iter().map(|&v| self.ty(v).clone()).collect()
    }
    pub fn output_types(&self) -> Vec<TensorType> {
        self.outputs.iter().map(|&v| self.ty(v).clone()).collect()
    }

    /// Check every invariant: SSA order, arity, attribute schemas, and that
    /// each node's recorded output types are what its op infers.
    ///
    /// Sub-graphs are verified recursively, each a level of
    /// [`crate::nesting`]: a graph nested deeper than
    /// `limits().max_nesting_depth` is an [`IrError::Limit`]. The work is
    /// linear in the nodes of the whole tree (attributes are checked in
    /// place, never copied).
    pub fn verify(&self) -> Result<(), IrError> {
        self.verify_nodes(true)
    }

    /// [`Graph::verify`] of this graph's own nodes; sub-graphs are verified
    /// too when `deep`, otherwise only their nesting depth is checked.
    fn verify_nodes(&self, deep: bool) -> Result<(), IrError> {
        let _level = crate::nesting::enter(&format!("sub-graph nesting at graph `{}`", self.name))?;
        let mut defined = vec![false; self.values.len()];
        for (i, &v) in self.inputs.iter().enumerate() {
            let val = self.values.get(v.index()).ok_or_else(|| {
                IrError::msg(format!("graph input {i} refers to missing value %{}", v.0))
            })?;
            if val.def != ValueDef::Input(i) {
                return Err(IrError::msg(format!(
                    "value %{} is listed as input {i} but not defined as one",
                    v.0
                )));
            }
            check_size(&val.ty).map_err(|e| IrError::msg(format!("graph input {i}: {e}")))?;
            defined[v.index()] = true;
        }
        for (n, node) in self.nodes.iter().enumerate() {
            let err = |msg: String| IrError::Node {
                node: n,
                op: node.op.name().into(),
                msg,
            };
            for (k, &inp) in node.inputs.iter().enumerate() {
                if !defined.get(inp.index()).copied().unwrap_or(false) {
                    return Err(err(format!(
                        "input {k} (%{}) is used before it is defined",
                        inp.0
                    )));
                }
            }
            let in_types: Vec<TensorType> =
                node.inputs.iter().map(|&v| self.ty(v).clone()).collect();
            node.attrs.check_normalized(node.op.name(), node.op.attrs)?;
            let out = infer(node.op, &in_types, &node.attrs).map_err(err)?;
            if out.len() != node.outputs.len() {
                return Err(err(format!(
                    "op produces {} outputs, node lists {}",
                    out.len(),
                    node.outputs.len()
                )));
            }
            for (k, (&ov, want)) in node.outputs.iter().zip(&out).enumerate() {
                let val = self
                    .values
                    .get(ov.index())
                    .ok_or_else(|| err(format!("output {k} refers to a missing value")))?;
                if &val.ty != want {
                    return Err(err(format!(
                        "output {k} is recorded as {}, but the op infers {want}",
                        val.ty
                    )));
                }
                if val.def != (ValueDef::Node { node: n, output: k }) || defined[ov.index()] {
                    return Err(err(format!("output {k} (%{}) is defined twice", ov.0)));
                }
                defined[ov.index()] = true;
            }
            for (name, a) in &node.attrs.0 {
                if let Attr::Graph(g) = a {
                    let checked = if deep {
                        g.verify_nodes(true)
                    } else {
                        g.check_nesting()
                    };
                    checked.map_err(|e| match e {
                        // A limit keeps its type: callers tell it apart.
                        IrError::Limit(l) => IrError::Limit(l),
                        e => err(format!("in sub-graph `{name}`: {e}")),
                    })?;
                }
            }
        }
        for (i, &o) in self.outputs.iter().enumerate() {
            if !defined.get(o.index()).copied().unwrap_or(false) {
                return Err(IrError::msg(format!(
                    "graph output {i} (%{}) is never defined",
                    o.0
                )));
            }
        }
        // Every value is an input or a node output: a value no input or
        // node defines (a stale entry of a JSON graph, say) would print as
        // a different graph than the one held.
        if let Some(i) = defined.iter().position(|d| !d) {
            return Err(IrError::msg(format!(
                "value %{i} is neither a graph input nor a node's output (its definition says {:?})",
                self.values[i].def
            )));
        }
        Ok(())
    }

    /// Check that the sub-graphs of this graph (at the current nesting
    /// level) fit under `limits().max_nesting_depth`, without verifying
    /// them. The walk stops as soon as they are too deep, so it is bounded
    /// by the limit; it allocates nothing and touches no lock per level,
    /// so repeating it at every level of a build stays cheap.
    fn check_nesting(&self) -> Result<(), IrError> {
        let max = crate::limits::limits().max_nesting_depth;
        // The level this graph would be entered at, below the caller.
        let level = crate::nesting::depth() + 1;
        if level > max || self.nests_deeper_than(max - level) {
            let what = format!("sub-graph nesting below graph `{}`", self.name);
            crate::limits::limits().check_depth(&what, max + 1)?;
        }
        Ok(())
    }

    /// Whether sub-graphs nest more than `room` levels below this graph.
    fn nests_deeper_than(&self, room: usize) -> bool {
        self.nodes
            .iter()
            .flat_map(|n| n.attrs.0.values())
            .any(|a| match a {
                Attr::Graph(g) => room == 0 || g.nests_deeper_than(room - 1),
                _ => false,
            })
    }

    /// A stable JSON form (see docs/ARCHITECTURE.md).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Read the JSON form from a parsed value, and verify it.
    ///
    /// Deserializing recurses once per level of the value, so a value
    /// nested deeper than [`JSON_MAX_DEPTH`] (what `serde_json` itself
    /// allows when parsing text) is refused first, by a walk that does not
    /// recurse: a hand-built `Value` cannot overflow the stack either.
    pub fn from_json(v: &serde_json::Value) -> Result<Graph, IrError> {
        let depth = json_depth(v);
        if depth > JSON_MAX_DEPTH {
            return Err(IrError::msg(format!(
                "bad graph JSON: it nests {depth} levels deep, more than the {JSON_MAX_DEPTH} \
                 a JSON document may (sub-graphs nested this deep need the text form)"
            )));
        }
        let g = Graph::deserialize(v).map_err(|e| IrError::msg(format!("bad graph JSON: {e}")))?;
        g.verify()?;
        Ok(g)
    }

    /// Parse the JSON form from text, and verify it. Errors name the line
    /// and column; nesting deeper than [`JSON_MAX_DEPTH`] is one of them.
    pub fn from_json_str(s: &str) -> Result<Graph, IrError> {
        let v: serde_json::Value = serde_json::from_str(s).map_err(|e| IrError::Parse {
            line: e.line(),
            col: e.column(),
            msg: format!("bad graph JSON: {e}"),
        })?;
        Graph::from_json(&v)
    }

    /// Number of nodes per op name.
    pub fn op_histogram(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut h = std::collections::BTreeMap::new();
        for n in &self.nodes {
            *h.entry(n.op.name()).or_insert(0) += 1;
        }
        h
    }
}

/// The deepest JSON value [`Graph::from_json`] reads: `serde_json`'s own
/// recursion limit for text, applied to values built any other way too.
/// One level of `if` nesting takes five levels of JSON, so the JSON form
/// holds about 25 nested regions; deeper programs use the text form, which
/// is bounded by `limits().max_nesting_depth` instead.
pub const JSON_MAX_DEPTH: usize = 128;

/// How deep `v` nests (a scalar is 0), without recursing.
fn json_depth(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    let mut max = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|x| (x, d + 1))),
            Value::Object(m) => stack.extend(m.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

/// Run an op's type rule, first checking arity and the first input's dtype.
pub fn infer(op: Op, inputs: &[TensorType], attrs: &Attrs) -> Result<Vec<TensorType>, String> {
    for (k, t) in inputs.iter().enumerate() {
        check_size(t).map_err(|e| format!("input {k}: {e}"))?;
    }
    if !op.arity.admits(inputs.len()) {
        return Err(format!("takes {} inputs, got {}", op.arity, inputs.len()));
    }
    if let Some(first) = inputs.first() {
        if !op.dtypes.is_empty() && !op.dtypes.contains(&first.dtype) {
            let names: Vec<_> = op.dtypes.iter().map(|d| d.name()).collect();
            return Err(format!(
                "input 0 has dtype {}, expected one of {}",
                first.dtype,
                names.join(", ")
            ));
        }
    }
    let out = (op.infer)(&InferCx {
        op: op.name(),
        inputs,
        attrs,
    })?;
    for (k, t) in out.iter().enumerate() {
        check_size(t).map_err(|e| format!("output {k}: {e}"))?;
    }
    Ok(out)
}

/// The most elements one tensor may have: 2^48 − 1 on 64-bit targets (far
/// beyond any real model; byte counts cannot overflow), 2^27 − 1 on wasm32,
/// whose 4 GiB address space could not hold more anyway.
pub const MAX_ELEMENTS: usize = if usize::BITS >= 64 {
    usize::MAX >> 16
} else {
    usize::MAX >> 5
};

/// Reject types whose element count is absurd (or overflowed).
pub fn check_size(t: &TensorType) -> Result<(), String> {
    if t.shape.numel() > MAX_ELEMENTS {
        return Err(format!("{t} has more than {MAX_ELEMENTS} elements"));
    }
    Ok(())
}

/// Appends nodes in topological order, inferring types as it goes, so a
/// finished graph is valid by construction.
#[derive(Clone, Debug)]
pub struct GraphBuilder {
    graph: Graph,
    origin: Option<String>,
}

impl GraphBuilder {
    pub fn new(name: impl Into<String>) -> Self {
        GraphBuilder {
            graph: Graph {
                name: name.into(),
                values: vec![],
                nodes: vec![],
                inputs: vec![],
                outputs: vec![],
            },
            origin: None,
        }
    }

    /// Set the origin recorded on the nodes that follow (HIR block path).
    pub fn set_origin(&mut self, origin: Option<String>) {
        self.origin = origin;
    }

    pub fn input(&mut self, name: impl Into<String>, ty: TensorType) -> ValueId {
        let id = ValueId(self.graph.values.len() as u32);
        let k = self.graph.inputs.len();
        self.graph.values.push(Value {
            ty,
            name: Some(name.into()),
            def: ValueDef::Input(k),
        });
        self.graph.inputs.push(id);
        id
    }

    pub fn ty(&self, v: ValueId) -> &TensorType {
        self.graph.ty(v)
    }
    pub fn dtype(&self, v: ValueId) -> DType {
        self.graph.ty(v).dtype
    }
    pub fn shape(&self, v: ValueId) -> &Shape {
        &self.graph.ty(v).shape
    }

    /// Name a value (shown in the text IR).
    pub fn name_value(&mut self, v: ValueId, name: impl Into<String>) {
        self.graph.values[v.index()].name = Some(name.into());
    }

    /// Append a node of `op`; returns its outputs.
    pub fn op(
        &mut self,
        op: &str,
        inputs: &[ValueId],
        attrs: Attrs,
    ) -> Result<Vec<ValueId>, IrError> {
        let op = Op::named(op)?;
        self.push(op, inputs, attrs)
    }

    /// Append a node with exactly one output.
    pub fn op1(&mut self, op: &str, inputs: &[ValueId], attrs: Attrs) -> Result<ValueId, IrError> {
        let outs = self.op(op, inputs, attrs)?;
        match outs.as_slice() {
            [v] => Ok(*v),
            _ => Err(IrError::msg(format!(
                "`{op}` has {} outputs, expected one",
                outs.len()
            ))),
        }
    }

    pub fn push(
        &mut self,
        op: Op,
        inputs: &[ValueId],
        attrs: Attrs,
    ) -> Result<Vec<ValueId>, IrError> {
        let n = self.graph.nodes.len();
        let node_err = |msg: String| IrError::Node {
            node: n,
            op: op.name().into(),
            msg,
        };
        for (k, v) in inputs.iter().enumerate() {
            if v.index() >= self.graph.values.len() {
                return Err(node_err(format!(
                    "input {k} (%{}) does not exist in this graph",
                    v.0
                )));
            }
        }
        let attrs = attrs.normalize(op.name(), op.attrs)?;
        let in_types: Vec<TensorType> = inputs.iter().map(|&v| self.graph.ty(v).clone()).collect();
        let out_types = infer(op, &in_types, &attrs).map_err(node_err)?;
        let mut outputs = Vec::with_capacity(out_types.len());
        for (k, ty) in out_types.into_iter().enumerate() {
            let id = ValueId(self.graph.values.len() as u32);
            self.graph.values.push(Value {
                ty,
                name: None,
                def: ValueDef::Node { node: n, output: k },
            });
            outputs.push(id);
        }
        self.graph.nodes.push(Node {
            op,
            inputs: inputs.to_vec(),
            outputs: outputs.clone(),
            attrs,
            origin: self.origin.clone(),
        });
        Ok(outputs)
    }

    /// A constant tensor.
    pub fn constant(&mut self, t: HostTensor) -> Result<ValueId, IrError> {
        self.op1("constant", &[], Attrs::new().with("value", t))
    }

    /// A scalar constant of `dtype`.
    pub fn scalar(&mut self, v: f64, dtype: DType) -> Result<ValueId, IrError> {
        self.constant(HostTensor::from_f64(dtype, Shape::scalar(), vec![v])?)
    }

    pub fn unary(&mut self, op: &str, x: ValueId) -> Result<ValueId, IrError> {
        self.op1(op, &[x], Attrs::new())
    }
    pub fn binary(&mut self, op: &str, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.op1(op, &[a, b], Attrs::new())
    }
    /// Reduce over `axes`, keeping reduced dims as 1.
    pub fn reduce_keep(&mut self, op: &str, x: ValueId, axes: &[i64]) -> Result<ValueId, IrError> {
        self.op1(
            op,
            &[x],
            Attrs::new()
                .with("axes", axes.to_vec())
                .with("keepdim", true),
        )
    }

    pub fn set_outputs(&mut self, outputs: &[ValueId]) {
        self.graph.outputs = outputs.to_vec();
    }

    /// Finish with `outputs` and verify the graph's own nodes (each
    /// sub-graph's interface is checked by its op's type rule) and the
    /// nesting depth of its sub-graphs.
    ///
    /// The insides of sub-graphs are not verified again: a sub-graph built
    /// with a builder was verified by its own `finish`, and re-verifying
    /// every sub-tree at every level made building (parsing, and every
    /// optimizer pass, which rebuilds graphs level by level) quadratic in
    /// the nesting depth. [`Graph::verify`] checks the whole tree; compile
    /// and the JSON reader run it.
    pub fn finish(mut self, outputs: &[ValueId]) -> Result<Graph, IrError> {
        self.graph.outputs = outputs.to_vec();
        self.graph.verify_nodes(false)?;
        Ok(self.graph)
    }

    /// The graph so far (unverified outputs).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
}
