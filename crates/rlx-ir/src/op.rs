//! The op definition: everything the IR knows about one op kind lives in
//! one `OpDef` — its inputs, attribute schema, type inference (which is
//! also its verifier), its decomposition into primitives when it is a fused
//! op, and whether it is differentiable. Printing and parsing are generic
//! over the schema, so an op needs no printer of its own.
//!
//! Built-in ops are declared in `ops/*`; downstream crates add their own
//! with [`register_op`].

use crate::attr::{AttrSpec, Attrs};
use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::{GraphBuilder, ValueId};
use crate::shape::TensorType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{OnceLock, RwLock};

/// What the op's type rule sees.
pub struct InferCx<'a> {
    pub op: &'a str,
    pub inputs: &'a [TensorType],
    pub attrs: &'a Attrs,
}

/// Type inference and verification: output types, or why the node is wrong.
pub type InferFn = fn(&InferCx) -> Result<Vec<TensorType>, String>;

/// Rewrites a fused op into primitive ops appended to the builder.
pub type DecomposeFn = fn(&mut GraphBuilder, &[ValueId], &Attrs) -> Result<Vec<ValueId>, IrError>;

/// `f'(x)` of a unary op from `x` and `y = f(x)`, in primitive ops
/// appended to the builder (autodiff's rule when the op carries one).
pub type DerivFn = fn(&mut GraphBuilder, ValueId, ValueId) -> Result<ValueId, IrError>;

/// Where a value's elements sit in the buffer it reads: an element offset
/// and a stride per axis (in elements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub offset: usize,
    pub strides: Vec<usize>,
}

/// View-ness: how a node's output can read its one input's memory instead
/// of a copy. From the input's type and window, the attributes and the
/// output's type, the output's window — or `None` when this instance must
/// copy (a reshape of a strided window, a narrow along an inner axis). The
/// memory planner asks it; an op without one always copies.
pub type ViewFn = fn(&TensorType, &Attrs, &TensorType, &Window) -> Option<Window>;

/// In-place-ness: whose buffer an op's output may take over when that
/// input's value dies at the node (same type, read by no other operand
/// through another view). The memory planner asks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InPlace {
    /// Never: the kernel may read inputs after writing output elements.
    No,
    /// Any input: each element is read before that element is written
    /// (another operand may be the same value, read the same way).
    Elementwise,
    /// Only input `k`, which the kernel reads element by element just
    /// before writing it; no other operand may read its memory
    /// (`matmul_residual`'s residual: the GEMM reads `a`, `b` whole).
    Operand(usize),
}

/// How backends get an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lowering {
    /// Backends run it with kernels of their own; a backend without one
    /// runs its decomposition (when it has one) through the legalizer.
    Kernel,
    /// An elementwise op defined by its scalar formula: the decomposition,
    /// written in elementwise primitives only, is the op. The optimizer
    /// inlines it before region fusion, so every backend's code generator
    /// compiles the formula into one kernel with no table entry of its own;
    /// the reference interpreter evaluates the same formula.
    Formula,
}

/// The family an op belongs to (for listing and for backends' claims).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Unary,
    Binary,
    Ternary,
    Reduce,
    Linalg,
    Conv,
    Pool,
    Shape,
    Index,
    Cumulative,
    Sort,
    Fft,
    Random,
    Control,
    Recurrent,
    Fused,
    Quant,
    Misc,
    Custom,
}

/// How many inputs an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Arity {
    Exact(usize),
    Between(usize, usize),
    AtLeast(usize),
}

impl Arity {
    pub fn admits(self, n: usize) -> bool {
        match self {
            Arity::Exact(k) => n == k,
            Arity::Between(a, b) => (a..=b).contains(&n),
            Arity::AtLeast(a) => n >= a,
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arity::Exact(k) => write!(f, "{k}"),
            Arity::Between(a, b) => write!(f, "{a}-{b}"),
            Arity::AtLeast(a) => write!(f, "{a}+"),
        }
    }
}

/// Whether and how an op is differentiated (the autodiff issue adds rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Grad {
    Differentiable,
    /// Integer/boolean results or piecewise-constant: no gradient flows.
    NotDifferentiable,
}

/// The one definition of an op kind.
#[derive(Clone, Copy)]
pub struct OpDef {
    pub name: &'static str,
    pub category: Category,
    pub arity: Arity,
    /// Element types admitted for the first input (the others are checked by `infer`).
    pub dtypes: &'static [DType],
    pub attrs: &'static [AttrSpec],
    pub infer: InferFn,
    /// Present exactly for fused ops (and formula ops: their formula).
    pub decompose: Option<DecomposeFn>,
    pub grad: Grad,
    pub doc: &'static str,
    /// How backends get it (see [`Lowering`]).
    pub lowering: Lowering,
    /// `f'(x)` for a differentiable unary op whose derivative is written
    /// on its definition (autodiff uses it when it has no rule of its own).
    pub derivative: Option<DerivFn>,
    /// Whether (and how) its output can be a view of its input.
    pub view: Option<ViewFn>,
    /// Whose buffer its output may take over.
    pub in_place: InPlace,
}

impl OpDef {
    pub fn is_fused(&self) -> bool {
        self.decompose.is_some()
    }

    /// Defined by a scalar formula (see [`Lowering::Formula`]).
    pub fn is_formula(&self) -> bool {
        self.lowering == Lowering::Formula
    }

    /// The registry row shown by `rlx ops --json` and the npm package's
    /// `rlx.ops()`: `name` (also as `kind`), category, arity, dtypes,
    /// attributes, fused, differentiable (bool), doc.
    pub fn to_json(&self) -> serde_json::Value {
        let attrs: Vec<serde_json::Value> = self
            .attrs
            .iter()
            .map(|a| serde_json::json!({"name": a.name, "kind": a.kind}))
            .collect();
        serde_json::json!({
            "name": self.name,
            "kind": self.name,
            "category": self.category,
            "arity": self.arity.to_string(),
            "dtypes": self.dtypes.iter().map(|t| t.name()).collect::<Vec<_>>(),
            "attributes": attrs,
            "fused": self.is_fused(),
            "lowering": self.lowering,
            "differentiable": self.grad == Grad::Differentiable,
            "doc": self.doc,
        })
    }
}

impl fmt::Debug for OpDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpDef({})", self.name)
    }
}

/// A reference to a registered op; compares and serializes by name.
#[derive(Clone, Copy)]
pub struct Op(pub &'static OpDef);

impl Op {
    /// Look an op up by name.
    pub fn named(name: &str) -> Result<Op, IrError> {
        lookup(name)
            .map(Op)
            .ok_or_else(|| IrError::UnknownOp(name.into()))
    }
    pub fn name(&self) -> &'static str {
        self.0.name
    }
    pub fn def(&self) -> &'static OpDef {
        self.0
    }
}

impl std::ops::Deref for Op {
    type Target = OpDef;
    fn deref(&self) -> &OpDef {
        self.0
    }
}

impl PartialEq for Op {
    fn eq(&self, o: &Op) -> bool {
        self.0.name == o.0.name
    }
}
impl Eq for Op {}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl Serialize for Op {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name)
    }
}

impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Op::named(&s).map_err(serde::de::Error::custom)
    }
}

fn registry() -> &'static RwLock<BTreeMap<&'static str, &'static OpDef>> {
    static REG: OnceLock<RwLock<BTreeMap<&'static str, &'static OpDef>>> = OnceLock::new();
    REG.get_or_init(|| {
        let mut m = BTreeMap::new();
        for def in crate::ops::builtin() {
            let prev = m.insert(def.name, def);
            assert!(prev.is_none(), "built-in op `{}` defined twice", def.name);
        }
        RwLock::new(m)
    })
}

/// The op registered under `name`.
pub fn lookup(name: &str) -> Option<&'static OpDef> {
    registry().read().ok()?.get(name).copied()
}

/// Every registered op, sorted by name.
pub fn all_ops() -> Vec<&'static OpDef> {
    registry()
        .read()
        .map(|m| m.values().copied().collect())
        .unwrap_or_default()
}

/// Register a custom op. Its name must be new; the definition lives for the
/// rest of the process.
pub fn register_op(def: OpDef) -> Result<Op, IrError> {
    let mut reg = registry()
        .write()
        .map_err(|_| IrError::msg("op registry lock poisoned"))?;
    if reg.contains_key(def.name) {
        return Err(IrError::DuplicateOp(def.name.into()));
    }
    let def: &'static OpDef = Box::leak(Box::new(def));
    reg.insert(def.name, def);
    Ok(Op(def))
}
