//! HIR: model blocks with named parameters that lower to MIR.
//!
//! A [`Model`] is a tree of [`Block`]s. Each block declares its own
//! parameters under names relative to itself (`weight`, `bias`) and names
//! its children (`attn`, `q`, `layers.0`); a parameter's full name is the
//! dotted path from the root, as in a PyTorch `state_dict`
//! (`encoder.layers.0.attn.q.weight`). Parameter shapes follow PyTorch too,
//! so checkpoints load by tensor name.
//!
//! [`Model::to_mir`] turns the tree into one MIR [`Graph`]: the data inputs
//! come first, then every parameter as a named graph input, then the nodes
//! each block emits through a [`Lower`] context. Every node records in its
//! `origin` the path of the block that emitted it (the model name for the
//! root block), so MIR diagnostics and profiles point back at the model.
//!
//! HIR only builds graphs; numeric behaviour is that of the MIR ops.

use crate::attr::Attrs;
use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::{Graph, GraphBuilder, ValueId};
use crate::shape::{Shape, TensorType};
use crate::tensor::HostTensor;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

mod attention;
mod conv;
mod layers;
mod mlp;
mod recurrent;
mod sequential;
#[cfg(test)]
mod tests;
mod transformer;

pub use attention::*;
pub use conv::*;
pub use layers::*;
pub use mlp::*;
pub use recurrent::*;
pub use sequential::*;
pub use transformer::*;

// ------------------------------------------------------------ the framework

/// A named parameter tensor. Inside a block the name is relative to it
/// (`weight`); [`Model::parameters`] returns full dotted names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    pub name: String,
    pub ty: TensorType,
}

impl Param {
    /// A parameter of `dtype` and shape `dims`.
    pub fn new(name: impl Into<String>, dtype: DType, dims: impl Into<Shape>) -> Self {
        Param {
            name: name.into(),
            ty: TensorType::new(dtype, dims),
        }
    }
}

/// One HIR block: a model component with named parameters and children
/// that knows how to emit itself as MIR.
pub trait Block {
    /// The block's type name (`Linear`, `Attention`, ...).
    fn kind(&self) -> &'static str;

    /// A one-line description with the configuration, for outlines.
    fn describe(&self) -> String {
        self.kind().to_string()
    }

    /// The block's own parameters (not its children's), with names relative
    /// to the block.
    fn params(&self) -> Vec<Param> {
        Vec::new()
    }

    /// The named child blocks. A name may contain dots (`layers.0`) to
    /// flatten a list of children into one level.
    fn children(&self) -> Vec<(String, &dyn Block)> {
        Vec::new()
    }

    /// Emit MIR for this block applied to `inputs`; returns its outputs.
    /// Parameters are read with [`Lower::param`], children lowered with
    /// [`Lower::child`] under the names `children` reports.
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError>;
}

/// The lowering context: the MIR builder, the path of the block being
/// lowered, and the graph inputs bound to each parameter's full name.
pub struct Lower<'a> {
    builder: &'a mut GraphBuilder,
    path: Vec<String>,
    params: HashMap<String, ValueId>,
    /// The origin recorded for nodes the root block emits.
    root: String,
    /// Set once an error has been prefixed with the block that raised it,
    /// so enclosing blocks pass it through instead of prefixing it again.
    tagged: bool,
}

impl<'a> Lower<'a> {
    /// A context appending to `builder`; nodes of the root block record
    /// `root` as their origin.
    pub fn new(builder: &'a mut GraphBuilder, root: impl Into<String>) -> Self {
        let root = root.into();
        builder.set_origin(Some(root.clone()));
        Lower {
            builder,
            path: Vec::new(),
            params: HashMap::new(),
            root,
            tagged: false,
        }
    }

    /// Make the parameter `full_name` (dotted from the root) read as `v`.
    pub fn bind_param(&mut self, full_name: impl Into<String>, v: ValueId) {
        self.params.insert(full_name.into(), v);
    }

    /// The MIR builder, for emitting nodes directly.
    pub fn builder(&mut self) -> &mut GraphBuilder {
        self.builder
    }

    /// The dotted path of the block being lowered (empty at the root).
    pub fn path(&self) -> String {
        self.path.join(".")
    }

    /// The origin recorded on nodes emitted now: the block path, or the
    /// root label at the root.
    pub fn origin(&self) -> String {
        if self.path.is_empty() {
            self.root.clone()
        } else {
            self.path()
        }
    }

    /// The value of this block's parameter `local` (e.g. `weight`).
    pub fn param(&self, local: &str) -> Result<ValueId, IrError> {
        let full = join(&self.path(), local);
        self.params.get(&full).copied().ok_or_else(|| {
            IrError::msg(format!(
                "parameter `{local}` is not declared (looked for `{full}`; a block must list every parameter it reads in `params()`)"
            ))
        })
    }

    /// Lower `block` as the child `name` of the current block: its nodes
    /// record the child's path as their origin, and its parameters resolve
    /// under that path.
    pub fn child(
        &mut self,
        name: &str,
        block: &dyn Block,
        inputs: &[ValueId],
    ) -> Result<Vec<ValueId>, IrError> {
        self.path.push(name.to_string());
        self.builder.set_origin(Some(self.origin()));
        let result = block.lower(self, inputs);
        let result = self.tag(result, block);
        self.path.pop();
        self.builder.set_origin(Some(self.origin()));
        result
    }

    /// [`Lower::child`] for a child with exactly one output.
    pub fn child1(
        &mut self,
        name: &str,
        block: &dyn Block,
        inputs: &[ValueId],
    ) -> Result<ValueId, IrError> {
        let outs = self.child(name, block, inputs)?;
        match outs.as_slice() {
            [v] => Ok(*v),
            _ => Err(self.tag_msg(format!(
                "child `{name}` ({}) gave {} outputs, expected one",
                block.kind(),
                outs.len()
            ))),
        }
    }

    /// Lower `block` as the root (empty path).
    pub fn root(&mut self, block: &dyn Block, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let result = block.lower(self, inputs);
        self.tag(result, block)
    }

    /// Prefix the first error to leave a block with that block's path.
    fn tag<T>(&mut self, result: Result<T, IrError>, block: &dyn Block) -> Result<T, IrError> {
        match result {
            Err(e) if !self.tagged => {
                self.tagged = true;
                Err(IrError::msg(format!(
                    "block `{}` ({}): {e}",
                    self.origin(),
                    block.kind()
                )))
            }
            other => other,
        }
    }

    /// An error already naming the current block.
    fn tag_msg(&mut self, msg: String) -> IrError {
        self.tagged = true;
        IrError::msg(format!("block `{}`: {msg}", self.origin()))
    }

    /// An error about the block being lowered (its path is added when the
    /// error leaves the block).
    pub fn err(&self, msg: impl Into<String>) -> IrError {
        IrError::msg(msg)
    }

    /// The type of `v`.
    pub fn ty(&self, v: ValueId) -> TensorType {
        self.builder.ty(v).clone()
    }

    /// The extents of `v`.
    pub fn dims(&self, v: ValueId) -> Vec<usize> {
        self.builder.shape(v).dims().to_vec()
    }

    /// Append a node with one output.
    pub fn op1(&mut self, op: &str, inputs: &[ValueId], attrs: Attrs) -> Result<ValueId, IrError> {
        self.builder.op1(op, inputs, attrs)
    }

    /// Append a node; returns all its outputs.
    pub fn op(
        &mut self,
        op: &str,
        inputs: &[ValueId],
        attrs: Attrs,
    ) -> Result<Vec<ValueId>, IrError> {
        self.builder.op(op, inputs, attrs)
    }

    /// Append an attribute-free binary op.
    pub fn binary(&mut self, op: &str, a: ValueId, b: ValueId) -> Result<ValueId, IrError> {
        self.builder.binary(op, a, b)
    }

    /// `reshape` to static extents.
    pub fn reshape(&mut self, x: ValueId, dims: &[usize]) -> Result<ValueId, IrError> {
        let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        self.op1("reshape", &[x], Attrs::new().with("shape", shape))
    }

    /// `permute` by `perm`.
    pub fn permute(&mut self, x: ValueId, perm: &[i64]) -> Result<ValueId, IrError> {
        self.op1("permute", &[x], Attrs::new().with("perm", perm.to_vec()))
    }
}

/// `prefix.name`, or `name` at the root.
fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Names are dot-separated segments of ASCII letters, digits and `_`, so
/// they survive the text IR unchanged.
fn check_name(name: &str, what: &str) -> Result<(), IrError> {
    let ok = name
        .split('.')
        .all(|seg| !seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    if ok {
        Ok(())
    } else {
        Err(IrError::msg(format!(
            "{what} name {name:?} is invalid: use dot-separated segments of letters, digits and `_`"
        )))
    }
}

/// Visit `block` and its descendants depth first with their full paths.
fn walk<'b>(
    path: &str,
    block: &'b dyn Block,
    f: &mut dyn FnMut(&str, &'b dyn Block) -> Result<(), IrError>,
) -> Result<(), IrError> {
    f(path, block)?;
    for (name, child) in block.children() {
        walk(&join(path, &name), child, f)?;
    }
    Ok(())
}

/// A whole model: named, typed data inputs and a root block.
pub struct Model {
    pub name: String,
    pub inputs: Vec<(String, TensorType)>,
    pub root: Box<dyn Block>,
}

impl Model {
    /// A model with no data inputs yet (add them with [`Model::with_input`]).
    pub fn new(name: impl Into<String>, root: impl Block + 'static) -> Self {
        Model {
            name: name.into(),
            inputs: Vec::new(),
            root: Box::new(root),
        }
    }

    /// Builder-style: append a data input.
    pub fn with_input(mut self, name: impl Into<String>, ty: TensorType) -> Self {
        self.inputs.push((name.into(), ty));
        self
    }

    /// Every parameter with its full dotted name, in tree order (a block's
    /// own parameters, then its children's).
    pub fn parameters(&self) -> Vec<Param> {
        let mut out = Vec::new();
        let _ = walk("", self.root.as_ref(), &mut |path, b| {
            out.extend(b.params().into_iter().map(|p| Param {
                name: join(path, &p.name),
                ty: p.ty,
            }));
            Ok(())
        });
        out
    }

    /// The number of parameter elements.
    pub fn num_parameters(&self) -> usize {
        // Saturating: absurd configurations must not panic here.
        let numel = |p: &Param| p.ty.dims().iter().fold(1usize, |a, &d| a.saturating_mul(d));
        self.parameters()
            .iter()
            .map(numel)
            .fold(0, usize::saturating_add)
    }

    /// Every block's path and kind, in tree order (the root's path is empty).
    pub fn blocks(&self) -> Vec<(String, &'static str)> {
        let mut out = Vec::new();
        let _ = walk("", self.root.as_ref(), &mut |path, b| {
            out.push((path.to_string(), b.kind()));
            Ok(())
        });
        out
    }

    /// Check names: valid segments, no two children of a block alike, and
    /// data inputs and parameters all distinct (they become graph inputs).
    pub fn check(&self) -> Result<(), IrError> {
        let mut seen = HashSet::new();
        for (name, _) in &self.inputs {
            check_name(name, "input")?;
            if !seen.insert(name.clone()) {
                return Err(IrError::msg(format!(
                    "model `{}`: input `{name}` is declared twice",
                    self.name
                )));
            }
        }
        walk("", self.root.as_ref(), &mut |path, b| {
            let at = if path.is_empty() {
                self.name.as_str()
            } else {
                path
            };
            let mut kids = HashSet::new();
            for (name, _) in b.children() {
                check_name(&name, &format!("block `{at}`: child"))?;
                if !kids.insert(name.clone()) {
                    return Err(IrError::msg(format!(
                        "block `{at}` has two children named `{name}`"
                    )));
                }
            }
            for p in b.params() {
                check_name(&p.name, &format!("block `{at}`: parameter"))?;
                let full = join(path, &p.name);
                if !seen.insert(full.clone()) {
                    return Err(IrError::msg(format!(
                        "`{full}` names two graph inputs (parameters or data inputs)"
                    )));
                }
            }
            Ok(())
        })
    }

    /// Lower to a verified MIR graph: data inputs, then every parameter as a
    /// graph input named by its full name, then the root block's nodes.
    pub fn to_mir(&self) -> Result<Graph, IrError> {
        self.check()?;
        let mut b = GraphBuilder::new(self.name.clone());
        let data: Vec<ValueId> = self
            .inputs
            .iter()
            .map(|(n, ty)| b.input(n.clone(), ty.clone()))
            .collect();
        let params: Vec<(String, ValueId)> = self
            .parameters()
            .into_iter()
            .map(|p| (p.name.clone(), b.input(p.name, p.ty)))
            .collect();
        let outputs = {
            let mut cx = Lower::new(&mut b, self.name.clone());
            for (name, v) in params {
                cx.bind_param(name, v);
            }
            cx.root(self.root.as_ref(), &data)?
        };
        b.set_origin(None);
        b.finish(&outputs)
    }

    /// The block tree with each block's configuration and parameter types,
    /// and the parameter total.
    pub fn outline(&self) -> String {
        let mut s = String::new();
        let inputs: Vec<String> = self
            .inputs
            .iter()
            .map(|(n, t)| format!("{n}: {t}"))
            .collect();
        let _ = writeln!(s, "model {} ({})", self.name, inputs.join(", "));
        outline_block(&mut s, &self.name, self.root.as_ref(), 0);
        let params = self.parameters();
        let _ = writeln!(
            s,
            "{} parameters in {} tensors",
            self.num_parameters(),
            params.len()
        );
        s
    }
}

fn outline_block(s: &mut String, name: &str, block: &dyn Block, depth: usize) {
    let pad = "  ".repeat(depth);
    let _ = writeln!(s, "{pad}{name}: {}", block.describe());
    for p in block.params() {
        let _ = writeln!(s, "{pad}  {} {}", p.name, p.ty);
    }
    for (n, child) in block.children() {
        outline_block(s, &n, child, depth + 1);
    }
}

// ------------------------------------------------------------ shared checks

/// The inputs as exactly `N` values.
fn inputs_n<const N: usize>(inputs: &[ValueId]) -> Result<[ValueId; N], IrError> {
    inputs.try_into().map_err(|_| {
        IrError::msg(format!(
            "expects {N} input{}, got {}",
            if N == 1 { "" } else { "s" },
            inputs.len()
        ))
    })
}

/// `x` as (..., `last`), the trailing axis a block's parameters fix.
fn expect_last(cx: &Lower, x: ValueId, last: usize, layout: &str) -> Result<Vec<usize>, IrError> {
    let dims = cx.dims(x);
    if dims.last() != Some(&last) {
        return Err(cx.err(format!(
            "expects input {layout} with last axis {last}, got {}",
            cx.ty(x)
        )));
    }
    Ok(dims)
}

// ------------------------------------------------------------ leaf blocks

/// An activation function, fusable into `matmul_bias_act`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    #[default]
    None,
    Relu,
    /// Exact (erf) gelu.
    Gelu,
    /// tanh-approximated gelu.
    GeluTanh,
    Silu,
    Sigmoid,
    Tanh,
}

impl Activation {
    /// The MIR op name (also `matmul_bias_act`'s `activation` value).
    pub fn name(self) -> &'static str {
        match self {
            Activation::None => "none",
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_tanh",
            Activation::Silu => "silu",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
        }
    }

    /// Apply as a standalone op (`None` is the identity and emits nothing).
    pub fn apply(self, cx: &mut Lower, x: ValueId) -> Result<ValueId, IrError> {
        match self {
            Activation::None => Ok(x),
            a => cx.op1(a.name(), &[x], Attrs::new()),
        }
    }
}
