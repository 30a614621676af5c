//! The fast kernels whose outputs are host tensors (`Step::Host`): the
//! integer products of `matmul_integer`, f32 → u8/i8 casts and
//! `dynamic_quantize_linear` — integer values the f32 arenas do not hold.

use super::convert::Fmt;
use super::layout::Root;
use super::state::State;
use super::step::Home;
use super::{fail, igemm, par, reduce, FastProgram, Kind};
use crate::CpuError;
use rlx_ir::{DType, Element, HostTensor};
use std::borrow::Cow;

impl FastProgram {
    /// A fast kernel with a host-tensor (integer) output.
    pub(super) fn run_host(
        &self,
        st: &mut State,
        ni: usize,
        kind: &Kind,
        inputs: &[&HostTensor],
    ) -> Result<(), CpuError> {
        let node = &self.graph.nodes[ni];
        let op = node.op.name();
        let ty = self.graph.ty(node.outputs[0]);
        if matches!(kind, Kind::DynQuant) {
            return self.dynamic_quantize(st, ni, inputs);
        }
        let out_v = node.outputs[0].index();
        let n = ty.shape.numel();
        // Last run's output, whose buffer is reused when nothing else
        // holds it (a large Vec is fresh pages — faults — every run).
        let old = st.host[out_v].take().map(HostTensor::into_data);
        let out = match kind {
            Kind::IntMatmul { isa } => {
                // The weight's pack and a's staging live in the state
                // between runs; taken out while the operands borrow it.
                let mut cache = std::mem::take(&mut st.int_packs[out_v]);
                let args: Vec<Cow<HostTensor>> = node
                    .inputs
                    .iter()
                    .map(|&v| self.fetch(st, v, inputs))
                    .collect::<Result<_, _>>()?;
                let a = args[0].as_ref();
                let ad = a.shape().dims();
                let m = if ad.len() >= 2 { ad[ad.len() - 2] } else { 1 };
                let mut y = match old {
                    Some(rlx_ir::TensorData::I32(v)) if v.len() == n => v,
                    _ => vec![0i32; n],
                };
                igemm::run(
                    *isa,
                    a,
                    args[1].as_ref(),
                    args.get(2).map(|t| t.as_ref()),
                    args.get(3).map(|t| t.as_ref()),
                    m,
                    &mut cache,
                    igemm::Dst::I32(&mut y),
                )
                .map_err(|e| fail(op, e))?;
                drop(args);
                st.int_packs[out_v] = cache;
                HostTensor::new(DType::I32, ty.shape.clone(), y.into())?
            }
            Kind::ToInt8 { to } => {
                // Read in place where the input is a contiguous arena slot.
                let fetched;
                let x: &[f32] = match &self.homes[node.inputs[0].index()] {
                    Home::Mem(l, Fmt::F32) if l.root == Root::Arena && l.is_contiguous() => {
                        &st.arena[l.offset..l.offset + n]
                    }
                    _ => {
                        fetched = self.fetch(st, node.inputs[0], inputs)?;
                        f32::unwrap(fetched.data())
                            .ok_or_else(|| fail(op, "the input is not f32 (an engine bug)"))?
                    }
                };
                let mut v = match old {
                    Some(rlx_ir::TensorData::U8(v)) if v.len() == n && *to == DType::U8 => v,
                    Some(rlx_ir::TensorData::I8(v)) if v.len() == n && *to == DType::I8 => {
                        v.into_iter().map(|x| x as u8).collect()
                    }
                    _ => vec![0u8; n],
                };
                if !to_int8(x, *to, &mut v) {
                    let index = x.iter().position(|f| !f.is_finite()).unwrap_or(0);
                    return Err(CpuError::Cast {
                        node: None,
                        index,
                        value: x[index] as f64,
                        to: *to,
                    });
                }
                let data: rlx_ir::TensorData = match to {
                    DType::U8 => v.into(),
                    _ => v.into_iter().map(|x| x as i8).collect::<Vec<_>>().into(),
                };
                HostTensor::new(*to, ty.shape.clone(), data)?
            }
            _ => return Err(fail(op, "not a host-output kernel (an engine bug)")),
        };
        st.host[out_v] = Some(out);
        Ok(())
    }

    /// `dynamic_quantize_linear`: min and max in one pass, then each value
    /// quantized as the op's decomposition does it (f32 division, ties to
    /// even, the same clamps; scale 1 for an all-zero x). An input with a
    /// non-finite value goes to the reference kernel, whose error names it.
    fn dynamic_quantize(
        &self,
        st: &mut State,
        ni: usize,
        inputs: &[&HostTensor],
    ) -> Result<(), CpuError> {
        let node = &self.graph.nodes[ni];
        let [yv, sv, zv] = node.outputs[..] else {
            return Err(fail(
                node.op.name(),
                "three outputs expected (an engine bug)",
            ));
        };
        let old = st.host[yv.index()].take().map(HostTensor::into_data);
        let fetched;
        let x: &[f32] = match &self.homes[node.inputs[0].index()] {
            Home::Mem(l, Fmt::F32) if l.root == Root::Arena && l.is_contiguous() => {
                &st.arena[l.offset..l.offset + l.numel()]
            }
            _ => {
                fetched = self.fetch(st, node.inputs[0], inputs)?;
                f32::unwrap(fetched.data())
                    .ok_or_else(|| fail(node.op.name(), "the input is not f32 (an engine bug)"))?
            }
        };
        // NaN or ±inf anywhere (min/max carry NaN; `f32::min` would drop
        // it): the reference kernel's error.
        let (lo, hi) = reduce::min_max(x);
        if !(lo.is_finite() && hi.is_finite()) {
            return self.run_ref(st, node, inputs);
        }
        let (lo, hi) = (lo.min(0.0), hi.max(0.0));
        let range = hi - lo;
        let scale = if range == 0.0 { 1.0 } else { range / 255.0 };
        let zp = (-(lo / scale)).round_ties_even().clamp(0.0, 255.0);
        let mut y = match old {
            Some(rlx_ir::TensorData::U8(v)) if v.len() == x.len() => v,
            _ => vec![0u8; x.len()],
        };
        quantize_u8(x, scale, zp, &mut y);
        let shape = self.graph.ty(yv).shape.clone();
        st.host[yv.index()] = Some(HostTensor::new(DType::U8, shape, y.into())?);
        st.host[zv.index()] = Some(HostTensor::scalar(zp as u8));
        match &self.homes[sv.index()] {
            Home::Mem(l, Fmt::F32) if l.root == Root::Arena => st.arena[l.offset] = scale,
            _ => st.host[sv.index()] = Some(HostTensor::scalar(scale)),
        }
        Ok(())
    }
}

/// `x` cast to u8 or i8 (as bits) into `out`, in parallel chunks: the
/// reference's cast (truncate toward zero, saturate) of finite values,
/// written as a clamp the compiler vectorizes. Returns false if any value
/// is not finite.
fn to_int8(x: &[f32], to: DType, out: &mut [u8]) -> bool {
    let (lo, hi) = if to == DType::U8 {
        (0.0, 255.0)
    } else {
        (-128.0, 127.0)
    };
    let ok = std::sync::atomic::AtomicBool::new(true);
    let chunk = par::chunk_len(x.len(), 64, 16 * 1024);
    par::for_each(x.len().div_ceil(chunk.max(1)), |c| {
        let r = c * chunk..((c + 1) * chunk).min(x.len());
        // SAFETY: chunks are disjoint ranges of `out`.
        #[allow(unsafe_code)]
        let o = unsafe {
            std::slice::from_raw_parts_mut(out.as_ptr().add(r.start) as *mut u8, r.len())
        };
        let finite = narrow_chunk(&x[r], o, lo, hi);
        if !finite {
            ok.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    });
    ok.into_inner()
}

super::simd::simd_fn! {
    /// One chunk of [`to_int8`]: whether every value is finite, and each
    /// clamped to [lo, hi] and truncated (branch-free, so it vectorizes).
    fn narrow_chunk(x: &[f32], o: &mut [u8], lo: f32, hi: f32) -> bool {
        let mut bad = 0u32;
        for (d, &f) in o.iter_mut().zip(x) {
            bad |= u32::from(f.to_bits() & 0x7f80_0000 == 0x7f80_0000);
            // Clamped first, the conversion is in range; NaN becomes lo
            // (and is reported through `bad`).
            let c = f.max(lo).min(hi);
            // SAFETY: `c` is in [lo, hi] ⊂ i32's range and not NaN (`max`
            // returns `lo` for NaN), so the unchecked conversion is exact
            // truncation — and vectorizes, unlike `as`'s saturating one.
            #[allow(unsafe_code)]
            let i = unsafe { c.to_int_unchecked::<i32>() };
            *d = i as u8;
        }
        bad == 0
    }
}

super::simd::simd_fn! {
    /// `clamp(round(x / scale) + zp, 0, 255)` as u8, ties to even, each step
    /// in f32 as `dynamic_quantize_linear`'s decomposition (x finite,
    /// scale > 0: every value is in range before the conversion).
    fn quantize_u8(x: &[f32], scale: f32, zp: f32, y: &mut [u8]) {
        for (d, &v) in y.iter_mut().zip(x) {
            let q = ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0);
            // SAFETY: q is in [0, 255] and not NaN (x finite, scale > 0).
            #[allow(unsafe_code)]
            let i = unsafe { q.to_int_unchecked::<i32>() };
            *d = i as u8;
        }
    }
}
