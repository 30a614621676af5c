//! LIR → kernels. Places every value (arena slot from the memory plan,
//! graph input buffer, baked constant, or a strided view of one of them),
//! then generates one WGSL kernel per step. Pure code generation: no GPU
//! needed, so `rlx kernels` and the translation tests run anywhere.

use crate::error::WgpuError;
use crate::tref::{words_per_elem, BufId, TensorRef};
use crate::wgsl::elementwise::{Access, Body};
use crate::wgsl::{self, Kernel};
use rlx_ir::lir::Program;
use rlx_ir::shape::normalize_axis;
use rlx_ir::{Attr, DType, HostTensor, Node, ValueId};
use rlx_runtime::options::WgpuOptions;
use std::collections::HashMap;

/// A program lowered to kernels over placed buffers.
pub struct Lowered {
    pub kernels: Vec<Kernel>,
    /// Where each graph output is read back from (contiguous).
    pub outputs: Vec<TensorRef>,
    /// Arena size in 32-bit words; the last word is the error flag.
    pub arena_words: usize,
    /// Constant buffers, in `BufId::Const` order.
    pub consts: Vec<HostTensor>,
    /// Names of the kernels that can raise the error flag.
    pub flagging: Vec<String>,
    /// Size of the f16 arena (`BufId::Half`) in bytes, a multiple of 8.
    pub half_bytes: usize,
    /// f16 tensors are held as f32 words (the adapter lacks `shader-f16`).
    pub f16_wide: bool,
}

fn unsupported(op: &str, why: impl Into<String>) -> WgpuError {
    WgpuError::Unsupported {
        op: op.into(),
        why: why.into(),
    }
}

/// Bytes per stored element in the memory plan.
fn plan_bytes(d: DType) -> Result<usize, WgpuError> {
    d.storage_bytes(1)
        .filter(|&b| b > 0)
        .ok_or_else(|| unsupported("tensor", format!("dtype {d} has no fixed element size")))
}

fn check_dtype(d: DType) -> Result<(), WgpuError> {
    match d {
        DType::F32 | DType::F16 | DType::I32 | DType::I64 | DType::Bool => Ok(()),
        d if wgsl::quant::decodes(d) => Err(unsupported(
            "tensor",
            format!(
                "{d} values are held on the GPU only as graph inputs (weights, raw bytes read by dequant_matmul), not computed into the arena"
            ),
        )),
        d => Err(unsupported(
            "tensor",
            format!("dtype {d} is not held on the GPU (f32, f16, i32, i64, bool are; q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k graph inputs as raw bytes)"),
        )),
    }
}

/// A graph input's dtype: the held ones, or a block type `dequant_matmul`
/// decodes (kept as raw bytes).
fn check_input_dtype(d: DType) -> Result<(), WgpuError> {
    if wgsl::quant::decodes(d) {
        return Ok(());
    }
    check_dtype(d)
}

fn ints(n: &Node, k: &str) -> Result<Vec<i64>, WgpuError> {
    n.attrs
        .ints(k)
        .map(|v| v.to_vec())
        .map_err(|e| unsupported(n.op.name(), e.to_string()))
}
fn int(n: &Node, k: &str) -> Result<i64, WgpuError> {
    n.attrs
        .int(k)
        .map_err(|e| unsupported(n.op.name(), e.to_string()))
}
fn axis(n: &Node, k: &str, rank: usize) -> Result<usize, WgpuError> {
    normalize_axis(int(n, k)?, rank).map_err(|e| unsupported(n.op.name(), e.to_string()))
}

/// What the adapter offers that changes the generated code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// `shader-f16`: f16 tensors are stored as 2-byte elements (the f16
    /// arena, f16 input and constant buffers); without it they are held as
    /// f32 words and every store rounds to f16.
    pub f16_native: bool,
    /// f16 matmuls run on 16×16×16 cooperative matrices (tensor cores)
    /// with f32 accumulation; needs `f16_native`.
    pub coop_f16: bool,
    /// Subgroup operations (subgroups of at most 32): workgroup sums in
    /// reductions and row ops start with `subgroupAdd`.
    pub subgroups: bool,
}

/// Lower `p` to kernels for an adapter with `shader-f16`.
pub fn lower(p: &Program) -> Result<Lowered, WgpuError> {
    lower_with(p, true)
}

/// Lower `p` to kernels; `f16_native` as in [`Caps`], no cooperative matrices.
pub fn lower_with(p: &Program, f16_native: bool) -> Result<Lowered, WgpuError> {
    lower_for(
        p,
        Caps {
            f16_native,
            ..Caps::default()
        },
    )
}

/// Lower `p` to kernels for an adapter with `caps`, default options.
pub fn lower_for(p: &Program, caps: Caps) -> Result<Lowered, WgpuError> {
    lower_with_options(p, caps, &WgpuOptions::default())
}

/// Lower `p` to kernels for an adapter with `caps`; the generators follow
/// `opts` (forced tile sizes, kernel variants, split-K).
pub fn lower_with_options(
    p: &Program,
    caps: Caps,
    opts: &WgpuOptions,
) -> Result<Lowered, WgpuError> {
    let f16_native = caps.f16_native;
    let wide = !f16_native;
    let g = &p.graph;
    let used: Vec<&rlx_ir::lir::BufferSlot> = p
        .slots
        .iter()
        .filter(|s| {
            let d = &g.values[s.value.index()].def;
            !matches!(d, rlx_ir::ValueDef::Node { node, .. } if matches!(g.nodes[*node].op.name(), "transfer" | "constant" | "arange"))
        })
        .collect();
    for s in &used {
        check_dtype(s.ty.dtype)?;
    }
    let in_half = |s: &rlx_ir::lir::BufferSlot| f16_native && s.ty.dtype == DType::F16;
    let (used16, used32): (Vec<_>, Vec<_>) = used.into_iter().partition(|s| in_half(s));
    let remap = ArenaMap::new(&used32)?;
    let remap16 = ArenaMap::new(&used16)?;
    let mut arena_words = remap.total_bytes.div_ceil(4);
    let mut half_elems = remap16.total_bytes / 2;
    let mut loc: HashMap<ValueId, TensorRef> = HashMap::new();
    for (i, &v) in g.inputs.iter().enumerate() {
        let ty = g.ty(v);
        check_input_dtype(ty.dtype)?;
        loc.insert(
            v,
            TensorRef::contiguous(BufId::Input(i), ty.dtype, ty.dims(), 0).widened(wide),
        );
    }
    let slot: HashMap<ValueId, &rlx_ir::lir::BufferSlot> =
        p.slots.iter().map(|s| (s.value, s)).collect();
    let view: HashMap<ValueId, &rlx_ir::lir::View> = p.views.iter().map(|w| (w.value, w)).collect();
    let mut consts = Vec::new();
    for node in &g.nodes {
        for &o in &node.outputs {
            let ty = g.ty(o);
            // Block-quantized bytes: a graph input moved to the device, or
            // a view of one (no kernel writes them).
            let from_input =
                |v: &ValueId| matches!(loc.get(v), Some(r) if matches!(r.buf, BufId::Input(_)));
            let block_ok = wgsl::quant::decodes(ty.dtype)
                && (node.op.name() == "transfer" || view.contains_key(&o))
                && node.inputs.first().is_some_and(from_input);
            if !block_ok {
                check_dtype(ty.dtype)?;
            }
            let r = match node.op.name() {
                // Host↔device moves are the run's uploads and readbacks.
                "transfer" => loc[&node.inputs[0]].clone(),
                "constant" | "arange" => {
                    let t = const_value(node, ty)?;
                    consts.push(t);
                    TensorRef::contiguous(BufId::Const(consts.len() - 1), ty.dtype, ty.dims(), 0)
                        .widened(wide)
                }
                _ => {
                    if let Some(w) = view.get(&o) {
                        let base = &loc[&w.base];
                        TensorRef {
                            buf: base.buf,
                            dtype: ty.dtype,
                            dims: ty.dims().to_vec(),
                            strides: w.strides.iter().map(|&s| s as i64).collect(),
                            offset: base.offset + w.offset as i64,
                            wide: base.wide,
                        }
                    } else if let Some(s) = slot.get(&o).filter(|s| in_half(s)) {
                        TensorRef::contiguous(
                            BufId::Half,
                            ty.dtype,
                            ty.dims(),
                            (remap16.map(s.offset) / 2) as i64,
                        )
                    } else if let Some(s) = slot.get(&o) {
                        let words = remap.map(s.offset) / 4;
                        TensorRef::contiguous(
                            BufId::Arena,
                            ty.dtype,
                            ty.dims(),
                            (words / words_per_elem(ty.dtype)) as i64,
                        )
                        .widened(wide)
                    } else {
                        return Err(unsupported(
                            node.op.name(),
                            format!("value %{} has no storage in the plan", o.0),
                        ));
                    }
                }
            };
            loc.insert(o, r);
        }
    }
    let mut kernels = Vec::new();
    let has_kernel = |ni: usize| {
        let node = &g.nodes[ni];
        !(matches!(node.op.name(), "transfer" | "constant" | "arange")
            || node.outputs.iter().all(|o| view.contains_key(o)))
    };
    for (si, step) in p.steps.iter().enumerate() {
        let [ni] = step.nodes[..] else {
            return Err(unsupported(
                &step.kernel,
                "multi-node steps are not lowered yet",
            ));
        };
        let node = &g.nodes[ni];
        if !has_kernel(ni) {
            continue;
        }
        let ins: Vec<TensorRef> = node.inputs.iter().map(|v| loc[v].clone()).collect();
        let outs: Vec<TensorRef> = node.outputs.iter().map(|v| loc[v].clone()).collect();
        let dt = ins.first().map(|t| t.dtype).unwrap_or(outs[0].dtype);
        let name = format!("s{si}_{}_{}", node.op.name(), dt.name());
        kernels.extend(node_kernels(&name, node, &ins, &outs, caps, opts)?);
    }
    // Graph outputs must be contiguous for readback; copy the rest into
    // scratch words at the end of the arena.
    let mut outputs = Vec::new();
    for (k, &o) in g.outputs.iter().enumerate() {
        let r = loc[&o].clone();
        check_dtype(r.dtype)?;
        if r.is_contiguous() {
            outputs.push(r);
        } else if r.is_half() {
            // Even offsets: readback copies move whole 4-byte words.
            let off = half_elems.div_ceil(2) * 2;
            half_elems = off + r.numel();
            let dst = TensorRef::contiguous(BufId::Half, r.dtype, &r.dims, off as i64);
            kernels.push(copy(&format!("out{k}_copy"), &r, &dst)?);
            outputs.push(dst);
        } else {
            let w = words_per_elem(r.dtype);
            let off = arena_words.div_ceil(w);
            arena_words = (off + r.numel()) * w;
            let dst =
                TensorRef::contiguous(BufId::Arena, r.dtype, &r.dims, off as i64).widened(wide);
            kernels.push(copy(&format!("out{k}_copy"), &r, &dst)?);
            outputs.push(dst);
        }
    }
    // Scratch shared by the kernels that need it (they run one at a time).
    let scratch = kernels.iter().map(|k| k.scratch_words).max().unwrap_or(0);
    let scratch_base = arena_words;
    arena_words += scratch;
    for k in &mut kernels {
        if k.scratch_words > 0 {
            k.wgsl = k.wgsl.replace("SCRATCH_BASE", &format!("{scratch_base}u"));
        }
    }
    arena_words += 1; // the error flag
    let flag = arena_words - 1;
    let mut flagging = Vec::new();
    for k in &mut kernels {
        if k.flags {
            k.wgsl = k.wgsl.replace("FLAG_WORD", &format!("{flag}u"));
            flagging.push(k.name.clone());
        }
    }
    Ok(Lowered {
        kernels,
        outputs,
        arena_words,
        consts,
        flagging,
        // Padded so a readback may round its last copy up to a whole word.
        half_bytes: (half_elems * 2).div_ceil(8) * 8 + 8,
        f16_wide: wide,
    })
}

/// Plan byte offsets → arena byte offsets. The plan packs bool in one byte;
/// here every element takes whole 32-bit words, and slots the GPU never
/// writes (transfers, constants) take no room. A monotone piecewise-linear
/// map keeps every pair of disjoint plan slots disjoint (so the plan's
/// reuse is kept) while stretching each plan segment by the largest factor
/// any slot over it needs and dropping segments no used slot covers.
struct ArenaMap {
    /// (plan start, arena start, slope) per elementary segment.
    segs: Vec<(usize, usize, usize)>,
    total_bytes: usize,
}

impl ArenaMap {
    fn new(slots: &[&rlx_ir::lir::BufferSlot]) -> Result<ArenaMap, WgpuError> {
        let mut cuts: Vec<usize> = slots
            .iter()
            .flat_map(|s| [s.offset, s.offset + s.bytes.max(1)])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut segs = Vec::new();
        let mut at = 0usize;
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            let mut slope = 0;
            for s in slots {
                if s.offset < b && a < s.offset + s.bytes.max(1) {
                    let pb = plan_bytes(s.ty.dtype)?;
                    slope = slope.max((4 * words_per_elem(s.ty.dtype)).div_ceil(pb));
                }
            }
            segs.push((a, at, slope));
            // Keep 8-byte alignment (i64 elements are two words).
            at += ((b - a) * slope).div_ceil(8) * 8;
        }
        Ok(ArenaMap {
            segs,
            total_bytes: at,
        })
    }

    fn map(&self, plan: usize) -> usize {
        match self.segs.iter().rev().find(|s| s.0 <= plan) {
            Some(&(a, at, slope)) => at + (plan - a) * slope,
            None => 0,
        }
    }
}

/// The value of a `constant` or `arange` node, computed on the host.
fn const_value(node: &Node, ty: &rlx_ir::TensorType) -> Result<HostTensor, WgpuError> {
    match node.op.name() {
        "constant" => match node.attrs.get("value") {
            Some(Attr::Tensor(t)) => Ok(t.clone()),
            _ => Err(unsupported("constant", "no tensor value")),
        },
        _ => {
            let start = node
                .attrs
                .float("start")
                .map_err(|e| unsupported("arange", e.to_string()))?;
            let step = node
                .attrs
                .float("step")
                .map_err(|e| unsupported("arange", e.to_string()))?;
            let n = ty.shape.numel();
            let v: Vec<f64> = (0..n).map(|i| start + step * i as f64).collect();
            HostTensor::from_f64(ty.dtype, ty.shape.clone(), v)
                .map_err(|e| unsupported("arange", e.to_string()))
        }
    }
}

fn copy(name: &str, src: &TensorRef, dst: &TensorRef) -> Result<Kernel, WgpuError> {
    let attrs = rlx_ir::Attrs::new();
    wgsl::elementwise::kernel(
        name,
        dst,
        &[(src.clone(), Access::Broadcast)],
        Body::Op {
            op: "identity",
            attrs: &attrs,
        },
    )
}

fn flat_copy(name: &str, src: &TensorRef, dst: &TensorRef) -> Result<Kernel, WgpuError> {
    let attrs = rlx_ir::Attrs::new();
    wgsl::elementwise::kernel(
        name,
        dst,
        &[(src.clone(), Access::Flat)],
        Body::Op {
            op: "identity",
            attrs: &attrs,
        },
    )
}

/// Attention's (.., H, Sq, Dv) result as a strided view of its merged
/// output (.., Sq, H·Dv): that buffer seen as (.., Sq, H, Dv), its middle
/// axes swapped.
fn heads_view(merged: &TensorRef, dv: usize) -> Option<TensorRef> {
    let d = &merged.dims;
    let r = d.len();
    if r < 2 || dv == 0 || !d[r - 1].is_multiple_of(dv) {
        return None;
    }
    let mut split = d[..r - 1].to_vec();
    split.extend([d[r - 1] / dv, dv]);
    let mut perm: Vec<usize> = (0..=r).collect();
    perm.swap(r - 2, r - 1);
    Some(merged.reshaped(&split)?.permuted(&perm))
}

/// The kernels of one node.
fn node_kernels(
    name: &str,
    node: &Node,
    ins: &[TensorRef],
    outs: &[TensorRef],
    caps: Caps,
    opts: &WgpuOptions,
) -> Result<Vec<Kernel>, WgpuError> {
    let op = node.op.name();
    let out = &outs[0];
    let rank = ins.first().map(|t| t.dims.len()).unwrap_or(0);
    let one = |k: Kernel| Ok(vec![k]);
    match op {
        "fused_elementwise" => {
            let body = node
                .attrs
                .graph("body")
                .map_err(|e| unsupported(op, e.to_string()))?;
            if body.outputs.len() != 1 {
                return Err(unsupported(op, "regions with several outputs"));
            }
            let acc: Vec<_> = ins.iter().map(|t| (t.clone(), Access::Broadcast)).collect();
            one(wgsl::elementwise::kernel(
                name,
                out,
                &acc,
                Body::Region(body),
            )?)
        }
        "reshape" | "squeeze" | "unsqueeze" => match ins[0].reshaped(&out.dims) {
            Some(r) => one(copy(name, &r, out)?),
            None => one(flat_copy(name, &ins[0], out)?),
        },
        "permute" => {
            let perm: Vec<usize> = ints(node, "perm")?
                .iter()
                .map(|&p| normalize_axis(p, rank).map_err(|e| unsupported(op, e.to_string())))
                .collect::<Result<_, _>>()?;
            one(copy(name, &ins[0].permuted(&perm), out)?)
        }
        "broadcast" => one(copy(name, &ins[0].broadcast_to(&out.dims), out)?),
        "narrow" => {
            let ax = axis(node, "axis", rank)?;
            let mut start = int(node, "start")?;
            if start < 0 {
                start += ins[0].dims[ax] as i64;
            }
            one(copy(name, &ins[0].sliced(ax, start, out.dims[ax], 1), out)?)
        }
        "slice" => {
            let starts = ints(node, "starts")?;
            let axes = ints(node, "axes")?;
            let steps = ints(node, "steps")?;
            let mut r = ins[0].clone();
            for (k, &start) in starts.iter().enumerate() {
                let ax = match axes.get(k) {
                    Some(&a) => {
                        normalize_axis(a, rank).map_err(|e| unsupported(op, e.to_string()))?
                    }
                    None => k,
                };
                let step = steps.get(k).copied().unwrap_or(1);
                let d = ins[0].dims[ax] as i64;
                // NumPy slice bounds: negative from the end, then clamped.
                let clampi = |v: i64, lo: i64, hi: i64| v.max(lo).min(hi);
                let s0 = if start < 0 { start + d } else { start };
                let s0 = if step > 0 {
                    clampi(s0, 0, d)
                } else {
                    clampi(s0, -1, d - 1)
                };
                r = r.sliced(ax, s0, out.dims[ax], step);
            }
            one(copy(name, &r, out)?)
        }
        "flip" => {
            let mut r = ins[0].clone();
            let axes = ints(node, "axes")?;
            let axes: Vec<i64> = if axes.is_empty() {
                (0..rank as i64).collect()
            } else {
                axes
            };
            for a in axes {
                let ax = normalize_axis(a, rank).map_err(|e| unsupported(op, e.to_string()))?;
                let d = r.dims[ax] as i64;
                r = r.sliced(ax, d - 1, d as usize, -1);
            }
            one(copy(name, &r, out)?)
        }
        "concat" => {
            let ax = axis(node, "axis", rank)?;
            let mut at = 0i64;
            let mut ks = Vec::new();
            for (k, t) in ins.iter().enumerate() {
                let dst = out.sliced(ax, at, t.dims[ax], 1);
                at += t.dims[ax] as i64;
                if t.numel() > 0 {
                    ks.push(copy(&format!("{name}_{k}"), t, &dst)?);
                }
            }
            Ok(ks)
        }
        "split" => {
            let ax = axis(node, "axis", rank)?;
            let mut at = 0i64;
            let mut ks = Vec::new();
            for (k, o) in outs.iter().enumerate() {
                let src = ins[0].sliced(ax, at, o.dims[ax], 1);
                at += o.dims[ax] as i64;
                if o.numel() > 0 {
                    ks.push(copy(&format!("{name}_{k}"), &src, o)?);
                }
            }
            Ok(ks)
        }
        "reduce_sum" | "reduce_mean" | "reduce_prod" | "reduce_max" | "reduce_min"
        | "reduce_logsumexp" | "reduce_variance" | "reduce_any" | "reduce_all" => {
            let axes = ints(node, "axes")?;
            let mut ax: Vec<usize> = if axes.is_empty() {
                (0..rank).collect()
            } else {
                axes.iter()
                    .map(|&a| normalize_axis(a, rank).map_err(|e| unsupported(op, e.to_string())))
                    .collect::<Result<_, _>>()?
            };
            ax.sort_unstable();
            ax.dedup();
            let corr = if op == "reduce_variance" {
                int(node, "correction")?
            } else {
                0
            };
            one(wgsl::reduce::kernel(
                name,
                op,
                &ins[0],
                &ax,
                corr,
                out,
                caps.subgroups,
            )?)
        }
        "argmax" | "argmin" => {
            let ax = axis(node, "axis", rank)?;
            one(wgsl::reduce::kernel(
                name,
                op,
                &ins[0],
                &[ax],
                0,
                out,
                caps.subgroups,
            )?)
        }
        "softmax" | "log_softmax" => {
            let ax = axis(node, "axis", rank)?;
            one(wgsl::norm::kernel(
                name,
                op,
                &ins[0],
                &[ax],
                &[],
                0.0,
                out,
                caps.subgroups,
            )?)
        }
        "layer_norm" | "rms_norm" => {
            let ax = axis(node, "axis", rank)?;
            let eps = node
                .attrs
                .float("eps")
                .map_err(|e| unsupported(op, e.to_string()))?;
            let axes: Vec<usize> = (ax..rank).collect();
            one(wgsl::norm::kernel(
                name,
                op,
                &ins[0],
                &axes,
                &ins[1..],
                eps,
                out,
                caps.subgroups,
            )?)
        }
        "matmul" | "matmul_bias_act" | "matmul_residual" => {
            let act = match op {
                "matmul" => "none",
                _ => node
                    .attrs
                    .str("activation")
                    .map_err(|e| unsupported(op, e.to_string()))?,
            };
            // matmul_residual: (a, b, r, [bias]); the epilogue adds r
            // after the activation, reading it before writing the same
            // element (the memory plan may put the output over r).
            let (bias, residual) = match op {
                "matmul" => (None, None),
                "matmul_bias_act" => (ins.get(2), None),
                _ => (ins.get(3), ins.get(2)),
            };
            let mm = wgsl::matmul::Matmul {
                a: &ins[0],
                b: &ins[1],
                bias,
                act,
                residual,
                out,
                opts,
            };
            // Tensor cores for f16 operands stored as f16 (f32 accumulation,
            // as in the scalar kernel); everything else the scalar kernel.
            if caps.coop_f16 && wgsl::coop::applies(&mm) {
                wgsl::coop::kernel(&format!("{name}_coop"), &mm)
            } else {
                wgsl::matmul::kernel(name, &mm)
            }
        }
        "attention" | "attention_merged" => {
            // Merged heads: the output (.., Sq, H·Dv) seen as (.., Sq, H,
            // Dv) and its middle axes swapped back, so the kernel writes
            // (.., H, Sq, Dv) through those strides.
            let merged;
            let out = if op == "attention_merged" {
                merged = heads_view(out, ins[2].dims[rank - 1])
                    .ok_or_else(|| unsupported(op, "output is not a (.., Sq, H·Dv) buffer"))?;
                &merged
            } else {
                out
            };
            let kind = node
                .attrs
                .str("mask_kind")
                .map_err(|e| unsupported(op, e.to_string()))?;
            let window = int(node, "window")?;
            let scale = node.attrs.opt_float("scale");
            let att = wgsl::attention::Attention {
                q: &ins[0],
                k: &ins[1],
                v: &ins[2],
                new_kv: None,
                mask: ins.get(3),
                kind,
                window,
                scale,
                out,
                opts,
            };
            // Tensor cores for f16 heads whose dims are multiples of 16.
            if caps.coop_f16 && wgsl::attention_coop::applies(&att) {
                one(wgsl::attention_coop::kernel(name, &att)?)
            } else {
                one(wgsl::attention::kernel(name, &att)?)
            }
        }
        // The cache and the new keys read apart (the tiled kernel; `select`
        // refused the other shapes).
        "attention_cached" => one(wgsl::attention::kernel(
            name,
            &wgsl::attention::Attention {
                q: &ins[0],
                k: &ins[1],
                v: &ins[2],
                new_kv: Some((&ins[3], &ins[4])),
                mask: ins.get(5),
                kind: "custom",
                window: 0,
                scale: node.attrs.opt_float("scale"),
                out,
                opts,
            },
        )?),
        "dequant_matmul" => one(wgsl::quant::kernel(name, &ins[0], &ins[1], out)?),
        "conv" | "conv_act" | "conv_transpose" => {
            let win = wgsl::conv::window(op, &node.attrs, ins[1].dims[2..].to_vec())?;
            one(wgsl::conv::conv(
                name,
                &wgsl::conv::Conv {
                    x: &ins[0],
                    w: &ins[1],
                    bias: ins.get(2),
                    out,
                    win: &win,
                    groups: node.attrs.int("groups").unwrap_or(1).max(1) as usize,
                    act: node.attrs.str("activation").unwrap_or("none"),
                    transpose: op == "conv_transpose",
                },
            )?)
        }
        "max_pool" | "avg_pool" => {
            let kernel = ints(node, "kernel")?
                .iter()
                .map(|&k| k.max(0) as usize)
                .collect();
            let win = wgsl::conv::window(op, &node.attrs, kernel)?;
            let include_pad = node.attrs.bool("count_include_pad").unwrap_or(false);
            one(wgsl::conv::pool(name, op, &ins[0], out, &win, include_pad)?)
        }
        "gather" | "index_select" => {
            let ax = axis(node, "axis", rank)?;
            one(wgsl::index::kernel(name, &ins[0], &ins[1], ax, out)?)
        }
        "embedding" => one(wgsl::index::kernel(name, &ins[0], &ins[1], 0, out)?),
        _ => {
            let acc: Vec<_> = ins.iter().map(|t| (t.clone(), Access::Broadcast)).collect();
            one(wgsl::elementwise::kernel(
                name,
                out,
                &acc,
                Body::Op {
                    op,
                    attrs: &node.attrs,
                },
            )?)
        }
    }
}

/// Ops with a kernel here (besides the elementwise table), per dtype.
pub fn structural_claims() -> Vec<(&'static str, Vec<DType>)> {
    let held = || vec![DType::F32, DType::F16, DType::I32, DType::I64, DType::Bool];
    let f = || vec![DType::F32, DType::F16];
    let mut v: Vec<(&'static str, Vec<DType>)> = [
        "reshape",
        "squeeze",
        "unsqueeze",
        "permute",
        "broadcast",
        "narrow",
        "slice",
        "flip",
        "concat",
        "split",
        "transfer",
        "constant",
        "arange",
    ]
    .into_iter()
    .map(|o| (o, held()))
    .collect();
    // Block-quantized weights move to the device as raw bytes.
    if let Some((_, d)) = v.iter_mut().find(|(o, _)| *o == "transfer") {
        d.extend(wgsl::quant::DTYPES);
    }
    // Keyed by x's dtype; `select` checks the weight's.
    v.push(("dequant_matmul", f()));
    for o in [
        "softmax",
        "log_softmax",
        "layer_norm",
        "rms_norm",
        "matmul",
        "matmul_bias_act",
        "matmul_residual",
        "attention",
        "attention_merged",
        "attention_cached",
        "conv",
        "conv_act",
        "conv_transpose",
        "avg_pool",
    ] {
        v.push((o, f()));
    }
    v.push(("max_pool", vec![DType::F32, DType::F16, DType::I32]));
    for o in ["gather", "index_select", "embedding"] {
        v.push((o, vec![DType::F32, DType::F16, DType::I32, DType::Bool]));
    }
    v
}
