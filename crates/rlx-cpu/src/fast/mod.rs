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
//!
//! The engine's own modules: `compile` (where each value lives and the
//! step each node runs), `step` (those steps), `fold` (the following
//! nodes a kernel computes as it writes), `weights` (prepared copies and
//! packs of graph inputs), `state` (the buffers of one run, and preparing
//! the weights in them), `run` (running the steps); the kernels are
//! `elementwise`, `matmul`, `bf16dot`, `attention`, `norm`, `reduce`, over
//! `layout`, `convert`, `simd` and `par`.

mod attention;
pub mod bf16dot;
mod bounds;
mod compile;
mod conv;
mod conv_gemm;
#[cfg(test)]
mod conv_tests;
mod convert;
/// f32 elements to an f32/f16/bf16 host tensor, rounded as the `cast` op.
pub use convert::host_from_f32;
mod elementwise;
mod host_step;
pub mod igemm;
#[cfg(test)]
mod igemm_tests;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod igemm_wasm;
#[cfg(target_arch = "x86_64")]
mod igemm_x86;
mod layout;
mod matmul;
mod norm;
pub(crate) mod par;
#[cfg(target_arch = "x86_64")]
mod qdot_avx2k;
#[cfg(target_arch = "x86_64")]
mod qdot_vnni;
#[cfg(target_arch = "x86_64")]
mod qdot_x512;
#[cfg(target_arch = "x86_64")]
mod qdot_x512k;
#[cfg(target_arch = "x86_64")]
mod qdot_x86;
#[cfg(target_arch = "x86_64")]
mod qgemm;
#[cfg(target_arch = "x86_64")]
mod qgemm_avx2;
pub mod qmatmul;
mod reduce;
mod rope;
mod run;
pub mod simd;
mod state;
mod step;
#[cfg(test)]
mod tests;
mod weights;
mod winograd;
#[cfg(test)]
mod winograd_tests;

use crate::kernels::amx;
use crate::CpuError;
use rlx_ir::{Attrs, DType, Graph, HostTensor, TensorType};
use state::State;
use std::sync::Mutex;
use step::{Home, Step};
use weights::{F32Pack, F32PackKind, Pack, Prep};

pub use par::threads;

/// How the fast engine runs one op, when it can.
#[derive(Clone, Debug)]
pub enum Kind {
    Elementwise(elementwise::Program),
    Matmul {
        act: matmul::Act,
        bias: bool,
        /// `matmul_residual`: the product is added onto its residual
        /// (input 2; the bias, if any, is input 3).
        residual: bool,
    },
    /// `attention`, or `attention_merged` (`merged`: the output is written
    /// with its heads merged, (.., Sq, H·Dv)), or `attention_cached`
    /// (`cached`: keys and values in two parts, a cache and the new ones,
    /// read where they are; the mask is input 5).
    Attention {
        merged: bool,
        cached: bool,
    },
    Conv {
        geom: conv::Geom,
        bias: bool,
        /// Applied to the rows as they are written (`conv_act`).
        act: matmul::Act,
        /// Run as Winograd F(4×4, 3×3), with this transformed filter.
        winograd: Option<Filter>,
    },
    ConvTranspose {
        geom: conv::TGeom,
        bias: bool,
    },
    MaxPool {
        geom: conv::Geom,
    },
    /// `x` indexed along `axis` by host indices.
    Gather {
        axis: usize,
    },
    /// Inputs laid side by side along `axis`.
    Concat {
        axis: usize,
    },
    Norm {
        centered: bool,
    },
    Softmax {
        log: bool,
    },
    Embedding,
    /// `x · wᵀ` with `w` (n × k) in a GGUF block type, decoded as read.
    DequantMatmul {
        dtype: DType,
        /// 8-bit activations and integer dot products for few rows
        /// (`CpuOptions::q8_activations`, where this CPU has the kernel).
        q8: bool,
    },
    /// `matmul_integer` of 8-bit host tensors into an int32 host tensor
    /// (its weight packed once while it stays the same tensor).
    IntMatmul {
        isa: igemm::Isa,
    },
    /// `matmul_integer_scaled`: the integer product written as f32 by its
    /// epilogue (scale, and bias when `bias`).
    IntMatmulScaled {
        isa: igemm::Isa,
        bias: bool,
    },
    /// `dynamic_quantize_linear`: the range, then the u8 values, in two
    /// passes (host tensor y and zero point; the scale where the plan
    /// keeps it).
    DynQuant,
    /// An f32 → u8 / i8 cast into a host tensor (quantized activations
    /// on their way into `matmul_integer`).
    ToInt8 {
        to: DType,
    },
    /// Rotary position embedding of one input (`rope`), f32.
    Rope {
        interleaved: bool,
    },
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

/// Where a Winograd conv's transformed filter comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Filter {
    /// Made at compile time from a constant weight, at this offset of the
    /// program's constants.
    Const(usize),
    /// Made by each run (the weight is an input).
    PerRun,
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
                    residual: false,
                },
            )
        }
        // The GEMM accumulates onto the residual, then adds the bias: an
        // f32 product without activation (the activation would apply to
        // the sum).
        "matmul_residual" => {
            let act = matmul::activation(attrs.str("activation").ok()?)?;
            let f32_only = inputs.iter().all(|t| t.dtype == DType::F32);
            (f32_only && act == matmul::Act::None && rank(0) >= 2 && rank(1) >= 2).then_some(
                Kind::Matmul {
                    act,
                    bias: inputs.len() == 4,
                    residual: true,
                },
            )
        }
        "attention" | "attention_merged" => {
            let kind = attrs.str("mask_kind").ok()?;
            let qkv_ok = f32s(&inputs[..3.min(inputs.len())]) && rank(0) >= 2;
            let mask_ok = match (kind, inputs.get(3)) {
                ("none" | "causal" | "sliding_window", None) => true,
                ("custom", Some(m)) => m.dtype == DType::Bool,
                ("bias", Some(m)) => convert::is_float(m.dtype),
                _ => false,
            };
            let merged = op == "attention_merged";
            (qkv_ok && mask_ok && (!merged || rank(0) >= 3)).then_some(Kind::Attention {
                merged,
                cached: false,
            })
        }
        "attention_cached" => (inputs.len() == 6
            && f32s(&inputs[..5])
            && rank(0) >= 2
            && inputs[5].dtype == DType::Bool)
            .then_some(Kind::Attention {
                merged: false,
                cached: true,
            }),
        // `conv_act` (rlx-opt's fold of a following activation): the
        // activation is applied to each row as it is written.
        "conv" | "conv_act" => {
            let bias_ok = inputs
                .get(2)
                .is_none_or(|b| b.shape.numel() == inputs[1].dims()[0]);
            let act = match op {
                "conv" => matmul::Act::None,
                _ => matmul::activation(attrs.str("activation").ok()?)?,
            };
            (inputs.len() >= 2 && f32s(inputs) && bias_ok)
                .then(|| conv::geom(inputs, attrs))?
                .map(|geom| Kind::Conv {
                    winograd: (crate::options::current().winograd && winograd::applies(&geom))
                        .then_some(Filter::PerRun),
                    geom,
                    bias: inputs.len() == 3,
                    act,
                })
        }
        "conv_transpose" => {
            let bias_ok = inputs
                .get(2)
                .is_none_or(|b| b.shape.numel() == inputs[1].dims()[1]);
            (inputs.len() >= 2 && f32s(inputs) && bias_ok)
                .then(|| conv::tgeom(inputs, attrs))?
                .map(|geom| Kind::ConvTranspose {
                    geom,
                    bias: inputs.len() == 3,
                })
        }
        "concat" => {
            let rank = rank(0);
            let axis = usize::try_from(attrs.int("axis").ok()?).ok()?;
            (f32s(inputs) && axis < rank && inputs.iter().all(|t| t.shape.rank() == rank))
                .then_some(Kind::Concat { axis })
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
        // A gather of rows (axis 0) is an embedding lookup; along another
        // axis, runs of the axes after it are copied.
        "gather" => {
            let (t, ids) = (inputs.first()?, inputs.get(1)?);
            let axis = t.shape.axis(attrs.int("axis").ok()?).ok()?;
            let ok = convert::is_float(t.dtype)
                && t.shape.rank() >= 1
                && matches!(ids.dtype, DType::I64 | DType::I32);
            ok.then_some(if axis == 0 {
                Kind::Embedding
            } else {
                Kind::Gather { axis }
            })
        }
        "rope" => {
            (inputs.len() == 3 && inputs.iter().all(|t| t.dtype == DType::F32) && rank(0) >= 2)
                .then(|| {
                    Some(Kind::Rope {
                        interleaved: attrs.bool("interleaved").ok()?,
                    })
                })?
        }
        "max_pool" => (f32s(inputs) && inputs.len() == 1)
            .then(|| conv::pool_geom(inputs[0], attrs))?
            .map(|geom| Kind::MaxPool { geom }),
        "dequant_matmul" => {
            let (x, w) = (inputs.first()?, inputs.get(1)?);
            let block = matches!(w.dtype.storage(), rlx_ir::dtype::Storage::Block { block, .. } if block >= 32);
            (convert::is_float(x.dtype)
                && x.shape.rank() >= 1
                && w.shape.rank() == 2
                && block
                && qmatmul::supported(w.dtype))
            .then(|| Kind::DequantMatmul {
                dtype: w.dtype,
                q8: crate::options::current().q8_activations && qmatmul::q8_kernel(w.dtype),
            })
        }
        "embedding" => {
            let (t, ids) = (inputs.first()?, inputs.get(1)?);
            (convert::is_float(t.dtype)
                && t.shape.rank() >= 1
                && matches!(ids.dtype, DType::I64 | DType::I32))
            .then_some(Kind::Embedding)
        }
        "fused_elementwise" => {
            let body = attrs.graph("body").ok()?;
            // bool inputs are read as 1.0 / 0.0 (masks, conditions);
            // integer ones (quantized values, integer products) only into
            // casts to f32.
            (inputs.iter().all(|t| {
                convert::is_float(t.dtype)
                    || t.dtype == DType::Bool
                    || elementwise::host_int(t.dtype)
            }))
            .then(|| elementwise::Program::for_region(body))?
            .map(Kind::Elementwise)
        }
        "matmul_integer" => {
            let (a, b) = (inputs.first()?, inputs.get(1)?);
            let int8 = |d: DType| matches!(d, DType::U8 | DType::I8);
            (int8(a.dtype) && int8(b.dtype) && b.shape.rank() == 2 && b.shape.numel() > 0).then(
                || Kind::IntMatmul {
                    isa: igemm::Isa::best(),
                },
            )
        }
        "matmul_integer_scaled" => {
            let (a, b) = (inputs.first()?, inputs.get(1)?);
            let int8 = |d: DType| matches!(d, DType::U8 | DType::I8);
            let f32s = inputs[4..].iter().all(|t| t.dtype == DType::F32);
            (int8(a.dtype) && int8(b.dtype) && b.shape.rank() == 2 && b.shape.numel() > 0 && f32s)
                .then(|| Kind::IntMatmulScaled {
                    isa: igemm::Isa::best(),
                    bias: inputs.len() == 6,
                })
        }
        "dynamic_quantize_linear" => {
            (inputs.len() == 1 && inputs[0].dtype == DType::F32).then_some(Kind::DynQuant)
        }
        "cast" if matches!(attrs.dtype("dtype"), Ok(DType::U8 | DType::I8)) => {
            let to = attrs.dtype("dtype").ok()?;
            (inputs.len() == 1 && inputs[0].dtype == DType::F32).then_some(Kind::ToInt8 { to })
        }
        // Between f32, f16 and bf16 a cast is a copy that the 16-bit
        // store rounds; other casts change the element kind.
        "cast" => {
            let to = attrs.dtype("dtype").ok()?;
            let from = inputs.first()?;
            // An integer (quantized value, integer product) becomes f32
            // as it is read; to 16 bits it would be rounded twice.
            let int_to_f32 = elementwise::host_int(from.dtype) && to == DType::F32;
            let float = convert::is_float(to) && convert::is_float(from.dtype);
            ((float || int_to_f32) && inputs.len() == 1)
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
        // A global pool is a reduction over each (n, c) plane.
        "global_avg_pool" | "global_max_pool" => {
            let d = inputs.first()?.dims();
            let len: usize = d.get(2..)?.iter().product();
            (f32s(inputs) && inputs.len() == 1 && d.len() >= 3 && len > 0).then_some(Kind::Reduce {
                red: if op == "global_avg_pool" {
                    reduce::Red::Mean
                } else {
                    reduce::Red::Max
                },
                outer: d[0] * d[1],
                len,
                inner: 1,
            })
        }
        "clamp" => (f32s(inputs) && inputs.len() == 1).then(|| {
            let (lo, hi) = elementwise::clamp_bounds(attrs);
            Kind::Elementwise(elementwise::Program::clamp(lo, hi))
        }),
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
    kernel_base_name(op, select(op, inputs, attrs), dtype)
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
        Some(Kind::Matmul { .. } | Kind::Attention { .. }) if cfg!(target_arch = "wasm32") => format!(
            "cpu::fast::{op}<{dtype}: gemm128 {} {}x{}>",
            crate::kernels::gemm128::VARIANT,
            crate::kernels::gemm128::MR,
            crate::kernels::gemm128::NR
        ),
        Some(Kind::Matmul { .. }) if dtype == DType::F32 && amx::available() => format!(
            "cpu::fast::{op}<f32: AMX bf16x6 tiles (f32-accurate) for a resident weight of finite values and >= {} rows, else the gemm crate>",
            amx::MIN_ROWS
        ),
        Some(Kind::DequantMatmul { dtype: w, q8 }) => format!(
            "cpu::fast::{op}<{w}: {} blocks decoded as read; < {} rows: {}, more: {}>",
            if qmatmul::has_fast_decoder(w) { "fast" } else { "reference-decoded" },
            qmatmul::GEMM_ROWS,
            match qmatmul::Q8Few::best(w).filter(|_| q8) {
                Some(k) => format!("{} (q8_activations)", k.describe()),
                None => qmatmul::few_rows_kernel(w).into(),
            },
            match qmatmul::q8_gemm_kernel(w).filter(|_| q8) {
                Some(k) => format!("activations rounded to 8 bits, {k} (q8_activations)"),
                None => "decoded panels through GEMM".into(),
            }
        ),
        Some(Kind::IntMatmul { isa }) => format!("cpu::fast::{op}<i32: {}>", isa.describe()),
        Some(Kind::IntMatmulScaled { isa, .. }) => {
            format!("cpu::fast::{op}<f32: {}, rescaled in the epilogue>", isa.describe())
        }
        Some(Kind::Conv { winograd, geom, .. }) => format!(
            "cpu::fast::{op}<{dtype}: {}>",
            if winograd.is_some() {
                "Winograd F(4x4,3x3), f32 transforms"
            } else if geom.depthwise() {
                "direct depthwise"
            } else {
                "im2col + GEMM"
            }
        ),
        Some(_) => format!("cpu::fast::{op}<{dtype}>"),
        None => format!("cpu::ref::{op}<{dtype}>"),
    }
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
    /// (fast kernels, reference kernels, views) in this
    /// program.
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for s in &self.steps {
            match s {
                Step::Fast { .. } | Step::Host(_) => c.0 += 1,
                Step::Ref => c.1 += 1,
                Step::View => c.2 += 1,
            }
        }
        c
    }

    pub fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, CpuError> {
        rlx_ref::check_inputs(&self.graph, inputs)?;
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
        // The threaded browser build: the run stays on the calling thread
        // (the page's main thread, which may not block), which takes its
        // share of each loop while the workers spin for theirs.
        #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
        if par::threads() > 1 && rayon::current_thread_index().is_none() {
            return par::with_helpers_here(|| self.run_in(st, inputs));
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

    /// Resident input `input` changed (`Executable::update_resident`):
    /// what was prepared from it is made again on the next run, from the
    /// tensor the caller passes then.
    pub fn resident_changed(&self, input: usize) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *st;
        for (p, ready) in self.preps.iter().zip(st.ready.iter_mut()) {
            *ready &= p.input != input;
        }
        for (p, ready) in self.packs.iter().zip(st.packed_ready.iter_mut()) {
            *ready &= p.input != input;
        }
        for (p, ready) in self.f32_packs.iter().zip(st.f32_packed_ready.iter_mut()) {
            *ready &= p.input != input;
        }
    }
}
