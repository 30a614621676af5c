//! Elementwise work in one pass: a unary or binary op, or a whole
//! `fused_elementwise` region, is a small register program evaluated over
//! tiles of the output. Every intermediate lives in a tile-sized register
//! in per-thread scratch (L1-resident), never in a full-size buffer.

use super::convert::{self, Fmt};
use super::layout::{Loc, View};
use super::par::{chunk_len, for_chunks, Scratch};
use super::simd::{self, simd_fn, Mad};
use rlx_ir::{DType, Graph, Node, TensorType};

/// Elements per tile.
pub const TILE: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Un {
    Abs,
    Neg,
    Square,
    Relu,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Recip,
    Tanh,
    Sigmoid,
    Erf,
    Gelu,
    GeluTanh,
    Silu,
    Sign,
    /// `round`: to the nearest integer, ties to even (ONNX Round).
    RoundEven,
    Copy,
    /// Round to f16 / bf16 and back: a cast to a 16-bit type inside a
    /// region (registers stay f32).
    Round(Fmt),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
}

pub fn unary(op: &str) -> Option<Un> {
    Some(match op {
        "abs" => Un::Abs,
        "neg" => Un::Neg,
        "square" => Un::Square,
        "relu" => Un::Relu,
        "exp" => Un::Exp,
        "log" => Un::Log,
        "sqrt" => Un::Sqrt,
        "rsqrt" => Un::Rsqrt,
        "reciprocal" => Un::Recip,
        "tanh" => Un::Tanh,
        "sigmoid" => Un::Sigmoid,
        "erf" => Un::Erf,
        "gelu" => Un::Gelu,
        "gelu_tanh" => Un::GeluTanh,
        "silu" => Un::Silu,
        "sign" => Un::Sign,
        "round" => Un::RoundEven,
        // Same-dtype copies (when the memory plan could not make a view).
        "identity" | "stop_gradient" | "cast" | "reshape" | "squeeze" | "unsqueeze" | "permute"
        | "contiguous" => Un::Copy,
        _ => return None,
    })
}

pub fn binary(op: &str) -> Option<Bin> {
    Some(match op {
        "add" => Bin::Add,
        "sub" => Bin::Sub,
        "mul" => Bin::Mul,
        "div" => Bin::Div,
        "max" => Bin::Max,
        "min" => Bin::Min,
        "pow" => Bin::Pow,
        _ => return None,
    })
}

/// Copies whose output element order is not the input's (the engine reads
/// their input through the permuted strides); not allowed inside regions.
pub fn reorders(op: &str) -> bool {
    op == "permute"
}

#[derive(Clone, Debug)]
pub enum Instr {
    /// Register ← region input k.
    Load(usize),
    Const(f32),
    Un(Un, usize),
    Bin(Bin, usize, usize),
    /// A binary op of a register and a scalar constant: `reg ∘ c`, or
    /// `c ∘ reg` when the flag says the constant is on the left.
    BinS(Bin, usize, f32, bool),
    /// A constant every reader took as a scalar (`BinS`): nothing to fill.
    Nop,
    /// A comparison or logic op: 1.0 (true) or 0.0 (false).
    Cmp(Cmp, usize, usize),
    Not(usize),
    /// where(c, a, b) on a 1.0/0.0 condition.
    Where(usize, usize, usize),
    /// Cast to bool: x != 0 (NaN is true, as in the reference).
    ToBool(usize),
    /// clamp(x, lo, hi): below lo is lo, then above hi is hi; NaN stays
    /// (an absent bound is an infinity).
    Clamp(usize, f32, f32),
    /// isnan / isinf / isfinite: 1.0 or 0.0.
    Class(Class, usize),
}

/// The float classifications a region computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Class {
    Nan,
    Inf,
    Finite,
}

/// The bounds of a `clamp` node (absent: ±∞).
pub fn clamp_bounds(attrs: &rlx_ir::Attrs) -> (f32, f32) {
    (
        attrs
            .opt_float("min")
            .map_or(f32::NEG_INFINITY, |v| v as f32),
        attrs.opt_float("max").map_or(f32::INFINITY, |v| v as f32),
    )
}

/// Comparisons and logic ops inside a region; bools live in registers as
/// 1.0 / 0.0, so only region inputs and outputs are ever real bools.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
}

fn cmp(op: &str) -> Option<Cmp> {
    Some(match op {
        "eq" => Cmp::Eq,
        "ne" => Cmp::Ne,
        "lt" => Cmp::Lt,
        "le" => Cmp::Le,
        "gt" => Cmp::Gt,
        "ge" => Cmp::Ge,
        "and" => Cmp::And,
        "or" => Cmp::Or,
        "xor" => Cmp::Xor,
        _ => return None,
    })
}

/// A register program over the region's inputs; `outs` name the result
/// register (one output).
#[derive(Clone, Debug)]
pub struct Program {
    pub instrs: Vec<Instr>,
    pub out: usize,
    pub inputs: usize,
}

impl Program {
    /// A plain copy (a cast between f32, f16 and bf16: the store rounds).
    /// `clamp(x)` on its own.
    pub fn clamp(lo: f32, hi: f32) -> Program {
        Program {
            instrs: vec![Instr::Load(0), Instr::Clamp(0, lo, hi)],
            out: 1,
            inputs: 1,
        }
    }

    pub fn copy() -> Program {
        Program {
            instrs: vec![Instr::Load(0), Instr::Un(Un::Copy, 0)],
            out: 1,
            inputs: 1,
        }
    }

    /// One op (unary or binary), when the fast path has it for these types
    /// (f32, f16 or bf16, computed in f32).
    pub fn for_node(op: &str, inputs: &[TensorType], out: &TensorType) -> Option<Program> {
        if !convert::is_float(out.dtype) || inputs.iter().any(|t| !convert::is_float(t.dtype)) {
            return None;
        }
        if let Some(u) = unary(op) {
            if inputs.len() != 1 {
                return None;
            }
            return Some(Program {
                instrs: vec![Instr::Load(0), Instr::Un(u, 0)],
                out: 1,
                inputs: 1,
            });
        }
        if op == "swiglu" && inputs.len() == 2 {
            // silu(gate) · up (one shape, checked by the type rule).
            return Some(Program {
                instrs: vec![
                    Instr::Load(0),
                    Instr::Load(1),
                    Instr::Un(Un::Silu, 0),
                    Instr::Bin(Bin::Mul, 2, 1),
                ],
                out: 3,
                inputs: 2,
            });
        }
        let b = binary(op)?;
        (inputs.len() == 2).then(|| Program {
            instrs: vec![Instr::Load(0), Instr::Load(1), Instr::Bin(b, 0, 1)],
            out: 2,
            inputs: 2,
        })
    }

    /// A `fused_elementwise` body, when every node of it is f32, f16, bf16
    /// or bool and the fast path has its op (scalar constants only), with
    /// one float output. 16-bit intermediates stay f32 in registers (only
    /// explicit casts round), so a region is at least as accurate as the
    /// reference's per-op rounding.
    pub fn for_region(body: &Graph) -> Option<Program> {
        if body.outputs.len() != 1 {
            return None;
        }
        let mut reg = vec![usize::MAX; body.values.len()];
        let mut instrs = Vec::new();
        let ok = |d: DType| convert::is_float(d) || d == DType::Bool;
        // An integer input (i8/u8 quantized values, i32 products) may only
        // be cast to f32: its register holds the value as the cast rounds
        // it, and no integer arithmetic is done.
        let int_only_cast = |v: rlx_ir::ValueId| {
            body.nodes
                .iter()
                .filter(|n| n.inputs.contains(&v))
                .all(|n| n.op.name() == "cast" && body.ty(n.outputs[0]).dtype == DType::F32)
                && !body.outputs.contains(&v)
        };
        for (k, &v) in body.inputs.iter().enumerate() {
            let d = body.ty(v).dtype;
            if !(ok(d) || (host_int(d) && int_only_cast(v))) {
                return None;
            }
            reg[v.index()] = instrs.len();
            instrs.push(Instr::Load(k));
        }
        for n in &body.nodes {
            let out = *n.outputs.first()?;
            if n.outputs.len() != 1 || !ok(body.ty(out).dtype) {
                return None;
            }
            let in_ty = |i: usize| n.inputs.get(i).map(|&v| body.ty(v).dtype);
            let arg = |i: usize| -> Option<usize> {
                let r = reg[n.inputs.get(i)?.index()];
                (r != usize::MAX).then_some(r)
            };
            let ins = match n.op.name() {
                "constant" => Instr::Const(scalar_constant(n)?),
                "where" if n.inputs.len() == 3 => Instr::Where(arg(0)?, arg(1)?, arg(2)?),
                "not" if n.inputs.len() == 1 => Instr::Not(arg(0)?),
                op @ ("isnan" | "isinf" | "isfinite")
                    if n.inputs.len() == 1 && convert::is_float(in_ty(0)?) =>
                {
                    let c = match op {
                        "isnan" => Class::Nan,
                        "isinf" => Class::Inf,
                        _ => Class::Finite,
                    };
                    Instr::Class(c, arg(0)?)
                }
                "clamp" if n.inputs.len() == 1 && convert::is_float(in_ty(0)?) => {
                    let (lo, hi) = clamp_bounds(&n.attrs);
                    Instr::Clamp(arg(0)?, lo, hi)
                }
                op if n.inputs.len() == 2 && cmp(op).is_some() => {
                    Instr::Cmp(cmp(op)?, arg(0)?, arg(1)?)
                }
                // Casts between f32 and bool (registers hold bools as 1/0).
                "cast" => match (in_ty(0)?, body.ty(out).dtype) {
                    (DType::Bool, DType::Bool) => Instr::Un(Un::Copy, arg(0)?),
                    (
                        DType::Bool
                        | DType::I8
                        | DType::U8
                        | DType::I32
                        | DType::F32
                        | DType::F16
                        | DType::BF16,
                        DType::F32,
                    ) => Instr::Un(Un::Copy, arg(0)?),
                    (from, to @ (DType::F16 | DType::BF16)) if ok(from) => {
                        // Narrowing rounds; a bool or a narrower value is exact.
                        let exact = from == DType::Bool || from == to;
                        let u = if exact {
                            Un::Copy
                        } else {
                            Un::Round(Fmt::of(to)?)
                        };
                        Instr::Un(u, arg(0)?)
                    }
                    (from, DType::Bool) if convert::is_float(from) => Instr::ToBool(arg(0)?),
                    _ => return None,
                },
                op if n.inputs.len() == 1 && unary(op).is_some() && !reorders(op) => {
                    Instr::Un(unary(op)?, arg(0)?)
                }
                op if n.inputs.len() == 2 && binary(op).is_some() => {
                    let (b, x, y) = (binary(op)?, arg(0)?, arg(1)?);
                    match (&instrs[x], &instrs[y]) {
                        (_, Instr::Const(c)) => Instr::BinS(b, x, *c, false),
                        (Instr::Const(c), _) => Instr::BinS(b, y, *c, true),
                        _ => Instr::Bin(b, x, y),
                    }
                }
                _ => return None,
            };
            reg[out.index()] = instrs.len();
            instrs.push(ins);
        }
        // Constants no instruction reads as a register fill nothing.
        let mut read = vec![false; instrs.len()];
        read[reg[body.outputs[0].index()].min(instrs.len().saturating_sub(1))] = true;
        for ins in &instrs {
            let regs: &[usize] = match ins {
                Instr::Un(_, a)
                | Instr::BinS(_, a, _, _)
                | Instr::Not(a)
                | Instr::ToBool(a)
                | Instr::Clamp(a, _, _)
                | Instr::Class(_, a) => std::slice::from_ref(a),
                Instr::Bin(_, a, b) | Instr::Cmp(_, a, b) => &[*a, *b],
                Instr::Where(c, a, b) => &[*c, *a, *b],
                Instr::Load(_) | Instr::Const(_) | Instr::Nop => &[],
            };
            for &r in regs {
                read[r] = true;
            }
        }
        for (ins, &r) in instrs.iter_mut().zip(&read) {
            if matches!(ins, Instr::Const(_)) && !r {
                *ins = Instr::Nop;
            }
        }
        if !convert::is_float(body.ty(body.outputs[0]).dtype) {
            return None;
        }
        let out = reg[body.outputs[0].index()];
        (out != usize::MAX).then_some(Program {
            instrs,
            out,
            inputs: body.inputs.len(),
        })
    }

    /// Scratch floats one thread needs.
    pub fn scratch(&self) -> usize {
        self.instrs.len() * TILE
    }
}

fn scalar_constant(n: &Node) -> Option<f32> {
    let t = n.attrs.tensor("value").ok()?;
    (t.numel() == 1 && convert::is_float(t.dtype()))
        .then(|| Some(*t.to_f64_vec().ok()?.first()? as f32))?
}

#[inline(always)]
fn apply_un<M: Mad>(u: Un, x: &mut [f32], src: &[f32]) {
    macro_rules! map {
        ($f:expr) => {
            for (d, &s) in x.iter_mut().zip(src) {
                *d = $f(s);
            }
        };
    }
    match u {
        Un::Abs => map!(|s: f32| s.abs()),
        Un::Neg => map!(|s: f32| -s),
        Un::Square => map!(|s: f32| s * s),
        Un::Relu => map!(simd::relu),
        Un::Exp => map!(simd::exp::<M>),
        Un::Log => map!(|s: f32| s.ln()),
        Un::Sqrt => map!(|s: f32| s.sqrt()),
        Un::Rsqrt => map!(|s: f32| 1.0 / s.sqrt()),
        Un::Recip => map!(|s: f32| 1.0 / s),
        Un::Tanh => map!(simd::tanh::<M>),
        Un::Sigmoid => map!(simd::sigmoid::<M>),
        Un::Erf => map!(simd::erf::<M>),
        Un::Gelu => map!(simd::gelu::<M>),
        Un::GeluTanh => map!(simd::gelu_tanh::<M>),
        Un::Silu => map!(simd::silu::<M>),
        // NaN stays NaN; ±0 give 0.
        Un::Sign => map!(|s: f32| if s > 0.0 {
            1.0
        } else if s < 0.0 {
            -1.0
        } else {
            s * 0.0
        }),
        Un::RoundEven => map!(|s: f32| s.round_ties_even()),
        Un::Copy => x.copy_from_slice(src),
        Un::Round(f) => map!(|s: f32| convert::round_through(s, f)),
    }
}

#[inline(always)]
fn apply_cmp(o: Cmp, x: &mut [f32], p: &[f32], q: &[f32]) {
    macro_rules! zip {
        ($f:expr) => {
            for ((d, &a), &c) in x.iter_mut().zip(p).zip(q) {
                *d = if $f(a, c) { 1.0 } else { 0.0 };
            }
        };
    }
    match o {
        Cmp::Eq => zip!(|a: f32, c: f32| a == c),
        Cmp::Ne => zip!(|a: f32, c: f32| a != c),
        Cmp::Lt => zip!(|a: f32, c: f32| a < c),
        Cmp::Le => zip!(|a: f32, c: f32| a <= c),
        Cmp::Gt => zip!(|a: f32, c: f32| a > c),
        Cmp::Ge => zip!(|a: f32, c: f32| a >= c),
        Cmp::And => zip!(|a: f32, c: f32| a != 0.0 && c != 0.0),
        Cmp::Or => zip!(|a: f32, c: f32| a != 0.0 || c != 0.0),
        Cmp::Xor => zip!(|a: f32, c: f32| (a != 0.0) != (c != 0.0)),
    }
}

/// The binary ops, once: `$apply!(f)` with each op's scalar function,
/// so each loop shape below is monomorphized per op (the `match` stays
/// outside the vector loop).
macro_rules! with_bin {
    ($b:expr, $apply:ident) => {
        match $b {
            Bin::Add => $apply!(|a: f32, c: f32| a + c),
            Bin::Sub => $apply!(|a: f32, c: f32| a - c),
            Bin::Mul => $apply!(|a: f32, c: f32| a * c),
            Bin::Div => $apply!(|a: f32, c: f32| a / c),
            // NaN-propagating, as the reference's f64 max/min on NaN inputs.
            Bin::Max => $apply!(|a: f32, c: f32| if a.is_nan() || c.is_nan() {
                f32::NAN
            } else {
                a.max(c)
            }),
            Bin::Min => $apply!(|a: f32, c: f32| if a.is_nan() || c.is_nan() {
                f32::NAN
            } else {
                a.min(c)
            }),
            Bin::Pow => $apply!(|a: f32, c: f32| a.powf(c)),
        }
    };
}

#[inline(always)]
fn apply_bin(b: Bin, x: &mut [f32], p: &[f32], q: &[f32]) {
    macro_rules! zip {
        ($f:expr) => {
            for ((d, &a), &c) in x.iter_mut().zip(p).zip(q) {
                *d = $f(a, c);
            }
        };
    }
    with_bin!(b, zip)
}

/// [`apply_bin`] with one operand a scalar: `p ∘ c`, or `c ∘ p` when
/// `left` (the same operations in the same order, so the same results).
#[inline(always)]
fn apply_bin_scalar(b: Bin, x: &mut [f32], p: &[f32], c: f32, left: bool) {
    macro_rules! map {
        ($f:expr) => {
            if left {
                for (d, &a) in x.iter_mut().zip(p) {
                    *d = $f(c, a);
                }
            } else {
                for (d, &a) in x.iter_mut().zip(p) {
                    *d = $f(a, c);
                }
            }
        };
    }
    with_bin!(b, map)
}

/// An operand of the region as the tile loop reads it.
#[derive(Clone, Copy)]
pub enum Src<'a, 'l> {
    /// The output buffer itself (the plan ran this op in place).
    Out,
    View(View<'a, 'l>),
    /// A host bool tensor, read through broadcast strides as 1.0 / 0.0.
    Bool(&'a [bool], &'l [usize], &'l [usize]),
    /// A host i8 tensor (quantized weights), read exactly as f32.
    I8(&'a [i8], &'l [usize], &'l [usize]),
    /// A host u8 tensor (quantized activations), read exactly as f32.
    U8(&'a [u8], &'l [usize], &'l [usize]),
    /// A host i32 tensor (an integer product), read as f32 (rounded to
    /// nearest, as a cast does).
    I32(&'a [i32], &'l [usize], &'l [usize]),
}

/// Integer host tensors a region reads (only into casts to f32).
pub fn host_int(d: DType) -> bool {
    matches!(d, DType::I8 | DType::U8 | DType::I32)
}

/// Elements `start..` of a broadcast bool tensor as 1.0 / 0.0.
fn load_bool(data: &[bool], strides: &[usize], dims: &[usize], start: usize, dst: &mut [f32]) {
    load_host(
        data,
        strides,
        dims,
        start,
        dst,
        |&b| if b { 1.0 } else { 0.0 },
    )
}

/// Elements `start..` of a broadcast host tensor, each through `f`; a
/// contiguous run (the usual weight) without index arithmetic.
fn load_host<T>(
    data: &[T],
    strides: &[usize],
    dims: &[usize],
    start: usize,
    dst: &mut [f32],
    f: impl Fn(&T) -> f32,
) {
    let mut next = 1;
    let contiguous = dims.iter().zip(strides).rev().all(|(&d, &st)| {
        let ok = st == next || d == 1;
        next *= d;
        ok
    });
    if contiguous {
        let n = dst.len();
        for (v, x) in dst.iter_mut().zip(&data[start..start + n]) {
            *v = f(x);
        }
        return;
    }
    // Runs along the innermost axis: one index computation per run, then
    // a fill (a broadcast axis) or a strided read (a mask broadcast over
    // heads, say, is 128-long runs, not 196k index computations).
    let r = dims.len();
    let (inner, is) = if r == 0 {
        (1, 0)
    } else {
        (dims[r - 1].max(1), strides[r - 1])
    };
    let (mut i, mut k) = (start, 0);
    while k < dst.len() {
        let run = (inner - i % inner).min(dst.len() - k);
        let (mut rest, mut at) = (i, 0);
        for (&d, &st) in dims.iter().zip(strides).rev() {
            at += (rest % d) * st;
            rest /= d;
        }
        let out = &mut dst[k..k + run];
        if is == 0 {
            out.fill(f(&data[at]));
        } else {
            for (j, v) in out.iter_mut().enumerate() {
                *v = f(&data[at + j * is]);
            }
        }
        i += run;
        k += run;
    }
}

/// Broadcast `loc` (its own dims) to `out` dims: stride 0 on new or
/// size-1 axes.
pub fn broadcast(loc: &Loc, out: &[usize]) -> Loc {
    let pad = out.len() - loc.dims.len();
    let mut strides = vec![0; out.len()];
    for (i, (&d, &s)) in loc.dims.iter().zip(&loc.strides).enumerate() {
        strides[pad + i] = if d == 1 { 0 } else { s };
    }
    Loc {
        root: loc.root,
        offset: loc.offset,
        dims: out.to_vec(),
        strides,
    }
}

/// Fill `dst` with elements `start..start + dst.len()` (row-major over
/// the view's dims) of `v`.
pub(super) fn load(v: &View, start: usize, dst: &mut [f32]) {
    let loc = v.loc;
    if loc.is_contiguous() {
        let s = loc.offset - v.shift + start;
        dst.copy_from_slice(&v.data[s..s + dst.len()]);
        return;
    }
    let r = loc.dims.len();
    let (inner, is) = if r == 0 {
        (1, 0)
    } else {
        (loc.dims[r - 1].max(1), loc.strides[r - 1])
    };
    let mut i = start;
    let mut k = 0;
    while k < dst.len() {
        let j0 = i % inner;
        let run = (inner - j0).min(dst.len() - k);
        let base = loc.index_of(i) - v.shift;
        if is == 0 {
            dst[k..k + run].fill(v.data[base]);
        } else if is == 1 {
            // A broadcast row (a bias): its runs are contiguous.
            dst[k..k + run].copy_from_slice(&v.data[base..base + run]);
        } else {
            for (j, d) in dst[k..k + run].iter_mut().enumerate() {
                *d = v.data[base + j * is];
            }
        }
        i += run;
        k += run;
    }
}

/// 1.0 where `yes(x)`, else 0.0 (registers hold bools as 1 / 0).
#[inline(always)]
fn set_where(dst: &mut [f32], src: &[f32], yes: impl Fn(f32) -> bool) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = if yes(x) { 1.0 } else { 0.0 };
    }
}

simd_fn! {
    /// Evaluate `p` over one chunk `oc` of the output, whose first element
    /// is element `base` of the whole output.
    fn eval_chunk(p: &Program, oc: &mut [f32], regs: &mut [f32], srcs: &[Src<'_, '_>], base: usize) {
        for (ti, ot) in oc.chunks_mut(TILE).enumerate() {
            let start = base + ti * TILE;
            let len = ot.len();
            for (r, ins) in p.instrs.iter().enumerate() {
                let (prev, rest) = regs.split_at_mut(r * TILE);
                let dst = &mut rest[..len];
                let reg = |k: usize| &prev[k * TILE..k * TILE + len];
                match ins {
                    Instr::Load(k) => match &srcs[*k] {
                        Src::Out => dst.copy_from_slice(ot),
                        Src::View(v) => load(v, start, dst),
                        Src::Bool(d, st, dims) => load_bool(d, st, dims, start, dst),
                        Src::I8(d, st, dims) => load_host(d, st, dims, start, dst, |&x| x as f32),
                        Src::U8(d, st, dims) => load_host(d, st, dims, start, dst, |&x| x as f32),
                        Src::I32(d, st, dims) => load_host(d, st, dims, start, dst, |&x| x as f32),
                    },
                    Instr::Const(c) => dst.fill(*c),
                    Instr::Un(u, a) => apply_un::<M>(*u, dst, reg(*a)),
                    Instr::Bin(b, a, c) => apply_bin(*b, dst, reg(*a), reg(*c)),
                    Instr::BinS(b, a, c, left) => apply_bin_scalar(*b, dst, reg(*a), *c, *left),
                    Instr::Nop => {}
                    Instr::Cmp(o, a, c) => apply_cmp(*o, dst, reg(*a), reg(*c)),
                    Instr::Not(a) => {
                        for (d, &x) in dst.iter_mut().zip(reg(*a)) {
                            *d = if x != 0.0 { 0.0 } else { 1.0 };
                        }
                    }
                    Instr::ToBool(a) => {
                        for (d, &x) in dst.iter_mut().zip(reg(*a)) {
                            *d = if x != 0.0 || x.is_nan() { 1.0 } else { 0.0 };
                        }
                    }
                    // The class chosen once, outside the loop: matched per
                    // element, it was reloaded each time (the stores might
                    // alias it) and the loop stayed scalar.
                    Instr::Class(c, a) => {
                        let src = reg(*a);
                        match *c {
                            Class::Nan => set_where(dst, src, |x| x.is_nan()),
                            Class::Inf => set_where(dst, src, |x| x.is_infinite()),
                            Class::Finite => set_where(dst, src, |x| x.is_finite()),
                        }
                    }
                    Instr::Clamp(a, lo, hi) => {
                        // Bounds in locals: read through the instruction
                        // inside the loop they kept it scalar.
                        let (lo, hi) = (*lo, *hi);
                        for (d, &x) in dst.iter_mut().zip(reg(*a)) {
                            let v = if x < lo { lo } else { x };
                            *d = if v > hi { hi } else { v };
                        }
                    }
                    Instr::Where(c, a, b) => {
                        let n = dst.len();
                        let (c, a, b) = (&reg(*c)[..n], &reg(*a)[..n], &reg(*b)[..n]);
                        for i in 0..n {
                            dst[i] = if c[i] != 0.0 { a[i] } else { b[i] };
                        }
                    }
                }
            }
            ot.copy_from_slice(&regs[p.out * TILE..p.out * TILE + len]);
        }
    }
}

/// Evaluate `p` into `out` (contiguous), operands broadcast to its shape.
pub fn run(p: &Program, out: &mut [f32], srcs: &[Src], scratch: &Scratch) {
    let chunk = chunk_len(out.len(), TILE, 16 * 1024);
    for_chunks(out, chunk, |ci, oc| {
        scratch.with(|regs| eval_chunk(p, oc, regs, srcs, ci * chunk))
    });
}

simd_fn! {
    /// `where`: out[i] = cond[i] ? x[i] : y[i] over one tile, the condition
    /// already gathered into `c` (1.0 / 0.0).
    fn select_tile(o: &mut [f32], c: &[f32], x: &[f32], y: &[f32]) {
        for (((d, &k), &a), &b) in o.iter_mut().zip(c).zip(x).zip(y) {
            *d = if k != 0.0 { a } else { b };
        }
    }
}

/// `where(cond, x, y)` into `out`: `cond` is a host bool tensor read
/// through `cond_strides` (broadcast to the output), x and y f32 views.
pub fn select(
    out: &mut [f32],
    cond: &[bool],
    cond_strides: &[usize],
    x: &Src,
    y: &Src,
    dims: &[usize],
    scratch: &Scratch,
) {
    let chunk = chunk_len(out.len(), TILE, 16 * 1024);
    for_chunks(out, chunk, |ci, oc| {
        scratch.with(|regs| {
            for (ti, ot) in oc.chunks_mut(TILE).enumerate() {
                let start = ci * chunk + ti * TILE;
                let len = ot.len();
                let (c, rest) = regs.split_at_mut(TILE);
                let (a, rest) = rest.split_at_mut(TILE);
                let b = &mut rest[..TILE];
                for (j, v) in c[..len].iter_mut().enumerate() {
                    let mut i = start + j;
                    let mut at = 0;
                    for (&d, &st) in dims.iter().zip(cond_strides).rev() {
                        at += (i % d) * st;
                        i /= d;
                    }
                    *v = if cond[at] { 1.0 } else { 0.0 };
                }
                for (src, dst) in [(x, &mut a[..len]), (y, &mut b[..len])] {
                    match src {
                        Src::Out => dst.copy_from_slice(ot),
                        Src::View(v) => load(v, start, dst),
                        Src::Bool(d, st, dims) => load_bool(d, st, dims, start, dst),
                        Src::I8(d, st, dims) => load_host(d, st, dims, start, dst, |&x| x as f32),
                        Src::U8(d, st, dims) => load_host(d, st, dims, start, dst, |&x| x as f32),
                        Src::I32(d, st, dims) => load_host(d, st, dims, start, dst, |&x| x as f32),
                    }
                }
                select_tile(ot, &c[..len], &a[..len], &b[..len]);
            }
        })
    });
}
