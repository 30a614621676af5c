//! From an LIR program to a static launch list: where every value lives
//! (arena slot, graph input, constant, scratch, or a strided view of one of
//! them), the generated CUDA source, and one launch (kernel or cuBLAS call)
//! per step. Everything is fixed at compile time, so the whole list can be
//! captured as one CUDA graph.

mod attention;
mod elementwise;
pub(crate) use elementwise::region_form;
mod fuse;
mod gather;
mod gemm;
mod inline;
mod lower;
mod mask;
mod movement;
mod quant;
mod reduce;
mod rope;

use crate::options::CudaOptions;
use attention::attention;
use elementwise::{elementwise_parts, is_elementwise, vector_width, ElementwiseParts};
use gemm::matmul;
use lower::{lower, norm_axis, norm_takes_producer};
use movement::table_copy;

use crate::codegen::expr;
use crate::codegen::kernels::{self, contiguous, Mask, Operand, Reduce, ROW_THREADS};
use crate::codegen::Module;
use crate::ctype;
use crate::error::CudaError;
use rlx_ir::lir::Program;
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, Node, TensorType, ValueId};
use std::collections::HashMap;

/// Which allocation a value's memory belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// Byte offset into the arena.
    Arena(usize),
    Input(usize),
    Const(usize),
    Scratch(usize),
}

/// A value's memory: a root, an element offset and a stride per axis.
#[derive(Clone, Debug)]
pub struct Loc {
    pub root: Root,
    pub offset: i64,
    pub strides: Vec<i64>,
    pub dtype: DType,
    pub dims: Vec<usize>,
}

impl Loc {
    fn is_contiguous(&self) -> bool {
        let c = contiguous(&self.dims);
        self.dims
            .iter()
            .zip(self.strides.iter().zip(&c))
            .all(|(&d, (s, c))| d == 1 || s == c)
    }
    fn ptr(&self) -> Ptr {
        Ptr {
            root: self.root,
            byte: self.offset * esize(self.dtype) as i64,
        }
    }
}

/// A device address: root + byte offset (resolved when memory is allocated).
#[derive(Clone, Copy, Debug)]
pub struct Ptr {
    pub root: Root,
    pub byte: i64,
}

/// One cuBLAS strided-batched GEMM in column-major terms (C = op(A)·op(B)).
#[derive(Clone, Debug)]
pub struct Gemm {
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub a: Ptr,
    pub lda: i32,
    pub stride_a: i64,
    pub b: Ptr,
    pub ldb: i32,
    pub stride_b: i64,
    pub c: Ptr,
    pub ldc: i32,
    pub stride_c: i64,
    pub batch: i32,
    pub dtype: DType,
    /// The dtype of C/D (f32 scores from f16 operands, say); usually `dtype`.
    pub c_dtype: DType,
    /// Epilogue (cuBLASLt): add this bias vector (length m, per row of the
    /// column-major result).
    pub bias: Option<Ptr>,
    /// Epilogue (cuBLASLt): add this tensor (same layout as C; beta = 1);
    /// C then names the output D.
    pub residual: Option<Ptr>,
    /// Elements between the bias vectors of consecutive batches (0: one
    /// bias for all).
    pub bias_stride: i64,
    /// A bias and activation the next launch (an elementwise kernel)
    /// applies to this GEMM's output in place; our own 16-bit kernels can
    /// apply them in their epilogue instead (`hgemm.rs`; the tuner
    /// decides and drops that launch when they run).
    pub tail: Option<Tail>,
}

/// See [`Gemm::tail`].
#[derive(Clone, Debug)]
pub struct Tail {
    /// A vector over the output's last axis (D's m), or none.
    pub bias: Option<Ptr>,
    /// The activation: a CUDA expression of the float `y`.
    pub act: String,
}

/// One entry of the schedule.
#[derive(Clone, Debug)]
pub enum Launch {
    Kernel {
        node: usize,
        func: String,
        grid: (u32, u32, u32),
        block: u32,
        smem: u32,
        args: Vec<Ptr>,
        /// Whether the last argument is the error flag.
        err: bool,
    },
    Gemm {
        node: usize,
        gemm: Gemm,
    },
    /// One cuBLAS GEMM over per-batch pointer triples (A, B, C) with the
    /// shape, transposes and leading dims of `gemm` (its pointers unused).
    GemmBatched {
        node: usize,
        gemm: Gemm,
        ptrs: Vec<[Ptr; 3]>,
    },
}

/// The compiled form of a program, before any device memory exists.
pub struct Plan {
    pub source: String,
    pub launches: Vec<Launch>,
    pub consts: Vec<HostTensor>,
    pub scratch: Vec<usize>,
    pub arena_bytes: usize,
    pub inputs: Vec<TensorType>,
    /// Where each graph output lives (contiguous).
    pub outputs: Vec<Loc>,
    /// Node index → op name, for error messages and the profile.
    pub node_ops: Vec<String>,
    /// Per node: the kernels it launched.
    pub kernels: Vec<(usize, String)>,
    /// Graph inputs the executable must allocate back to back in one
    /// buffer, [`group_stride`] bytes apart (the weights of sibling GEMMs
    /// run as one batched GEMM).
    pub input_groups: Vec<Vec<usize>>,
}

impl Plan {
    /// How many kernels nodes of `op` launched (tests and reports check
    /// that a fusion removed a node's own kernel).
    pub fn kernels_of(&self, op: &str) -> usize {
        self.kernels
            .iter()
            .filter(|(n, _)| self.node_ops[*n] == op)
            .count()
    }
}

/// Bytes between consecutive members of an input group of type `ty`.
pub fn group_stride(ty: &TensorType) -> usize {
    ty.dtype
        .storage_bytes(ty.shape.numel())
        .unwrap_or(0)
        .div_ceil(256)
        .max(1)
        * 256
}

pub fn esize(d: DType) -> usize {
    d.storage_bytes(1).unwrap_or(1)
}

struct Planner<'a> {
    g: &'a Graph,
    locs: Vec<Option<Loc>>,
    m: Module,
    launches: Vec<Launch>,
    consts: Vec<HostTensor>,
    scratch: Vec<usize>,
    kernels: Vec<(usize, String)>,
    contiguous_cache: HashMap<ValueId, Loc>,
    node: usize,
    /// Per value: the nodes that read it.
    users: Vec<Vec<usize>>,
    /// Values that are views (no kernel).
    views: std::collections::HashSet<ValueId>,
    /// Nodes already lowered as part of an earlier node (fused epilogues).
    done: std::collections::HashSet<usize>,
    slots: HashMap<ValueId, usize>,
    /// The GPU has `mma.sync` f16/bf16 tensor cores (sm_80+).
    tensor_cores: bool,
    /// How the tensor-core attention spreads a head over blocks.
    attn_split: AttnSplit,
    input_groups: Vec<Vec<usize>>,
    /// Elementwise results not computed where their node stands: the
    /// reduction that reads them computes them (see `reduce.rs`).
    deferred: HashMap<ValueId, reduce::Deferred>,
    /// Gathers not computed where their node stands: the elementwise node
    /// that reads them loads through their indices (see `gather.rs`).
    gathers: HashMap<ValueId, gather::GatherSrc>,
    /// Each view's base value.
    view_base: HashMap<ValueId, ValueId>,
    /// `x != 0` masks read by attention as `x` (see `mask.rs`): the
    /// value's (x, own) locations.
    nonzero_masks: HashMap<ValueId, (Loc, Loc)>,
    /// Elementwise values recomputed by each reader (see `inline.rs`),
    /// and views of them.
    inline: HashMap<ValueId, inline::InlineSrc>,
    /// Values not to recompute in readers (found unsafe by a first pass).
    no_inline: std::collections::HashSet<ValueId>,
    /// Values whose arena slot no kernel writes (computed inside a fused
    /// kernel, or recomputed by readers): for `inline::overwritten`.
    unstored: std::collections::HashSet<ValueId>,
    /// Each view: its base, element offset and strides (the LIR's).
    view_defs: HashMap<ValueId, (ValueId, i64, Vec<i64>)>,
    /// The one scratch buffer every prompt-sized `dequant_matmul` decodes
    /// its weight into before its GEMM (see `quant.rs`): launches run in
    /// stream order, so each node may reuse it.
    decoded_weights: Option<usize>,
}

fn unsupported(node: usize, n: &Node, msg: impl Into<String>) -> CudaError {
    CudaError::Unsupported {
        node,
        op: n.op.name().into(),
        msg: msg.into(),
    }
}

fn grid_for(n: usize) -> (u32, u32, u32) {
    (((n.div_ceil(256)).clamp(1, 65535 * 8)) as u32, 1, 1)
}

/// Strides of `loc` broadcast (NumPy, right-aligned) to `dims`.
fn broadcast_strides(loc: &Loc, dims: &[usize]) -> Vec<i64> {
    let r = dims.len();
    let lr = loc.dims.len();
    (0..r)
        .map(|k| {
            if k + lr < r {
                0
            } else {
                let j = k + lr - r;
                if loc.dims[j] == 1 && dims[k] != 1 {
                    0
                } else {
                    loc.strides[j]
                }
            }
        })
        .collect()
}

impl<'a> Planner<'a> {
    fn loc(&self, v: ValueId) -> Result<Loc, CudaError> {
        self.locs[v.index()].clone().ok_or_else(|| {
            CudaError::Input(format!("value %{} has no location (planner bug)", v.0))
        })
    }
    fn ty(&self, v: ValueId) -> &TensorType {
        self.g.ty(v)
    }
    fn scratch_loc(&mut self, dtype: DType, dims: &[usize]) -> Loc {
        let bytes = dtype
            .storage_bytes(dims.iter().product())
            .unwrap_or(0)
            .max(1);
        self.scratch.push(bytes);
        Loc {
            root: Root::Scratch(self.scratch.len() - 1),
            offset: 0,
            strides: contiguous(dims),
            dtype,
            dims: dims.to_vec(),
        }
    }
    /// A contiguous `dims` in the scratch buffer shared by every node that
    /// asks for one (grown to the largest); its contents live only until
    /// the next node that asks.
    fn shared_scratch_loc(&mut self, dtype: DType, dims: &[usize]) -> Loc {
        let bytes = dtype
            .storage_bytes(dims.iter().product())
            .unwrap_or(0)
            .max(1);
        let i = match self.decoded_weights {
            Some(i) => {
                self.scratch[i] = self.scratch[i].max(bytes);
                i
            }
            None => {
                self.scratch.push(bytes);
                self.decoded_weights = Some(self.scratch.len() - 1);
                self.scratch.len() - 1
            }
        };
        Loc {
            root: Root::Scratch(i),
            offset: 0,
            strides: contiguous(dims),
            dtype,
            dims: dims.to_vec(),
        }
    }
    fn const_loc(&mut self, t: HostTensor) -> Loc {
        let dims = t.shape().dims().to_vec();
        let dtype = t.dtype();
        self.consts.push(t);
        Loc {
            root: Root::Const(self.consts.len() - 1),
            offset: 0,
            strides: contiguous(&dims),
            dtype,
            dims,
        }
    }
    fn kernel(
        &mut self,
        text: String,
        grid: (u32, u32, u32),
        block: u32,
        smem: u32,
        args: Vec<Ptr>,
        err: bool,
    ) {
        let func = self.m.add(text);
        self.kernels.push((self.node, func.clone()));
        self.launches.push(Launch::Kernel {
            node: self.node,
            func,
            grid,
            block,
            smem,
            args,
            err,
        });
    }

    /// Strided copy of `src` into `dst` over `src`'s dims (both may be strided).
    fn copy(&mut self, src: &Loc, dst: &Loc) {
        let n: usize = src.dims.iter().product();
        if n == 0 {
            return;
        }
        let text = kernels::elementwise(
            &src.dims,
            &[Operand::plain(src.dtype, src.strides.clone())],
            &[(dst.dtype, dst.strides.clone())],
            "",
            &["x0".into()],
        );
        self.kernel(text, grid_for(n), 256, 0, vec![src.ptr(), dst.ptr()], false);
    }

    /// `v` in contiguous memory (copied into scratch once if it is a strided view).
    fn contiguous(&mut self, v: ValueId) -> Result<Loc, CudaError> {
        let l = self.loc(v)?;
        if l.is_contiguous() {
            return Ok(l);
        }
        if let Some(c) = self.contiguous_cache.get(&v) {
            return Ok(c.clone());
        }
        let dst = self.scratch_loc(l.dtype, &l.dims);
        self.copy(&l, &dst);
        self.contiguous_cache.insert(v, dst.clone());
        Ok(dst)
    }

    fn out_loc(&self, v: ValueId) -> Result<Loc, CudaError> {
        let ty = self.ty(v);
        let off = self
            .slots
            .get(&v)
            .ok_or_else(|| CudaError::Input(format!("value %{} has no arena slot", v.0)))?;
        Ok(Loc {
            root: Root::Arena(*off),
            offset: 0,
            strides: contiguous(ty.dims()),
            dtype: ty.dtype,
            dims: ty.dims().to_vec(),
        })
    }
}

/// How the f16/bf16 tensor-core attention spreads a head over thread
/// blocks (`CudaOptions::attn_split`). The A/B that chose the automatic
/// widths is settled (benches/results/minilm-cuda-split-ab.log); forced
/// widths remain for the tests that run each kernel shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnSplit {
    /// Warps per block chosen by the grid size.
    Auto,
    /// This many warps per block, at most one per 16 rows.
    Warps(u32),
}

/// The head count from which attention without tensor cores (fp32) runs as
/// batched GEMMs: below it the fused kernels' one launch wins (H200 A/B,
/// benches/results/minilm-cuda-attn-ab.log).
pub const ATTN_GEMM_HEADS: usize = 48;

/// Plan `program` for an sm_80+ GPU: every value placed, every node lowered.
pub fn plan(program: &Program) -> Result<Plan, CudaError> {
    plan_for(program, true)
}

/// Plan `program` with default options; `tensor_cores` says whether
/// kernels may use `mma.sync` f16/bf16 tensor-core instructions (compute
/// capability 8.0 or newer).
pub fn plan_for(program: &Program, tensor_cores: bool) -> Result<Plan, CudaError> {
    plan_opts(program, tensor_cores, &CudaOptions::default())
}

/// [`plan_for`] with the attention split given (other options default).
pub fn plan_with(
    program: &Program,
    tensor_cores: bool,
    attn_split: AttnSplit,
) -> Result<Plan, CudaError> {
    let opts = CudaOptions {
        attn_split,
        ..CudaOptions::default()
    };
    plan_opts(program, tensor_cores, &opts)
}

/// [`plan_for`] following `opts` (the attention split).
pub fn plan_opts(
    program: &Program,
    tensor_cores: bool,
    opts: &CudaOptions,
) -> Result<Plan, CudaError> {
    // Values recomputed by their readers whose operands turned out to be
    // overwritten before the last reader ran are planned again as stored
    // values (each round bans at least one more value, so this ends).
    let mut no_inline = std::collections::HashSet::new();
    loop {
        match plan_once(program, tensor_cores, opts, &no_inline)? {
            Ok(plan) => return Ok(plan),
            Err(unsafe_values) => no_inline.extend(unsafe_values),
        }
    }
}

/// One planning pass; `Err` names the recomputed values to store instead.
fn plan_once(
    program: &Program,
    tensor_cores: bool,
    opts: &CudaOptions,
    no_inline: &std::collections::HashSet<ValueId>,
) -> Result<Result<Plan, Vec<ValueId>>, CudaError> {
    let attn_split = opts.attn_split;
    let g = &program.graph;
    let slots: HashMap<ValueId, usize> =
        program.slots.iter().map(|s| (s.value, s.offset)).collect();
    let views: HashMap<ValueId, &rlx_ir::lir::View> =
        program.views.iter().map(|v| (v.value, v)).collect();
    let mut p = Planner {
        g,
        locs: vec![None; g.values.len()],
        m: Module::default(),
        launches: vec![],
        consts: vec![],
        scratch: vec![],
        decoded_weights: None,
        kernels: vec![],
        contiguous_cache: HashMap::new(),
        node: 0,
        users: {
            let mut u = vec![Vec::new(); g.values.len()];
            for (k, n) in g.nodes.iter().enumerate() {
                for &v in &n.inputs {
                    if !u[v.index()].contains(&k) {
                        u[v.index()].push(k);
                    }
                }
            }
            u
        },
        views: views.keys().copied().collect(),
        done: Default::default(),
        slots: slots.clone(),
        tensor_cores,
        attn_split,
        input_groups: vec![],
        deferred: HashMap::new(),
        gathers: HashMap::new(),
        view_base: views.iter().map(|(&v, w)| (v, w.base)).collect(),
        nonzero_masks: HashMap::new(),
        inline: HashMap::new(),
        no_inline: no_inline.clone(),
        unstored: Default::default(),
        view_defs: views
            .iter()
            .map(|(&v, w)| {
                let st = w.strides.iter().map(|&s| s as i64).collect();
                (v, (w.base, w.offset as i64, st))
            })
            .collect(),
    };
    for (i, &v) in g.inputs.iter().enumerate() {
        let ty = g.ty(v);
        // Block-quantized weights are held as their raw bytes, read only
        // by the dequant_matmul kernels that decode them.
        if ctype::storage(ty.dtype).is_none() && !kernels::quant::decodes(ty.dtype) {
            return Err(CudaError::Input(format!(
                "graph input {i} has dtype {}, which CUDA kernels cannot hold",
                ty.dtype
            )));
        }
        p.locs[v.index()] = Some(Loc {
            root: Root::Input(i),
            offset: 0,
            strides: contiguous(ty.dims()),
            dtype: ty.dtype,
            dims: ty.dims().to_vec(),
        });
    }
    // The trailing run of transfers (and views): no kernel runs after it.
    let tail = g
        .nodes
        .iter()
        .rposition(|n| n.op.name() != "transfer" && !views.contains_key(&n.outputs[0]))
        .map_or(0, |k| k + 1);
    for (i, node) in g.nodes.iter().enumerate() {
        p.node = i;
        if p.done.contains(&i) {
            continue;
        }
        let out0 = node.outputs[0];
        // A view: strides into its root's memory, no kernel.
        if let Some(view) = views.get(&out0) {
            let strides: Vec<i64> = view.strides.iter().map(|&s| s as i64).collect();
            if inline::view_of_inline(&mut p, out0, view.base, view.offset as i64, strides) {
                continue;
            }
            let base = p.loc(view.base)?;
            let ty = g.ty(out0);
            p.locs[out0.index()] = Some(Loc {
                root: base.root,
                offset: base.offset + view.offset as i64,
                strides: view.strides.iter().map(|&s| s as i64).collect(),
                dtype: ty.dtype,
                dims: ty.dims().to_vec(),
            });
            continue;
        }
        // Uploads of graph inputs alias the input buffer (inputs are copied
        // to the device by the executable itself).
        // So do the final transfers of results to the host: nothing writes
        // memory after them, so their sources stay intact until the
        // download (a strided source still gets its contiguous copy below).
        if node.op.name() == "transfer" {
            if let Ok(l) = p.loc(node.inputs[0]) {
                if matches!(l.root, Root::Input(_)) || i >= tail {
                    p.locs[out0.index()] = Some(l);
                    p.unstored.insert(out0);
                    continue;
                }
            }
        }
        for &o in &node.outputs {
            if ctype::storage(g.ty(o).dtype).is_none() {
                return Err(unsupported(
                    i,
                    node,
                    format!("dtype {} has no CUDA storage", g.ty(o).dtype),
                ));
            }
            p.locs[o.index()] = Some(p.out_loc(o)?);
        }
        lower(&mut p, i, node)?;
    }
    // Graph outputs must be contiguous for the download.
    let mut outputs = Vec::new();
    for &o in &g.outputs {
        outputs.push(p.contiguous(o)?);
    }
    let overwritten = inline::overwritten(&p);
    if !overwritten.is_empty() {
        return Ok(Err(overwritten));
    }
    Ok(Ok(Plan {
        source: p.m.source(),
        launches: p.launches,
        consts: p.consts,
        scratch: p.scratch,
        arena_bytes: program.arena_bytes,
        inputs: g.input_types(),
        outputs,
        node_ops: g.nodes.iter().map(|n| n.op.name().to_string()).collect(),
        kernels: p.kernels,
        input_groups: p.input_groups,
    }))
}

/// Byte range [lo, hi) a location can touch.
fn span(l: &Loc) -> (Root, i64, i64) {
    let es = esize(l.dtype) as i64;
    let (mut lo, mut hi) = (l.offset, l.offset);
    for (&d, &st) in l.dims.iter().zip(&l.strides) {
        let reach = (d as i64 - 1).max(0) * st;
        lo += reach.min(0);
        hi += reach.max(0);
    }
    (l.root, lo * es, (hi + 1) * es)
}

/// Whether two locations may share a byte. Arena roots are slot bases in
/// one arena, and the memory planner reuses bytes between slots: two
/// arena locations are compared in arena bytes, not by root. (Comparing
/// roots let a kernel write over the operands of a value its reader
/// recomputes — YOLOv8's box centres on CUDA.)
fn overlap(a: &Loc, b: &Loc) -> bool {
    let (ra, la, ha) = span(a);
    let (rb, lb, hb) = span(b);
    match (ra, rb) {
        (Root::Arena(x), Root::Arena(y)) => {
            let (x, y) = (x as i64, y as i64);
            x + la < y + hb && y + lb < x + ha
        }
        _ => ra == rb && la < hb && lb < ha,
    }
}

#[cfg(test)]
mod overlap_tests {
    use super::*;

    fn loc(root: Root, offset: i64, dims: &[usize]) -> Loc {
        Loc {
            root,
            offset,
            strides: contiguous(dims),
            dtype: DType::F32,
            dims: dims.to_vec(),
        }
    }

    /// The slots of YOLOv8n's box tail on CUDA: the width/height (slot at
    /// arena byte 0, 16,800 bytes) shares bytes with the box distances it
    /// is computed from (slot at byte 64) — different roots, one arena.
    #[test]
    fn arena_slots_with_different_bases_overlap_by_bytes() {
        let wh = loc(Root::Arena(0), 0, &[1, 2, 2100]);
        let lt = loc(Root::Arena(64), 0, &[1, 2, 2100]);
        let rb = loc(Root::Arena(64), 4200, &[1, 2, 2100]);
        assert!(overlap(&wh, &lt) && overlap(&lt, &wh));
        assert!(!overlap(&wh, &rb), "rb starts at byte 64 + 16800");
        let after = loc(Root::Arena(16800), 0, &[4]);
        assert!(!overlap(&wh, &after));
        assert!(overlap(&lt, &after));
        // Other roots never share bytes with the arena or each other.
        assert!(!overlap(
            &loc(Root::Const(0), 0, &[4]),
            &loc(Root::Arena(0), 0, &[4])
        ));
        assert!(overlap(
            &loc(Root::Input(1), 0, &[4]),
            &loc(Root::Input(1), 2, &[4])
        ));
        assert!(!overlap(
            &loc(Root::Input(1), 0, &[4]),
            &loc(Root::Input(2), 0, &[4])
        ));
    }
}
