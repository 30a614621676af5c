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

/// `y = act(x · Wᵀ + b)` over the last axis (PyTorch `nn.Linear`).
/// Parameters: `weight` (out, in), `bias` (out).
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    pub in_features: usize,
    pub out_features: usize,
    pub bias: bool,
    /// Fused into the matmul epilogue.
    pub activation: Activation,
    pub dtype: DType,
}

impl Linear {
    /// An f32 layer without activation.
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Self {
        Linear {
            in_features,
            out_features,
            bias,
            activation: Activation::None,
            dtype: DType::F32,
        }
    }
    /// Builder-style: fuse `activation` after the bias.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
}

impl Block for Linear {
    fn kind(&self) -> &'static str {
        "Linear"
    }
    fn describe(&self) -> String {
        format!(
            "Linear(in={}, out={}, bias={}, activation={})",
            self.in_features,
            self.out_features,
            self.bias,
            self.activation.name()
        )
    }
    fn params(&self) -> Vec<Param> {
        let mut p = vec![Param::new(
            "weight",
            self.dtype,
            [self.out_features, self.in_features],
        )];
        if self.bias {
            p.push(Param::new("bias", self.dtype, [self.out_features]));
        }
        p
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        expect_last(cx, x, self.in_features, "(..., in_features)")?;
        // The weight is stored (out, in) as in PyTorch; the product wants (in, out).
        let w = cx.param("weight")?;
        let wt = cx.permute(w, &[1, 0])?;
        if !self.bias && self.activation == Activation::None {
            return Ok(vec![cx.binary("matmul", x, wt)?]);
        }
        let mut args = vec![x, wt];
        if self.bias {
            args.push(cx.param("bias")?);
        }
        let attrs = Attrs::new().with("activation", self.activation.name());
        Ok(vec![cx.op1("matmul_bias_act", &args, attrs)?])
    }
}

/// Rows of a (num, dim) table selected by integer ids (`nn.Embedding`).
/// Parameter: `weight` (num, dim). Input ids of any shape, i32 or i64.
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    pub num: usize,
    pub dim: usize,
    pub dtype: DType,
}

impl Embedding {
    /// An f32 table of `num` rows of `dim`.
    pub fn new(num: usize, dim: usize) -> Self {
        Embedding {
            num,
            dim,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
}

impl Block for Embedding {
    fn kind(&self) -> &'static str {
        "Embedding"
    }
    fn describe(&self) -> String {
        format!("Embedding(num={}, dim={})", self.num, self.dim)
    }
    fn params(&self) -> Vec<Param> {
        vec![Param::new("weight", self.dtype, [self.num, self.dim])]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [ids] = inputs_n(inputs)?;
        let ty = cx.ty(ids);
        if !matches!(ty.dtype, DType::I32 | DType::I64) {
            return Err(cx.err(format!("expects i32 or i64 ids, got {ty}")));
        }
        let w = cx.param("weight")?;
        Ok(vec![cx.op1("embedding", &[w, ids], Attrs::new())?])
    }
}

/// Layer normalization over the last axis (`nn.LayerNorm(dim)`).
/// Parameters: `weight` (dim), `bias` (dim).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerNorm {
    pub dim: usize,
    pub eps: f64,
    pub dtype: DType,
}

impl LayerNorm {
    /// An f32 layer norm.
    pub fn new(dim: usize, eps: f64) -> Self {
        LayerNorm {
            dim,
            eps,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
}

impl Block for LayerNorm {
    fn kind(&self) -> &'static str {
        "LayerNorm"
    }
    fn describe(&self) -> String {
        format!("LayerNorm(dim={}, eps={:e})", self.dim, self.eps)
    }
    fn params(&self) -> Vec<Param> {
        vec![
            Param::new("weight", self.dtype, [self.dim]),
            Param::new("bias", self.dtype, [self.dim]),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        expect_last(cx, x, self.dim, "(..., dim)")?;
        let (w, b) = (cx.param("weight")?, cx.param("bias")?);
        let attrs = Attrs::new().with("axis", -1i64).with("eps", self.eps);
        Ok(vec![cx.op1("layer_norm", &[x, w, b], attrs)?])
    }
}

/// RMS normalization over the last axis (llama `RMSNorm`).
/// Parameter: `weight` (dim).
#[derive(Clone, Debug, PartialEq)]
pub struct RmsNorm {
    pub dim: usize,
    pub eps: f64,
    pub dtype: DType,
}

impl RmsNorm {
    /// An f32 RMS norm.
    pub fn new(dim: usize, eps: f64) -> Self {
        RmsNorm {
            dim,
            eps,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
}

impl Block for RmsNorm {
    fn kind(&self) -> &'static str {
        "RmsNorm"
    }
    fn describe(&self) -> String {
        format!("RmsNorm(dim={}, eps={:e})", self.dim, self.eps)
    }
    fn params(&self) -> Vec<Param> {
        vec![Param::new("weight", self.dtype, [self.dim])]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        expect_last(cx, x, self.dim, "(..., dim)")?;
        let w = cx.param("weight")?;
        let attrs = Attrs::new().with("axis", -1i64).with("eps", self.eps);
        Ok(vec![cx.op1("rms_norm", &[x, w], attrs)?])
    }
}

/// 2-D convolution of (N, C, H, W) inputs (`nn.Conv2d`).
/// Parameters: `weight` (out_ch, in_ch/groups, kh, kw), `bias` (out_ch).
#[derive(Clone, Debug, PartialEq)]
pub struct Conv2d {
    pub in_ch: usize,
    pub out_ch: usize,
    /// (kh, kw).
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// Zero padding on both sides of (h, w).
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
    pub bias: bool,
    pub dtype: DType,
}

impl Conv2d {
    /// A square `kernel`, stride 1, no padding, one group, with bias, f32.
    pub fn new(in_ch: usize, out_ch: usize, kernel: usize) -> Self {
        Conv2d {
            in_ch,
            out_ch,
            kernel: [kernel; 2],
            stride: [1; 2],
            padding: [0; 2],
            dilation: [1; 2],
            groups: 1,
            bias: true,
            dtype: DType::F32,
        }
    }
    /// Builder-style: the same stride on both axes.
    pub fn with_stride(mut self, stride: usize) -> Self {
        self.stride = [stride; 2];
        self
    }
    /// Builder-style: the same padding on both axes.
    pub fn with_padding(mut self, padding: usize) -> Self {
        self.padding = [padding; 2];
        self
    }
    /// Builder-style: the same dilation on both axes.
    pub fn with_dilation(mut self, dilation: usize) -> Self {
        self.dilation = [dilation; 2];
        self
    }
    /// Builder-style: grouped convolution.
    pub fn with_groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }
    /// Builder-style: whether there is a bias.
    pub fn with_bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    fn check_groups(&self) -> Result<(), String> {
        let g = self.groups;
        if g == 0 || !self.in_ch.is_multiple_of(g) || !self.out_ch.is_multiple_of(g) {
            return Err(format!(
                "groups = {g} must divide in_ch = {} and out_ch = {}",
                self.in_ch, self.out_ch
            ));
        }
        Ok(())
    }
}

impl Block for Conv2d {
    fn kind(&self) -> &'static str {
        "Conv2d"
    }
    fn describe(&self) -> String {
        format!(
            "Conv2d(in={}, out={}, kernel={:?}, stride={:?}, padding={:?}, dilation={:?}, groups={}, bias={})",
            self.in_ch, self.out_ch, self.kernel, self.stride, self.padding, self.dilation, self.groups, self.bias
        )
    }
    fn params(&self) -> Vec<Param> {
        // A bad `groups` is reported by `lower`; here it must not divide by zero.
        let per_group = self.in_ch.checked_div(self.groups).unwrap_or(0);
        let [kh, kw] = self.kernel;
        let mut p = vec![Param::new(
            "weight",
            self.dtype,
            [self.out_ch, per_group, kh, kw],
        )];
        if self.bias {
            p.push(Param::new("bias", self.dtype, [self.out_ch]));
        }
        p
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        self.check_groups().map_err(|m| cx.err(m))?;
        let dims = cx.dims(x);
        if dims.len() != 4 || dims[1] != self.in_ch {
            return Err(cx.err(format!(
                "expects x as (N, {}, H, W), got {}",
                self.in_ch,
                cx.ty(x)
            )));
        }
        let mut args = vec![x, cx.param("weight")?];
        if self.bias {
            args.push(cx.param("bias")?);
        }
        let i = |v: [usize; 2]| v.iter().map(|&d| d as i64).collect::<Vec<i64>>();
        let [ph, pw] = self.padding;
        let attrs = Attrs::new()
            .with("strides", i(self.stride))
            .with(
                "pads",
                i([ph, pw])
                    .into_iter()
                    .chain(i([ph, pw]))
                    .collect::<Vec<_>>(),
            )
            .with("dilations", i(self.dilation))
            .with("groups", self.groups);
        Ok(vec![cx.op1("conv", &args, attrs)?])
    }
}

/// Inference batch normalization of (N, C, ...) inputs with running
/// statistics (`nn.BatchNorm2d` in eval mode). Parameters: `weight`,
/// `bias`, `running_mean`, `running_var`, all (C).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchNorm {
    pub channels: usize,
    pub eps: f64,
    pub dtype: DType,
}

impl BatchNorm {
    /// An f32 batch norm.
    pub fn new(channels: usize, eps: f64) -> Self {
        BatchNorm {
            channels,
            eps,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }
}

const BATCH_NORM_PARAMS: [&str; 4] = ["weight", "bias", "running_mean", "running_var"];

impl Block for BatchNorm {
    fn kind(&self) -> &'static str {
        "BatchNorm"
    }
    fn describe(&self) -> String {
        format!("BatchNorm(channels={}, eps={:e})", self.channels, self.eps)
    }
    fn params(&self) -> Vec<Param> {
        BATCH_NORM_PARAMS
            .iter()
            .map(|n| Param::new(*n, self.dtype, [self.channels]))
            .collect()
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        let dims = cx.dims(x);
        if dims.len() < 2 || dims[1] != self.channels {
            return Err(cx.err(format!(
                "expects x as (N, {}, ...), got {}",
                self.channels,
                cx.ty(x)
            )));
        }
        let mut args = vec![x];
        for name in BATCH_NORM_PARAMS {
            args.push(cx.param(name)?);
        }
        Ok(vec![cx.op1(
            "batch_norm",
            &args,
            Attrs::new().with("eps", self.eps),
        )?])
    }
}

/// A one-layer unidirectional LSTM over (T, B, I) inputs (`nn.LSTM`,
/// `batch_first=False`). Parameters: `weight_ih` (4H, I), `weight_hh`
/// (4H, H), `bias_ih` (4H), `bias_hh` (4H), gates in PyTorch order i, f, g, o.
///
/// Inputs: `x`, optionally followed by `h0`, `c0` (B, H) (zeros otherwise).
/// Outputs: the hidden sequence (T, B, H), then the final `h` and `c`.
///
/// Lowered to one `scan` whose body applies `lstm_cell`. Sub-graphs cannot
/// capture outer values, so the four weights ride along as loop-invariant
/// carries that the body returns unchanged.
#[derive(Clone, Debug, PartialEq)]
pub struct Lstm {
    pub input_size: usize,
    pub hidden_size: usize,
    pub dtype: DType,
}

const LSTM_PARAMS: [&str; 4] = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"];

impl Lstm {
    /// An f32 LSTM.
    pub fn new(input_size: usize, hidden_size: usize) -> Self {
        Lstm {
            input_size,
            hidden_size,
            dtype: DType::F32,
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// The scan body: (h, c, weights..., x_t) → (h', c', weights..., h').
    fn step_graph(
        &self,
        cx: &Lower,
        state: &TensorType,
        weights: &[TensorType; 4],
        x_t: TensorType,
    ) -> Result<Graph, IrError> {
        let mut b = GraphBuilder::new("lstm_step");
        b.set_origin(Some(cx.origin()));
        let h = b.input("h", state.clone());
        let c = b.input("c", state.clone());
        let w: Vec<ValueId> = LSTM_PARAMS
            .iter()
            .zip(weights)
            .map(|(n, ty)| b.input(*n, ty.clone()))
            .collect();
        let x = b.input("x", x_t);
        let hc = b.op(
            "lstm_cell",
            &[x, h, c, w[0], w[1], w[2], w[3]],
            Attrs::new(),
        )?;
        let mut outs = vec![hc[0], hc[1]];
        outs.extend(&w);
        outs.push(hc[0]);
        b.finish(&outs)
    }

    /// The initial state: given, or zeros of (B, H).
    fn initial_state(
        &self,
        cx: &mut Lower,
        given: &[ValueId],
        batch: usize,
        dtype: DType,
    ) -> Result<(ValueId, ValueId), IrError> {
        if let [h, c] = given {
            return Ok((*h, *c));
        }
        let zero = cx.builder().scalar(0.0, dtype)?;
        let shape = vec![batch as i64, self.hidden_size as i64];
        let z = cx.op1("broadcast", &[zero], Attrs::new().with("shape", shape))?;
        Ok((z, z))
    }
}

impl Block for Lstm {
    fn kind(&self) -> &'static str {
        "Lstm"
    }
    fn describe(&self) -> String {
        format!(
            "Lstm(input_size={}, hidden_size={})",
            self.input_size, self.hidden_size
        )
    }
    fn params(&self) -> Vec<Param> {
        let (h4, i, h) = (
            self.hidden_size.saturating_mul(4),
            self.input_size,
            self.hidden_size,
        );
        vec![
            Param::new("weight_ih", self.dtype, [h4, i]),
            Param::new("weight_hh", self.dtype, [h4, h]),
            Param::new("bias_ih", self.dtype, [h4]),
            Param::new("bias_hh", self.dtype, [h4]),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, state) = match inputs {
            [x, rest @ ..] if rest.is_empty() || rest.len() == 2 => (*x, rest),
            _ => {
                return Err(cx.err(format!(
                    "expects x or (x, h0, c0), got {} inputs",
                    inputs.len()
                )))
            }
        };
        let xt = cx.ty(x);
        if xt.rank() != 3 || xt.dims()[2] != self.input_size {
            return Err(cx.err(format!(
                "expects x as (T, B, {}), got {xt}",
                self.input_size
            )));
        }
        let batch = xt.dims()[1];
        let (h0, c0) = self.initial_state(cx, state, batch, xt.dtype)?;
        let mut weights = Vec::with_capacity(4);
        for name in LSTM_PARAMS {
            weights.push(cx.param(name)?);
        }
        let wty = [0, 1, 2, 3].map(|k| cx.ty(weights[k]));
        let body = self.step_graph(
            cx,
            &cx.ty(h0),
            &wty,
            TensorType::new(xt.dtype, [batch, self.input_size]),
        )?;
        let mut args = vec![h0, c0];
        args.extend(&weights);
        args.push(x);
        let carries = 2 + weights.len();
        let outs = cx.op(
            "scan",
            &args,
            Attrs::new().with("body", body).with("num_carry", carries),
        )?;
        // scan returns the final carries first, then the stacked per-step outputs.
        Ok(vec![outs[carries], outs[0], outs[1]])
    }
}

// ------------------------------------------------------------ composite blocks

/// fc1 → activation → fc2 (BERT / GPT-2 feed-forward). Children `fc1`
/// (dim → hidden, activation fused) and `fc2` (hidden → dim).
#[derive(Clone, Debug, PartialEq)]
pub struct Mlp {
    pub fc1: Linear,
    pub fc2: Linear,
}

impl Mlp {
    /// With biases, f32.
    pub fn new(dim: usize, hidden: usize, activation: Activation) -> Self {
        Mlp {
            fc1: Linear::new(dim, hidden, true).with_activation(activation),
            fc2: Linear::new(hidden, dim, true),
        }
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.fc1.dtype = dtype;
        self.fc2.dtype = dtype;
        self
    }
}

impl Block for Mlp {
    fn kind(&self) -> &'static str {
        "Mlp"
    }
    fn describe(&self) -> String {
        format!(
            "Mlp(dim={}, hidden={}, activation={})",
            self.fc1.in_features,
            self.fc1.out_features,
            self.fc1.activation.name()
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![("fc1".into(), &self.fc1), ("fc2".into(), &self.fc2)]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        let h = cx.child1("fc1", &self.fc1, &[x])?;
        Ok(vec![cx.child1("fc2", &self.fc2, &[h])?])
    }
}

/// Gated feed-forward: down(act(gate(x)) · up(x)) (llama SwiGLU with the
/// default silu; GeGLU with gelu). Children `gate`, `up` (dim → hidden),
/// `down` (hidden → dim), without biases by default.
#[derive(Clone, Debug, PartialEq)]
pub struct GatedMlp {
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
    pub activation: Activation,
}

impl GatedMlp {
    /// SwiGLU without biases, f32.
    pub fn new(dim: usize, hidden: usize) -> Self {
        GatedMlp {
            gate: Linear::new(dim, hidden, false),
            up: Linear::new(dim, hidden, false),
            down: Linear::new(hidden, dim, false),
            activation: Activation::Silu,
        }
    }
    /// Builder-style: the gate's activation.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }
    /// Builder-style: biases on all three projections.
    pub fn with_bias(mut self, bias: bool) -> Self {
        for l in [&mut self.gate, &mut self.up, &mut self.down] {
            l.bias = bias;
        }
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        for l in [&mut self.gate, &mut self.up, &mut self.down] {
            l.dtype = dtype;
        }
        self
    }
}

impl Block for GatedMlp {
    fn kind(&self) -> &'static str {
        "GatedMlp"
    }
    fn describe(&self) -> String {
        format!(
            "GatedMlp(dim={}, hidden={}, activation={})",
            self.gate.in_features,
            self.gate.out_features,
            self.activation.name()
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("gate".into(), &self.gate),
            ("up".into(), &self.up),
            ("down".into(), &self.down),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let [x] = inputs_n(inputs)?;
        let g = cx.child1("gate", &self.gate, &[x])?;
        let u = cx.child1("up", &self.up, &[x])?;
        // silu has a fused gate op; other activations gate elementwise.
        let h = if self.activation == Activation::Silu {
            cx.binary("swiglu", g, u)?
        } else {
            let a = self.activation.apply(cx, g)?;
            cx.binary("mul", a, u)?
        };
        Ok(vec![cx.child1("down", &self.down, &[h])?])
    }
}

/// Multi-head self-attention over (B, S, D) inputs. Children `q`, `k`, `v`,
/// `o` (Linear). With `kv_heads < heads` it is grouped-query attention:
/// query head h reads key/value head h / (heads / kv_heads), as in llama.
///
/// Inputs: `x`, optionally a mask: bool (keep where true) or additive
/// float, shaped (S, S) or (B|1, heads|1, S, S). A causal block combines a
/// given mask with causality. Optional rotary embeddings (NeoX halves,
/// positions 0..S) are applied to q and k.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub heads: usize,
    pub kv_heads: usize,
    pub causal: bool,
    /// RoPE base frequency (theta) when rotary embeddings are used.
    pub rope_theta: Option<f64>,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
}

/// The head layout of one attention application.
#[derive(Clone, Copy, Debug)]
struct Heads {
    batch: usize,
    seq: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl Heads {
    /// Grouped-query layouts need a group axis; MHA and MQA (one kv head)
    /// broadcast as they are.
    fn grouped(&self) -> bool {
        self.kv_heads > 1 && self.kv_heads < self.heads
    }
    fn group(&self) -> usize {
        self.heads / self.kv_heads
    }
}

impl Attention {
    /// Multi-head attention with biased projections, f32, no RoPE.
    pub fn new(dim: usize, heads: usize, causal: bool) -> Self {
        Attention {
            heads,
            kv_heads: heads,
            causal,
            rope_theta: None,
            q: Linear::new(dim, dim, true),
            k: Linear::new(dim, dim, true),
            v: Linear::new(dim, dim, true),
            o: Linear::new(dim, dim, true),
        }
    }
    /// Builder-style: grouped-query attention with `kv_heads` key/value
    /// heads (resizes the k and v projections).
    pub fn with_kv_heads(mut self, kv_heads: usize) -> Self {
        // A zero head count is reported by `lower`; here it must not divide by zero.
        let head_dim = self.q.out_features.checked_div(self.heads).unwrap_or(0);
        self.kv_heads = kv_heads;
        self.k.out_features = kv_heads.saturating_mul(head_dim);
        self.v.out_features = kv_heads.saturating_mul(head_dim);
        self
    }
    /// Builder-style: biases on all four projections.
    pub fn with_bias(mut self, bias: bool) -> Self {
        for l in [&mut self.q, &mut self.k, &mut self.v, &mut self.o] {
            l.bias = bias;
        }
        self
    }
    /// Builder-style: rotary embeddings with base `theta` (None: off).
    pub fn with_rope(mut self, theta: Option<f64>) -> Self {
        self.rope_theta = theta;
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        for l in [&mut self.q, &mut self.k, &mut self.v, &mut self.o] {
            l.dtype = dtype;
        }
        self
    }

    /// Check the configuration against x (B, S, D); returns the layout.
    fn heads_of(&self, cx: &Lower, x: ValueId) -> Result<Heads, IrError> {
        let dims = cx.dims(x);
        let d = self.q.in_features;
        if dims.len() != 3 || dims[2] != d {
            return Err(cx.err(format!("expects x as (B, S, {d}), got {}", cx.ty(x))));
        }
        let (h, kh) = (self.heads, self.kv_heads);
        if h == 0 || kh == 0 || !h.is_multiple_of(kh) || !self.q.out_features.is_multiple_of(h) {
            return Err(cx.err(format!(
                "heads = {h} must be positive, divide the q width {} and be a multiple of kv_heads = {kh}",
                self.q.out_features
            )));
        }
        let hd = self.q.out_features / h;
        if self.k.out_features != kh * hd
            || self.v.out_features != kh * hd
            || self.o.in_features != h * hd
        {
            return Err(cx.err(format!(
                "k and v must produce kv_heads·head_dim = {} features and o take {}; got k {}, v {}, o {}",
                kh * hd,
                h * hd,
                self.k.out_features,
                self.v.out_features,
                self.o.in_features
            )));
        }
        if self.k.in_features != d || self.v.in_features != d {
            return Err(cx.err(format!("k and v must take {d} features")));
        }
        if self.rope_theta.is_some() && !hd.is_multiple_of(2) {
            return Err(cx.err(format!("rotary embeddings need an even head_dim, got {hd}")));
        }
        Ok(Heads {
            batch: dims[0],
            seq: dims[1],
            heads: h,
            kv_heads: kh,
            head_dim: hd,
        })
    }

    /// The mask input and `mask_kind` for the attention op.
    fn mask(
        &self,
        cx: &mut Lower,
        mask: Option<ValueId>,
        hs: &Heads,
        dtype: DType,
    ) -> Result<(Option<ValueId>, &'static str), IrError> {
        let Some(m) = mask else {
            return Ok((None, if self.causal { "causal" } else { "none" }));
        };
        let custom = cx.ty(m).dtype == DType::Bool;
        let mut m = mask_layout(cx, m, hs)?;
        if self.causal {
            // The op takes one mask kind, so causality is folded into the given mask.
            let keep: Vec<bool> = (0..hs.seq)
                .flat_map(|i| (0..hs.seq).map(move |j| j <= i))
                .collect();
            let keep = cx
                .builder()
                .constant(HostTensor::from_slice(&keep, [hs.seq, hs.seq])?)?;
            m = if custom {
                cx.binary("and", m, keep)?
            } else {
                let ninf = cx.builder().scalar(f64::NEG_INFINITY, dtype)?;
                cx.op1("where", &[keep, m, ninf], Attrs::new())?
            };
        }
        Ok((Some(m), if custom { "custom" } else { "bias" }))
    }
}

/// (B, S, H·hd) → (B, H, S, hd).
fn split_heads(cx: &mut Lower, x: ValueId, hs: &Heads, heads: usize) -> Result<ValueId, IrError> {
    let r = cx.reshape(x, &[hs.batch, hs.seq, heads, hs.head_dim])?;
    cx.permute(r, &[0, 2, 1, 3])
}

/// (B, H, S, hd) → (B, S, H·hd).
fn merge_heads(cx: &mut Lower, y: ValueId, hs: &Heads) -> Result<ValueId, IrError> {
    let p = cx.permute(y, &[0, 2, 1, 3])?;
    cx.reshape(p, &[hs.batch, hs.seq, hs.heads * hs.head_dim])
}

/// A user mask in the layout of the scores: for grouped heads the head axis
/// is split into (kv_heads, group) like the queries.
fn mask_layout(cx: &mut Lower, m: ValueId, hs: &Heads) -> Result<ValueId, IrError> {
    let d = cx.dims(m);
    let ok = match d.len() {
        2 => true,
        4 => d[1] == 1 || d[1] == hs.heads,
        _ => false,
    };
    if !ok {
        return Err(cx.err(format!(
            "mask must be (S, S) or (B|1, {}|1, S, S), got {}",
            hs.heads,
            cx.ty(m)
        )));
    }
    if d.len() == 2 || !hs.grouped() {
        return Ok(m);
    }
    let heads = if d[1] == 1 {
        [1, 1]
    } else {
        [hs.kv_heads, hs.group()]
    };
    cx.reshape(m, &[d[0], heads[0], heads[1], d[2], d[3]])
}

/// The (S, hd/2) cos and sin tables of rotary embeddings at positions 0..S.
fn rope_tables(
    cx: &mut Lower,
    seq: usize,
    head_dim: usize,
    theta: f64,
    dtype: DType,
) -> Result<(ValueId, ValueId), IrError> {
    let half = head_dim / 2;
    let angles: Vec<f64> = (0..seq)
        .flat_map(|p| {
            (0..half).map(move |i| p as f64 * theta.powf(-2.0 * i as f64 / head_dim as f64))
        })
        .collect();
    let table = |f: fn(f64) -> f64| {
        HostTensor::from_f64(dtype, [seq, half], angles.iter().map(|&a| f(a)).collect())
    };
    let cos = cx.builder().constant(table(f64::cos)?)?;
    let sin = cx.builder().constant(table(f64::sin)?)?;
    Ok((cos, sin))
}

impl Block for Attention {
    fn kind(&self) -> &'static str {
        "Attention"
    }
    fn describe(&self) -> String {
        let rope = self
            .rope_theta
            .map(|t| format!(", rope_theta={t}"))
            .unwrap_or_default();
        format!(
            "Attention(dim={}, heads={}, kv_heads={}, causal={}{rope})",
            self.q.in_features, self.heads, self.kv_heads, self.causal
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("q".into(), &self.q),
            ("k".into(), &self.k),
            ("v".into(), &self.v),
            ("o".into(), &self.o),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, mask) = match inputs {
            [x] => (*x, None),
            [x, m] => (*x, Some(*m)),
            _ => {
                return Err(cx.err(format!(
                    "expects x and an optional mask, got {} inputs",
                    inputs.len()
                )))
            }
        };
        let hs = self.heads_of(cx, x)?;
        let dtype = cx.ty(x).dtype;
        let q = cx.child1("q", &self.q, &[x])?;
        let k = cx.child1("k", &self.k, &[x])?;
        let v = cx.child1("v", &self.v, &[x])?;
        let mut q = split_heads(cx, q, &hs, hs.heads)?;
        let mut k = split_heads(cx, k, &hs, hs.kv_heads)?;
        let mut v = split_heads(cx, v, &hs, hs.kv_heads)?;
        if let Some(theta) = self.rope_theta {
            let (cos, sin) = rope_tables(cx, hs.seq, hs.head_dim, theta, dtype)?;
            let qk = cx.op("qk_rope", &[q, k, cos, sin], Attrs::new())?;
            (q, k) = (qk[0], qk[1]);
        }
        if hs.grouped() {
            // (B, KH, g, S, hd) queries against (B, KH, 1, S, hd) keys and
            // values: the batch axes broadcast, so kv heads are never copied.
            let (b, s, hd) = (hs.batch, hs.seq, hs.head_dim);
            q = cx.reshape(q, &[b, hs.kv_heads, hs.group(), s, hd])?;
            k = cx.reshape(k, &[b, hs.kv_heads, 1, s, hd])?;
            v = cx.reshape(v, &[b, hs.kv_heads, 1, s, hd])?;
        }
        let (mask, kind) = self.mask(cx, mask, &hs, dtype)?;
        let mut args = vec![q, k, v];
        args.extend(mask);
        let mut y = cx.op1("attention", &args, Attrs::new().with("mask_kind", kind))?;
        if hs.grouped() {
            y = cx.reshape(y, &[hs.batch, hs.heads, hs.seq, hs.head_dim])?;
        }
        let y = merge_heads(cx, y, &hs)?;
        Ok(vec![cx.child1("o", &self.o, &[y])?])
    }
}

/// A BERT-style encoder layer over (B, S, D). Post-norm by default:
/// `x = ln1(x + attn(x)); x = ln2(x + mlp(x))`; with `norm_first`:
/// `x = x + attn(ln1(x)); x = x + mlp(ln2(x))`. Children `attn`, `ln1`,
/// `mlp` (gelu), `ln2`. Inputs: `x` and an optional attention mask.
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerEncoderLayer {
    pub norm_first: bool,
    pub attn: Attention,
    pub ln1: LayerNorm,
    pub mlp: Mlp,
    pub ln2: LayerNorm,
}

impl TransformerEncoderLayer {
    /// Post-norm, biased projections, gelu, f32.
    pub fn new(dim: usize, heads: usize, hidden: usize, eps: f64) -> Self {
        TransformerEncoderLayer {
            norm_first: false,
            attn: Attention::new(dim, heads, false),
            ln1: LayerNorm::new(dim, eps),
            mlp: Mlp::new(dim, hidden, Activation::Gelu),
            ln2: LayerNorm::new(dim, eps),
        }
    }
    /// Builder-style: pre-norm (true) or post-norm (false).
    pub fn with_norm_first(mut self, norm_first: bool) -> Self {
        self.norm_first = norm_first;
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.attn = self.attn.with_dtype(dtype);
        self.ln1.dtype = dtype;
        self.mlp = self.mlp.with_dtype(dtype);
        self.ln2.dtype = dtype;
        self
    }
}

/// `x` and an optional mask.
fn x_and_mask(cx: &Lower, inputs: &[ValueId]) -> Result<(ValueId, Option<ValueId>), IrError> {
    match inputs {
        [x] => Ok((*x, None)),
        [x, m] => Ok((*x, Some(*m))),
        _ => Err(cx.err(format!(
            "expects x and an optional mask, got {} inputs",
            inputs.len()
        ))),
    }
}

/// The attention child's inputs: `x` and the mask, if any.
fn with_mask(x: ValueId, mask: Option<ValueId>) -> Vec<ValueId> {
    std::iter::once(x).chain(mask).collect()
}

impl Block for TransformerEncoderLayer {
    fn kind(&self) -> &'static str {
        "TransformerEncoderLayer"
    }
    fn describe(&self) -> String {
        format!(
            "TransformerEncoderLayer(dim={}, heads={}, hidden={}, {})",
            self.attn.q.in_features,
            self.attn.heads,
            self.mlp.fc1.out_features,
            if self.norm_first {
                "pre-norm"
            } else {
                "post-norm"
            }
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("attn".into(), &self.attn),
            ("ln1".into(), &self.ln1),
            ("mlp".into(), &self.mlp),
            ("ln2".into(), &self.ln2),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, mask) = x_and_mask(cx, inputs)?;
        if self.norm_first {
            let n = cx.child1("ln1", &self.ln1, &[x])?;
            let a = cx.child1("attn", &self.attn, &with_mask(n, mask))?;
            let x = cx.binary("add", x, a)?;
            let n = cx.child1("ln2", &self.ln2, &[x])?;
            let m = cx.child1("mlp", &self.mlp, &[n])?;
            Ok(vec![cx.binary("add", x, m)?])
        } else {
            let a = cx.child1("attn", &self.attn, &with_mask(x, mask))?;
            let r = cx.binary("add", x, a)?;
            let x = cx.child1("ln1", &self.ln1, &[r])?;
            let m = cx.child1("mlp", &self.mlp, &[x])?;
            let r = cx.binary("add", x, m)?;
            Ok(vec![cx.child1("ln2", &self.ln2, &[r])?])
        }
    }
}

/// A stack of encoder layers (children `layers.0`, `layers.1`, ...) with
/// an optional final LayerNorm `norm` (pre-norm stacks have one). Inputs:
/// `x` and an optional mask shared by all layers.
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerEncoder {
    pub layers: Vec<TransformerEncoderLayer>,
    pub norm: Option<LayerNorm>,
}

impl TransformerEncoder {
    /// `num_layers` post-norm layers, no final norm (BERT).
    pub fn new(num_layers: usize, dim: usize, heads: usize, hidden: usize, eps: f64) -> Self {
        let layer = TransformerEncoderLayer::new(dim, heads, hidden, eps);
        TransformerEncoder {
            layers: vec![layer; num_layers],
            norm: None,
        }
    }
}

impl Block for TransformerEncoder {
    fn kind(&self) -> &'static str {
        "TransformerEncoder"
    }
    fn describe(&self) -> String {
        format!(
            "TransformerEncoder(layers={}, final_norm={})",
            self.layers.len(),
            self.norm.is_some()
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        let mut c: Vec<(String, &dyn Block)> = self
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| (format!("layers.{i}"), l as &dyn Block))
            .collect();
        if let Some(n) = &self.norm {
            c.push(("norm".into(), n));
        }
        c
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (mut x, mask) = x_and_mask(cx, inputs)?;
        for (i, layer) in self.layers.iter().enumerate() {
            x = cx.child1(&format!("layers.{i}"), layer, &with_mask(x, mask))?;
        }
        if let Some(n) = &self.norm {
            x = cx.child1("norm", n, &[x])?;
        }
        Ok(vec![x])
    }
}

/// A llama-style decoder layer over (B, S, D): pre-norm with RMSNorm,
/// causal self-attention with RoPE and no biases, SwiGLU feed-forward:
/// `h = x + attn(attn_norm(x)); y = h + mlp(mlp_norm(h))`. Children
/// `attn_norm`, `attn`, `mlp_norm`, `mlp`. Inputs: `x` and an optional
/// (padding) mask, combined with causality.
#[derive(Clone, Debug, PartialEq)]
pub struct TransformerDecoderLayer {
    pub attn_norm: RmsNorm,
    pub attn: Attention,
    pub mlp_norm: RmsNorm,
    pub mlp: GatedMlp,
}

/// Llama's default RoPE base.
pub const DEFAULT_ROPE_THETA: f64 = 10000.0;

impl TransformerDecoderLayer {
    /// Multi-head (kv_heads = heads), RoPE theta 10000, f32.
    pub fn new(dim: usize, heads: usize, hidden: usize, eps: f64) -> Self {
        TransformerDecoderLayer {
            attn_norm: RmsNorm::new(dim, eps),
            attn: Attention::new(dim, heads, true)
                .with_bias(false)
                .with_rope(Some(DEFAULT_ROPE_THETA)),
            mlp_norm: RmsNorm::new(dim, eps),
            mlp: GatedMlp::new(dim, hidden),
        }
    }
    /// Builder-style: grouped-query attention.
    pub fn with_kv_heads(mut self, kv_heads: usize) -> Self {
        self.attn = self.attn.with_kv_heads(kv_heads);
        self
    }
    /// Builder-style: parameter element type.
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.attn_norm.dtype = dtype;
        self.attn = self.attn.with_dtype(dtype);
        self.mlp_norm.dtype = dtype;
        self.mlp = self.mlp.with_dtype(dtype);
        self
    }
}

impl Block for TransformerDecoderLayer {
    fn kind(&self) -> &'static str {
        "TransformerDecoderLayer"
    }
    fn describe(&self) -> String {
        format!(
            "TransformerDecoderLayer(dim={}, heads={}, kv_heads={}, hidden={})",
            self.attn.q.in_features,
            self.attn.heads,
            self.attn.kv_heads,
            self.mlp.gate.out_features
        )
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        vec![
            ("attn_norm".into(), &self.attn_norm),
            ("attn".into(), &self.attn),
            ("mlp_norm".into(), &self.mlp_norm),
            ("mlp".into(), &self.mlp),
        ]
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let (x, mask) = x_and_mask(cx, inputs)?;
        let n = cx.child1("attn_norm", &self.attn_norm, &[x])?;
        let a = cx.child1("attn", &self.attn, &with_mask(n, mask))?;
        let h = cx.binary("add", x, a)?;
        let n = cx.child1("mlp_norm", &self.mlp_norm, &[h])?;
        let m = cx.child1("mlp", &self.mlp, &[n])?;
        Ok(vec![cx.binary("add", h, m)?])
    }
}

/// Named children applied in order: the first gets the block's inputs,
/// each next one the previous one's outputs. Empty, it passes its inputs
/// through.
#[derive(Default)]
pub struct Sequential {
    children: Vec<(String, Box<dyn Block>)>,
}

impl Sequential {
    /// No children yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Builder-style: append the child `name`.
    pub fn with(mut self, name: impl Into<String>, block: impl Block + 'static) -> Self {
        self.push(name, Box::new(block));
        self
    }
    /// Append the child `name`.
    pub fn push(&mut self, name: impl Into<String>, block: Box<dyn Block>) {
        self.children.push((name.into(), block));
    }
    /// The number of children.
    pub fn len(&self) -> usize {
        self.children.len()
    }
    /// Whether there are no children.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }
}

impl Block for Sequential {
    fn kind(&self) -> &'static str {
        "Sequential"
    }
    fn describe(&self) -> String {
        format!("Sequential({} children)", self.children.len())
    }
    fn children(&self) -> Vec<(String, &dyn Block)> {
        self.children
            .iter()
            .map(|(n, b)| (n.clone(), b.as_ref()))
            .collect()
    }
    fn lower(&self, cx: &mut Lower, inputs: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
        let mut values = inputs.to_vec();
        for (name, block) in &self.children {
            values = cx.child(name, block.as_ref(), &values)?;
        }
        Ok(values)
    }
}

// ------------------------------------------------------------ tests

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ValueDef;
    use crate::text;

    fn f32t(dims: &[usize]) -> TensorType {
        TensorType::new(DType::F32, dims.to_vec())
    }

    /// Lower and check what every test wants: a verified graph whose inputs
    /// are the data inputs then the parameters, by name and type, each used.
    fn lower(model: &Model) -> Graph {
        let g = model
            .to_mir()
            .unwrap_or_else(|e| panic!("{} does not lower: {e}", model.name));
        g.verify().unwrap();
        let mut want: Vec<(String, TensorType)> = model.inputs.clone();
        want.extend(model.parameters().into_iter().map(|p| (p.name, p.ty)));
        let have: Vec<(String, TensorType)> = g
            .inputs
            .iter()
            .map(|&v| {
                (
                    g.values[v.index()].name.clone().unwrap_or_default(),
                    g.ty(v).clone(),
                )
            })
            .collect();
        assert_eq!(have, want);
        for &v in &g.inputs {
            let used = g.nodes.iter().any(|n| n.inputs.contains(&v)) || g.outputs.contains(&v);
            assert!(
                used,
                "graph input {:?} is never used",
                g.values[v.index()].name
            );
        }
        g
    }

    fn params(model: &Model) -> Vec<(String, Vec<usize>)> {
        model
            .parameters()
            .into_iter()
            .map(|p| (p.name, p.ty.dims().to_vec()))
            .collect()
    }

    fn p(name: &str, dims: &[usize]) -> (String, Vec<usize>) {
        (name.to_string(), dims.to_vec())
    }

    fn count(g: &Graph, op: &str) -> usize {
        g.op_histogram().get(op).copied().unwrap_or(0)
    }

    fn round_trips(g: &Graph) {
        let printed = text::print(g);
        let parsed = text::parse(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(text::print(&parsed), printed);
    }

    #[test]
    fn linear_is_x_times_w_transposed_plus_bias() {
        let m = Model::new(
            "lin",
            Linear::new(4, 8, true).with_activation(Activation::Gelu),
        )
        .with_input("x", f32t(&[2, 3, 4]));
        assert_eq!(params(&m), vec![p("weight", &[8, 4]), p("bias", &[8])]);
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[2, 3, 8])]);
        let mm = g
            .nodes
            .iter()
            .find(|n| n.op.name() == "matmul_bias_act")
            .expect("a fused matmul");
        assert_eq!(mm.attrs.str("activation").unwrap(), "gelu");
        assert_eq!(count(&g, "permute"), 1);

        let plain = lower(&Model::new("lin", Linear::new(4, 8, false)).with_input("x", f32t(&[4])));
        assert_eq!(plain.output_types(), vec![f32t(&[8])]);
        assert_eq!(count(&plain, "matmul"), 1);
        assert_eq!(count(&plain, "matmul_bias_act"), 0);
    }

    #[test]
    fn errors_name_the_block_and_the_problem() {
        let m = Model::new(
            "net",
            Sequential::new().with("head", Linear::new(4, 2, true)),
        )
        .with_input("x", f32t(&[2, 5]));
        let e = m.to_mir().unwrap_err().to_string();
        assert!(
            e.contains("block `head` (Linear)")
                && e.contains("last axis 4")
                && e.contains("f32[2,5]"),
            "{e}"
        );

        let m = Model::new("net", Embedding::new(10, 4)).with_input("ids", f32t(&[3]));
        let e = m.to_mir().unwrap_err().to_string();
        assert!(
            e.contains("block `net` (Embedding)") && e.contains("i32 or i64"),
            "{e}"
        );

        let m = Model::new("net", Conv2d::new(4, 6, 3).with_groups(4))
            .with_input("x", f32t(&[1, 4, 8, 8]));
        assert!(m.to_mir().unwrap_err().to_string().contains("groups = 4"));
        let m = Model::new("net", Conv2d::new(4, 6, 3).with_groups(0))
            .with_input("x", f32t(&[1, 4, 8, 8]));
        assert!(m.to_mir().unwrap_err().to_string().contains("groups = 0"));

        let m = Model::new("net", Attention::new(8, 3, false)).with_input("x", f32t(&[1, 2, 8]));
        assert!(m.to_mir().unwrap_err().to_string().contains("heads = 3"));
    }

    /// A block that reads a parameter it never declared.
    struct Undeclared;
    impl Block for Undeclared {
        fn kind(&self) -> &'static str {
            "Undeclared"
        }
        fn lower(&self, cx: &mut Lower, _: &[ValueId]) -> Result<Vec<ValueId>, IrError> {
            Ok(vec![cx.param("scale")?])
        }
    }

    #[test]
    fn missing_parameters_and_bad_names_are_errors() {
        let m = Model::new(
            "net",
            Sequential::new().with("a", Sequential::new().with("b", Undeclared)),
        );
        let e = m.to_mir().unwrap_err().to_string();
        assert!(
            e.contains("block `a.b` (Undeclared)") && e.contains("`a.b.scale`"),
            "{e}"
        );
        // The innermost block names itself once; enclosing blocks do not re-prefix.
        assert_eq!(e.matches("block `").count(), 1, "{e}");

        let twice = Model::new(
            "net",
            Sequential::new()
                .with("l", Linear::new(2, 2, true))
                .with("l", Linear::new(2, 2, true)),
        );
        assert!(twice
            .to_mir()
            .unwrap_err()
            .to_string()
            .contains("two children named `l`"));
        let bad = Model::new(
            "net",
            Sequential::new().with("a b", Linear::new(2, 2, true)),
        );
        assert!(bad.to_mir().unwrap_err().to_string().contains("\"a b\""));
        let clash = Model::new("net", Linear::new(2, 2, true)).with_input("weight", f32t(&[2]));
        assert!(clash
            .to_mir()
            .unwrap_err()
            .to_string()
            .contains("`weight` names two graph inputs"));
    }

    #[test]
    fn embedding_and_norms() {
        let m = Model::new("emb", Embedding::new(100, 16))
            .with_input("ids", TensorType::new(DType::I64, vec![2, 5]));
        assert_eq!(params(&m), vec![p("weight", &[100, 16])]);
        assert_eq!(lower(&m).output_types(), vec![f32t(&[2, 5, 16])]);
        let m = Model::new("emb", Embedding::new(100, 16))
            .with_input("ids", TensorType::new(DType::I32, vec![7]));
        assert_eq!(lower(&m).output_types(), vec![f32t(&[7, 16])]);

        let ln = Model::new("ln", LayerNorm::new(16, 1e-12)).with_input("x", f32t(&[2, 5, 16]));
        assert_eq!(params(&ln), vec![p("weight", &[16]), p("bias", &[16])]);
        let g = lower(&ln);
        assert_eq!(g.output_types(), vec![f32t(&[2, 5, 16])]);
        assert_eq!(g.nodes[0].attrs.float("eps").unwrap(), 1e-12);

        let rms = Model::new("rms", RmsNorm::new(16, 1e-6)).with_input("x", f32t(&[5, 16]));
        assert_eq!(params(&rms), vec![p("weight", &[16])]);
        assert_eq!(lower(&rms).output_types(), vec![f32t(&[5, 16])]);
    }

    #[test]
    fn mlps() {
        let m = Model::new("mlp", Mlp::new(8, 32, Activation::GeluTanh))
            .with_input("x", f32t(&[2, 3, 8]));
        assert_eq!(
            params(&m),
            vec![
                p("fc1.weight", &[32, 8]),
                p("fc1.bias", &[32]),
                p("fc2.weight", &[8, 32]),
                p("fc2.bias", &[8])
            ]
        );
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[2, 3, 8])]);
        let acts: Vec<&str> = g
            .nodes
            .iter()
            .filter_map(|n| n.attrs.str("activation").ok())
            .collect();
        assert_eq!(acts, vec!["gelu_tanh", "none"]);

        let m = Model::new("swiglu", GatedMlp::new(8, 24)).with_input("x", f32t(&[3, 8]));
        assert_eq!(
            params(&m),
            vec![
                p("gate.weight", &[24, 8]),
                p("up.weight", &[24, 8]),
                p("down.weight", &[8, 24])
            ]
        );
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[3, 8])]);
        assert_eq!(count(&g, "swiglu"), 1);

        let m = Model::new(
            "geglu",
            GatedMlp::new(8, 24).with_activation(Activation::Gelu),
        )
        .with_input("x", f32t(&[3, 8]));
        let g = lower(&m);
        assert_eq!(
            (count(&g, "gelu"), count(&g, "mul"), count(&g, "swiglu")),
            (1, 1, 0)
        );
    }

    #[test]
    fn attention_heads_masks_and_gqa() {
        let m = Model::new("attn", Attention::new(16, 4, false)).with_input("x", f32t(&[2, 5, 16]));
        let names: Vec<String> = m.parameters().into_iter().map(|p| p.name).collect();
        let want: Vec<String> = ["q", "k", "v", "o"]
            .iter()
            .flat_map(|l| [format!("{l}.weight"), format!("{l}.bias")])
            .collect();
        assert_eq!(names, want);
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[2, 5, 16])]);
        let att = g
            .nodes
            .iter()
            .find(|n| n.op.name() == "attention")
            .expect("an attention node");
        assert_eq!(g.ty(att.inputs[0]), &f32t(&[2, 4, 5, 4]));
        assert_eq!(att.attrs.str("mask_kind").unwrap(), "none");

        let causal = lower(
            &Model::new("attn", Attention::new(16, 4, true)).with_input("x", f32t(&[2, 5, 16])),
        );
        let att = causal
            .nodes
            .iter()
            .find(|n| n.op.name() == "attention")
            .expect("an attention node");
        assert_eq!(att.attrs.str("mask_kind").unwrap(), "causal");

        // A bool padding mask on a causal block: folded together, custom kind.
        let m = Model::new("attn", Attention::new(16, 4, true))
            .with_input("x", f32t(&[2, 5, 16]))
            .with_input("mask", TensorType::new(DType::Bool, vec![2, 1, 5, 5]));
        let g = lower(&m);
        assert_eq!(count(&g, "and"), 1);
        let att = g
            .nodes
            .iter()
            .find(|n| n.op.name() == "attention")
            .expect("an attention node");
        assert_eq!(att.attrs.str("mask_kind").unwrap(), "custom");

        // An additive mask stays additive.
        let m = Model::new("attn", Attention::new(16, 4, false))
            .with_input("x", f32t(&[2, 5, 16]))
            .with_input("bias", f32t(&[5, 5]));
        let g = lower(&m);
        let att = g
            .nodes
            .iter()
            .find(|n| n.op.name() == "attention")
            .expect("an attention node");
        assert_eq!(att.attrs.str("mask_kind").unwrap(), "bias");

        // Grouped-query: 4 query heads share 2 kv heads of width 4.
        let gqa = Attention::new(16, 4, true)
            .with_kv_heads(2)
            .with_bias(false);
        let m = Model::new("gqa", gqa)
            .with_input("x", f32t(&[2, 5, 16]))
            .with_input("mask", TensorType::new(DType::Bool, vec![2, 4, 5, 5]));
        assert_eq!(
            params(&m),
            vec![
                p("q.weight", &[16, 16]),
                p("k.weight", &[8, 16]),
                p("v.weight", &[8, 16]),
                p("o.weight", &[16, 16])
            ]
        );
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[2, 5, 16])]);
        let att = g
            .nodes
            .iter()
            .find(|n| n.op.name() == "attention")
            .expect("an attention node");
        assert_eq!(g.ty(att.inputs[0]), &f32t(&[2, 2, 2, 5, 4]));
        assert_eq!(g.ty(att.inputs[1]), &f32t(&[2, 2, 1, 5, 4]));

        let mqa = Model::new("mqa", Attention::new(16, 4, false).with_kv_heads(1))
            .with_input("x", f32t(&[1, 3, 16]));
        assert_eq!(lower(&mqa).output_types(), vec![f32t(&[1, 3, 16])]);

        let bad = Model::new("attn", Attention::new(16, 4, false))
            .with_input("x", f32t(&[2, 5, 16]))
            .with_input("mask", TensorType::new(DType::Bool, vec![2, 5, 5]));
        assert!(bad
            .to_mir()
            .unwrap_err()
            .to_string()
            .contains("mask must be"));
    }

    fn encoder_layer_params(prefix: &str, d: usize, h: usize) -> Vec<(String, Vec<usize>)> {
        let mut v = Vec::new();
        for l in ["q", "k", "v", "o"] {
            v.push(p(&format!("{prefix}attn.{l}.weight"), &[d, d]));
            v.push(p(&format!("{prefix}attn.{l}.bias"), &[d]));
        }
        v.push(p(&format!("{prefix}ln1.weight"), &[d]));
        v.push(p(&format!("{prefix}ln1.bias"), &[d]));
        v.push(p(&format!("{prefix}mlp.fc1.weight"), &[h, d]));
        v.push(p(&format!("{prefix}mlp.fc1.bias"), &[h]));
        v.push(p(&format!("{prefix}mlp.fc2.weight"), &[d, h]));
        v.push(p(&format!("{prefix}mlp.fc2.bias"), &[d]));
        v.push(p(&format!("{prefix}ln2.weight"), &[d]));
        v.push(p(&format!("{prefix}ln2.bias"), &[d]));
        v
    }

    #[test]
    fn encoder_layer_lowers_and_round_trips_through_text() {
        let m = Model::new("bert_layer", TransformerEncoderLayer::new(16, 4, 64, 1e-12))
            .with_input("x", f32t(&[2, 6, 16]));
        assert_eq!(params(&m), encoder_layer_params("", 16, 64));
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[2, 6, 16])]);
        assert_eq!(
            (
                count(&g, "layer_norm"),
                count(&g, "attention"),
                count(&g, "add")
            ),
            (2, 1, 2)
        );
        // Post-norm: the graph ends in ln2.
        let last = g.nodes.last().expect("nodes");
        assert_eq!(
            (last.op.name(), last.origin.as_deref()),
            ("layer_norm", Some("ln2"))
        );
        round_trips(&g);
        assert_eq!(Graph::from_json(&g.to_json()).unwrap(), g);

        let pre = Model::new(
            "pre",
            TransformerEncoderLayer::new(16, 4, 64, 1e-5).with_norm_first(true),
        )
        .with_input("x", f32t(&[2, 6, 16]))
        .with_input("mask", TensorType::new(DType::Bool, vec![2, 1, 6, 6]));
        let g = lower(&pre);
        assert_eq!(g.output_types(), vec![f32t(&[2, 6, 16])]);
        assert_eq!(g.nodes.last().expect("nodes").op.name(), "add");
        round_trips(&g);
    }

    #[test]
    fn decoder_layer_is_llama_shaped() {
        let layer = TransformerDecoderLayer::new(16, 4, 40, 1e-6).with_kv_heads(2);
        let m = Model::new("llama_layer", layer).with_input("x", f32t(&[1, 6, 16]));
        assert_eq!(
            params(&m),
            vec![
                p("attn_norm.weight", &[16]),
                p("attn.q.weight", &[16, 16]),
                p("attn.k.weight", &[8, 16]),
                p("attn.v.weight", &[8, 16]),
                p("attn.o.weight", &[16, 16]),
                p("mlp_norm.weight", &[16]),
                p("mlp.gate.weight", &[40, 16]),
                p("mlp.up.weight", &[40, 16]),
                p("mlp.down.weight", &[16, 40]),
            ]
        );
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[1, 6, 16])]);
        for op in ["rms_norm", "qk_rope", "attention", "swiglu"] {
            assert!(count(&g, op) > 0, "no {op}");
        }
        let att = g
            .nodes
            .iter()
            .find(|n| n.op.name() == "attention")
            .expect("an attention node");
        assert_eq!(att.attrs.str("mask_kind").unwrap(), "causal");
        round_trips(&g);
    }

    #[test]
    fn conv_and_batch_norm() {
        let m = Model::new("conv", Conv2d::new(3, 6, 3).with_stride(2).with_padding(1))
            .with_input("x", f32t(&[1, 3, 8, 8]));
        assert_eq!(
            params(&m),
            vec![p("weight", &[6, 3, 3, 3]), p("bias", &[6])]
        );
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[1, 6, 4, 4])]);
        assert_eq!(g.nodes[0].attrs.ints("pads").unwrap(), &[1, 1, 1, 1]);

        let m = Model::new("dw", Conv2d::new(4, 8, 3).with_groups(2).with_bias(false))
            .with_input("x", f32t(&[2, 4, 5, 5]));
        assert_eq!(params(&m), vec![p("weight", &[8, 2, 3, 3])]);
        assert_eq!(lower(&m).output_types(), vec![f32t(&[2, 8, 3, 3])]);

        let m = Model::new("bn", BatchNorm::new(6, 1e-5)).with_input("x", f32t(&[2, 6, 4, 4]));
        assert_eq!(
            params(&m),
            vec![
                p("weight", &[6]),
                p("bias", &[6]),
                p("running_mean", &[6]),
                p("running_var", &[6])
            ]
        );
        assert_eq!(lower(&m).output_types(), vec![f32t(&[2, 6, 4, 4])]);
    }

    #[test]
    fn lstm_scans_a_cell() {
        let m = Model::new("lstm", Lstm::new(3, 4)).with_input("x", f32t(&[5, 2, 3]));
        assert_eq!(
            params(&m),
            vec![
                p("weight_ih", &[16, 3]),
                p("weight_hh", &[16, 4]),
                p("bias_ih", &[16]),
                p("bias_hh", &[16])
            ]
        );
        let g = lower(&m);
        assert_eq!(
            g.output_types(),
            vec![f32t(&[5, 2, 4]), f32t(&[2, 4]), f32t(&[2, 4])]
        );
        let scan = g
            .nodes
            .iter()
            .find(|n| n.op.name() == "scan")
            .expect("a scan");
        let body = scan.attrs.graph("body").unwrap();
        assert_eq!(count(body, "lstm_cell"), 1);
        assert!(body
            .nodes
            .iter()
            .all(|n| n.origin.as_deref() == Some("lstm")));
        round_trips(&g);

        let with_state = Model::new("lstm", Lstm::new(3, 4))
            .with_input("x", f32t(&[5, 2, 3]))
            .with_input("h0", f32t(&[2, 4]))
            .with_input("c0", f32t(&[2, 4]));
        let g = lower(&with_state);
        assert_eq!(
            g.output_types(),
            vec![f32t(&[5, 2, 4]), f32t(&[2, 4]), f32t(&[2, 4])]
        );
        assert_eq!(count(&g, "broadcast"), 0);
    }

    fn tiny_bert() -> Model {
        let root = Sequential::new()
            .with("embed", Embedding::new(50, 16))
            .with("encoder", TransformerEncoder::new(2, 16, 4, 32, 1e-12))
            .with(
                "pooler",
                Linear::new(16, 16, true).with_activation(Activation::Tanh),
            );
        Model::new("bert", root).with_input("ids", TensorType::new(DType::I64, vec![2, 6]))
    }

    #[test]
    fn nested_models_have_dotted_parameter_names() {
        let m = tiny_bert();
        let mut want = vec![p("embed.weight", &[50, 16])];
        want.extend(encoder_layer_params("encoder.layers.0.", 16, 32));
        want.extend(encoder_layer_params("encoder.layers.1.", 16, 32));
        want.push(p("pooler.weight", &[16, 16]));
        want.push(p("pooler.bias", &[16]));
        assert_eq!(params(&m), want);
        assert_eq!(
            m.num_parameters(),
            want.iter()
                .map(|(_, d)| d.iter().product::<usize>())
                .sum::<usize>()
        );
        let g = lower(&m);
        assert_eq!(g.output_types(), vec![f32t(&[2, 6, 16])]);
        let weight = g.inputs.iter().find(|&&v| {
            g.values[v.index()].name.as_deref() == Some("encoder.layers.0.attn.q.weight")
        });
        assert!(weight.is_some());
    }

    #[test]
    fn every_node_records_the_block_that_made_it() {
        let m = tiny_bert();
        let g = lower(&m);
        let paths: HashSet<String> = m
            .blocks()
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| !p.is_empty())
            .collect();
        for (i, n) in g.nodes.iter().enumerate() {
            let o = n
                .origin
                .as_deref()
                .unwrap_or_else(|| panic!("node {i} ({}) has no origin", n.op.name()));
            assert!(
                paths.contains(o),
                "node {i} has origin {o:?}, not a block path"
            );
        }
        // The q projection's matmul comes from that Linear, reading its weight.
        let q = "encoder.layers.1.attn.q";
        let mm = g
            .nodes
            .iter()
            .find(|n| n.op.name() == "matmul_bias_act" && n.origin.as_deref() == Some(q));
        let mm = mm.expect("the q projection of layer 1");
        let bias = &g.values[mm.inputs[2].index()];
        assert!(matches!(bias.def, ValueDef::Input(_)));
        assert_eq!(bias.name.as_deref(), Some("encoder.layers.1.attn.q.bias"));
        // Nodes the attention block emits itself (head reshapes) carry its path.
        assert!(g
            .nodes
            .iter()
            .any(|n| n.op.name() == "attention"
                && n.origin.as_deref() == Some("encoder.layers.1.attn")));

        // The root block's own nodes carry the model name.
        let root = Model::new("solo", TransformerEncoderLayer::new(8, 2, 16, 1e-5))
            .with_input("x", f32t(&[1, 3, 8]));
        let g = lower(&root);
        assert!(g
            .nodes
            .iter()
            .any(|n| n.op.name() == "add" && n.origin.as_deref() == Some("solo")));
    }

    #[test]
    fn outline_shows_the_tree_and_parameter_types() {
        let m = tiny_bert();
        let o = m.outline();
        assert!(
            o.starts_with("model bert (ids: i64[2,6])\nbert: Sequential(3 children)\n"),
            "{o}"
        );
        assert!(
            o.contains("\n  encoder: TransformerEncoder(layers=2, final_norm=false)\n"),
            "{o}"
        );
        assert!(
            o.contains(
                "\n    layers.0: TransformerEncoderLayer(dim=16, heads=4, hidden=32, post-norm)\n"
            ),
            "{o}"
        );
        assert!(o.contains("\n        q: Linear(in=16, out=16, bias=true, activation=none)\n          weight f32[16,16]\n          bias f32[16]\n"), "{o}");
        assert!(
            o.ends_with(&format!(
                "{} parameters in {} tensors\n",
                m.num_parameters(),
                m.parameters().len()
            )),
            "{o}"
        );
    }

    #[test]
    fn sequential_chains_and_passes_through_when_empty() {
        let root = Sequential::new()
            .with("conv", Conv2d::new(3, 8, 3).with_padding(1))
            .with("bn", BatchNorm::new(8, 1e-5));
        let m = Model::new("stem", root).with_input("x", f32t(&[1, 3, 6, 6]));
        assert_eq!(lower(&m).output_types(), vec![f32t(&[1, 8, 6, 6])]);

        let empty = Model::new("id", Sequential::new()).with_input("x", f32t(&[2]));
        let g = lower(&empty);
        assert_eq!(g.outputs, g.inputs);
    }

    #[test]
    fn absurd_configurations_do_not_panic() {
        let m = Model::new("big", Lstm::new(usize::MAX, usize::MAX));
        assert_eq!(m.num_parameters(), usize::MAX);
        let m = Model::new("big", Attention::new(8, 0, false).with_kv_heads(0))
            .with_input("x", f32t(&[1, 2, 8]));
        assert!(m.to_mir().unwrap_err().to_string().contains("heads = 0"));
    }

    #[test]
    fn dtypes_propagate_to_parameters() {
        let layer = TransformerDecoderLayer::new(8, 2, 16, 1e-6).with_dtype(DType::BF16);
        let m =
            Model::new("bf16", layer).with_input("x", TensorType::new(DType::BF16, vec![1, 4, 8]));
        assert!(m.parameters().iter().all(|p| p.ty.dtype == DType::BF16));
        assert_eq!(
            lower(&m).output_types(),
            vec![TensorType::new(DType::BF16, vec![1, 4, 8])]
        );
    }
}
