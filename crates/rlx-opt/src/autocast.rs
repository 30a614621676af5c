//! Automatic mixed precision: the autocast pass.
//!
//! [`Autocast`] rewrites an f32 graph so that the ops that profit from
//! 16-bit arithmetic (contractions: matmul, convolutions, attention and
//! their fused forms) run in f16 or bf16, while the ops that lose accuracy
//! or range in 16 bits (exp/log, powers, softmax, norms, sums and other
//! reductions, losses built from them) run in f32. Every other op follows
//! its inputs: it runs in 16 bits when all of its f32-born inputs arrive in
//! 16 bits, and in f32 otherwise (a 16-bit input is widened, as PyTorch's
//! autocast promotes). Constants do not vote: `x_bf16 * 0.5` stays bf16.
//!
//! The kernels accumulate 16-bit contractions in f32 on every backend
//! (the CPU GEMMs and bf16 dot products, WGSL and CUDA tensor cores); the
//! pass only decides storage and arithmetic dtypes, as casts in the IR,
//! where the dispatch report and the playground show them.
//!
//! What is never touched: the graph's interface (inputs and outputs keep
//! their dtypes; outputs are cast back), values that are not f32 (f64,
//! integers, quantized blocks), sub-graphs of control-flow ops (their
//! inputs are given in their own dtypes), and `fused_elementwise` regions.
//! A node whose op refuses the 16-bit inputs (its type rule fails) is kept
//! in f32 and listed in [`AutocastReport::refused`] — nothing is dropped
//! silently.

use crate::error::OptError;
use rlx_ir::{Attr, Attrs, DType, Graph, GraphBuilder, HostTensor, Node, Op, ValueId};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Ops run in the 16-bit dtype by default (PyTorch's autocast "lower
/// precision" list, in rlx's op names).
pub const DEFAULT_LOWER: &[&str] = &[
    "matmul",
    "dot_general",
    "matmul_bias_act",
    "matmul_residual",
    // x in 16 bits against block-quantized weights (which autocast never
    // touches): the kernels decode the blocks to the x's dtype.
    "dequant_matmul",
    "conv",
    "conv_act",
    "conv_transpose",
    "attention",
    "attention_merged",
    "attention_cached",
    "rnn_cell",
    "lstm_cell",
    "gru_cell",
];

/// Ops kept in f32 by default (PyTorch's autocast "f32" list: range- or
/// accuracy-sensitive functions, normalizations, sums and losses).
pub const DEFAULT_KEEP_F32: &[&str] = &[
    "exp",
    "exp2",
    "expm1",
    "log",
    "log1p",
    "log2",
    "pow",
    "reciprocal",
    "rsqrt",
    "softplus",
    "acos",
    "asin",
    "acosh",
    "atanh",
    "cosh",
    "sinh",
    "tan",
    "erfinv",
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "reduce_sum",
    "reduce_mean",
    "reduce_prod",
    "reduce_logsumexp",
    "reduce_variance",
    "cumsum",
    "cumprod",
    "fft",
    "ifft",
    "rfft",
    "irfft",
];

/// Ops whose inputs are always given in their original dtypes: their
/// types are tied to a sub-graph (control flow, fused regions).
const EXACT: &[&str] = &["if", "while", "scan", "fused_elementwise"];

/// The autocast policy: the 16-bit dtype and the per-op lists.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Autocast {
    dtype: DType,
    lower: BTreeSet<&'static str>,
    keep: BTreeSet<&'static str>,
}

/// What [`Autocast::apply`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutocastReport {
    /// The 16-bit dtype.
    pub dtype: Option<DType>,
    /// Nodes of the lower-precision list that now run in 16 bits, by op.
    pub lowered: BTreeMap<&'static str, usize>,
    /// Nodes that follow their inputs and run in 16 bits, by op.
    pub followed: BTreeMap<&'static str, usize>,
    /// Nodes of the f32 list that received a 16-bit value (widened), by op.
    pub kept_f32: BTreeMap<&'static str, usize>,
    /// Nodes kept in f32 because their op refused 16-bit inputs: (op, why).
    pub refused: Vec<(&'static str, String)>,
    /// Casts inserted (constants converted in place are not counted).
    pub casts: usize,
    /// Graph inputs read only through a 16-bit cast, taken in that dtype
    /// instead ([`narrow_inputs`]; set by the compile pipeline): (input
    /// index, name, dtype). The caller converts them before a run.
    pub narrowed: Vec<(usize, String, DType)>,
}

impl fmt::Display for AutocastReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |m: &BTreeMap<&str, usize>| {
            m.iter()
                .map(|(k, v)| format!("{k}×{v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let dt = self.dtype.map(|d| d.to_string()).unwrap_or_default();
        writeln!(f, "autocast to {dt}: {} casts", self.casts)?;
        writeln!(f, "  {dt}: {}", list(&self.lowered))?;
        if !self.followed.is_empty() {
            writeln!(f, "  {dt} (following): {}", list(&self.followed))?;
        }
        if !self.kept_f32.is_empty() {
            writeln!(f, "  f32 (kept): {}", list(&self.kept_f32))?;
        }
        for (op, why) in &self.refused {
            writeln!(f, "  f32 (refused 16 bits): {op}: {why}")?;
        }
        if !self.narrowed.is_empty() {
            let names: Vec<String> = self
                .narrowed
                .iter()
                .map(|(_, n, d)| format!("{n}:{d}"))
                .collect();
            writeln!(
                f,
                "  inputs converted before the run (once if resident): {}",
                names.join(" ")
            )?;
        }
        Ok(())
    }
}

impl Autocast {
    /// The default lists, computing in `dtype` (f16 or bf16).
    pub fn new(dtype: DType) -> Result<Self, OptError> {
        if !matches!(dtype, DType::F16 | DType::BF16) {
            return Err(OptError::pass(
                "autocast",
                format!("the compute dtype must be f16 or bf16, not {dtype}"),
            ));
        }
        Ok(Self::with_dtype(dtype))
    }

    /// The default lists, computing in f16.
    pub fn f16() -> Self {
        Self::with_dtype(DType::F16)
    }

    /// The default lists, computing in bf16.
    pub fn bf16() -> Self {
        Self::with_dtype(DType::BF16)
    }

    fn with_dtype(dtype: DType) -> Self {
        Autocast {
            dtype,
            lower: DEFAULT_LOWER.iter().copied().collect(),
            keep: DEFAULT_KEEP_F32.iter().copied().collect(),
        }
    }

    /// The 16-bit dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Run `op` in 16 bits (moves it off the f32 list). An unknown op name
    /// is an error.
    pub fn lower(mut self, op: &str) -> Result<Self, OptError> {
        let name = known(op)?;
        self.keep.remove(name);
        self.lower.insert(name);
        Ok(self)
    }

    /// Keep `op` in f32 (moves it off the lower-precision list).
    pub fn keep_f32(mut self, op: &str) -> Result<Self, OptError> {
        let name = known(op)?;
        self.lower.remove(name);
        self.keep.insert(name);
        Ok(self)
    }

    /// Let `op` follow its inputs (off both lists).
    pub fn follow(mut self, op: &str) -> Result<Self, OptError> {
        let name = known(op)?;
        self.lower.remove(name);
        self.keep.remove(name);
        Ok(self)
    }

    /// The ops run in 16 bits.
    pub fn lowered_ops(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.lower.iter().copied()
    }

    /// The ops kept in f32.
    pub fn f32_ops(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.keep.iter().copied()
    }

    /// The rewritten graph (same inputs and outputs) and what was done.
    pub fn apply(&self, g: &Graph) -> Result<(Graph, AutocastReport), OptError> {
        let mut cx = Cx {
            old: g,
            b: GraphBuilder::new(g.name.clone()),
            cur: vec![None; g.values.len()],
            low: vec![None; g.values.len()],
            wide: vec![None; g.values.len()],
            is_const: vec![false; g.values.len()],
            dtype: self.dtype,
            rep: AutocastReport {
                dtype: Some(self.dtype),
                ..AutocastReport::default()
            },
        };
        for &v in &g.inputs {
            let val = &g.values[v.index()];
            let name = val.name.clone().unwrap_or_else(|| v.0.to_string());
            cx.cur[v.index()] = Some(cx.b.input(name, val.ty.clone()));
        }
        for node in &g.nodes {
            cx.node(self, node)?;
        }
        let outs: Vec<ValueId> = g
            .outputs
            .iter()
            .map(|&v| cx.original(v))
            .collect::<Result<_, _>>()?;
        let out = cx.b.finish(&outs)?;
        Ok((out, cx.rep))
    }
}

/// Graph inputs of `g` that are f32 and read only through casts to one
/// 16-bit dtype (as autocast leaves weights) become inputs of that dtype,
/// the casts gone. Returns the graph — whose interface differs from `g`'s
/// at those inputs — and each changed input with its new dtype. The
/// caller converts those inputs before each run (once, for inputs that
/// stay the same from run to run: `rlx::Compiled` does).
pub fn narrow_inputs(g: &Graph) -> Result<(Graph, Vec<(usize, DType)>), OptError> {
    let mut readers: Vec<Vec<usize>> = vec![vec![]; g.values.len()];
    for (k, n) in g.nodes.iter().enumerate() {
        for v in &n.inputs {
            readers[v.index()].push(k);
        }
    }
    let mut narrowed = vec![];
    // Old values that carry a narrowed input (the input, and movement ops
    // of it: a weight is often read as `cast(permute(w))`).
    let mut carried = vec![false; g.values.len()];
    for (i, &v) in g.inputs.iter().enumerate() {
        if g.ty(v).dtype != DType::F32 {
            continue;
        }
        let mut to = None;
        let mut chain = vec![];
        if narrowable(g, &readers, v, &mut to, &mut chain) {
            if let Some(dt) = to {
                narrowed.push((i, dt));
                for c in chain {
                    carried[c.index()] = true;
                }
            }
        }
    }
    if narrowed.is_empty() {
        return Ok((g.clone(), narrowed));
    }
    let mut b = GraphBuilder::new(g.name.clone());
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for (i, &v) in g.inputs.iter().enumerate() {
        let val = &g.values[v.index()];
        let mut ty = val.ty.clone();
        if let Some(&(_, dt)) = narrowed.iter().find(|(k, _)| *k == i) {
            ty.dtype = dt;
        }
        let name = val.name.clone().unwrap_or_else(|| v.0.to_string());
        map[v.index()] = Some(b.input(name, ty));
    }
    let get = |map: &[Option<ValueId>], v: ValueId| {
        map[v.index()].ok_or_else(|| OptError::pass("narrow_inputs", format!("%{} unset", v.0)))
    };
    for n in &g.nodes {
        let ins: Vec<ValueId> = n
            .inputs
            .iter()
            .map(|&v| get(&map, v))
            .collect::<Result<_, _>>()?;
        if n.op.name() == "cast" && carried[n.inputs[0].index()] {
            map[n.outputs[0].index()] = Some(ins[0]);
            continue;
        }
        b.set_origin(n.origin.clone());
        let outs = b.push(n.op, &ins, n.attrs.clone());
        b.set_origin(None);
        for (&o, &m) in n.outputs.iter().zip(&outs?) {
            if let Some(name) = &g.values[o.index()].name {
                b.name_value(m, name.clone());
            }
            map[o.index()] = Some(m);
        }
    }
    let outs: Vec<ValueId> = g
        .outputs
        .iter()
        .map(|&v| get(&map, v))
        .collect::<Result<_, _>>()?;
    Ok((b.finish(&outs)?, narrowed))
}

/// Ops that only move elements: a cast commutes with them.
const MOVEMENT: &[&str] = &[
    "permute",
    "reshape",
    "squeeze",
    "unsqueeze",
    "narrow",
    "slice",
    "broadcast",
    "identity",
];

/// Whether every path from `v` (an f32 value, not a graph output) goes
/// through movement ops to a cast to one 16-bit dtype (`to`); `chain`
/// collects `v` and the movement outputs on the way.
fn narrowable(
    g: &Graph,
    readers: &[Vec<usize>],
    v: ValueId,
    to: &mut Option<DType>,
    chain: &mut Vec<ValueId>,
) -> bool {
    if g.outputs.contains(&v) || readers[v.index()].is_empty() {
        return false;
    }
    chain.push(v);
    for &k in &readers[v.index()] {
        let n = &g.nodes[k];
        let name = n.op.name();
        if name == "cast" {
            let dt = g.ty(n.outputs[0]).dtype;
            if !matches!(dt, DType::F16 | DType::BF16) || to.is_some_and(|t| t != dt) {
                return false;
            }
            *to = Some(dt);
        } else if MOVEMENT.contains(&name) && n.inputs.len() == 1 && n.outputs.len() == 1 {
            if !narrowable(g, readers, n.outputs[0], to, chain) {
                return false;
            }
        } else {
            return false;
        }
    }
    true
}

fn known(op: &str) -> Result<&'static str, OptError> {
    Ok(Op::named(op)?.name())
}

/// The rewrite in progress. For each old value: the new value carrying it
/// (`cur`, in its original dtype or in the 16-bit one) and cached casts to
/// 16 bits (`low`) and back to the original dtype (`wide`).
struct Cx<'g> {
    old: &'g Graph,
    b: GraphBuilder,
    cur: Vec<Option<ValueId>>,
    low: Vec<Option<ValueId>>,
    wide: Vec<Option<ValueId>>,
    is_const: Vec<bool>,
    dtype: DType,
    rep: AutocastReport,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Original,
    Low,
}

impl Cx<'_> {
    fn get(&self, v: ValueId) -> Result<ValueId, OptError> {
        self.cur[v.index()].ok_or_else(|| {
            OptError::pass(
                "autocast",
                format!("value %{} used before it is defined", v.0),
            )
        })
    }

    /// Whether old value `v` is an f32 value (the only kind autocast moves).
    fn f32_born(&self, v: ValueId) -> bool {
        self.old.ty(v).dtype == DType::F32
    }

    /// Whether `v` currently travels in 16 bits.
    fn is_low(&self, v: ValueId) -> Result<bool, OptError> {
        let n = self.get(v)?;
        Ok(self.b.dtype(n) != self.old.ty(v).dtype)
    }

    /// `v` in its original dtype.
    fn original(&mut self, v: ValueId) -> Result<ValueId, OptError> {
        if !self.is_low(v)? {
            return self.get(v);
        }
        if let Some(w) = self.wide[v.index()] {
            return Ok(w);
        }
        let w = self.cast(v, self.old.ty(v).dtype)?;
        self.wide[v.index()] = Some(w);
        Ok(w)
    }

    /// `v` in 16 bits (only for f32-born values).
    fn lowered(&mut self, v: ValueId) -> Result<ValueId, OptError> {
        if self.is_low(v)? {
            return self.get(v);
        }
        if let Some(l) = self.low[v.index()] {
            return Ok(l);
        }
        let l = self.cast(v, self.dtype)?;
        self.low[v.index()] = Some(l);
        Ok(l)
    }

    /// A cast of `v`'s current value; a constant is converted in place.
    fn cast(&mut self, v: ValueId, to: DType) -> Result<ValueId, OptError> {
        let n = self.get(v)?;
        if self.is_const[v.index()] {
            if let Some(t) = self.const_value(v) {
                let c = HostTensor::from_f64(to, t.shape().clone(), t.to_f64_vec()?)?;
                return Ok(self.b.constant(c)?);
            }
        }
        self.rep.casts += 1;
        Ok(self.b.op1("cast", &[n], Attrs::new().with("dtype", to))?)
    }

    fn const_value(&self, v: ValueId) -> Option<&HostTensor> {
        match self.old.values[v.index()].def {
            rlx_ir::ValueDef::Node { node, .. } => match self.old.nodes[node].attrs.get("value") {
                Some(Attr::Tensor(t)) => Some(t),
                _ => None,
            },
            _ => None,
        }
    }

    fn node(&mut self, policy: &Autocast, node: &Node) -> Result<(), OptError> {
        let name = node.op.name();
        if name == "constant" {
            let outs = self.emit(node, &[])?;
            self.bind(node, &outs);
            for &o in &node.outputs {
                self.is_const[o.index()] = true;
            }
            return Ok(());
        }
        let f32_ins: Vec<ValueId> = node
            .inputs
            .iter()
            .copied()
            .filter(|&v| self.f32_born(v))
            .collect();
        let want = if f32_ins.is_empty() || EXACT.contains(&name) || policy.keep.contains(name) {
            Want::Original
        } else if policy.lower.contains(name) {
            Want::Low
        } else {
            // Follow: 16 bits when every non-constant f32-born input
            // arrives in 16 bits (and at least one does).
            let voters: Vec<ValueId> = f32_ins
                .iter()
                .copied()
                .filter(|&v| !self.is_const[v.index()])
                .collect();
            let mut all_low = !voters.is_empty();
            for &v in &voters {
                all_low &= self.is_low(v)?;
            }
            if all_low {
                Want::Low
            } else {
                Want::Original
            }
        };
        if want == Want::Original && policy.keep.contains(name) {
            let mut widened = false;
            for &v in &f32_ins {
                widened |= self.is_low(v)?;
            }
            if widened {
                *self.rep.kept_f32.entry(name).or_default() += 1;
            }
        }
        if want == Want::Low {
            let ins = self.inputs(node, Want::Low)?;
            match self.emit(node, &ins) {
                Ok(outs) => {
                    let map = if policy.lower.contains(name) {
                        &mut self.rep.lowered
                    } else {
                        &mut self.rep.followed
                    };
                    *map.entry(name).or_default() += 1;
                    self.bind(node, &outs);
                    return Ok(());
                }
                Err(e) => self.rep.refused.push((name, e.to_string())),
            }
        }
        let ins = self.inputs(node, Want::Original)?;
        let outs = self.emit(node, &ins)?;
        self.bind(node, &outs);
        Ok(())
    }

    fn inputs(&mut self, node: &Node, want: Want) -> Result<Vec<ValueId>, OptError> {
        node.inputs
            .iter()
            .map(|&v| match want {
                Want::Low if self.f32_born(v) => self.lowered(v),
                _ => self.original(v),
            })
            .collect()
    }

    /// Push `node` with new inputs; a failed type rule leaves no trace.
    fn emit(&mut self, node: &Node, ins: &[ValueId]) -> Result<Vec<ValueId>, OptError> {
        self.b.set_origin(node.origin.clone());
        let outs = self.b.push(node.op, ins, node.attrs.clone());
        self.b.set_origin(None);
        let outs = outs?;
        for (&o, &n) in node.outputs.iter().zip(&outs) {
            if let Some(name) = &self.old.values[o.index()].name {
                self.b.name_value(n, name.clone());
            }
        }
        Ok(outs)
    }

    fn bind(&mut self, node: &Node, outs: &[ValueId]) {
        for (&o, &n) in node.outputs.iter().zip(outs) {
            self.cur[o.index()] = Some(n);
        }
    }
}

#[cfg(test)]
mod tests;
