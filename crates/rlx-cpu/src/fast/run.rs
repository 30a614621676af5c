//! Running a compiled program: each node's step in order, on its fast
//! kernel (operands read out of the arenas through their strides) or its
//! reference kernel (operands fetched as host tensors).

use super::convert::{self, narrow_into, widen_into, Fmt, Raw};
use super::elementwise::{self, Src};
use super::layout::{Loc, Reader, Root, View};
use super::state::State;
use super::step::{Home, Step};
use super::weights::{DotPlan, F32PackKind};
use super::{
    attention, conv, fail, igemm, matmul, norm, qmatmul, reduce, rope, winograd, FastProgram,
    Filter, Kind,
};
use crate::kernels::{kernel, KernelCx};
use crate::CpuError;
use rlx_ir::{DType, Element, HostTensor, TensorType};
use std::borrow::Cow;

impl FastProgram {
    /// Runs the steps in order, then returns the graph outputs.
    pub(super) fn run_in(
        &self,
        st: &mut State,
        inputs: &[&HostTensor],
    ) -> Result<Vec<HostTensor>, CpuError> {
        let g = &self.graph;
        self.prepare_weights(st, inputs)?;
        for (i, (node, step)) in g.nodes.iter().zip(&self.steps).enumerate() {
            match step {
                Step::View => {}
                Step::Ref => {
                    crate::profile::time(node.op.name(), || self.run_ref(st, node, inputs))
                        .map_err(|e| e.at_node(i))?
                }
                Step::Host(kind) => {
                    crate::profile::time(node.op.name(), || self.run_host(st, i, kind, inputs))
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
    pub(super) fn fetch<'a>(
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

    pub(super) fn run_ref(
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
            runner: &rlx_ref::Interp,
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
        inputs: &[&HostTensor],
    ) -> Result<bool, CpuError> {
        let staged_out = out_half.is_some();
        let g = &self.graph;
        let op = node.op.name();
        let out_v = node.outputs[0];
        let out_loc = match &self.homes[out_v.index()] {
            Home::Mem(l, _) => l,
            Home::Host(_) => {
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
                        let st = &host_strides[k];
                        if let Some(d) = i8::unwrap(t.data()) {
                            return Ok(Src::I8(d, st, out_dims));
                        }
                        if let Some(d) = u8::unwrap(t.data()) {
                            return Ok(Src::U8(d, st, out_dims));
                        }
                        if let Some(d) = i32::unwrap(t.data()) {
                            return Ok(Src::I32(d, st, out_dims));
                        }
                        let d = bool::unwrap(t.data())
                            .ok_or_else(|| fail(op, "host input is not bool, i8, u8 or i32"))?;
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
            Kind::Matmul { act, bias, .. } if dot.is_some() => {
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
            Kind::Matmul {
                act,
                bias,
                residual,
            } => {
                let (a, b) = (view(0)?, view(1)?);
                let bias = if *bias {
                    Some(view(2 + *residual as usize)?)
                } else {
                    None
                };
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
                // The GEMM accumulates onto the residual: already in the
                // output's slot when the memory plan wrote it in place,
                // copied there first otherwise.
                if *residual && !rd.is_output(args[2].as_ref().ok_or_else(overlap)?) {
                    out.copy_from_slice(&own(&view(2)?));
                }
                matmul::run(
                    out,
                    out_dims,
                    &a,
                    &b,
                    packed,
                    bias.as_ref(),
                    *act,
                    half,
                    *residual,
                );
                return Ok(true);
            }
            Kind::Attention { merged, cached } => {
                let (q, k, v) = (view(0)?, view(1)?, view(2)?);
                let new_kv = if *cached {
                    Some((view(3)?, view(4)?))
                } else {
                    None
                };
                let mi = if *cached { 5 } else { 3 };
                let r = q.loc.dims.len();
                let d = q.loc.dims[r - 1];
                let scale = match node.attrs.get("scale") {
                    Some(_) => node.attrs.float("scale")?,
                    None => 1.0 / (d as f64).sqrt(),
                } as f32;
                // The unmerged dims (.., H, Sq, Dv).
                let att_dims = &attention::unmerged(g.ty(out_v).dims(), v.loc.dims[r - 1], *merged);
                let dims = attention::Dims {
                    batch: &att_dims[..r - 2],
                    sq: q.loc.dims[r - 2],
                    sk: k.loc.dims[r - 2] + new_kv.as_ref().map_or(0, |(k, _)| k.loc.dims[r - 2]),
                    sc: k.loc.dims[r - 2],
                    d,
                    dv: v.loc.dims[r - 1],
                    scale,
                };
                let bias_view;
                let m = match node.inputs.len() {
                    3 if mask.is_empty() => attention::Mask::None,
                    3 => attention::Mask::Builtin(mask),
                    _ if g.ty(node.inputs[mi]).dtype == DType::Bool => {
                        let t = host_of(mi)?;
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
                let kv = attention::Kv {
                    k: &k,
                    v: &v,
                    new: new_kv.as_ref().map(|(k, v)| (k, v)),
                };
                if *merged {
                    attention::run_merged(out, &q, &kv, &m, &dims, &st.pool)
                } else {
                    attention::run(out, &q, &kv, &m, &dims, &st.pool)
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
                if inner > 1 && !*log {
                    // Over an inner axis: whole rows at a time, on x made
                    // contiguous first where it is a view.
                    norm::softmax_columns(out, &own(&x), len, inner);
                } else {
                    norm::softmax(out, &x, len, inner, *log, &st.pool);
                }
            }
            Kind::Rope { interleaved } => {
                let (x, c, s) = (view(0)?, view(1)?, view(2)?);
                let r = x.loc.dims.len();
                let (seq, d) = (x.loc.dims[r - 2], x.loc.dims[r - 1]);
                rope::rope(out, &own(&x), &own(&c), &own(&s), seq, d, *interleaved);
            }
            Kind::Constant => {}
            Kind::IntMatmulScaled { isa, bias } => {
                let (a, b) = (host_of(0)?, host_of(1)?);
                let (za, zb) = (host_of(2)?, host_of(3)?);
                let sv = view(4)?;
                let scale = own(&sv);
                let bv = if *bias { Some(view(5)?) } else { None };
                let bias = bv.as_ref().map(own);
                let ad = a.shape().dims();
                let m = if ad.len() >= 2 { ad[ad.len() - 2] } else { 1 };
                let dst = igemm::Dst::F32 {
                    out,
                    scale: &scale,
                    bias: bias.as_deref(),
                };
                let cache = &mut st.int_packs[out_v.index()];
                igemm::run(*isa, a, b, Some(za), Some(zb), m, cache, dst)
                    .map_err(|e| fail(op, e))?;
            }
            Kind::IntMatmul { .. } | Kind::ToInt8 { .. } | Kind::DynQuant => {
                return Err(fail(
                    op,
                    "a host-output kernel run as an arena one (an engine bug)",
                ))
            }
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
            Kind::Conv {
                geom,
                bias,
                act,
                winograd,
            } => {
                let (x, w) = (view(0)?, view(1)?);
                let bias = if *bias { Some(view(2)?) } else { None };
                // Strided operands (a view the memory plan made) are
                // gathered first; the kernel reads rows.
                let (m, c) = (w.loc.dims[0], w.loc.dims[1]);
                let w = own(&w);
                let per_run;
                let u = match winograd {
                    Some(Filter::Const(at)) => {
                        Some(&self.consts[*at..][..winograd::weights_len(m, c)])
                    }
                    Some(Filter::PerRun) => {
                        per_run = winograd::transform_weights(&w, m, c);
                        Some(&per_run[..])
                    }
                    None => None,
                };
                conv::run(geom, &own(&x), &w, u, bias.as_ref(), *act, out);
            }
            Kind::ConvTranspose { geom, bias } => {
                let (x, w) = (view(0)?, view(1)?);
                let bias = if *bias { Some(view(2)?) } else { None };
                conv::run_transpose(geom, &own(&x), &own(&w), bias.as_ref(), out);
            }
            Kind::MaxPool { geom } => {
                let x = view(0)?;
                conv::max_pool(geom, &own(&x), out);
            }
            Kind::Gather { axis } => {
                let x = view(0)?;
                let d = &x.loc.dims;
                let (n, inner) = (d[*axis], d[axis + 1..].iter().product::<usize>());
                let ids = host_of(1)?;
                let idx: Cow<[i64]> = match (i64::unwrap(ids.data()), i32::unwrap(ids.data())) {
                    (Some(v), _) => Cow::Borrowed(v),
                    (None, Some(v)) => Cow::Owned(v.iter().map(|&x| x as i64).collect()),
                    _ => return Err(fail(op, "indices must be i64 or i32")),
                };
                let mut rows = Vec::with_capacity(idx.len());
                for &i in idx.iter() {
                    let j = if i < 0 { i + n as i64 } else { i };
                    if j < 0 || j >= n as i64 {
                        return Err(fail(
                            op,
                            format!("index {i} is out of range for an axis of extent {n}"),
                        ));
                    }
                    rows.push(j as usize);
                }
                let xs = own(&x);
                let block = rows.len() * inner;
                // Along the last axis (a nearest resize's columns) element
                // by element; else runs of `inner` copied.
                super::par::for_chunks(out, block.max(1), |o, dst| {
                    let src = &xs[o * n * inner..(o + 1) * n * inner];
                    if inner == 1 {
                        for (d, &r) in dst.iter_mut().zip(&rows) {
                            *d = src[r];
                        }
                    } else {
                        for (r, d) in rows.iter().zip(dst.chunks_mut(inner.max(1))) {
                            d.copy_from_slice(&src[r * inner..(r + 1) * inner]);
                        }
                    }
                });
            }
            Kind::Concat { axis } => {
                // Per outer index, each input's block of (len · inner).
                let outer: usize = out_dims[..*axis].iter().product();
                let row = out.len() / outer.max(1);
                let mut at = 0;
                for k in 0..node.inputs.len() {
                    let v = view(k)?;
                    let block = v.loc.numel() / outer.max(1);
                    match v.contiguous() {
                        Some(src) => {
                            for (o, dst) in out.chunks_mut(row.max(1)).enumerate() {
                                dst[at..at + block]
                                    .copy_from_slice(&src[o * block..(o + 1) * block]);
                            }
                        }
                        None => {
                            for (o, dst) in out.chunks_mut(row.max(1)).enumerate() {
                                for (i, d) in dst[at..at + block].iter_mut().enumerate() {
                                    *d = v.get(o * block + i);
                                }
                            }
                        }
                    }
                    at += block;
                }
            }
            Kind::Reduce {
                red,
                outer,
                len,
                inner,
            } => reduce::run(out, &view(0)?, *outer, *len, *inner, *red),
            Kind::DequantMatmul { dtype, q8 } => {
                let xv = view(0)?;
                let x = own(&xv);
                let w = host_of(1)?;
                let rlx_ir::TensorData::Packed(wb) = w.data() else {
                    return Err(fail(op, "the weight is not packed blocks"));
                };
                let (n, k) = (w.shape().dims()[0], w.shape().dims()[1]);
                let m = x.len() / k.max(1);
                qmatmul::run(*dtype, *q8, wb, &x, m, n, k, out);
            }
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

/// A view's elements in order: borrowed when contiguous, else gathered
/// (kernels that read whole rows).
fn own<'v>(v: &'v View) -> Cow<'v, [f32]> {
    match v.contiguous() {
        Some(s) => Cow::Borrowed(s),
        None => {
            let mut c = vec![0.0; v.loc.numel()];
            elementwise::load(v, 0, &mut c);
            Cow::Owned(c)
        }
    }
}
