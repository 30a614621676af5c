//! From an LIR program to a static launch list: where every value lives
//! (arena slot, graph input, constant, scratch, or a strided view of one of
//! them), the generated CUDA source, and one launch (kernel or cuBLAS call)
//! per step. Everything is fixed at compile time, so the whole list can be
//! captured as one CUDA graph.

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
}

pub fn esize(d: DType) -> usize {
    d.storage_bytes(1).unwrap_or(1)
}

/// Ops whose node output is a plain strided copy of input 0.
const COPY_OPS: &[&str] = &[
    "reshape",
    "squeeze",
    "unsqueeze",
    "identity",
    "stop_gradient",
    "transfer",
    "permute",
    "broadcast",
];
/// Movement ops whose index map comes from the reference kernel run on an iota.
const TABLE_OPS: &[&str] = &[
    "narrow", "slice", "concat", "pad", "flip", "roll", "tile", "split",
];

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
            &[Operand {
                dtype: src.dtype,
                strides: src.strides.clone(),
            }],
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

/// Plan `program`. `tf32`: let fp32 GEMMs use TF32 tensor cores.
pub fn plan(program: &Program) -> Result<Plan, CudaError> {
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
    };
    for (i, &v) in g.inputs.iter().enumerate() {
        let ty = g.ty(v);
        if ctype::storage(ty.dtype).is_none() {
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
    for (i, node) in g.nodes.iter().enumerate() {
        p.node = i;
        if p.done.contains(&i) {
            continue;
        }
        let out0 = node.outputs[0];
        // A view: strides into its root's memory, no kernel.
        if let Some(view) = views.get(&out0) {
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
        if node.op.name() == "transfer" {
            if let Ok(l) = p.loc(node.inputs[0]) {
                if matches!(l.root, Root::Input(_)) {
                    p.locs[out0.index()] = Some(l);
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
    Ok(Plan {
        source: p.m.source(),
        launches: p.launches,
        consts: p.consts,
        scratch: p.scratch,
        arena_bytes: program.arena_bytes,
        inputs: g.input_types(),
        outputs,
        node_ops: g.nodes.iter().map(|n| n.op.name().to_string()).collect(),
        kernels: p.kernels,
    })
}

fn lower(p: &mut Planner, i: usize, node: &Node) -> Result<(), CudaError> {
    let op = node.op.name();
    let out = p.loc(node.outputs[0])?;
    let n_out: usize = out.dims.iter().product();
    let attrs = &node.attrs;
    let in_dtype = node
        .inputs
        .first()
        .map(|&v| p.ty(v).dtype)
        .unwrap_or(out.dtype);
    match op {
        "constant" => {
            let t = attrs
                .tensor("value")
                .map_err(|e| unsupported(i, node, e.to_string()))?
                .clone();
            let l = p.const_loc(t);
            p.locs[node.outputs[0].index()] = Some(l);
        }
        "arange" => {
            let (start, step) = (
                attrs.float("start").unwrap_or(0.0),
                attrs.float("step").unwrap_or(1.0),
            );
            let v: Vec<f64> = (0..n_out).map(|k| start + step * k as f64).collect();
            let t = HostTensor::from_f64(out.dtype, out.dims.clone(), v)
                .map_err(|e| unsupported(i, node, e.to_string()))?;
            let l = p.const_loc(t);
            p.locs[node.outputs[0].index()] = Some(l);
        }
        "fused_elementwise" => {
            let body = attrs
                .graph("body")
                .map_err(|e| unsupported(i, node, e.to_string()))?;
            let mut ins = Vec::new();
            let mut args = Vec::new();
            for &v in &node.inputs {
                let l = p.loc(v)?;
                ins.push(Operand {
                    dtype: l.dtype,
                    strides: broadcast_strides(&l, &out.dims),
                });
                args.push(l.ptr());
            }
            let (stmts, results) =
                region_body(body, &out.dims).map_err(|m| unsupported(i, node, m))?;
            let mut outs = Vec::new();
            for &o in &node.outputs {
                let l = p.loc(o)?;
                outs.push((l.dtype, l.strides.clone()));
                args.push(l.ptr());
            }
            let text = kernels::elementwise(&out.dims, &ins, &outs, &stmts, &results);
            if n_out > 0 {
                p.kernel(text, grid_for(n_out), 256, 0, args, false);
            }
        }
        _ if expr::knows(op, in_dtype) && node.outputs.len() == 1 && !matches!(op, "cast")
            || op == "cast" =>
        {
            let mut ins = Vec::new();
            let mut args = Vec::new();
            let mut names = Vec::new();
            for (k, &v) in node.inputs.iter().enumerate() {
                let l = p.loc(v)?;
                ins.push(Operand {
                    dtype: l.dtype,
                    strides: broadcast_strides(&l, &out.dims),
                });
                args.push(l.ptr());
                names.push(format!("x{k}"));
            }
            args.push(out.ptr());
            let e = elementwise_expr(
                op,
                &ins.iter().map(|o| o.dtype).collect::<Vec<_>>(),
                out.dtype,
                &names,
                attrs,
            )
            .ok_or_else(|| unsupported(i, node, format!("no CUDA expression for {in_dtype}")))?;
            let text = kernels::elementwise(
                &out.dims,
                &ins,
                &[(out.dtype, out.strides.clone())],
                "",
                &[e],
            );
            if n_out > 0 {
                p.kernel(text, grid_for(n_out), 256, 0, args, false);
            }
        }
        _ if COPY_OPS.contains(&op) => {
            let src = p.loc(node.inputs[0])?;
            let src = match op {
                "permute" => {
                    let perm = attrs
                        .ints("perm")
                        .map_err(|e| unsupported(i, node, e.to_string()))?;
                    let r = src.dims.len() as i64;
                    let idx: Vec<usize> = perm
                        .iter()
                        .map(|&a| (if a < 0 { a + r } else { a }) as usize)
                        .collect();
                    Loc {
                        strides: idx.iter().map(|&a| src.strides[a]).collect(),
                        dims: out.dims.clone(),
                        ..src
                    }
                }
                "broadcast" => Loc {
                    strides: broadcast_strides(&src, &out.dims),
                    dims: out.dims.clone(),
                    ..src
                },
                // Same element order: copy over the source's own dims into
                // the contiguous output.
                _ => {
                    let dst = Loc {
                        strides: contiguous(&src.dims),
                        dims: src.dims.clone(),
                        ..out.clone()
                    };
                    p.copy(&src, &dst);
                    return Ok(());
                }
            };
            p.copy(&src, &out);
        }
        _ if TABLE_OPS.contains(&op) => table_copy(p, i, node)?,
        _ if Reduce::parse(op, 0).is_some() => {
            let src = p.loc(node.inputs[0])?;
            let r = src.dims.len();
            let axes: Vec<usize> = if op == "argmax" || op == "argmin" {
                let a = attrs.int("axis").unwrap_or(-1);
                vec![(if a < 0 { a + r as i64 } else { a }) as usize]
            } else {
                let a = attrs.ints("axes").map(|a| a.to_vec()).unwrap_or_default();
                if a.is_empty() {
                    (0..r).collect()
                } else {
                    a.iter()
                        .map(|&a| (if a < 0 { a + r as i64 } else { a }) as usize)
                        .collect()
                }
            };
            let kind =
                Reduce::parse(op, attrs.int("correction").unwrap_or(0)).expect("checked above");
            let kept: Vec<(usize, i64)> = (0..r)
                .filter(|k| !axes.contains(k))
                .map(|k| (src.dims[k], src.strides[k]))
                .collect();
            let red: Vec<(usize, i64)> = axes
                .iter()
                .map(|&k| (src.dims[k], src.strides[k]))
                .collect();
            let text = kernels::reduce(kind, src.dtype, out.dtype, &kept, &red);
            if n_out > 0 {
                p.kernel(
                    text,
                    ((n_out as u32).max(1), 1, 1),
                    ROW_THREADS,
                    0,
                    vec![src.ptr(), out.ptr()],
                    false,
                );
            }
        }
        "softmax" | "log_softmax" => {
            let src = p.contiguous(node.inputs[0])?;
            let r = src.dims.len();
            let a = attrs.int("axis").unwrap_or(-1);
            let ax = (if a < 0 { a + r as i64 } else { a }) as usize;
            let nn = src.dims[ax];
            let inner: usize = src.dims[ax + 1..].iter().product();
            let rows = n_out / nn.max(1);
            let text = kernels::softmax(src.dtype, nn, inner, op == "log_softmax");
            if rows > 0 {
                p.kernel(
                    text,
                    (rows as u32, 1, 1),
                    ROW_THREADS,
                    0,
                    vec![src.ptr(), out.ptr()],
                    false,
                );
            }
        }
        "layer_norm" | "rms_norm" => {
            let src = p.contiguous(node.inputs[0])?;
            let r = src.dims.len();
            let a = attrs.int("axis").unwrap_or(-1);
            let ax = (if a < 0 { a + r as i64 } else { a }) as usize;
            let nn: usize = src.dims[ax..].iter().product();
            let eps = attrs.float("eps").unwrap_or(1e-5);
            let mut args = vec![src.ptr()];
            for &v in &node.inputs[1..] {
                // gamma/beta broadcast to the normalized shape, contiguous.
                let l = p.loc(v)?;
                let full = Loc {
                    strides: broadcast_strides(&l, &src.dims[ax..]),
                    dims: src.dims[ax..].to_vec(),
                    ..l
                };
                let c = if full.is_contiguous() {
                    full
                } else {
                    let dst = p.scratch_loc(full.dtype, &full.dims);
                    p.copy(&full, &dst);
                    dst
                };
                args.push(c.ptr());
            }
            args.push(out.ptr());
            let rows = n_out / nn.max(1);
            // Single precision rows of up to 1024: one warp per row.
            if rows > 0 && nn <= 1024 && ctype::is_single(src.dtype) {
                let text = kernels::norm_warp(src.dtype, nn, rows, eps, op == "rms_norm");
                p.kernel(text, (rows.div_ceil(8) as u32, 1, 1), 256, 0, args, false);
            } else if rows > 0 {
                let text = kernels::norm(src.dtype, nn, eps, op == "rms_norm");
                p.kernel(text, (rows as u32, 1, 1), ROW_THREADS, 0, args, false);
            }
        }
        "gather" | "embedding" | "index_select" => {
            let (xv, iv, axis) = if op == "embedding" {
                (node.inputs[0], node.inputs[1], 0)
            } else {
                let r = p.ty(node.inputs[0]).rank() as i64;
                let a = attrs.int("axis").unwrap_or(0);
                (
                    node.inputs[0],
                    node.inputs[1],
                    (if a < 0 { a + r } else { a }) as usize,
                )
            };
            let x = p.contiguous(xv)?;
            let idx = p.contiguous(iv)?;
            if !matches!(idx.dtype, DType::I32 | DType::I64) {
                return Err(unsupported(
                    i,
                    node,
                    format!("indices of dtype {}", idx.dtype),
                ));
            }
            let outer: usize = x.dims[..axis].iter().product();
            let len = x.dims[axis];
            let inner: usize = x.dims[axis + 1..].iter().product();
            let n_idx: usize = idx.dims.iter().product();
            let text = kernels::gather(x.dtype, idx.dtype, outer, len, inner, n_idx, i as i32 + 1);
            if n_out > 0 {
                p.kernel(
                    text,
                    grid_for(n_out),
                    256,
                    0,
                    vec![x.ptr(), idx.ptr(), out.ptr()],
                    true,
                );
            }
        }
        "matmul" | "matmul_bias_act" => {
            let a = p.loc(node.inputs[0])?;
            let b = p.loc(node.inputs[1])?;
            let before = p.launches.len();
            matmul(p, i, node, a.clone(), b.clone(), &out)?;
            let act = attrs.str("activation").unwrap_or("none").to_string();
            let single = p.launches.len() == before + 1;
            // cuBLASLt epilogues: the bias (a contiguous vector over the
            // last axis), and a following residual `add` (D = A·B + bias + R).
            if single && act == "none" {
                let bias = match node.inputs.get(2) {
                    Some(&bv) => {
                        let bl = p.loc(bv)?;
                        let st = broadcast_strides(&bl, &out.dims);
                        let r = st.len();
                        let vector = st[r - 1] == 1 && st[..r - 1].iter().all(|&x| x == 0);
                        if !vector {
                            None
                        } else {
                            Some(Some(bl.ptr()))
                        }
                    }
                    None => Some(None),
                };
                if let Some(bias) = bias {
                    let residual = fuse_residual(p, i, node, &[&a, &b])?;
                    if let Some(Launch::Gemm { gemm, .. }) = p.launches.last_mut() {
                        gemm.bias = bias;
                        if let Some((r, d)) = residual {
                            gemm.residual = Some(r.ptr());
                            gemm.c = d.ptr();
                        }
                    }
                    if bias.is_some() || op == "matmul" {
                        return Ok(());
                    }
                }
            }
            if op == "matmul_bias_act" {
                let mut ins = vec![Operand {
                    dtype: out.dtype,
                    strides: out.strides.clone(),
                }];
                let mut args = vec![out.ptr()];
                let mut e = "x0".to_string();
                if let Some(&bv) = node.inputs.get(2) {
                    let bl = p.loc(bv)?;
                    ins.push(Operand {
                        dtype: bl.dtype,
                        strides: broadcast_strides(&bl, &out.dims),
                    });
                    args.push(bl.ptr());
                    e = "(x0 + x1)".into();
                }
                args.push(out.ptr());
                let e = if act == "none" {
                    e
                } else {
                    let stmt = e;
                    expr::unary(&act, out.dtype, "y")
                        .map(|s| {
                            format!(
                                "([&]() {{ {} y = {stmt}; return {s}; }}())",
                                ctype::compute(out.dtype)
                            )
                        })
                        .ok_or_else(|| unsupported(i, node, format!("activation {act}")))?
                };
                if node.inputs.len() > 2 || act != "none" {
                    let text = kernels::elementwise(
                        &out.dims,
                        &ins,
                        &[(out.dtype, out.strides.clone())],
                        "",
                        &[e],
                    );
                    p.kernel(text, grid_for(n_out), 256, 0, args, false);
                }
            }
        }
        "attention" => attention(p, i, node, &out)?,
        _ => return Err(unsupported(i, node, "no CUDA lowering")),
    }
    Ok(())
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

fn overlap(a: &Loc, b: &Loc) -> bool {
    let (ra, la, ha) = span(a);
    let (rb, lb, hb) = span(b);
    ra == rb && la < hb && lb < ha
}

/// If node `i`'s output feeds only a `permute` view that feeds only a
/// (copying) `reshape` right after it, node `i` can write its result in the
/// reshape's layout directly: returns the location to write (the reshape's
/// buffer seen through the inverse permutation) and marks the reshape done.
fn fuse_permute_reshape(
    p: &mut Planner,
    i: usize,
    node: &Node,
    reads: &[Loc],
) -> Result<Option<Loc>, CudaError> {
    let out = node.outputs[0];
    let users = &p.users[out.index()];
    if users.len() != 1 || p.g.outputs.contains(&out) {
        return Ok(None);
    }
    let j = users[0];
    let perm_node = &p.g.nodes[j];
    let w = perm_node.outputs[0];
    if perm_node.op.name() != "permute" || !p.views.contains(&w) || p.g.outputs.contains(&w) {
        return Ok(None);
    }
    let wu = &p.users[w.index()];
    if wu.len() != 1 {
        return Ok(None);
    }
    let k = wu[0];
    let rs = &p.g.nodes[k];
    if rs.op.name() != "reshape" || p.views.contains(&rs.outputs[0]) {
        return Ok(None);
    }
    if (i + 1..k).any(|m| !p.views.contains(&p.g.nodes[m].outputs[0])) {
        return Ok(None);
    }
    let dst = p.out_loc(rs.outputs[0])?;
    if reads.iter().any(|l| overlap(l, &dst)) {
        return Ok(None);
    }
    let perm = perm_node
        .attrs
        .ints("perm")
        .map_err(|e| unsupported(j, perm_node, e.to_string()))?;
    let wdims = p.ty(w).dims().to_vec();
    let cs = contiguous(&wdims);
    let r = wdims.len() as i64;
    let mut strides = vec![0i64; wdims.len()];
    for (kk, &a) in perm.iter().enumerate() {
        let a = (if a < 0 { a + r } else { a }) as usize;
        strides[a] = cs[kk];
    }
    p.done.insert(k);
    p.locs[rs.outputs[0].index()] = Some(dst.clone());
    let ty = p.ty(out);
    Ok(Some(Loc {
        root: dst.root,
        offset: dst.offset,
        strides,
        dtype: ty.dtype,
        dims: ty.dims().to_vec(),
    }))
}

/// If the only user of node `i`'s output is an `add` with a contiguous
/// operand of the same type, right after it (only views in between), fuse
/// that add into the GEMM: returns (the other operand, the add's output),
/// and marks the add as done. Refused when the add's output memory overlaps
/// the GEMM's inputs (the planner may reuse their buffers after node `i`).
fn fuse_residual(
    p: &mut Planner,
    i: usize,
    node: &Node,
    gemm_inputs: &[&Loc],
) -> Result<Option<(Loc, Loc)>, CudaError> {
    let out = node.outputs[0];
    let users = &p.users[out.index()];
    if users.len() != 1 || p.g.outputs.contains(&out) {
        return Ok(None);
    }
    let j = users[0];
    let add = &p.g.nodes[j];
    if add.op.name() != "add" || add.inputs.len() != 2 || add.inputs[0] == add.inputs[1] {
        return Ok(None);
    }
    if (i + 1..j).any(|k| !p.views.contains(&p.g.nodes[k].outputs[0])) {
        return Ok(None);
    }
    let other = if add.inputs[0] == out {
        add.inputs[1]
    } else {
        add.inputs[0]
    };
    let Some(r) = p.locs[other.index()].clone() else {
        return Ok(None);
    };
    let o = p.out_loc(add.outputs[0])?;
    if r.dims != o.dims
        || r.dtype != o.dtype
        || !r.is_contiguous()
        || p.g.ty(out) != p.g.ty(add.outputs[0])
    {
        return Ok(None);
    }
    let (orr, olo, ohi) = span(&o);
    let overlaps = |l: &Loc| {
        let (rr, lo, hi) = span(l);
        rr == orr && lo < ohi && olo < hi
    };
    let mut reads: Vec<&Loc> = gemm_inputs.to_vec();
    if let Some(&bv) = node.inputs.get(2) {
        if let Some(l) = p.locs[bv.index()].as_ref() {
            reads.push(l);
        }
    }
    if reads.iter().any(|l| overlaps(l)) {
        return Ok(None);
    }
    // R and D may be the same buffer (in place), but not partly overlap.
    if overlaps(&r) && !(r.root == o.root && r.offset == o.offset) {
        return Ok(None);
    }
    p.done.insert(j);
    p.locs[add.outputs[0].index()] = Some(o.clone());
    Ok(Some((r, o)))
}

/// The expression of an elementwise op over loaded operands `x0..`.
fn elementwise_expr(
    op: &str,
    ins: &[DType],
    out: DType,
    x: &[String],
    attrs: &Attrs,
) -> Option<String> {
    match op {
        "where" => Some(format!("({} ? {} : {})", x[0], x[1], x[2])),
        "clamp" => Some(expr::clamp(ins[0], &x[0], attrs)),
        "cast" => Some(expr::cast(ins[0], out, &x[0])),
        _ if x.len() == 1 => expr::unary(op, ins[0], &x[0]),
        _ if x.len() == 2 => expr::binary(op, ins[0], &x[0], &x[1]),
        _ => None,
    }
}

/// Statements for a `fused_elementwise` body evaluated at one output
/// element (the region inputs are loaded as `x0..`).
fn region_body(body: &Graph, _dims: &[usize]) -> Result<(String, Vec<String>), String> {
    let mut name: HashMap<ValueId, String> = HashMap::new();
    for (k, &v) in body.inputs.iter().enumerate() {
        name.insert(v, format!("x{k}"));
    }
    let mut s = String::new();
    for node in &body.nodes {
        let op = node.op.name();
        let o = node.outputs[0];
        let od = body.ty(o).dtype;
        let e = if op == "constant" {
            let t = node.attrs.tensor("value").map_err(|e| e.to_string())?;
            if t.numel() != 1 {
                return Err("a non-scalar constant inside a fused region".into());
            }
            if od.is_float() {
                ctype::lit(od, t.to_f64_vec().map_err(|e| e.to_string())?[0])
            } else {
                format!(
                    "(({})({}LL))",
                    ctype::compute(od),
                    t.to_i64_vec().map_err(|e| e.to_string())?[0]
                )
            }
        } else {
            let args: Vec<String> = node.inputs.iter().map(|v| name[v].clone()).collect();
            let dts: Vec<DType> = node.inputs.iter().map(|&v| body.ty(v).dtype).collect();
            if !(matches!(op, "where" | "clamp" | "cast") || expr::knows(op, dts[0])) {
                return Err(format!("`{op}` on {} inside a fused region", dts[0]));
            }
            elementwise_expr(op, &dts, od, &args, &node.attrs)
                .ok_or_else(|| format!("no expression for `{op}`"))?
        };
        let n = format!("v{}", o.0);
        s += &format!("    {} {n} = {e};\n", ctype::compute(od));
        name.insert(o, n);
    }
    let results = body.outputs.iter().map(|v| name[v].clone()).collect();
    Ok((s, results))
}

/// Movement ops whose semantics are taken from the reference kernel: run it
/// once on an iota of source indices, keep the result as an index table.
fn table_copy(p: &mut Planner, i: usize, node: &Node) -> Result<(), CudaError> {
    let g = p.g;
    let mut b = GraphBuilder::new("iota");
    let mut ins = Vec::new();
    let mut iotas = Vec::new();
    let mut base = 1usize; // 0 marks "filled, not copied"
    for &v in &node.inputs {
        let ty = g.ty(v);
        let n = ty.shape.numel();
        ins.push(b.input("x", TensorType::new(DType::F64, ty.shape.clone())));
        iotas.push(
            HostTensor::from_f64(
                DType::F64,
                ty.shape.clone(),
                (base..base + n).map(|x| x as f64).collect(),
            )
            .map_err(|e| unsupported(i, node, e.to_string()))?,
        );
        base += n;
    }
    let mut attrs = node.attrs.clone();
    if node.op.name() == "pad" {
        attrs.set("value", 0.0);
    }
    let outs = b
        .op(node.op.name(), &ins, attrs)
        .map_err(|e| unsupported(i, node, e.to_string()))?;
    let graph = b
        .finish(&outs)
        .map_err(|e| unsupported(i, node, e.to_string()))?;
    let tables =
        rlx_cpu::run_graph(&graph, &iotas).map_err(|e| unsupported(i, node, e.to_string()))?;
    let srcs: Vec<Loc> = node
        .inputs
        .iter()
        .map(|&v| p.contiguous(v))
        .collect::<Result<_, _>>()?;
    let fill = node.attrs.opt_float("value").unwrap_or(0.0);
    for (k, &o) in node.outputs.iter().enumerate() {
        let out = p.loc(o)?;
        let idx: Vec<i64> = tables[k]
            .to_f64_vec()
            .map_err(|e| unsupported(i, node, e.to_string()))?
            .iter()
            .map(|&x| x as i64 - 1)
            .collect();
        let n = idx.len();
        let table = p.const_loc(
            HostTensor::from_slice(&idx, [n]).map_err(|e| unsupported(i, node, e.to_string()))?,
        );
        let d = out.dtype;
        let sty = ctype::storage(d).unwrap_or("float");
        let mut params = vec!["const long long* __restrict__ t".to_string()];
        let mut pick = ctype::store(d, &ctype::lit(d, fill));
        let mut off = 0usize;
        let mut args = vec![table.ptr()];
        for (s, l) in srcs.iter().enumerate() {
            params.push(format!("const {sty}* __restrict__ in{s}"));
            let len: usize = l.dims.iter().product();
            pick = format!(
                "(j >= {off}LL && j < {}LL) ? in{s}[j - {off}LL] : {pick}",
                off + len
            );
            off += len;
            args.push(l.ptr());
        }
        args.push(out.ptr());
        let text = format!(
            "extern \"C\" __global__ void @NAME@({}, {sty}* __restrict__ out0) {{\n  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < {n}LL; i += (long long)gridDim.x * blockDim.x) {{ long long j = t[i]; out0[i] = {pick}; }}\n}}\n",
            params.join(", ")
        );
        if n > 0 {
            p.kernel(text, grid_for(n), 256, 0, args, false);
        }
    }
    Ok(())
}

/// A matrix operand for cuBLAS: (transposed in memory?, leading dim), or None.
fn mat_layout(rows: usize, cols: usize, sr: i64, sc: i64) -> Option<(bool, i32)> {
    if (sc == 1 || cols == 1) && (sr >= cols as i64 || rows == 1) {
        Some((false, sr.max(cols as i64).max(1) as i32))
    } else if (sr == 1 || rows == 1) && (sc >= rows as i64 || cols == 1) {
        Some((true, sc.max(rows as i64).max(1) as i32))
    } else {
        None
    }
}

/// NumPy matmul through cuBLAS (row-major C = A·B computed as Cᵀ = Bᵀ·Aᵀ).
fn matmul(
    p: &mut Planner,
    i: usize,
    node: &Node,
    a: Loc,
    b: Loc,
    out: &Loc,
) -> Result<(), CudaError> {
    let dtype = out.dtype;
    if !dtype.is_float() {
        return Err(unsupported(i, node, format!("matmul on {dtype}")));
    }
    // Promote 1-D operands.
    let promote = |l: Loc, front: bool| -> Loc {
        if l.dims.len() != 1 {
            return l;
        }
        let (dims, strides) = if front {
            (vec![1, l.dims[0]], vec![0, l.strides[0]])
        } else {
            (vec![l.dims[0], 1], vec![l.strides[0], 0])
        };
        Loc { dims, strides, ..l }
    };
    let mut a = promote(a, true);
    let mut b = promote(b, false);
    let (ra, rb) = (a.dims.len(), b.dims.len());
    let (m, k, n) = (a.dims[ra - 2], a.dims[ra - 1], b.dims[rb - 1]);
    // Out batch dims: broadcast of both.
    let ab: Vec<usize> = a.dims[..ra - 2].to_vec();
    let bb: Vec<usize> = b.dims[..rb - 2].to_vec();
    let nb = ab.len().max(bb.len());
    let mut batch = vec![1usize; nb];
    for kk in 0..nb {
        let x = if kk + ab.len() >= nb {
            ab[kk + ab.len() - nb]
        } else {
            1
        };
        let y = if kk + bb.len() >= nb {
            bb[kk + bb.len() - nb]
        } else {
            1
        };
        batch[kk] = x.max(y);
    }
    let bstr = |l: &Loc| -> Vec<i64> {
        let r = l.dims.len() - 2;
        let bl = Loc {
            dims: l.dims[..r].to_vec(),
            strides: l.strides[..r].to_vec(),
            ..l.clone()
        };
        broadcast_strides(&bl, &batch)
    };
    let mut la = mat_layout(m, k, a.strides[ra - 2], a.strides[ra - 1]);
    if la.is_none() {
        a = p.contiguous(node.inputs[0]).map(|c| promote(c, true))?;
        la = mat_layout(m, k, a.strides[ra - 2], a.strides[ra - 1]);
    }
    let mut lb = mat_layout(k, n, b.strides[rb - 2], b.strides[rb - 1]);
    if lb.is_none() {
        b = p.contiguous(node.inputs[1]).map(|c| promote(c, false))?;
        lb = mat_layout(k, n, b.strides[rb - 2], b.strides[rb - 1]);
    }
    let ((ta, lda), (tb, ldb)) = (la.expect("contiguous"), lb.expect("contiguous"));
    let (sa, sb) = (bstr(&a), bstr(&b));
    let nbatch: usize = batch.iter().product();
    // One strided call when each operand's batch offset is linear in the
    // flat batch index; else one call per batch element.
    let linear = |s: &[i64]| -> Option<i64> {
        let mut stride: Option<i64> = None;
        let mut inner = 1i64;
        for kk in (0..nb).rev() {
            if batch[kk] > 1 {
                let want = s[kk];
                match stride {
                    None => {
                        if want % inner != 0 {
                            return None;
                        }
                        stride = Some(want / inner);
                    }
                    Some(st) if st * inner == want => {}
                    _ => return None,
                }
            }
            inner *= batch[kk] as i64;
        }
        Some(stride.unwrap_or(0))
    };
    let es = esize(dtype) as i64;
    let call = |ap: Ptr, bp: Ptr, cp: Ptr, stride: (i64, i64), nbat: usize| Gemm {
        // C (m×n row-major) is Cᵀ (n×m col-major) = Bᵀ·Aᵀ.
        trans_a: tb,
        trans_b: ta,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        a: bp,
        lda: ldb,
        stride_a: stride.1,
        b: ap,
        ldb: lda,
        stride_b: stride.0,
        c: cp,
        ldc: n as i32,
        stride_c: (m * n) as i64,
        batch: nbat as i32,
        dtype,
        c_dtype: dtype,
        bias: None,
        residual: None,
    };
    match (linear(&sa), linear(&sb)) {
        (Some(x), Some(y)) => {
            let mut gemm = call(a.ptr(), b.ptr(), out.ptr(), (x, y), nbatch);
            // A shared right operand (weights) and row-major A whose batches
            // follow each other: one GEMM with the batches stacked into M.
            if nbatch > 1 && y == 0 && !ta && x == m as i64 * lda as i64 {
                gemm.n = (nbatch * m) as i32;
                gemm.batch = 1;
                gemm.stride_b = 0;
                gemm.stride_c = 0;
            }
            p.launches.push(Launch::Gemm { node: i, gemm });
            p.kernels.push((i, "cublas::gemm_strided_batched".into()));
        }
        _ => {
            for t in 0..nbatch {
                let mut r = t;
                let (mut oa, mut ob) = (0i64, 0i64);
                for kk in (0..nb).rev() {
                    let c = (r % batch[kk]) as i64;
                    r /= batch[kk];
                    oa += c * sa[kk];
                    ob += c * sb[kk];
                }
                let mut ap = a.ptr();
                ap.byte += oa * es;
                let mut bp = b.ptr();
                bp.byte += ob * es;
                let mut cp = out.ptr();
                cp.byte += (t * m * n) as i64 * es;
                let gemm = call(ap, bp, cp, (0, 0), 1);
                p.launches.push(Launch::Gemm { node: i, gemm });
            }
            p.kernels.push((i, "cublas::gemm (per batch)".into()));
        }
    }
    Ok(())
}

fn attention(p: &mut Planner, i: usize, node: &Node, out: &Loc) -> Result<(), CudaError> {
    let q = p.loc(node.inputs[0])?;
    let k = p.loc(node.inputs[1])?;
    let v = p.loc(node.inputs[2])?;
    let r = out.dims.len() - 2;
    let batch = out.dims[..r].to_vec();
    let (sq, dh) = (q.dims[r], q.dims[r + 1]);
    let (sk, dv) = (k.dims[r], v.dims[r + 1]);
    let full = |l: &Loc, last: [usize; 2]| -> Vec<i64> {
        let mut d = batch.clone();
        d.extend(last);
        broadcast_strides(l, &d)
    };
    let (qs, ks, vs) = (full(&q, [sq, dh]), full(&k, [sk, dh]), full(&v, [sk, dv]));
    let kind = node.attrs.str("mask_kind").unwrap_or("none").to_string();
    let window = node.attrs.int("window").unwrap_or(0);
    let scale = node
        .attrs
        .opt_float("scale")
        .unwrap_or(1.0 / (dh as f64).sqrt());
    let mut args = vec![q.ptr(), k.ptr(), v.ptr()];
    let mask = match (kind.as_str(), node.inputs.get(3)) {
        ("custom", Some(&m)) | ("bias", Some(&m)) => {
            let l = p.loc(m)?;
            let strides = full(&l, [sq, sk]);
            args.push(l.ptr());
            if kind == "custom" {
                Mask::Keep {
                    dtype: l.dtype,
                    strides,
                }
            } else {
                Mask::Bias {
                    dtype: l.dtype,
                    strides,
                }
            }
        }
        ("none", None) => Mask::None,
        (builtin, None) => {
            // Causal / sliding-window masks: the IR's own definition, as a constant.
            let keep = rlx_ir::ops::fused::attention_mask(builtin, sq, sk, window)
                .ok_or_else(|| unsupported(i, node, format!("mask kind {builtin}")))?;
            let t = HostTensor::from_slice(&keep, [sq, sk])
                .map_err(|e| unsupported(i, node, e.to_string()))?;
            let l = p.const_loc(t);
            let strides = full(&l, [sq, sk]);
            args.push(l.ptr());
            Mask::Keep {
                dtype: DType::Bool,
                strides,
            }
        }
        (kind, _) => {
            return Err(unsupported(
                i,
                node,
                format!("mask kind {kind} with these inputs"),
            ))
        }
    };
    // Write straight into a following permute + reshape's buffer if possible.
    let mut reads = vec![q.clone(), k.clone(), v.clone()];
    if let Some(&m) = node.inputs.get(3) {
        reads.push(p.loc(m)?);
    }
    let out = &match fuse_permute_reshape(p, i, node, &reads)? {
        Some(l) => l,
        None => out.clone(),
    };
    let os = out.strides.clone();
    args.push(out.ptr());
    let nb: usize = batch.iter().product();
    if sq == 0 || nb == 0 {
        return Ok(());
    }
    // Many heads: two batched cuBLAS GEMMs (tensor cores for f16/bf16/TF32)
    // around a masked softmax kernel. Few heads: one fused kernel launch.
    if nb >= 48 && os[r + 1] == 1 {
        let lq = mat_layout(sq, dh, qs[r], qs[r + 1]);
        let lkt = mat_layout(dh, sk, ks[r + 1], ks[r]);
        let lv = mat_layout(sk, dv, vs[r], vs[r + 1]);
        if let (Some((tq, ldq)), Some((tk, ldk)), Some((tv, ldv))) = (lq, lkt, lv) {
            let d = out.dtype;
            let scores = p.scratch_loc(DType::F32, &[nb, sq, sk]);
            let probs = p.scratch_loc(d, &[nb, sq, sk]);
            let es = esize(d) as i64;
            let boffs: Vec<(i64, i64, i64, i64)> = (0..nb)
                .map(|t| {
                    let (mut rr, mut o) = (t, (0i64, 0i64, 0i64, 0i64));
                    for kk in (0..r).rev() {
                        let c = (rr % batch[kk]) as i64;
                        rr /= batch[kk];
                        o.0 += c * qs[kk];
                        o.1 += c * ks[kk];
                        o.2 += c * vs[kk];
                        o.3 += c * os[kk];
                    }
                    o
                })
                .collect();
            let at = |l: &Loc, off: i64, e: i64| Ptr {
                root: l.root,
                byte: (l.offset + off) * e,
            };
            // S = Q·Kᵀ, as Sᵀ = (Kᵀ)ᵀ... in column-major: C(sk×sq) = op(Kᵀ)·op(Q).
            let g1 = Gemm {
                trans_a: tk,
                trans_b: tq,
                m: sk as i32,
                n: sq as i32,
                k: dh as i32,
                a: at(&k, 0, es),
                lda: ldk,
                stride_a: 0,
                b: at(&q, 0, es),
                ldb: ldq,
                stride_b: 0,
                c: scores.ptr(),
                ldc: sk as i32,
                stride_c: 0,
                batch: nb as i32,
                dtype: d,
                c_dtype: DType::F32,
                bias: None,
                residual: None,
            };
            let ptrs1 = boffs
                .iter()
                .enumerate()
                .map(|(t, o)| {
                    [
                        at(&k, o.1, es),
                        at(&q, o.0, es),
                        at(&scores, (t * sq * sk) as i64, 4),
                    ]
                })
                .collect();
            p.launches.push(Launch::GemmBatched {
                node: i,
                gemm: g1,
                ptrs: ptrs1,
            });
            let mut sargs = vec![scores.ptr()];
            if args.len() > 4 {
                sargs.push(args[3]);
            }
            sargs.push(probs.ptr());
            let text = kernels::attention_softmax(d, &batch, sq, sk, &mask, scale);
            p.kernel(
                text,
                ((nb * sq).div_ceil(8) as u32, 1, 1),
                256,
                0,
                sargs,
                false,
            );
            // O = P·V: C(dv×sq) = op(V)·op(P).
            let g2 = Gemm {
                trans_a: tv,
                trans_b: false,
                m: dv as i32,
                n: sq as i32,
                k: sk as i32,
                a: at(&v, 0, es),
                lda: ldv,
                stride_a: 0,
                b: probs.ptr(),
                ldb: sk as i32,
                stride_b: 0,
                c: out.ptr(),
                ldc: os[r] as i32,
                stride_c: 0,
                batch: nb as i32,
                dtype: d,
                c_dtype: d,
                bias: None,
                residual: None,
            };
            let ptrs2 = boffs
                .iter()
                .enumerate()
                .map(|(t, o)| {
                    [
                        at(&v, o.2, es),
                        at(&probs, (t * sq * sk) as i64, es),
                        at(out, o.3, es),
                    ]
                })
                .collect();
            p.launches.push(Launch::GemmBatched {
                node: i,
                gemm: g2,
                ptrs: ptrs2,
            });
            p.kernels.push((
                i,
                "cublas::gemm_batched(QK^T) + nvrtc masked softmax + cublas::gemm_batched(PV)"
                    .into(),
            ));
            return Ok(());
        }
    }
    // K and V of one head staged in shared memory when they fit (227 KiB
    // per block on Hopper; keep well below), else one warp per row reading
    // them from global memory.
    // Fewer rows per block when there are few heads, to fill the GPU.
    let rows = if nb * sq.div_ceil(32) < 264 {
        16u32
    } else {
        32
    };
    let warps = 8u32;
    let tiled = (sk * (dh + 1) + sk * dv + warps as usize * (dh + sk)) * 4;
    if tiled <= 160 * 1024 {
        let text = kernels::attention_tiled(
            out.dtype,
            &batch,
            sq,
            sk,
            dh,
            dv,
            [&qs, &ks, &vs],
            &os,
            &mask,
            scale,
            warps,
            rows,
        );
        let grid = ((sq as u32).div_ceil(rows), nb as u32, 1);
        p.kernel(text, grid, warps * 32, tiled as u32, args, false);
    } else {
        let warps = 4u32;
        let text = kernels::attention(
            out.dtype,
            &batch,
            sq,
            sk,
            dh,
            dv,
            [&qs, &ks, &vs],
            &os,
            &mask,
            scale,
            warps,
        );
        let smem = (warps as usize * (dh + sk) * 4) as u32;
        let grid = ((sq as u32).div_ceil(warps), nb as u32, 1);
        p.kernel(text, grid, warps * 32, smem, args, false);
    }
    Ok(())
}
