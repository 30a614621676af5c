//! The fast CPU engine: runs a planned LIR program, computing in f32.
//!
//! At compile time every node gets one of three fates, decided by
//! [`select`] from its op, input types and attributes — the same function
//! names the kernel in the dispatch report, so the report says exactly
//! which nodes run here and which run on the reference kernels:
//!
//! * **view** — the memory plan made the value a strided view of another
//!   value's memory; nothing runs, consumers read through the strides;
//! * **fast** (`cpu::fast::…`) — an f32 kernel of this module writing into
//!   the program's arena: GEMM with fused epilogues, attention, norms,
//!   softmax, embedding, and elementwise register programs (single ops and
//!   whole `fused_elementwise` regions);
//! * **reference** (`cpu::ref::…`) — the reference kernel (f64 widening,
//!   every op and dtype), reading its inputs out of the arena.
//!
//! f16 and bf16 values are *stored* as 16 bits and *computed* in f32: the
//! plan's 16-bit slots live in a second, `u16` arena; before a fast kernel
//! runs, each 16-bit operand it reads is widened into an f32 staging
//! buffer, and a 16-bit output is computed into an f32 staging output and
//! rounded (to nearest even) into the 16-bit arena. The kernels themselves
//! only ever see f32. 16-bit graph inputs that fast kernels read are
//! widened into the prepared buffer — once, when the caller keeps them
//! resident (weights); a weight read transposed is widened and transposed
//! in one pass. So resident 16-bit weights cost f32 memory too (their
//! prepared copy), and the GEMMs run at f32 speed — except bf16 weights
//! read only by the AVX512-BF16 dot-product matmuls, which pack the bits.
//! A copy is made only where a kernel reads it (`Need`): weights packed
//! for the AMX tiles or gemm128 are packed from the graph input itself.
//!
//! The arenas (the plan's slots), staging buffers, per-thread scratch and
//! the host-side table for other dtypes are allocated once per compiled
//! program, and the prepared buffer on the first run (as far as the copies
//! made reach); later runs on fast kernels only allocate the tensors they
//! return.

mod attention;
pub mod bf16dot;
mod bounds;
mod convert;
mod elementwise;
mod layout;
mod matmul;
mod norm;
pub(crate) mod par;
mod reduce;
pub mod simd;

use crate::error::CpuError;
use crate::kernels::{amx, kernel, KernelCx};
use convert::{Fmt, Raw};
use elementwise::Src;
use layout::{row_major, Loc, Reader, Root, View};
use par::Scratch;
use rlx_ir::lir::Program;
use rlx_ir::{Attrs, DType, Element, Graph, HostTensor, TensorType};
use std::borrow::Cow;
use std::sync::Mutex;

pub use par::threads;

/// How the fast engine runs one op, when it can.
#[derive(Clone, Debug)]
pub enum Kind {
    Elementwise(elementwise::Program),
    Matmul {
        act: matmul::Act,
        bias: bool,
    },
    Attention,
    Norm {
        centered: bool,
    },
    Softmax {
        log: bool,
    },
    Embedding,
    /// Materialized once at compile time; nothing runs.
    Constant,
    /// `where(cond, x, y)` with a bool condition.
    Where,
    Reduce {
        red: reduce::Red,
        outer: usize,
        len: usize,
        inner: usize,
    },
}

/// All f32, f16 or bf16 (16-bit values are stored as such and computed in f32).
fn f32s(ts: &[&TensorType]) -> bool {
    ts.iter().all(|t| convert::is_float(t.dtype))
}

/// The fast kernel for an op with these input types and attributes, if
/// this engine has one. `None` means the reference kernel runs it.
pub fn select(op: &str, inputs: &[&TensorType], attrs: &Attrs) -> Option<Kind> {
    let rank = |k: usize| inputs.get(k).map_or(0, |t| t.shape.rank());
    match op {
        "matmul" | "matmul_bias_act" => {
            let act = match op {
                "matmul" => matmul::Act::None,
                _ => matmul::activation(attrs.str("activation").ok()?)?,
            };
            (f32s(inputs) && rank(0) >= 2 && rank(1) >= 2 && inputs.len() <= 3).then_some(
                Kind::Matmul {
                    act,
                    bias: inputs.len() == 3,
                },
            )
        }
        "attention" => {
            let kind = attrs.str("mask_kind").ok()?;
            let qkv_ok = f32s(&inputs[..3.min(inputs.len())]) && rank(0) >= 2;
            let mask_ok = match (kind, inputs.get(3)) {
                ("none" | "causal" | "sliding_window", None) => true,
                ("custom", Some(m)) => m.dtype == DType::Bool,
                ("bias", Some(m)) => convert::is_float(m.dtype),
                _ => false,
            };
            (qkv_ok && mask_ok).then_some(Kind::Attention)
        }
        "layer_norm" | "rms_norm" => {
            let x = inputs.first()?;
            let ax = x.shape.axis(attrs.int("axis").ok()?).ok()?;
            let inner: usize = x.shape.dims()[ax..].iter().product();
            let params_ok = inputs[1..].iter().all(|t| t.shape.numel() == inner);
            (f32s(inputs) && params_ok).then_some(Kind::Norm {
                centered: op == "layer_norm",
            })
        }
        "softmax" | "log_softmax" => (f32s(inputs) && inputs.len() == 1).then_some(Kind::Softmax {
            log: op == "log_softmax",
        }),
        "embedding" => {
            let (t, ids) = (inputs.first()?, inputs.get(1)?);
            (convert::is_float(t.dtype)
                && t.shape.rank() >= 1
                && matches!(ids.dtype, DType::I64 | DType::I32))
            .then_some(Kind::Embedding)
        }
        "fused_elementwise" => {
            let body = attrs.graph("body").ok()?;
            // bool inputs are read as 1.0 / 0.0 (masks, conditions).
            (inputs
                .iter()
                .all(|t| convert::is_float(t.dtype) || t.dtype == DType::Bool))
            .then(|| elementwise::Program::for_region(body))?
            .map(Kind::Elementwise)
        }
        // Between f32, f16 and bf16 a cast is a copy that the 16-bit
        // store rounds; other casts change the element kind.
        "cast" => {
            let to = attrs.dtype("dtype").ok()?;
            let from = inputs.first()?;
            (convert::is_float(to) && convert::is_float(from.dtype) && inputs.len() == 1)
                .then(elementwise::Program::copy)
                .map(Kind::Elementwise)
        }
        "reduce_sum" | "reduce_mean" | "reduce_max" | "reduce_min" => {
            let x = inputs.first()?;
            let (_, axes) =
                rlx_ir::ops::reduce::reduced_shape(&x.shape, attrs.ints("axes").ok()?, false)
                    .ok()?;
            let (outer, len, inner) = reduce::split(x.dims(), &axes)?;
            // max/min of nothing is a runtime error: the reference says so.
            let empty_ok = len > 0 || matches!(op, "reduce_sum" | "reduce_mean");
            (f32s(inputs) && inputs.len() == 1 && empty_ok).then_some(Kind::Reduce {
                red: reduce::reduction(op)?,
                outer,
                len,
                inner,
            })
        }
        "where" => (inputs.len() == 3 && inputs[0].dtype == DType::Bool && f32s(&inputs[1..]))
            .then_some(Kind::Where),
        "constant" => attrs
            .tensor("value")
            .is_ok_and(|t| convert::is_float(t.dtype()))
            .then_some(Kind::Constant),
        _ => {
            let out = inputs.first().map(|t| (*t).clone())?;
            elementwise::Program::for_node(
                op,
                &inputs.iter().map(|t| (*t).clone()).collect::<Vec<_>>(),
                &out,
            )
            .map(Kind::Elementwise)
        }
    }
}

/// The kernel name the dispatch report shows for a node.
pub fn kernel_name(op: &str, inputs: &[&TensorType], attrs: &Attrs, dtype: DType) -> String {
    let kind = select(op, inputs, attrs);
    // Whether this node folds in a following residual add depends on its
    // neighbours and the memory plan, so the report says where it can.
    let folds = matches!(
        kind,
        Some(Kind::Matmul {
            act: matmul::Act::None,
            ..
        })
    ) && dtype == DType::F32;
    let name = kernel_base_name(op, kind, dtype);
    if folds {
        format!("{name} (+ a following residual add, where the memory plan allows)")
    } else {
        name
    }
}

fn kernel_base_name(op: &str, kind: Option<Kind>, dtype: DType) -> String {
    match kind {
        Some(Kind::Matmul { .. }) if dtype == DType::BF16 && bf16dot::available() => {
            format!(
                "cpu::fast::{op}<bf16: AVX512-BF16 dot products where the layout allows, else f32 GEMM>"
            )
        }
        // The browser build runs its f32 products on rlx's simd128 kernel
        // (`kernels::gemm128`), not the `gemm` crate as natively; the
        // report says whether it was built with relaxed SIMD's FMA.
        Some(Kind::Matmul { .. } | Kind::Attention) if cfg!(target_arch = "wasm32") => format!(
            "cpu::fast::{op}<{dtype}: gemm128 {} {}x{}>",
            crate::kernels::gemm128::VARIANT,
            crate::kernels::gemm128::MR,
            crate::kernels::gemm128::NR
        ),
        Some(Kind::Matmul { .. }) if dtype == DType::F32 && amx::available() => format!(
            "cpu::fast::{op}<f32: AMX bf16x6 tiles (f32-accurate) for a resident weight of finite values and >= {} rows, else the gemm crate>",
            amx::MIN_ROWS
        ),
        Some(_) => format!("cpu::fast::{op}<{dtype}>"),
        None => format!("cpu::ref::{op}<{dtype}>"),
    }
}

/// Where a value lives during a run.
#[derive(Clone, Debug)]
enum Home {
    /// Float elements (stored as `Fmt`) in the arena, the 16-bit arena, a
    /// graph input, the constants or the prepared buffer; possibly strided.
    Mem(Loc, Fmt),
    /// A host tensor: graph input `Some(k)`, else the host-side table.
    Host(Option<usize>),
}

/// Widen a node's 16-bit operand (its whole span in the 16-bit arena) into
/// the staging buffer at `to`, before the node runs.
#[derive(Clone, Debug)]
struct StageIn {
    from: std::ops::Range<usize>,
    fmt: Fmt,
    to: usize,
}

// One step per node, made once per compiled program: size is no concern.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Step {
    /// A view made by the memory plan, or a constant: nothing runs.
    View,
    Fast {
        kind: Kind,
        /// Operand locations as the kernel reads them.
        args: Vec<Option<Loc>>,
        /// causal / sliding-window mask, or a custom mask's strides.
        mask: Vec<bool>,
        mask_strides: Vec<usize>,
        /// Broadcast strides of bool (host) inputs of elementwise regions.
        host_strides: Vec<Vec<usize>>,
        /// 16-bit operands widened into the staging buffer first.
        stage_in: Vec<StageIn>,
        /// A 16-bit output: the kernel writes f32 into the staging output,
        /// which is then rounded into the 16-bit arena at this offset.
        out_half: Option<(usize, Fmt)>,
        /// A bf16 matmul on dot products.
        dot: Option<DotPlan>,
        /// An f32 matmul whose weight, when resident, is packed once for
        /// gemm128 (`f32_packs[i]`).
        f32_pack: Option<usize>,
        /// A following node this one computes as it writes its output.
        fold: Option<Fold>,
    },
    Ref,
    /// Computed by an earlier node's kernel ([`Fold`]); nothing runs.
    Folded,
}

/// A following node that a kernel computes while writing its output: it
/// writes that node's slot `out` instead of its own, which nobody reads.
#[derive(Clone, Debug)]
struct Fold {
    out: Loc,
    kind: FoldKind,
}

#[derive(Clone, Debug)]
enum FoldKind {
    /// `add(matmul(..), r)`: the matmul writes the add's slot — `r` copied
    /// there first (`from`), or already there when the memory plan put the
    /// add in place over `r`, as it does for a transformer's residual
    /// stream — and adds `a·b + bias` onto it.
    Residual { from: Option<Loc> },
    /// `reshape(permute(attention(..)))` merging the heads — (.., H, S, D)
    /// to (.., S, H·D): attention writes that layout directly
    /// ([`attention::run_merged`]), so the copy is not made.
    MergeHeads,
}

/// The node after `after` that reads `v`, when that is `v`'s only use
/// and `v` is not a graph output (so nobody else needs it stored).
fn sole_user(g: &Graph, uses: &[usize], v: rlx_ir::ValueId, after: usize) -> Option<usize> {
    if uses[v.index()] != 1 || g.outputs.contains(&v) {
        return None;
    }
    (after + 1..g.nodes.len()).find(|&j| g.nodes[j].inputs.contains(&v))
}

/// The reshape that merges attention node `i`'s heads, if attention can
/// write that layout itself: its output (.., H, S, D) is read only through
/// one view that swaps H and S, and that view only by a reshape (a copy).
/// The reshape's memory-plan slot may reuse q's, k's or v's memory, so
/// attention writes its own slot, merged, and the reshape's value is
/// moved there — which needs that slot untouched until the value's last
/// use (the plan freed it after the reshape). Returns the reshape's node
/// index, the fold, and the reshape value's new home.
fn merge_heads(g: &Graph, i: usize, homes: &[Home], uses: &[usize]) -> Option<(usize, Fold, Loc)> {
    let v = g.nodes[i].outputs[0];
    let w_node = sole_user(g, uses, v, i)?;
    let w = *g.nodes[w_node].outputs.first()?;
    let j = sole_user(g, uses, w, w_node)?;
    let copy = &g.nodes[j];
    if copy.op.name() != "reshape" || copy.inputs.len() != 1 || copy.outputs.len() != 1 {
        return None;
    }
    let y = copy.outputs[0];
    let (Home::Mem(vl, Fmt::F32), Home::Mem(wl, Fmt::F32), Home::Mem(yl, Fmt::F32)) =
        (&homes[v.index()], &homes[w.index()], &homes[y.index()])
    else {
        return None;
    };
    let r = vl.dims.len();
    if r < 3 || vl.root != Root::Arena || !vl.is_contiguous() || yl.numel() != vl.numel() {
        return None;
    }
    // The view: v's axes r-3 (heads) and r-2 (rows) swapped, nothing else.
    let mut want_dims = vl.dims.clone();
    let mut want_strides = vl.strides.clone();
    want_dims.swap(r - 3, r - 2);
    want_strides.swap(r - 3, r - 2);
    if wl.root != vl.root
        || wl.offset != vl.offset
        || wl.dims != want_dims
        || wl.strides != want_strides
    {
        return None;
    }
    // Nothing after the reshape may write v's slot while y lives there.
    let last = if g.outputs.contains(&y) {
        g.nodes.len()
    } else {
        (j + 1..g.nodes.len())
            .rev()
            .find(|&k| g.nodes[k].inputs.contains(&y))
            .map_or(j + 1, |k| k + 1)
    };
    let clobbers = |k: usize| {
        g.nodes[k].outputs.iter().any(|o| match &homes[o.index()] {
            Home::Mem(l, _) => l.overlaps_in_arena(vl),
            Home::Host(_) => false,
        })
    };
    if (j + 1..last).any(clobbers) {
        return None;
    }
    let moved = Loc {
        root: Root::Arena,
        offset: vl.offset,
        dims: yl.dims.clone(),
        strides: row_major(&yl.dims),
    };
    Some((
        j,
        Fold {
            out: vl.clone(),
            kind: FoldKind::MergeHeads,
        },
        moved,
    ))
}

/// The residual `add` that matmul node `i` (f32, no activation, arena
/// output) can fold in: its output's one use, after nothing but views,
/// is an `add` with a same-typed f32 value `r`, and the add's slot does
/// not overlap what the product reads (`reads`). Returns the add's node
/// index and the plan.
fn residual_add(
    g: &Graph,
    i: usize,
    homes: &[Home],
    no_op: &[bool],
    uses: &[usize],
    reads: &[Option<Loc>],
) -> Option<(usize, Fold)> {
    let v = g.nodes[i].outputs[0];
    let j = sole_user(g, uses, v, i)?;
    let add = &g.nodes[j];
    if (i + 1..j).any(|k| !no_op[k])
        || add.op.name() != "add"
        || add.inputs.len() != 2
        || add.outputs.len() != 1
    {
        return None;
    }
    let r = if add.inputs[0] == v {
        add.inputs[1]
    } else {
        add.inputs[0]
    };
    if r == v || g.ty(r) != g.ty(v) || g.ty(add.outputs[0]) != g.ty(v) {
        return None;
    }
    let (Home::Mem(o, Fmt::F32), Home::Mem(rl, Fmt::F32)) =
        (&homes[add.outputs[0].index()], &homes[r.index()])
    else {
        return None;
    };
    if o.root != Root::Arena || !o.is_contiguous() || !rl.is_contiguous() {
        return None;
    }
    if reads.iter().flatten().any(|l| l.overlaps_in_arena(o)) {
        return None;
    }
    let from = if rl.root == Root::Arena && rl.offset == o.offset {
        None
    } else if rl.overlaps_in_arena(o) {
        return None;
    } else {
        Some(rl.clone())
    };
    Some((
        j,
        Fold {
            out: o.clone(),
            kind: FoldKind::Residual { from },
        },
    ))
}

struct State {
    arena: Vec<f32>,
    /// f16/bf16 values of the memory plan, as bits.
    half: Vec<u16>,
    /// f32 staging of 16-bit operands and of a 16-bit output.
    stage: Vec<f32>,
    stage_out: Vec<f32>,
    host: Vec<Option<HostTensor>>,
    pool: Scratch,
    /// Transposed and widened graph inputs ([`Root::Prepared`]).
    prepared: Vec<f32>,
    /// Graph inputs the caller promised not to change ([`FastProgram::keep_resident`]).
    resident: Vec<bool>,
    /// Whether each [`Prep`] already holds its resident input's copy.
    ready: Vec<bool>,
    /// The [`Pack`]s, and whether each holds its resident input already.
    packed: Vec<Option<bf16dot::PackedB>>,
    packed_ready: Vec<bool>,
    /// The [`F32Pack`]s (for gemm128 or for the AMX tiles, as
    /// [`FastProgram::f32_pack_kind`] says), and whether each holds its
    /// resident input already.
    f32_packed: Vec<crate::kernels::gemm128::PackedB>,
    amx_packed: Vec<amx::PackedB>,
    f32_packed_ready: Vec<bool>,
    /// Per-thread scratch for the AMX products' split left operands.
    amx_pool: Scratch<u16>,
}

impl State {
    fn empty() -> State {
        State {
            arena: Vec::new(),
            half: Vec::new(),
            stage: Vec::new(),
            stage_out: Vec::new(),
            host: Vec::new(),
            pool: Scratch::new(0),
            prepared: Vec::new(),
            resident: Vec::new(),
            ready: Vec::new(),
            packed: Vec::new(),
            packed_ready: Vec::new(),
            f32_packed: Vec::new(),
            amx_packed: Vec::new(),
            f32_packed_ready: Vec::new(),
            amx_pool: Scratch::new(0),
        }
    }
}

/// An f32 copy of graph input `input` at `offset` in the prepared buffer:
/// either its transpose (a `c × r` matrix read as its `r × c` transpose —
/// GEMM packs a row-major operand with vector loads; through the
/// transposing strides it would gather element by element, once per row
/// block), or, for an f16/bf16 input the fast kernels read, its elements
/// widened to f32.
#[derive(Clone, Debug)]
struct Prep {
    input: usize,
    rows: usize,
    cols: usize,
    offset: usize,
    transpose: bool,
    need: Need,
}

/// Whether a [`Prep`]'s copy is made: a weight's transposed f32 copy costs
/// 4 bytes per parameter, and none is needed where every reader reads the
/// weight some other way. `prepared` only grows as far as the copies made
/// reach; a copy not made past the last one made costs no memory.
#[derive(Clone, Debug, PartialEq)]
enum Need {
    Always,
    /// Every reader is a bf16 dot-product matmul, which packs the input's
    /// bits itself.
    Never,
    /// Every reader is (or is a bf16 dot-product matmul besides) an f32
    /// matmul through `f32_packs[i]` for these `i`, each packed from the
    /// graph input itself, and — on the AMX tiles — never with fewer than
    /// [`amx::MIN_ROWS`] rows: the copy is needed only while the weight is
    /// not resident, or where an AMX pack holds a non-finite value (those
    /// products run on the `gemm` crate).
    UnlessPacked(Vec<usize>),
}

/// A bf16 graph input packed for [`bf16dot`]: read as `k × n` through
/// strides (`rs`, `cs`) — row-major, or a transposed weight.
#[derive(Clone, Debug, PartialEq)]
struct Pack {
    input: usize,
    k: usize,
    n: usize,
    rs: usize,
    cs: usize,
}

/// A bf16 matmul on dot products: the left operand's rows straight from
/// the 16-bit arena or graph input `a_input` (no staging), the weight from
/// `packs[pack]`.
#[derive(Clone, Copy, Debug)]
struct DotPlan {
    a_input: Option<usize>,
    a_offset: usize,
    lda: usize,
    pack: usize,
}

/// The dot-product plan of a bf16 matmul node, when its operands allow:
/// `a` a bf16 arena value or graph input whose rows (batch axes merged) are
/// unit-stride,
/// the weight a 2-D bf16 graph input read plain or transposed, a bias (if
/// any) of `n` elements.
fn dot_plan(
    g: &Graph,
    node: &rlx_ir::Node,
    homes: &[Home],
    preps: &[Prep],
    packs: &mut Vec<Pack>,
    bias: bool,
) -> Option<DotPlan> {
    let Home::Mem(a, Fmt::BF16) = &homes[node.inputs[0].index()] else {
        return None;
    };
    let r = a.dims.len();
    let a_input = match a.root {
        Root::Half => None,
        Root::Input(k) => Some(k),
        _ => return None,
    };
    if r < 2 || a.strides[r - 1] != 1 {
        return None;
    }
    let (k, lda) = (a.dims[r - 1], a.strides[r - 2]);
    let mut want = lda * a.dims[r - 2];
    for ax in (0..r - 2).rev() {
        if a.dims[ax] != 1 && a.strides[ax] != want {
            return None;
        }
        want *= a.dims[ax];
    }
    let (input, rs, cs, n) = match &homes[node.inputs[1].index()] {
        Home::Mem(l, Fmt::BF16) if l.dims.len() == 2 && l.dims[0] == k => match l.root {
            Root::Input(i) if l.offset == 0 => (i, l.strides[0], l.strides[1], l.dims[1]),
            _ => return None,
        },
        // A transposed weight: the prepared copy is the transpose of a
        // (n × k) input, whose bf16 bits are read directly instead.
        Home::Mem(l, Fmt::F32) if l.root == Root::Prepared && l.dims.len() == 2 => {
            let p = preps.iter().find(|p| p.transpose && p.offset == l.offset)?;
            let bf = Fmt::of(g.ty(g.inputs[p.input]).dtype) == Some(Fmt::BF16);
            if !bf || p.rows != k {
                return None;
            }
            (p.input, 1, p.rows, p.cols)
        }
        _ => return None,
    };
    if bias && g.ty(node.inputs[2]).dims() != [n] {
        return None;
    }
    let want = Pack {
        input,
        k,
        n,
        rs,
        cs,
    };
    let pack = match packs.iter().position(|p| *p == want) {
        Some(i) => i,
        None => {
            packs.push(want);
            packs.len() - 1
        }
    };
    Some(DotPlan {
        a_input,
        a_offset: a.offset,
        lda,
        pack,
    })
}

/// Whether resident f32 weights are packed once for gemm128: in the wasm32
/// build, whose f32 products run on it (natively the `gemm` crate packs
/// per call; this crate's own unit tests pack natively too, to test it).
const PACK_F32: bool = cfg!(any(target_arch = "wasm32", test));

/// How resident f32 weights are packed once, if they are.
#[derive(Clone, Copy, Debug, PartialEq)]
enum F32PackKind {
    Gemm128,
    /// Split for the AMX tiles ([`amx`]), where the CPU has them.
    Amx,
}

fn f32_pack_kind() -> Option<F32PackKind> {
    if amx::available() {
        Some(F32PackKind::Amx)
    } else if PACK_F32 {
        Some(F32PackKind::Gemm128)
    } else {
        None
    }
}

/// A 2-D f32 weight a matmul reads from graph input `input` (directly, or
/// its prepared transposed/widened copy) at `loc`: packed once for gemm128
/// when the input is resident.
#[derive(Clone, Debug, PartialEq)]
struct F32Pack {
    input: usize,
    loc: Loc,
    /// Where it is packed from: `loc`, or — for a whole transposed f32
    /// weight's prepared copy — the graph input itself through transposing
    /// strides, so that the copy need not exist.
    src: Loc,
}

/// The [`F32Pack`] of a matmul's weight as the kernel reads it (`b`), if
/// it is a 2-D view of a graph input or of its prepared copy.
fn f32_pack_plan(
    g: &Graph,
    b: Option<&Loc>,
    preps: &[Prep],
    packs: &mut Vec<F32Pack>,
) -> Option<usize> {
    let b = b.filter(|l| l.dims.len() == 2)?;
    let (input, src) = match b.root {
        Root::Input(k) => (k, b.clone()),
        Root::Prepared => {
            let p = preps
                .iter()
                .find(|p| (p.offset..p.offset + p.rows * p.cols).contains(&b.offset))?;
            let whole = p.transpose
                && b.offset == p.offset
                && b.dims == [p.rows, p.cols]
                && b.strides == [p.cols, 1]
                && g.ty(g.inputs[p.input]).dtype == DType::F32;
            let src = if whole {
                Loc {
                    root: Root::Input(p.input),
                    offset: 0,
                    dims: vec![p.rows, p.cols],
                    strides: vec![1, p.rows],
                }
            } else {
                b.clone()
            };
            (p.input, src)
        }
        _ => return None,
    };
    let want = F32Pack {
        input,
        loc: b.clone(),
        src,
    };
    Some(match packs.iter().position(|p| *p == want) {
        Some(i) => i,
        None => {
            packs.push(want);
            packs.len() - 1
        }
    })
}

/// The [`Need`] of transposed copy `p`, from every value whose home lies
/// in it and the step that reads that value.
fn prep_need(
    g: &Graph,
    homes: &[Home],
    steps: &[Step],
    p: &Prep,
    f32_packs: &[F32Pack],
    kind: Option<F32PackKind>,
) -> Need {
    let range = p.offset..p.offset + p.rows * p.cols;
    let inside = |v: rlx_ir::ValueId| matches!(&homes[v.index()], Home::Mem(l, _) if l.root == Root::Prepared && range.contains(&l.offset));
    if g.outputs.iter().any(|&v| inside(v)) {
        return Need::Always;
    }
    let mut packs = Vec::new();
    for (node, step) in g.nodes.iter().zip(steps) {
        for (j, &v) in node.inputs.iter().enumerate() {
            if !inside(v) || matches!(step, Step::View) {
                continue;
            }
            match step {
                Step::Fast { dot: Some(_), .. } if j == 1 => {}
                Step::Fast {
                    kind: Kind::Matmul { .. },
                    f32_pack: Some(i),
                    ..
                } if j == 1 && f32_packs[*i].src.root == Root::Input(p.input) => {
                    // The fewest rows a product of it can have: a batch
                    // entry's (the rows of all entries merge only where
                    // the layout allows).
                    let a = g.ty(node.inputs[0]).dims();
                    let rows = if a.len() >= 2 { a[a.len() - 2] } else { 1 };
                    if kind == Some(F32PackKind::Amx) && rows < amx::MIN_ROWS {
                        return Need::Always;
                    }
                    packs.push(*i);
                }
                _ => return Need::Always,
            }
        }
    }
    if packs.is_empty() {
        Need::Never
    } else {
        Need::UnlessPacked(packs)
    }
}

/// dst (r × c, row-major) = srcᵀ, src being c × r row-major (any storage);
/// in panels of 16 dst rows (16 contiguous elements of each src row),
/// across threads.
fn transpose_into(dst: &mut [f32], src: Raw, r: usize, c: usize) {
    const P: usize = 16;
    par::for_chunks(dst, P * c, |pi, panel| {
        let k0 = pi * P;
        let rows = panel.len() / c.max(1);
        let mut buf = [0f32; P];
        for j in 0..c {
            let s = &mut buf[..rows];
            src.load(j * r + k0, s);
            for (t, &x) in s.iter().enumerate() {
                panel[t * c + j] = x;
            }
        }
    });
}

/// dst = src widened to f32, across threads.
fn widen_into(dst: &mut [f32], src: Raw) {
    let chunk = par::chunk_len(dst.len(), 1024, 64 * 1024);
    par::for_chunks(dst, chunk, |ci, d| src.load(ci * chunk, d));
}

/// dst = src rounded to `fmt` (f16/bf16 bits), across threads.
fn narrow_into(dst: &mut [u16], src: &[f32], fmt: Fmt) {
    let chunk = par::chunk_len(dst.len(), 1024, 64 * 1024);
    par::for_chunks(dst, chunk, |ci, d| {
        convert::narrow(&src[ci * chunk..ci * chunk + d.len()], fmt, d)
    });
}

/// A program compiled for the fast engine.
pub struct FastProgram {
    graph: Graph,
    homes: Vec<Home>,
    steps: Vec<Step>,
    consts: Vec<f32>,
    preps: Vec<Prep>,
    packs: Vec<Pack>,
    f32_packs: Vec<F32Pack>,
    /// Decided once at compile time (whether this CPU has AMX).
    f32_pack_kind: Option<F32PackKind>,
    /// bf16 scratch per thread of the AMX products.
    amx_scratch: usize,
    prepared_len: usize,
    arena_len: usize,
    half_len: usize,
    stage_len: usize,
    stage_out_len: usize,
    scratch: usize,
    state: Mutex<State>,
}

fn fail(op: &str, msg: impl Into<String>) -> CpuError {
    CpuError::Runtime {
        op: op.into(),
        msg: msg.into(),
    }
}

impl FastProgram {
    pub fn compile(program: Program) -> Result<FastProgram, CpuError> {
        // Before any length below is computed or allocated.
        bounds::check(&program)?;
        let g = &program.graph;
        let mut homes: Vec<Home> = vec![Home::Host(None); g.values.len()];
        for (k, &v) in g.inputs.iter().enumerate() {
            let t = g.ty(v);
            homes[v.index()] = match Fmt::of(t.dtype) {
                Some(fmt) => Home::Mem(
                    Loc {
                        root: Root::Input(k),
                        offset: 0,
                        dims: t.dims().to_vec(),
                        strides: row_major(t.dims()),
                    },
                    fmt,
                ),
                None => Home::Host(Some(k)),
            };
        }
        // f32 slots in the f32 arena, f16/bf16 slots (as bits) in the
        // 16-bit arena, both at the plan's offsets; each arena is only as
        // long as its last slot.
        let (mut arena_len, mut half_len) = (0usize, 0usize);
        for s in &program.slots {
            let Some(fmt) = Fmt::of(s.ty.dtype) else {
                continue;
            };
            let (root, offset) = if fmt == Fmt::F32 {
                arena_len = arena_len.max((s.offset + s.bytes).div_ceil(4));
                (Root::Arena, s.offset / 4)
            } else {
                half_len = half_len.max((s.offset + s.bytes).div_ceil(2));
                (Root::Half, s.offset / 2)
            };
            homes[s.value.index()] = Home::Mem(
                Loc {
                    root,
                    offset,
                    dims: s.ty.dims().to_vec(),
                    strides: row_major(s.ty.dims()),
                },
                fmt,
            );
        }
        // Float constants live in their own f32 buffer, filled here once
        // (16-bit ones widened: exact).
        let mut consts = Vec::new();
        let mut is_const = vec![false; g.values.len()];
        for node in &g.nodes {
            if node.op.name() != "constant" || node.outputs.len() != 1 {
                continue;
            }
            let Ok(t) = node.attrs.tensor("value") else {
                continue;
            };
            if !convert::is_float(t.dtype()) {
                continue;
            }
            let Ok(data) = t.to_f64_vec() else {
                continue;
            };
            let v = node.outputs[0];
            homes[v.index()] = Home::Mem(
                Loc {
                    root: Root::Const,
                    offset: consts.len(),
                    dims: t.shape().dims().to_vec(),
                    strides: row_major(t.shape().dims()),
                },
                Fmt::F32,
            );
            consts.extend(data.iter().map(|&x| x as f32));
            is_const[v.index()] = true;
        }
        let mut is_view = vec![false; g.values.len()];
        for v in &program.views {
            if !convert::is_float(g.ty(v.value).dtype) {
                continue;
            }
            let (base, fmt) = match &homes[v.base.index()] {
                Home::Mem(l, f) => (l.clone(), *f),
                Home::Host(_) => continue,
            };
            homes[v.value.index()] = Home::Mem(
                Loc {
                    root: base.root,
                    offset: base.offset + v.offset,
                    dims: g.ty(v.value).dims().to_vec(),
                    strides: v.strides.clone(),
                },
                fmt,
            );
            is_view[v.value.index()] = true;
        }
        // Views that transpose a 2-D graph input get a prepared f32 copy.
        let mut preps = Vec::new();
        let mut packs = Vec::new();
        let mut f32_packs = Vec::new();
        let mut prepared_len = 0;
        for v in &program.views {
            let Home::Mem(l, _) = &homes[v.value.index()] else {
                continue;
            };
            let Root::Input(k) = l.root else { continue };
            let base = g.ty(g.inputs[k]);
            let (r, c) = match l.dims[..] {
                [r, c] => (r, c),
                _ => continue,
            };
            if base.dims() != [c, r] || l.offset != 0 || l.strides != [1, r] || r * c == 0 {
                continue;
            }
            preps.push(Prep {
                input: k,
                rows: r,
                cols: c,
                offset: prepared_len,
                transpose: true,
                need: Need::Always,
            });
            homes[v.value.index()] = Home::Mem(
                Loc {
                    root: Root::Prepared,
                    offset: prepared_len,
                    dims: vec![r, c],
                    strides: vec![c, 1],
                },
                Fmt::F32,
            );
            prepared_len += r * c;
        }
        // 16-bit graph inputs a fast kernel reads: widened copy in `prepared`.
        let mut widened: Vec<Option<usize>> = vec![None; g.inputs.len()];
        let mut steps = Vec::with_capacity(g.nodes.len());
        let (mut scratch, mut stage_len, mut stage_out_len) = (0usize, 0usize, 0usize);
        let f32_pack_kind = f32_pack_kind();
        let mut amx_scratch = 0usize;
        // Nodes that run nothing (views, constants), each value's uses, and
        // the adds folded into a matmul before them.
        let no_op: Vec<bool> = g
            .nodes
            .iter()
            .map(|n| {
                n.outputs.len() == 1
                    && convert::is_float(g.ty(n.outputs[0]).dtype)
                    && (is_view[n.outputs[0].index()] || is_const[n.outputs[0].index()])
            })
            .collect();
        let mut uses = vec![0usize; g.values.len()];
        for n in &g.nodes {
            for v in &n.inputs {
                uses[v.index()] += 1;
            }
        }
        let mut folded = vec![false; g.nodes.len()];
        for (ni, node) in g.nodes.iter().enumerate() {
            if no_op[ni] {
                steps.push(Step::View);
                continue;
            }
            if folded[ni] {
                steps.push(Step::Folded);
                continue;
            }
            let out_float =
                node.outputs.len() == 1 && convert::is_float(g.ty(node.outputs[0]).dtype);
            let types: Vec<&TensorType> = node.inputs.iter().map(|&v| g.ty(v)).collect();
            // Fast kernels write f32 arena slots directly, 16-bit slots
            // through the staging output.
            let out_home = match out_float.then(|| &homes[node.outputs[0].index()]) {
                Some(Home::Mem(l, f)) if matches!(l.root, Root::Arena | Root::Half) => {
                    Some((l.clone(), *f))
                }
                _ => None,
            };
            let kind = if out_home.is_some() {
                select(node.op.name(), &types, &node.attrs)
            } else {
                None
            };
            let (Some(kind), Some((out_loc, out_fmt))) = (kind, out_home) else {
                steps.push(Step::Ref);
                continue;
            };
            let out_ty = g.ty(node.outputs[0]);
            let out_half = (out_fmt != Fmt::F32).then(|| {
                stage_out_len = stage_out_len.max(out_loc.numel());
                (out_loc.offset, out_fmt)
            });
            let dot = match &kind {
                Kind::Matmul { bias, .. } if bf16dot::available() => {
                    dot_plan(g, node, &homes, &preps, &mut packs, *bias)
                }
                _ => None,
            };
            // 16-bit arena operands: their spans, overlapping ones merged
            // (q, k, v read through views of one packed buffer are staged
            // once), each region widened into the staging buffer. A dot
            // product matmul reads its left operand as it is.
            let mut spans: Vec<(std::ops::Range<usize>, Fmt)> = node
                .inputs
                .iter()
                .enumerate()
                .filter(|&(i, _)| !(dot.is_some() && i == 0))
                .filter_map(|(_, &v)| match &homes[v.index()] {
                    Home::Mem(l, f) if l.root == Root::Half && *f != Fmt::F32 => {
                        Some((l.span(), *f))
                    }
                    _ => None,
                })
                .collect();
            spans.sort_by_key(|(r, _)| r.start);
            let mut stage_in: Vec<StageIn> = Vec::new();
            let mut cursor = 0usize;
            for (r, fmt) in spans {
                match stage_in.last_mut() {
                    Some(last) if last.fmt == fmt && r.start < last.from.end => {
                        let end = last.from.end.max(r.end);
                        cursor += end - last.from.end;
                        last.from.end = end;
                    }
                    _ => {
                        stage_in.push(StageIn {
                            from: r.clone(),
                            fmt,
                            to: cursor,
                        });
                        cursor += r.len();
                    }
                }
            }
            let mut args: Vec<Option<Loc>> = Vec::with_capacity(node.inputs.len());
            for (i, &v) in node.inputs.iter().enumerate() {
                let Home::Mem(l, fmt) = &homes[v.index()] else {
                    args.push(None);
                    continue;
                };
                // A bf16 dot-product matmul reads its left operand in
                // place and its weight from its own pack: neither needs a
                // widened f32 copy.
                if dot.is_some() && i <= 1 {
                    args.push(None);
                    continue;
                }
                let l = match (l.root, *fmt) {
                    (_, Fmt::F32) => l.clone(),
                    (Root::Input(k), _) => {
                        let off = *widened[k].get_or_insert_with(|| {
                            let n = g.ty(g.inputs[k]).shape.numel();
                            preps.push(Prep {
                                input: k,
                                rows: n,
                                cols: 1,
                                offset: prepared_len,
                                transpose: false,
                                need: Need::Always,
                            });
                            prepared_len += n;
                            prepared_len - n
                        });
                        Loc {
                            root: Root::Prepared,
                            offset: off + l.offset,
                            ..l.clone()
                        }
                    }
                    (_, fmt) => {
                        let span = l.span();
                        let s = stage_in
                            .iter()
                            .find(|s| {
                                s.fmt == fmt && s.from.start <= span.start && span.end <= s.from.end
                            })
                            .ok_or_else(|| {
                                fail(node.op.name(), "unstaged operand (an engine bug)")
                            })?;
                        Loc {
                            root: Root::Stage,
                            offset: s.to + (l.offset - s.from.start),
                            ..l.clone()
                        }
                    }
                };
                args.push(Some(l));
            }
            stage_len = stage_len.max(cursor);
            let f32_pack = match &kind {
                Kind::Matmul { .. } if dot.is_none() && f32_pack_kind.is_some() => {
                    let b = args.get(1).and_then(Option::as_ref);
                    let i = f32_pack_plan(g, b, &preps, &mut f32_packs);
                    if let (Some(_), Some(F32PackKind::Amx)) = (i, f32_pack_kind) {
                        let k = b.map_or(0, |b| b.dims[0]);
                        amx_scratch = amx_scratch.max(amx::scratch_len(k));
                    }
                    i
                }
                _ => None,
            };
            let (mut mask, mut mask_strides) = (Vec::new(), Vec::new());
            let mut host_strides = vec![Vec::new(); node.inputs.len()];
            match &kind {
                Kind::Elementwise(p) => {
                    scratch = scratch.max(p.scratch());
                    let op = node.op.name();
                    for (k, t) in types.iter().enumerate() {
                        if t.dtype == DType::Bool {
                            let l = Loc {
                                root: Root::Arena,
                                offset: 0,
                                dims: t.dims().to_vec(),
                                strides: row_major(t.dims()),
                            };
                            host_strides[k] = elementwise::broadcast(&l, out_ty.dims()).strides;
                        }
                    }
                    for a in args.iter_mut().flatten() {
                        *a = if op == "permute" {
                            let perm = node.attrs.ints("perm").map_err(CpuError::Ir)?;
                            let r = a.dims.len();
                            let ax =
                                |p: i64| rlx_ir::shape::normalize_axis(p, r).map_err(CpuError::Ir);
                            let idx = perm.iter().map(|&p| ax(p)).collect::<Result<Vec<_>, _>>()?;
                            Loc {
                                dims: idx.iter().map(|&i| a.dims[i]).collect(),
                                strides: idx.iter().map(|&i| a.strides[i]).collect(),
                                ..a.clone()
                            }
                        } else if elementwise::unary(op) == Some(elementwise::Un::Copy) {
                            a.clone() // same element order, possibly other dims
                        } else {
                            elementwise::broadcast(a, out_ty.dims())
                        };
                    }
                }
                Kind::Attention => {
                    let (q, k) = (types[0], types[1]);
                    let r = q.shape.rank();
                    let (sq, sk) = (q.dims()[r - 2], k.dims()[r - 2]);
                    scratch = scratch.max(attention::scratch(sk));
                    let kind_s = node.attrs.str("mask_kind").map_err(CpuError::Ir)?;
                    let window = node.attrs.int("window").map_err(CpuError::Ir)?;
                    if let Some(m) = rlx_ir::ops::fused::attention_mask(kind_s, sq, sk, window) {
                        mask = m;
                    }
                    let mut full = out_ty.dims()[..r - 2].to_vec();
                    full.extend([sq, sk]);
                    if let Some(mt) = types.get(3) {
                        let ml = Loc {
                            root: Root::Arena,
                            offset: 0,
                            dims: mt.dims().to_vec(),
                            strides: row_major(mt.dims()),
                        };
                        let b = elementwise::broadcast(&ml, &full);
                        mask_strides = b.strides;
                        if let Some(Some(a)) = args.get_mut(3) {
                            *a = elementwise::broadcast(a, &full);
                        }
                    }
                }
                Kind::Norm { .. } => {
                    let x = types[0];
                    let ax = x
                        .shape
                        .axis(node.attrs.int("axis").map_err(CpuError::Ir)?)
                        .map_err(CpuError::Ir)?;
                    scratch = scratch.max(x.dims()[ax..].iter().product());
                }
                Kind::Softmax { .. } => {
                    let x = types[0];
                    let ax = x
                        .shape
                        .axis(node.attrs.int("axis").map_err(CpuError::Ir)?)
                        .map_err(CpuError::Ir)?;
                    scratch = scratch.max(x.dims()[ax]);
                }
                Kind::Where => {
                    scratch = scratch.max(3 * elementwise::TILE);
                    let c = types[0];
                    let cl = Loc {
                        root: Root::Arena,
                        offset: 0,
                        dims: c.dims().to_vec(),
                        strides: row_major(c.dims()),
                    };
                    mask_strides = elementwise::broadcast(&cl, out_ty.dims()).strides;
                    for a in args.iter_mut().skip(1).flatten() {
                        *a = elementwise::broadcast(a, out_ty.dims());
                    }
                }
                Kind::Matmul { .. } | Kind::Embedding | Kind::Constant | Kind::Reduce { .. } => {}
            }
            let fold = match &kind {
                Kind::Matmul {
                    act: matmul::Act::None,
                    ..
                } if dot.is_none() && out_half.is_none() && out_loc.root == Root::Arena => {
                    residual_add(g, ni, &homes, &no_op, &uses, &args)
                }
                Kind::Attention if out_half.is_none() => {
                    merge_heads(g, ni, &homes, &uses).map(|(j, f, moved)| {
                        let y = g.nodes[j].outputs[0];
                        homes[y.index()] = Home::Mem(moved, Fmt::F32);
                        (j, f)
                    })
                }
                _ => None,
            }
            .map(|(j, f)| {
                folded[j] = true;
                f
            });
            steps.push(Step::Fast {
                kind,
                args,
                mask,
                mask_strides,
                host_strides,
                stage_in,
                out_half,
                dot,
                f32_pack,
                fold,
            });
        }
        for p in preps.iter_mut().filter(|p| p.transpose) {
            p.need = prep_need(&program.graph, &homes, &steps, p, &f32_packs, f32_pack_kind);
        }
        let mut p = FastProgram {
            graph: program.graph,
            homes,
            steps,
            consts,
            preps,
            packs,
            f32_packs,
            f32_pack_kind,
            amx_scratch,
            prepared_len,
            arena_len,
            half_len,
            stage_len,
            stage_out_len,
            scratch,
            state: Mutex::new(State::empty()),
        };
        // `ready` is only ever set for resident inputs, which stay resident.
        p.state = Mutex::new(p.new_state());
        Ok(p)
    }

    /// Buffers for one run at a time, allocated once.
    fn new_state(&self) -> State {
        State {
            arena: vec![0.0; self.arena_len],
            half: vec![0; self.half_len],
            stage: vec![0.0; self.stage_len],
            stage_out: vec![0.0; self.stage_out_len],
            host: vec![None; self.graph.values.len()],
            pool: Scratch::new(self.scratch),
            // Grown by the first run to the end of the last copy it makes
            // (`Need`): a copy no kernel reads takes no memory, in wasm's
            // linear memory too.
            prepared: Vec::new(),
            resident: vec![false; self.graph.inputs.len()],
            ready: vec![false; self.preps.len()],
            packed: (0..self.packs.len()).map(|_| None).collect(),
            packed_ready: vec![false; self.packs.len()],
            f32_packed: match self.f32_pack_kind {
                Some(F32PackKind::Gemm128) => vec![Default::default(); self.f32_packs.len()],
                _ => Vec::new(),
            },
            amx_packed: match self.f32_pack_kind {
                Some(F32PackKind::Amx) => (0..self.f32_packs.len())
                    .map(|_| Default::default())
                    .collect(),
                _ => Vec::new(),
            },
            f32_packed_ready: vec![false; self.f32_packs.len()],
            amx_pool: Scratch::new(self.amx_scratch),
        }
    }

    /// (fast kernels, reference kernels, views and folded adds) in this
    /// program.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for s in &self.steps {
            match s {
                Step::Fast { .. } => c.0 += 1,
                Step::Ref => c.1 += 1,
                Step::View | Step::Folded => c.2 += 1,
            }
        }
        c
    }

    pub fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, CpuError> {
        crate::interp::check_inputs(&self.graph, inputs)?;
        // A second caller while a run is in flight gets its own state
        // (allocated now) instead of waiting.
        match self.state.try_lock() {
            Ok(mut st) => self.run_on_pool(&mut st, inputs),
            Err(std::sync::TryLockError::Poisoned(p)) => {
                self.run_on_pool(&mut p.into_inner(), inputs)
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                let mut st = self.new_state();
                self.run_on_pool(&mut st, inputs)
            }
        }
    }

    /// [`Self::run_in`] on a thread of the kernels' pool. Each parallel
    /// kernel called from outside the pool hands its work to the pool and
    /// blocks its caller on a latch: a wake-up and a sleep per kernel, ~20
    /// µs, longer than a batch-1 layer norm takes (which ran 2× slower on
    /// 2 threads than on 1). From a pool thread the kernels split their
    /// work in place: one hand-over per run instead of one per kernel.
    fn run_on_pool(
        &self,
        st: &mut State,
        inputs: &[&HostTensor],
    ) -> Result<Vec<HostTensor>, CpuError> {
        #[cfg(not(target_arch = "wasm32"))]
        if par::threads() > 1 && rayon::current_thread_index().is_none() {
            return rayon::scope(|_| par::with_helpers(|| self.run_in(st, inputs)));
        }
        self.run_in(st, inputs)
    }

    /// The caller promises that graph inputs `inputs` (weights) keep their
    /// values on every later run: what is prepared from them (transposed
    /// copies) is then made once, on the next run, and reused. Idempotent
    /// (an input already resident keeps its preparation); to run with
    /// other weights, compile again.
    pub fn keep_resident(&self, inputs: &[usize]) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for &k in inputs {
            if let Some(r) = st.resident.get_mut(k) {
                *r = true;
            }
        }
    }

    /// Resident f32 weights: packed once. Others are packed by each
    /// product. Those packed from a prepared copy (`from_prepared`) go
    /// after the copies are made.
    fn pack_f32_weights(&self, st: &mut State, inputs: &[&HostTensor], from_prepared: bool) {
        for (i, p) in self.f32_packs.iter().enumerate() {
            let prepared = p.src.root == Root::Prepared;
            if prepared != from_prepared || !st.resident[p.input] || st.f32_packed_ready[i] {
                continue;
            }
            let data = match p.src.root {
                Root::Input(k) => layout::input_f32(inputs[k]),
                _ => &st.prepared[..],
            };
            let b = crate::kernels::gemm::Mat {
                data: &data[p.src.offset..],
                rows: p.src.dims[0],
                cols: p.src.dims[1],
                row_stride: p.src.strides[0],
                col_stride: p.src.strides[1],
            };
            match self.f32_pack_kind {
                Some(F32PackKind::Amx) => {
                    let dst = &mut st.amx_packed[i];
                    crate::profile::time("prepare_weight", || dst.repack(b));
                }
                _ => {
                    let dst = &mut st.f32_packed[i];
                    crate::profile::time("prepare_weight", || dst.repack(b));
                }
            }
            st.f32_packed_ready[i] = true;
        }
    }

    fn run_in(&self, st: &mut State, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, CpuError> {
        let g = &self.graph;
        // Packs read from the graph inputs first: whether a prepared copy
        // is needed depends on them (`Need::UnlessPacked`).
        self.pack_f32_weights(st, inputs, false);
        for (i, p) in self.preps.iter().enumerate() {
            if st.resident[p.input] && st.ready[i] {
                continue;
            }
            let needed = match &p.need {
                Need::Always => true,
                Need::Never => false,
                Need::UnlessPacked(packs) => {
                    !st.resident[p.input]
                        || packs.iter().any(|&k| {
                            !st.f32_packed_ready[k]
                                || (self.f32_pack_kind == Some(F32PackKind::Amx)
                                    && !st.amx_packed[k].finite())
                        })
                }
            };
            if !needed {
                continue;
            }
            let end = p.offset + p.rows * p.cols;
            debug_assert!(end <= self.prepared_len);
            if st.prepared.len() < end {
                st.prepared.resize(end, 0.0);
            }
            let dst = &mut st.prepared[p.offset..end];
            let src = Raw::of_input(inputs[p.input]);
            crate::profile::time("prepare_weight", || {
                if p.transpose {
                    transpose_into(dst, src, p.rows, p.cols)
                } else {
                    widen_into(dst, src)
                }
            });
            st.ready[i] = st.resident[p.input];
        }
        for (i, p) in self.packs.iter().enumerate() {
            if st.resident[p.input] && st.packed_ready[i] {
                continue;
            }
            let bits = convert::half_bits(inputs[p.input])
                .ok_or_else(|| fail("matmul", "a packed weight is not bf16 (an engine bug)"))?;
            st.packed[i] = Some(crate::profile::time("prepare_weight", || {
                bf16dot::PackedB::pack(bits, p.k, p.n, p.rs, p.cs)
            }));
            st.packed_ready[i] = st.resident[p.input];
        }
        self.pack_f32_weights(st, inputs, true);
        for (i, (node, step)) in g.nodes.iter().zip(&self.steps).enumerate() {
            match step {
                Step::View | Step::Folded => {}
                Step::Ref => {
                    crate::profile::time(node.op.name(), || self.run_ref(st, node, inputs))
                        .map_err(|e| e.at_node(i))?
                }
                Step::Fast {
                    kind,
                    args,
                    mask,
                    mask_strides,
                    host_strides,
                    stage_in,
                    out_half,
                    dot,
                    f32_pack,
                    fold,
                } => crate::profile::time(node.op.name(), || {
                    for s in stage_in {
                        let dst = &mut st.stage[s.to..s.to + s.from.len()];
                        let src = Raw::Half(&st.half[s.from.clone()], s.fmt);
                        widen_into(dst, src);
                    }
                    let stored = self.run_fast(
                        st,
                        node,
                        kind,
                        args,
                        mask,
                        mask_strides,
                        host_strides,
                        *out_half,
                        *dot,
                        *f32_pack,
                        fold.as_ref(),
                        inputs,
                    )?;
                    if let (Some((off, fmt)), false) = (*out_half, stored) {
                        let n = g.ty(node.outputs[0]).shape.numel();
                        narrow_into(&mut st.half[off..off + n], &st.stage_out[..n], fmt);
                    }
                    Ok::<(), CpuError>(())
                })?,
            }
        }
        g.outputs
            .iter()
            .map(|&v| self.fetch(st, v, inputs).map(Cow::into_owned))
            .collect()
    }

    /// Value `v` as a host tensor (copied out of the arenas if it lives there).
    fn fetch<'a>(
        &self,
        st: &'a State,
        v: rlx_ir::ValueId,
        inputs: &'a [&'a HostTensor],
    ) -> Result<Cow<'a, HostTensor>, CpuError> {
        let ty = self.graph.ty(v);
        match &self.homes[v.index()] {
            Home::Mem(loc, fmt) => {
                let data = match loc.root {
                    Root::Arena => Raw::F32(&st.arena),
                    Root::Half => Raw::Half(&st.half, *fmt),
                    Root::Input(k) => Raw::of_input(inputs[k]),
                    Root::Const => Raw::F32(&self.consts),
                    Root::Prepared => Raw::F32(&st.prepared),
                    Root::Stage => Raw::F32(&st.stage),
                };
                let mut out = vec![0.0f32; loc.numel()];
                if loc.is_contiguous() {
                    data.load(loc.offset, &mut out);
                } else {
                    for (i, x) in out.iter_mut().enumerate() {
                        *x = data.get(loc.index_of(i));
                    }
                }
                Ok(Cow::Owned(convert::host_from_f32(
                    ty.dtype,
                    ty.shape.clone(),
                    out,
                )?))
            }
            Home::Host(Some(k)) => Ok(Cow::Borrowed(inputs[*k])),
            Home::Host(None) => st.host[v.index()]
                .as_ref()
                .map(Cow::Borrowed)
                .ok_or_else(|| fail("return", format!("value %{} was never computed", v.0))),
        }
    }

    fn run_ref(
        &self,
        st: &mut State,
        node: &rlx_ir::Node,
        inputs: &[&HostTensor],
    ) -> Result<(), CpuError> {
        let g = &self.graph;
        let k = kernel(node.op.name()).ok_or_else(|| CpuError::NoKernel(node.op.name().into()))?;
        let args: Vec<Cow<HostTensor>> = node
            .inputs
            .iter()
            .map(|&v| self.fetch(st, v, inputs))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&HostTensor> = args.iter().map(|c| c.as_ref()).collect();
        let out_types: Vec<TensorType> = node.outputs.iter().map(|&v| g.ty(v).clone()).collect();
        let outs = k(&KernelCx {
            op: node.op.name(),
            inputs: &refs,
            attrs: &node.attrs,
            outputs: &out_types,
            runner: &crate::interp::Interp,
        })?;
        drop(refs);
        drop(args);
        if outs.len() != out_types.len() {
            return Err(fail(
                node.op.name(),
                "kernel returned the wrong number of outputs (a kernel bug)",
            ));
        }
        for ((&v, t), ty) in node.outputs.iter().zip(outs).zip(&out_types) {
            if t.dtype() != ty.dtype || t.shape() != &ty.shape {
                return Err(fail(
                    node.op.name(),
                    format!(
                        "kernel returned {}{}, the op infers {ty} (a kernel bug)",
                        t.dtype(),
                        t.shape()
                    ),
                ));
            }
            match &self.homes[v.index()] {
                Home::Mem(loc, Fmt::F32) if loc.root == Root::Arena => {
                    let src = f32::unwrap(t.data()).unwrap_or(&[]);
                    st.arena[loc.offset..loc.offset + src.len()].copy_from_slice(src);
                }
                Home::Mem(loc, _) if loc.root == Root::Half => {
                    let src = convert::half_bits(&t).unwrap_or(&[]);
                    st.half[loc.offset..loc.offset + src.len()].copy_from_slice(src);
                }
                _ => st.host[v.index()] = Some(t),
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_fast(
        &self,
        st: &mut State,
        node: &rlx_ir::Node,
        kind: &Kind,
        args: &[Option<Loc>],
        mask: &[bool],
        mask_strides: &[usize],
        host_strides: &[Vec<usize>],
        out_half: Option<(usize, Fmt)>,
        dot: Option<DotPlan>,
        f32_pack: Option<usize>,
        fold: Option<&Fold>,
        inputs: &[&HostTensor],
    ) -> Result<bool, CpuError> {
        let staged_out = out_half.is_some();
        let g = &self.graph;
        let op = node.op.name();
        let out_v = node.outputs[0];
        // A kernel with a folded node writes that node's slot.
        let out_loc = match (fold, &self.homes[out_v.index()]) {
            (Some(f), _) => &f.out,
            (None, Home::Mem(l, _)) => l,
            (None, Home::Host(_)) => {
                return Err(fail(
                    op,
                    "fast kernel without an arena output (an engine bug)",
                ))
            }
        };
        let out_dims = out_loc.dims.as_slice();
        let host = &st.host;
        let host_of = |k: usize| -> Result<&HostTensor, CpuError> {
            match &self.homes[node.inputs[k].index()] {
                Home::Host(Some(i)) => Ok(inputs[*i]),
                Home::Host(None) => host[node.inputs[k].index()]
                    .as_ref()
                    .ok_or_else(|| fail(op, format!("input {k} was never computed"))),
                Home::Mem(..) => Err(fail(op, format!("input {k} is not a host tensor"))),
            }
        };
        // A 16-bit output is computed into the f32 staging output; the f32
        // arena is then read-only.
        let n = out_loc.numel();
        let range = if staged_out {
            0..0
        } else {
            out_loc.offset..out_loc.offset + n
        };
        let (out, rd) = Reader::split(
            &mut st.arena,
            range,
            inputs,
            &self.consts,
            &st.prepared,
            &st.stage,
        );
        let out = if staged_out {
            &mut st.stage_out[..n]
        } else {
            out
        };
        let overlap = || {
            fail(
                op,
                "an input overlaps the output in the memory plan (a planner bug)",
            )
        };
        let view = |k: usize| -> Result<View, CpuError> {
            let loc = args[k]
                .as_ref()
                .ok_or_else(|| fail(op, format!("input {k} is not f32")))?;
            let (data, shift) = rd.slice(loc).map_err(|_| overlap())?;
            Ok(View { data, loc, shift })
        };
        match kind {
            Kind::Elementwise(p) => {
                let src = |k: usize| -> Result<Src, CpuError> {
                    let Some(loc) = args[k].as_ref() else {
                        let t = host_of(k)?;
                        let d = bool::unwrap(t.data())
                            .ok_or_else(|| fail(op, "host input is not bool"))?;
                        return Ok(Src::Bool(d, &host_strides[k], out_dims));
                    };
                    if rd.is_output(loc) {
                        Ok(Src::Out)
                    } else {
                        view(k).map(Src::View)
                    }
                };
                // Operands on the stack for the usual few; a Vec beyond.
                let n = node.inputs.len();
                if n <= 8 {
                    let mut arr = [Src::Out; 8];
                    for (k, a) in arr.iter_mut().enumerate().take(n) {
                        *a = src(k)?;
                    }
                    elementwise::run(p, out, &arr[..n], &st.pool);
                } else {
                    let srcs = (0..n).map(src).collect::<Result<Vec<_>, _>>()?;
                    elementwise::run(p, out, &srcs, &st.pool);
                }
            }
            Kind::Matmul { act, bias } if dot.is_some() => {
                let Some(p) = dot else { unreachable!() };
                let bias = if *bias { Some(view(2)?) } else { None };
                let packed = st.packed[p.pack]
                    .as_ref()
                    .ok_or_else(|| fail(op, "weight not packed (an engine bug)"))?;
                let n = *out_dims.last().unwrap_or(&1);
                let rows = out.len() / n.max(1);
                let a_len = (rows.max(1) - 1) * p.lda + packed.k();
                // The left operand and a 16-bit output are disjoint slots
                // of the 16-bit arena.
                let (a, half) = match (p.a_input, out_half) {
                    (Some(k), out_half) => {
                        let bits = convert::half_bits(inputs[k])
                            .ok_or_else(|| fail(op, "a bf16 input is not bf16"))?;
                        let half =
                            out_half.map(|(off, fmt)| (&mut st.half[off..off + out.len()], fmt));
                        (&bits[p.a_offset..p.a_offset + a_len], half)
                    }
                    (None, Some((off, fmt))) if off >= p.a_offset + a_len => {
                        let (lo, hi) = st.half.split_at_mut(off);
                        (&lo[p.a_offset..], Some((&mut hi[..out.len()], fmt)))
                    }
                    (None, Some((off, fmt))) if off + out.len() <= p.a_offset => {
                        let (lo, hi) = st.half.split_at_mut(p.a_offset);
                        (&hi[..a_len], Some((&mut lo[off..off + out.len()], fmt)))
                    }
                    (None, Some(_)) => return Err(overlap()),
                    (None, None) => (&st.half[p.a_offset..p.a_offset + a_len], None),
                };
                matmul::run_bf16(out, n, a, p.lda, packed, bias.as_ref(), *act, half);
                return Ok(true);
            }
            Kind::Matmul { act, bias } => {
                let (a, b) = (view(0)?, view(1)?);
                let bias = if *bias { Some(view(2)?) } else { None };
                // A 16-bit output is rounded by the GEMM's epilogue, block
                // by block while it is in cache.
                let half = out_half.map(|(off, fmt)| (&mut st.half[off..off + out.len()], fmt));
                let packed = match f32_pack.filter(|&i| st.f32_packed_ready[i]) {
                    None => matmul::Packed::No,
                    Some(i) if self.f32_pack_kind == Some(F32PackKind::Amx) => {
                        matmul::Packed::Amx(&st.amx_packed[i], &st.amx_pool)
                    }
                    Some(i) => matmul::Packed::Gemm128(&st.f32_packed[i]),
                };
                let residual = match fold.map(|f| &f.kind) {
                    Some(FoldKind::Residual { from }) => {
                        if let Some(from) = from {
                            let (data, shift) = rd.slice(from).map_err(|_| overlap())?;
                            out.copy_from_slice(&data[from.offset - shift..][..out.len()]);
                        }
                        true
                    }
                    _ => false,
                };
                matmul::run(
                    out,
                    out_dims,
                    &a,
                    &b,
                    packed,
                    bias.as_ref(),
                    *act,
                    half,
                    residual,
                );
                return Ok(true);
            }
            Kind::Attention => {
                let (q, k, v) = (view(0)?, view(1)?, view(2)?);
                let r = q.loc.dims.len();
                let d = q.loc.dims[r - 1];
                let scale = match node.attrs.get("scale") {
                    Some(_) => node.attrs.float("scale")?,
                    None => 1.0 / (d as f64).sqrt(),
                } as f32;
                // The node's own dims (its output may be written merged).
                let att_dims = g.ty(out_v).dims();
                let dims = attention::Dims {
                    batch: &att_dims[..r - 2],
                    sq: q.loc.dims[r - 2],
                    sk: k.loc.dims[r - 2],
                    d,
                    dv: v.loc.dims[r - 1],
                    scale,
                };
                let bias_view;
                let m = match node.inputs.len() {
                    3 if mask.is_empty() => attention::Mask::None,
                    3 => attention::Mask::Builtin(mask),
                    _ if g.ty(node.inputs[3]).dtype == DType::Bool => {
                        let t = host_of(3)?;
                        let data =
                            bool::unwrap(t.data()).ok_or_else(|| fail(op, "mask is not bool"))?;
                        attention::Mask::Custom {
                            data,
                            strides: mask_strides,
                        }
                    }
                    _ => {
                        bias_view = view(3)?;
                        attention::Mask::Bias(bias_view)
                    }
                };
                match fold.map(|f| &f.kind) {
                    Some(FoldKind::MergeHeads) => {
                        attention::run_merged(out, &q, &k, &v, &m, &dims, &st.pool)
                    }
                    _ => attention::run(out, &q, &k, &v, &m, &dims, &st.pool),
                }
            }
            Kind::Norm { centered } => {
                let x = view(0)?;
                let ax = g.ty(node.inputs[0]).shape.axis(node.attrs.int("axis")?)?;
                let inner: usize = x.loc.dims[ax..].iter().product();
                let gv = view(1)?;
                let gs = gv
                    .contiguous()
                    .ok_or_else(|| fail(op, "scale is not contiguous"))?;
                let bv = if *centered { Some(view(2)?) } else { None };
                let bs = match &bv {
                    Some(b) => Some(
                        b.contiguous()
                            .ok_or_else(|| fail(op, "shift is not contiguous"))?,
                    ),
                    None => None,
                };
                let eps = node.attrs.float("eps")?;
                norm::norm(out, &x, gs, bs, inner, eps, *centered, &st.pool);
            }
            Kind::Softmax { log } => {
                let x = view(0)?;
                let ax = g.ty(node.inputs[0]).shape.axis(node.attrs.int("axis")?)?;
                let len = x.loc.dims[ax];
                let inner: usize = x.loc.dims[ax + 1..].iter().product();
                norm::softmax(out, &x, len, inner, *log, &st.pool);
            }
            Kind::Constant => {}
            Kind::Where => {
                let t = host_of(0)?;
                let cond =
                    bool::unwrap(t.data()).ok_or_else(|| fail(op, "condition is not bool"))?;
                let src = |k: usize| -> Result<Src, CpuError> {
                    let loc = args[k].as_ref().ok_or_else(|| fail(op, "non-f32 input"))?;
                    if rd.is_output(loc) {
                        Ok(Src::Out)
                    } else {
                        view(k).map(Src::View)
                    }
                };
                let (x, y) = (src(1)?, src(2)?);
                elementwise::select(out, cond, mask_strides, &x, &y, out_dims, &st.pool);
            }
            Kind::Reduce {
                red,
                outer,
                len,
                inner,
            } => reduce::run(out, &view(0)?, *outer, *len, *inner, *red),
            Kind::Embedding => {
                let table = view(0)?;
                let rows = table.loc.dims[0];
                let inner: usize = table.loc.dims[1..].iter().product();
                let ids = host_of(1)?;
                let idx: Cow<[i64]> = match (i64::unwrap(ids.data()), i32::unwrap(ids.data())) {
                    (Some(v), _) => Cow::Borrowed(v),
                    (None, Some(v)) => Cow::Owned(v.iter().map(|&x| x as i64).collect()),
                    _ => return Err(fail(op, "ids must be i64 or i32")),
                };
                let tc = table.contiguous();
                for (&i, o) in idx.iter().zip(out.chunks_mut(inner.max(1))) {
                    let j = if i < 0 { i + rows as i64 } else { i };
                    if j < 0 || j >= rows as i64 {
                        return Err(fail(
                            op,
                            format!("index {i} is out of range for an axis of extent {rows}"),
                        ));
                    }
                    let j = j as usize;
                    match tc {
                        Some(t) => o.copy_from_slice(&t[j * inner..(j + 1) * inner]),
                        None => o
                            .iter_mut()
                            .enumerate()
                            .for_each(|(c, x)| *x = table.get(j * inner + c)),
                    }
                }
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dims: &[usize], seed: u64) -> HostTensor {
        let mut s = seed;
        let d: Vec<f32> = (0..dims.iter().product::<usize>())
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect();
        HostTensor::new(DType::F32, rlx_ir::Shape::from(dims.to_vec()), d.into()).unwrap()
    }

    /// `g`'s program with its first node, `permute(input 1)` of a
    /// `(n, k)` weight, made a view of that input, as the memory plan does.
    fn transposed_weight_program(g: &Graph, k: usize) -> rlx_ir::lir::Program {
        let mut prog = rlx_ir::lir::Program::from_graph(g.clone());
        prog.views.push(rlx_ir::lir::View {
            value: g.nodes[0].outputs[0],
            base: g.inputs[1],
            offset: 0,
            strides: vec![1, k],
        });
        prog
    }

    /// A resident weight read through a transpose (`x · wᵀ`, as Linear
    /// layers store it) is packed from the graph input itself; its
    /// transposed f32 copy is made only where some product still reads it:
    /// on the AMX tiles, below `MIN_ROWS` rows or when the weight holds a
    /// non-finite value (the `gemm` crate runs those); with gemm128, never
    /// once packed; and whenever the weight is not resident. The results
    /// match the reference kernels (f64) every time.
    #[test]
    fn transposed_weights_get_a_copy_only_where_read() {
        let kinds = if amx::available() {
            vec![Some(F32PackKind::Amx), Some(F32PackKind::Gemm128)]
        } else {
            vec![Some(F32PackKind::Gemm128)]
        };
        for kind in kinds {
            for (rows, inf, resident) in [
                (40, false, true),
                (40, true, true),
                (40, false, false),
                (7, false, true),
            ] {
                let src = format!(
                    "graph @lin(%x: f32[{rows},70], %w: f32[33,70], %b: f32[33]) {{
  %wt = permute(%w) {{perm=[1, 0]}}
  %y = matmul_bias_act(%x, %wt, %b) {{activation=\"gelu\"}}
  return %y
}}"
                );
                let g = rlx_ir::text::parse(&src).unwrap();
                let prog = transposed_weight_program(&g, 70);
                let compile = || FastProgram::compile(prog.clone());
                let p = if kind == Some(F32PackKind::Amx) {
                    compile()
                } else {
                    amx::without(compile)
                }
                .unwrap();
                let case = format!("{kind:?} rows {rows} inf {inf} resident {resident}");
                assert_eq!(p.f32_pack_kind, kind, "{case}");
                assert_eq!(p.preps.len(), 1, "{case}");
                let tiles_too_few = kind == Some(F32PackKind::Amx) && rows < amx::MIN_ROWS;
                let want_need = if tiles_too_few {
                    Need::Always
                } else {
                    Need::UnlessPacked(vec![0])
                };
                assert_eq!(p.preps[0].need, want_need, "{case}");
                if resident {
                    p.keep_resident(&[1, 2]);
                }
                let mut ins = random_inputs(&g, 60);
                if inf {
                    let mut w = ins[1].to_f64_vec().unwrap();
                    w[11] = f64::INFINITY;
                    let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
                    ins[1] = HostTensor::new(DType::F32, ins[1].shape().clone(), w.into()).unwrap();
                }
                let refs: Vec<&HostTensor> = ins.iter().collect();
                let want = crate::run_graph_refs(&g, &refs).unwrap();
                for run in 0..2 {
                    let got = p.run(&refs).unwrap();
                    assert_close(&got[0], &want[0], |i| format!("{case} run {run} [{i}]"));
                }
                // The buffer grows only as far as the copies made reach.
                let prepared = p.state.lock().unwrap().prepared.clone();
                let copy_made = prepared.len() == 33 * 70 && prepared.iter().any(|&v| v != 0.0);
                assert!(
                    copy_made || prepared.is_empty(),
                    "{case}: {} floats",
                    prepared.len()
                );
                let finite_on_tiles = !(inf && kind == Some(F32PackKind::Amx));
                let want_copy = !resident || tiles_too_few || !finite_on_tiles;
                assert_eq!(copy_made, want_copy, "{case}");
            }
        }
    }

    /// bf16 weights on the dot-product matmuls (AVX512-BF16) are packed
    /// from their bits: neither a plain nor a transposed one gets an f32
    /// copy. Results within bf16 rounding of the reference.
    #[test]
    fn bf16_dot_weights_get_no_f32_copy() {
        if !bf16dot::available() {
            eprintln!("no AVX512-BF16 here: the dot-product path is not used");
            return;
        }
        let src = "graph @lin(%x: bf16[40,70], %w: bf16[33,70], %v: bf16[33,20]) {
  %wt = permute(%w) {perm=[1, 0]}
  %y = matmul(%x, %wt)
  %z = matmul(%y, %v)
  return %z
}";
        let g = rlx_ir::text::parse(src).unwrap();
        let p = FastProgram::compile(transposed_weight_program(&g, 70)).unwrap();
        assert_eq!(
            p.preps.iter().map(|p| p.need.clone()).collect::<Vec<_>>(),
            [Need::Never]
        );
        p.keep_resident(&[1, 2]);
        let ins: Vec<HostTensor> = random_inputs(&g, 80)
            .iter()
            .zip(&g.inputs)
            .map(|(t, &v)| {
                let d: Vec<half::bf16> = t
                    .to_f64_vec()
                    .unwrap()
                    .iter()
                    .map(|&x| half::bf16::from_f64(x))
                    .collect();
                HostTensor::new(DType::BF16, g.ty(v).shape.clone(), d.into()).unwrap()
            })
            .collect();
        let refs: Vec<&HostTensor> = ins.iter().collect();
        let want = crate::run_graph_refs(&g, &refs).unwrap()[0]
            .to_f64_vec()
            .unwrap();
        for run in 0..2 {
            let got = p.run(&refs).unwrap()[0].to_f64_vec().unwrap();
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                // %y is rounded to bf16 (2⁻⁸) before the second product.
                assert!(
                    (a - b).abs() <= 0.02 * (1.0 + b.abs()),
                    "run {run} [{i}]: {a} vs {b}"
                );
            }
        }
        let st = p.state.lock().unwrap();
        assert!(st.prepared.is_empty(), "an f32 copy was made");
    }

    /// Runs from several threads at once (of one program: the second
    /// caller gets its own state; of two programs) all finish, with the
    /// results of a run alone. Each run keeps the pool's other threads
    /// spinning for work (`par::with_helpers`); a run that starts while
    /// another's spinner holds a thread must still get through. Compared
    /// with the reference kernels (f64): a second caller's fresh state
    /// runs its first products unpacked, with other rounding.
    #[test]
    fn concurrent_runs_finish_and_agree() {
        let src = "graph @mlp(%x: f32[1024,64], %w: f32[64,96], %b: f32[96], %v: f32[96,32]) {
  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}
  %z = matmul(%y, %v)
  return %z
}";
        let g = rlx_ir::text::parse(src).unwrap();
        let compile = || {
            let p = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
            p.keep_resident(&[1, 2, 3]);
            std::sync::Arc::new(p)
        };
        let programs = [compile(), compile()];
        let ins = std::sync::Arc::new(random_inputs(&g, 7));
        let want = {
            let refs: Vec<&HostTensor> = ins.iter().collect();
            crate::run_graph_refs(&g, &refs).unwrap().remove(0)
        };
        let (tx, rx) = std::sync::mpsc::channel();
        for t in 0..4 {
            let (p, ins, tx) = (programs[t % 2].clone(), ins.clone(), tx.clone());
            std::thread::spawn(move || {
                let refs: Vec<&HostTensor> = ins.iter().collect();
                let outs: Vec<HostTensor> =
                    (0..25).map(|_| p.run(&refs).unwrap().remove(0)).collect();
                tx.send(outs).unwrap();
            });
        }
        for _ in 0..4 {
            let outs = rx
                .recv_timeout(std::time::Duration::from_secs(120))
                .expect("concurrent runs did not finish in 120 s: a deadlock");
            for (k, got) in outs.iter().enumerate() {
                assert_close(got, &want, |i| format!("run {k} [{i}]"));
            }
        }
    }

    /// A resident f32 weight is packed once for gemm128 (in the wasm32
    /// build; natively in these unit tests): the first and later runs
    /// match the reference kernels (f64), and later runs reuse it. A
    /// weight that is not resident is read on every run: new values, new
    /// results.
    #[test]
    fn resident_f32_weights_are_packed_once() {
        let src = "graph @lin(%x: f32[2,5,7], %w: f32[7,9], %b: f32[9], %v: f32[9,3]) {
  %y = matmul_bias_act(%x, %w, %b) {activation=\"gelu\"}
  %z = matmul(%y, %v)
  return %z
}";
        let g = rlx_ir::text::parse(src).unwrap();
        // Where the CPU has AMX its packing is chosen instead (tested below).
        let p = amx::without(|| {
            FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap()
        });
        assert_eq!(p.f32_pack_kind, Some(F32PackKind::Gemm128));
        assert_eq!(p.f32_packs.len(), 2);
        p.keep_resident(&[1, 2]);
        let (x, w, b) = (tensor(&[2, 5, 7], 1), tensor(&[7, 9], 2), tensor(&[9], 3));
        for (run, vseed) in [(0, 4), (1, 4), (2, 5)] {
            let v = tensor(&[9, 3], vseed);
            let ins = [&x, &w, &b, &v];
            let want = crate::run_graph_refs(&g, &ins).unwrap()[0]
                .to_f64_vec()
                .unwrap();
            let calls = crate::kernels::gemm128::calls();
            let got = p.run(&ins).unwrap()[0].to_f64_vec().unwrap();
            assert!(
                crate::kernels::gemm128::calls() > calls,
                "run {run}: gemm128 not used"
            );
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "run {run} [{i}]: {g} vs {w}"
                );
            }
            let st = p.state.lock().unwrap();
            // Only the resident weight (%w) is held packed.
            assert_eq!(st.f32_packed_ready, [true, false], "run {run}");
        }
    }

    /// Where the CPU has AMX, a resident f32 weight is split for the tiles
    /// once and products of at least 32 rows run on them (fewer: the
    /// `gemm` crate), matching the reference kernels (f64) on every run;
    /// a weight that is not resident is not packed and runs on the `gemm`
    /// crate. The report names the kernel.
    #[test]
    fn resident_f32_weights_run_on_amx() {
        if !amx::available() {
            eprintln!("no AMX tiles on this machine: the kernel is not used here");
            return;
        }
        for rows in [7, 40, 300] {
            let src = format!(
                "graph @lin(%x: f32[{rows},70], %w: f32[70,33], %b: f32[33], %v: f32[33,20]) {{
  %y = matmul_bias_act(%x, %w, %b) {{activation=\"gelu\"}}
  %z = matmul(%y, %v)
  return %z
}}"
            );
            let g = rlx_ir::text::parse(&src).unwrap();
            let p = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
            assert_eq!(p.f32_pack_kind, Some(F32PackKind::Amx));
            p.keep_resident(&[1, 2]);
            for run in 0..3 {
                let mut ins = random_inputs(&g, 20);
                ins[3] = tensor(&[33, 20], 40 + run);
                let refs: Vec<&HostTensor> = ins.iter().collect();
                let want = crate::run_graph_refs(&g, &refs).unwrap();
                let uses = || p.state.lock().unwrap().amx_packed[0].uses();
                let before = uses();
                let got = p.run(&refs).unwrap();
                // %w (resident) on the tiles from 32 rows on; %v not packed.
                let used = uses() - before;
                assert_eq!(
                    used > 0,
                    rows >= amx::MIN_ROWS,
                    "rows {rows}: {used} AMX calls"
                );
                assert_close(&got[0], &want[0], |i| {
                    format!("rows {rows} run {run} [{i}]")
                });
                let st = p.state.lock().unwrap();
                assert_eq!(st.f32_packed_ready, [true, false], "run {run}");
            }
        }
        let t = TensorType::new(DType::F32, rlx_ir::Shape::from(vec![64, 64]));
        let name = kernel_name("matmul", &[&t, &t], &Attrs::default(), DType::F32);
        assert!(name.contains("AMX"), "{name}");

        // A resident weight holding an inf: its products run on the `gemm`
        // crate (the report's "of finite values"), giving what f32 gives.
        let src = "graph @lin(%x: f32[40,6], %w: f32[6,5]) {
  %y = matmul(%x, %w)
  return %y
}";
        let g = rlx_ir::text::parse(src).unwrap();
        let p = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
        p.keep_resident(&[1]);
        let mut ins = random_inputs(&g, 50);
        let mut w = ins[1].to_f64_vec().unwrap();
        w[7] = f64::INFINITY;
        let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
        ins[1] = HostTensor::new(DType::F32, ins[1].shape().clone(), w.into()).unwrap();
        let refs: Vec<&HostTensor> = ins.iter().collect();
        let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
        assert_close(&p.run(&refs).unwrap()[0], want, |i| {
            format!("inf weight [{i}]")
        });
        assert!(want.to_f64_vec().unwrap().iter().any(|v| v.is_infinite()));
        assert_eq!(p.state.lock().unwrap().amx_packed[0].uses(), 0);
    }

    /// A tensor per graph input, seeded `seed`, `seed + 1`, ….
    fn random_inputs(g: &Graph, seed: u64) -> Vec<HostTensor> {
        g.inputs
            .iter()
            .enumerate()
            .map(|(i, &v)| tensor(g.ty(v).dims(), seed + i as u64))
            .collect()
    }

    /// `got` within 1e-5 (relative, absolute near 0) of the reference's
    /// `want`, element by element — where the reference is ±inf, the same
    /// infinity; where NaN, NaN; `what(i)` names element i.
    fn assert_close(got: &HostTensor, want: &HostTensor, what: impl Fn(usize) -> String) {
        let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
        assert_eq!(g.len(), w.len(), "{}: lengths differ", what(0));
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let close = match (b.is_nan(), b.is_infinite()) {
                (true, _) => a.is_nan(),
                (_, true) => a == b,
                _ => (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
            };
            assert!(close, "{}: {a} vs {b}", what(i));
        }
    }

    /// A residual `add` after a matmul is folded into it — in place over
    /// the residual (its last use), copied first (the residual lives on),
    /// or read from a graph input — on every GEMM path (few rows: columns
    /// split across threads; up to 1024: one threaded call; more: row
    /// blocks; a resident weight: gemm128, and the AMX tiles where the CPU
    /// has them), against the reference kernels.
    /// A matmul whose output has another use keeps its add.
    #[test]
    fn residual_adds_fold_into_matmuls() {
        for rows in [5, 64, 300, 1100] {
            let src = format!(
                "graph @g(%x: f32[{rows},16], %w: f32[16,16], %b: f32[16], %u: f32[16,16], %x2: f32[{rows},16]) {{
  %r = tanh(%x)
  %s = sigmoid(%x)
  %h = matmul_bias_act(%s, %u, %b) {{activation=\"none\"}}
  %y2 = add(%s, %h)
  %z = add(%y2, %s)
  %h2 = matmul(%r, %w)
  %y = add(%h2, %x2)
  %k = matmul(%r, %w)
  %k2 = add(%k, %k)
  %t = matmul_bias_act(%x, %u, %b) {{activation=\"none\"}}
  %t2 = add(%r, %t)
  return %y, %z, %k2, %t2
}}"
            );
            let g = rlx_ir::text::parse(&src).unwrap();
            // `from_graph` gives every value its own slot; a memory plan
            // puts %t2 in place over %r (its last use), as here.
            let mut prog = rlx_ir::lir::Program::from_graph(g.clone());
            let slot_of = |prog: &rlx_ir::lir::Program, v| {
                prog.slots.iter().position(|s| s.value == v).unwrap()
            };
            let (r, t2) = (
                slot_of(&prog, g.nodes[0].outputs[0]),
                slot_of(&prog, g.outputs[3]),
            );
            prog.slots[t2].offset = prog.slots[r].offset;
            // The AMX tiles where the CPU has them (resident weights),
            // else and also gemm128.
            for with_amx in [true, false] {
                let compile = || FastProgram::compile(prog.clone()).unwrap();
                let p = if with_amx {
                    compile()
                } else {
                    amx::without(compile)
                };
                let folds: Vec<Option<bool>> = p
                    .steps
                    .iter()
                    .filter_map(|s| match s {
                        Step::Fast {
                            kind: Kind::Matmul { .. },
                            fold,
                            ..
                        } => Some(
                            fold.as_ref()
                                .map(|f| matches!(f.kind, FoldKind::Residual { from: None })),
                        ),
                        _ => None,
                    })
                    .collect();
                // %h (residual %s lives on: copied), %h2 (graph input %x2:
                // copied), %k (two uses: not folded), %t (in place over %r).
                assert_eq!(
                    folds,
                    [Some(false), Some(false), None, Some(true)],
                    "rows {rows}: folded adds (Some(in place))"
                );
                assert_eq!(
                    p.steps.iter().filter(|s| matches!(s, Step::Folded)).count(),
                    3
                );
                for resident in [false, true] {
                    if resident {
                        p.keep_resident(&[1, 3]);
                    }
                    let ins = random_inputs(&g, 10);
                    let refs: Vec<&HostTensor> = ins.iter().collect();
                    let want = crate::run_graph_refs(&g, &refs).unwrap();
                    for run in 0..2 {
                        let got = p.run(&refs).unwrap();
                        for (o, (gt, wt)) in got.iter().zip(&want).enumerate() {
                            assert_close(gt, wt, |i| {
                                format!("rows {rows} amx {with_amx} resident {resident} run {run} output {o} [{i}]")
                            });
                        }
                    }
                }
            }
        }
    }

    /// Attention followed by the head-merging permute (a view) and
    /// reshape writes the merged layout itself and the reshape's value
    /// moves into attention's slot — against the reference kernels, with
    /// query-row blocks split across threads (batch 1) or not; when a
    /// later node would overwrite that slot while the value lives, no fold.
    #[test]
    fn attention_writes_merged_heads() {
        for (b, sq, clobber) in [(2, 5, false), (1, 8, false), (2, 5, true)] {
            let src = format!(
                "graph @g(%q: f32[{b},3,{sq},4], %k: f32[{b},3,6,4], %v: f32[{b},3,6,4], %m: f32[{b},1,1,6], %w: f32[12,7]) {{
  %a = attention(%q, %k, %v, %m) {{mask_kind=\"bias\"}}
  %p = permute(%a) {{perm=[0, 2, 1, 3]}}
  %y = reshape(%p) {{shape=[{b}, {sq}, 12]}}
  %t = tanh(%w)
  %z = matmul(%y, %t)
  return %z
}}"
            );
            let g = rlx_ir::text::parse(&src).unwrap();
            let mut prog = rlx_ir::lir::Program::from_graph(g.clone());
            let (a, p) = (g.nodes[0].outputs[0], g.nodes[1].outputs[0]);
            // The plan makes the permute a view of the attention's slot.
            prog.views.push(rlx_ir::lir::View {
                value: p,
                base: a,
                offset: 0,
                strides: vec![3 * sq * 4, 4, sq * 4, 1],
            });
            if clobber {
                let slot = |v| prog.slots.iter().position(|s| s.value == v).unwrap();
                let (sa, st) = (slot(a), slot(g.nodes[3].outputs[0]));
                prog.slots[st].offset = prog.slots[sa].offset;
            }
            let fp = FastProgram::compile(prog).unwrap();
            let folded = fp
                .steps
                .iter()
                .filter(|s| matches!(s, Step::Folded))
                .count();
            assert_eq!(
                folded,
                usize::from(!clobber),
                "b {b} sq {sq} clobber {clobber}"
            );
            let ins = random_inputs(&g, 30);
            let refs: Vec<&HostTensor> = ins.iter().collect();
            let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
            let got = &fp.run(&refs).unwrap()[0];
            assert_close(got, want, |i| format!("b {b} sq {sq} [{i}]"));
        }
    }

    /// An additive attention mask broadcast over the query rows (a
    /// padding mask, (B, 1, 1, Sk)) — read once per row of keys — and one
    /// that varies by query row, each against the reference kernels; the
    /// batches' masks differ, so reading the wrong batch's row fails.
    #[test]
    fn attention_with_additive_row_masks_matches_reference() {
        for mask in ["f32[2,1,1,5]", "f32[2,1,3,5]", "f32[1,1,1,5]"] {
            let src = format!(
                "graph @g(%q: f32[2,2,3,4], %k: f32[2,2,5,4], %v: f32[2,2,5,4], %mask: {mask}) {{
  %r = attention(%q, %k, %v, %mask) {{mask_kind=\"bias\"}}
  return %r
}}"
            );
            let g = rlx_ir::text::parse(&src).unwrap();
            let p = FastProgram::compile(rlx_ir::lir::Program::from_graph(g.clone())).unwrap();
            assert_eq!(p.counts().0, 1, "{mask}: attention not on the fast engine");
            let ins: Vec<HostTensor> = g
                .inputs
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let t = tensor(g.ty(v).dims(), 10 + i as u64);
                    if i < 3 {
                        return t;
                    }
                    // Mask values from −8 to 0, different per batch.
                    let d: Vec<f32> = t
                        .to_f64_vec()
                        .unwrap()
                        .iter()
                        .map(|x| (4.0 * x - 4.0) as f32)
                        .collect();
                    HostTensor::new(DType::F32, t.shape().clone(), d.into()).unwrap()
                })
                .collect();
            let refs: Vec<&HostTensor> = ins.iter().collect();
            let want = &crate::run_graph_refs(&g, &refs).unwrap()[0];
            assert_close(&p.run(&refs).unwrap()[0], want, |i| format!("{mask} [{i}]"));
        }
    }
}
