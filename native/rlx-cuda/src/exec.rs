//! A compiled program on the GPU: device memory for the arena, inputs,
//! constants and scratch; the resolved launch list; optional CUDA graph
//! capture of the whole schedule.

use crate::device::TunedAlgo;
use crate::device::{DevBuf, Gpu};
use crate::error::CudaError;
use crate::host::{bytes_of, from_bytes};
use crate::plan::{Launch, Plan, Ptr, Root};
use crate::staging::{pack, Pinned};
use crate::tune::{self, Choice, TuneKey};
use cudarc::cublas::sys as blas;
use cudarc::cublaslt::result as ltr;
use cudarc::cublaslt::sys as lt;
use cudarc::driver::{
    result, sys, CudaEvent, CudaFunction, CudaGraph, LaunchConfig, PushKernelArg,
};
use rlx_ir::{DType, HostTensor, TensorType};
use rlx_runtime::{Executable, RuntimeError};
use std::sync::{Arc, Mutex};

pub use crate::options::CudaOptions;

/// A cuBLASLt matmul with its descriptors and chosen algorithm, made once.
struct LtGemm {
    desc: lt::cublasLtMatmulDesc_t,
    layouts: [lt::cublasLtMatrixLayout_t; 3],
    algo: lt::cublasLtMatmulAlgo_t,
    /// The heuristic's candidates, then split-K variants of them, timed by
    /// [`LtGemm::tune`]; `splits[i]` is candidate i's K split (1: none).
    candidates: Vec<lt::cublasLtMatmulAlgo_t>,
    splits: Vec<i32>,
    /// Candidates from `searched_from` on came from the full search of
    /// cuBLASLt's configurations (`lt_search.rs`), `searched[i]` each.
    searched_from: usize,
    searched: Vec<crate::lt_search::Config>,
    ptrs: [u64; 4],
    f64: bool,
    residual: bool,
    /// What the tuning cache knows this GEMM by.
    key: TuneKey,
    /// How `algo` was chosen (shown by the profile).
    choice: Choice,
    /// Our own kernels this GEMM can run (`sgemm.rs`, `hgemm.rs`), timed
    /// after the cuBLASLt candidates; empty when not eligible.
    own: Vec<(Own, CudaFunction)>,
    /// The one of `own` that runs instead of cuBLASLt, when the tuner
    /// measured it fastest.
    own_pick: Option<usize>,
    /// (m, n, k, lda, ldb, ldd) and (strides of A, B, D, bias) for `own`.
    own_args: ([i32; 6], [i64; 4]),
    bias: u64,
    /// The GEMM, for `own`'s launch grids.
    grid_of: crate::plan::Gemm,
    /// The GEMM's tail (`plan::Tail`): the schedule's next launch, the
    /// bias + activation kernel that cuBLASLt's and sgemm's results need
    /// (timed with them), and the bias our fused kernels take instead.
    tail: Option<(Box<Resolved>, u64)>,
}

/// One of our own GEMM kernels as a tuning candidate.
#[derive(Clone, Copy, Debug)]
enum Own {
    /// fp32 on CUDA cores (`sgemm.rs`), with K in this many splits.
    S(crate::sgemm::Tile, u32),
    /// f16/bf16 on tensor cores (`hgemm.rs`); applies the GEMM's tail, if
    /// it has one, in its epilogue.
    H(crate::hgemm::Tile),
}

impl Own {
    fn name(&self) -> String {
        match self {
            Own::S(t, s) => t.candidate_name(*s),
            Own::H(t) => t.name(),
        }
    }

    fn fuses_tail(&self) -> bool {
        matches!(self, Own::H(_))
    }

    /// Block size and grid (K splits along z).
    fn launch_config(&self, g: &crate::plan::Gemm) -> LaunchConfig {
        let (threads, (gx, gy, gz), splits) = match self {
            Own::S(t, s) => (t.threads(), t.grid(g), *s),
            Own::H(t) => (t.threads(), t.grid(g), 1),
        };
        LaunchConfig {
            grid_dim: (gx, gy, gz * splits),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: match self {
                Own::S(..) => 0,
                Own::H(t) => t.smem(),
            },
        }
    }
}

/// Split-K variants of the heuristic's first [`SPLIT_BASES`] candidates
/// that do not split K already: the same algorithm with K in 2, 4 or 8
/// parts, each partial sum and their reduction in the compute type (so
/// fp32 stays fp32 arithmetic; only the order of the sums changes), kept
/// when cuBLASLt accepts it for this GEMM within the workspace. For
/// MiniLM's skinny products at small batch the heuristic offered none
/// for fp32 (e.g. m384 n512 k384 ran at 14 TFLOP/s: 24 output tiles for
/// 132 SMs). The tuner times them with the rest; any failure here only
/// means fewer candidates.
fn split_k_variants(
    gpu: &Gpu,
    desc: lt::cublasLtMatmulDesc_t,
    layouts: &[lt::cublasLtMatrixLayout_t; 3],
    heur: &[lt::cublasLtMatmulHeuristicResult_t],
    workspace: usize,
) -> Vec<(lt::cublasLtMatmulAlgo_t, i32)> {
    use lt::cublasLtMatmulAlgoConfigAttributes_t as Cfg;
    let ok = lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS;
    let mut out = Vec::new();
    for r in heur.iter().take(SPLIT_BASES) {
        // SAFETY: i32/u32 attributes read into and written from locals of
        // that size; `algo` is a copy owned here; the descriptors are live.
        unsafe {
            let (mut support, mut cur, mut written) = (0i32, 1i32, 0usize);
            if lt::cublasLtMatmulAlgoCapGetAttribute(
                &r.algo,
                lt::cublasLtMatmulAlgoCapAttributes_t::CUBLASLT_ALGO_CAP_SPLITK_SUPPORT,
                &mut support as *mut i32 as *mut _,
                4,
                &mut written,
            ) != ok
                || support == 0
            {
                continue;
            }
            if lt::cublasLtMatmulAlgoConfigGetAttribute(
                &r.algo,
                Cfg::CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                &mut cur as *mut i32 as *mut _,
                4,
                &mut written,
            ) != ok
                || cur > 1
            {
                continue;
            }
            for s in [2i32, 4, 8] {
                let mut algo = r.algo;
                let scheme =
                    lt::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE as u32;
                if lt::cublasLtMatmulAlgoConfigSetAttribute(
                    &mut algo,
                    Cfg::CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                    &s as *const i32 as *const _,
                    4,
                ) != ok
                    || lt::cublasLtMatmulAlgoConfigSetAttribute(
                        &mut algo,
                        Cfg::CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                        &scheme as *const u32 as *const _,
                        4,
                    ) != ok
                {
                    continue;
                }
                let mut res = std::mem::zeroed::<lt::cublasLtMatmulHeuristicResult_t>();
                if lt::cublasLtMatmulAlgoCheck(
                    gpu.lt.0, desc, layouts[0], layouts[1], layouts[2], layouts[2], &algo, &mut res,
                ) == ok
                    && res.workspaceSize <= workspace
                {
                    out.push((algo, s));
                }
            }
        }
    }
    out
}

/// Heuristic candidates that split-K variants are made of.
const SPLIT_BASES: usize = 3;

/// Candidate algorithms asked of the cuBLASLt heuristic per GEMM. Its first
/// pick is often not the fastest for MiniLM's small, skinny GEMMs; the
/// later ones include split-K variants that can fill the GPU at B = 1.
const LT_CANDIDATES: usize = 16;
// SAFETY: descriptors are immutable after creation and used under the
// executable's stream ordering.
unsafe impl Send for LtGemm {}
unsafe impl Sync for LtGemm {}
impl Drop for LtGemm {
    fn drop(&mut self) {
        // SAFETY: each handle was created once in `LtGemm::new`.
        unsafe {
            let _ = ltr::destroy_matmul_desc(self.desc);
            for l in self.layouts {
                let _ = ltr::destroy_matrix_layout(l);
            }
        }
    }
}

fn lt_err(e: ltr::CublasError) -> CudaError {
    CudaError::Cublas(format!("cuBLASLt: {e}"))
}

impl LtGemm {
    #[allow(clippy::too_many_arguments)]
    fn new(
        gpu: &Gpu,
        g: &crate::plan::Gemm,
        a: u64,
        b: u64,
        c: u64,
        bias: Option<u64>,
        residual: Option<u64>,
        opts: &CudaOptions,
        tail: Option<(Box<Resolved>, u64)>,
    ) -> Result<LtGemm, CudaError> {
        let tf32 = opts.tf32;
        let (ty, compute, scale) = match g.dtype {
            DType::F16 => (
                lt::cudaDataType::CUDA_R_16F,
                lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                lt::cudaDataType::CUDA_R_32F,
            ),
            DType::BF16 => (
                lt::cudaDataType::CUDA_R_16BF,
                lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                lt::cudaDataType::CUDA_R_32F,
            ),
            DType::F64 => (
                lt::cudaDataType::CUDA_R_64F,
                lt::cublasComputeType_t::CUBLAS_COMPUTE_64F,
                lt::cudaDataType::CUDA_R_64F,
            ),
            _ if tf32 => (
                lt::cudaDataType::CUDA_R_32F,
                lt::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                lt::cudaDataType::CUDA_R_32F,
            ),
            _ => (
                lt::cudaDataType::CUDA_R_32F,
                lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                lt::cudaDataType::CUDA_R_32F,
            ),
        };
        let desc = ltr::create_matmul_desc(compute, scale).map_err(lt_err)?;
        let set =
            |attr: lt::cublasLtMatmulDescAttributes_t, v: *const std::ffi::c_void, n: usize| {
                // SAFETY: v points to a live value of n bytes of the attribute's type.
                unsafe { ltr::set_matmul_desc_attribute(desc, attr, v, n) }.map_err(lt_err)
            };
        // cublasOperation_t as the int32 the attribute holds: 0 = N, 1 = T.
        let op = |t: bool| -> i32 { i32::from(t) };
        let (ta, tb) = (op(g.trans_a), op(g.trans_b));
        set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
            &ta as *const _ as *const _,
            std::mem::size_of_val(&ta),
        )?;
        set(
            lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
            &tb as *const _ as *const _,
            std::mem::size_of_val(&tb),
        )?;
        if let Some(bias) = bias {
            let epi = lt::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS;
            set(
                lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
                &epi as *const _ as *const _,
                std::mem::size_of_val(&epi),
            )?;
            set(
                lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                &bias as *const u64 as *const _,
                8,
            )?;
            if g.batch > 1 && g.bias_stride != 0 {
                set(
                    lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                    &g.bias_stride as *const i64 as *const _,
                    8,
                )?;
            }
        }
        // Column-major shapes: op(A) is m×k, op(B) k×n, C/D m×n.
        let (ar, ac) = if g.trans_a { (g.k, g.m) } else { (g.m, g.k) };
        let (br, bc) = if g.trans_b { (g.n, g.k) } else { (g.k, g.n) };
        let mk = |rows: i32,
                  cols: i32,
                  ld: i32,
                  stride: i64|
         -> Result<lt::cublasLtMatrixLayout_t, CudaError> {
            let l = ltr::create_matrix_layout(ty, rows as u64, cols as u64, ld as i64)
                .map_err(lt_err)?;
            if g.batch > 1 {
                // SAFETY: i32 / i64 attribute values, as the attributes require.
                unsafe {
                    ltr::set_matrix_layout_attribute(
                        l,
                        lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        &g.batch as *const i32 as *const _,
                        4,
                    )
                    .map_err(lt_err)?;
                    ltr::set_matrix_layout_attribute(l, lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride as *const i64 as *const _, 8).map_err(lt_err)?;
                }
            }
            Ok(l)
        };
        let layouts = [
            mk(ar, ac, g.lda, g.stride_a)?,
            mk(br, bc, g.ldb, g.stride_b)?,
            mk(g.m, g.n, g.ldc, g.stride_c)?,
        ];
        let pref = ltr::create_matmul_pref().map_err(lt_err)?;
        let ws = gpu.lt_workspace.bytes;
        // SAFETY: usize attribute; pref destroyed below.
        let heur = unsafe {
            ltr::set_matmul_pref_attribute(
                pref,
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &ws as *const usize as *const _,
                8,
            )
            .map_err(lt_err)?;
            let mut results =
                vec![std::mem::zeroed::<lt::cublasLtMatmulHeuristicResult_t>(); LT_CANDIDATES];
            let mut count = 0i32;
            let h = lt::cublasLtMatmulAlgoGetHeuristic(
                gpu.lt.0,
                desc,
                layouts[0],
                layouts[1],
                layouts[2],
                layouts[2],
                pref,
                LT_CANDIDATES as i32,
                results.as_mut_ptr(),
                &mut count,
            )
            .result();
            let _ = ltr::destroy_matmul_pref(pref);
            h.map_err(lt_err)?;
            results.truncate(count.max(0) as usize);
            results.retain(|r| r.state == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
            results
        };
        let Some(first) = heur.first() else {
            return Err(CudaError::Cublas(
                "cuBLASLt: no algorithm for this GEMM".into(),
            ));
        };
        let ptrs = [a, b, residual.unwrap_or(c), c];
        let mut candidates: Vec<_> = heur.iter().map(|r| r.algo).collect();
        let mut splits = vec![1; candidates.len()];
        for (algo, s) in split_k_variants(gpu, desc, &layouts, &heur, ws) {
            candidates.push(algo);
            splits.push(s);
        }
        let searched_from = candidates.len();
        let mut searched = Vec::new();
        if opts.lt_search && Self::worth_tuning(g) {
            let types = crate::lt_search::Types {
                compute,
                scale,
                data: ty,
                strict_f32: g.dtype == DType::F32 && !tf32,
            };
            for (algo, c) in crate::lt_search::variants(gpu.lt.0, desc, &layouts, types, ws) {
                candidates.push(algo);
                splits.push(c.split);
                searched.push(c);
            }
        }
        use crate::{hgemm, sgemm};
        let mode = opts.sgemm;
        let ws = gpu.lt_workspace.bytes;
        let mut own = Vec::new();
        if mode != sgemm::Mode::Off && sgemm::eligible(g, ptrs, tf32) {
            let module = gpu.module(&sgemm::source(), false)?;
            if opts.tune_log {
                for t in sgemm::TILES {
                    let f = module.load_function(&t.name())?;
                    eprintln!(
                        "sgemm {}: {} registers, {} blocks of {} threads per SM",
                        t.name(),
                        f.num_regs()?,
                        f.occupancy_max_active_blocks_per_multiprocessor(t.threads(), 0, None)?,
                        t.threads()
                    );
                }
            }
            for (i, t) in sgemm::TILES.iter().enumerate() {
                for s in sgemm::SPLITS {
                    let wanted = match mode {
                        sgemm::Mode::Force((f, fs)) => f == i && fs == s,
                        _ => sgemm::worth_timing(g, t, s),
                    };
                    if wanted && sgemm::split_fits(g, t, s, ws) {
                        own.push((Own::S(*t, s), module.load_function(&t.name())?));
                    }
                }
            }
        }
        let hmode = opts.hgemm;
        if hmode != hgemm::Mode::Off && hgemm::eligible(g, ptrs) {
            let act = g.tail.as_ref().filter(|_| tail.is_some());
            let src = hgemm::source(g.dtype, act.map(|t| t.act.as_str()));
            let module = gpu.module(&src, false)?;
            for (i, t) in hgemm::TILES.iter().enumerate() {
                if matches!(hmode, hgemm::Mode::Force(f) if f != i) {
                    continue;
                }
                let f = module.load_function(&t.name())?;
                if t.smem() > 48 * 1024 {
                    f.set_attribute(
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        t.smem() as i32,
                    )?;
                }
                own.push((Own::H(*t), f));
            }
        }
        // Without a kernel that can apply it, the tail stays a launch of
        // its own and is left out of the timing (the same for every
        // candidate).
        let tail = tail.filter(|_| own.iter().any(|(o, _)| o.fuses_tail()));
        let key = TuneKey::new(g, ptrs, bias, tf32)
            .with_own(own.iter().map(|(o, _)| o.name()).collect())
            .with_search(!searched.is_empty());
        let forced = (matches!(mode, sgemm::Mode::Force(..))
            || matches!(hmode, hgemm::Mode::Force(..)))
            && !own.is_empty();
        Ok(LtGemm {
            desc,
            layouts,
            algo: first.algo,
            candidates,
            splits,
            searched_from,
            searched,
            ptrs,
            f64: g.dtype == DType::F64,
            residual: residual.is_some(),
            key,
            choice: if forced {
                Choice::Forced {
                    kernel: own[0].0.name(),
                }
            } else {
                Choice::Heuristic {
                    candidates: heur.len(),
                }
            },
            own_pick: forced.then_some(0),
            own,
            own_args: crate::sgemm::scalar_args(g),
            bias: bias.unwrap_or(0),
            grid_of: g.clone(),
            tail,
        })
    }

    /// Run the fastest of the heuristic's candidates (see `tune.rs`):
    /// reused from the GPU's cache when a GEMM with the same [`TuneKey`]
    /// was tuned before, else each candidate timed on this GEMM's own
    /// buffers (their contents become garbage: tuning runs before any real
    /// run) and the choice cached.
    fn tune(&mut self, gpu: &Gpu, log: bool) -> Result<(), CudaError> {
        let cache = || {
            gpu.tuned
                .lock()
                .map_err(|_| CudaError::Driver("tuning cache lock poisoned".into()))
        };
        if matches!(self.choice, Choice::Forced { .. }) {
            return Ok(());
        }
        if let Some(t) = cache()?.get(&self.key) {
            self.algo = t.algo;
            self.own_pick = t.own;
            self.choice = match t.choice.clone() {
                Choice::Tuned {
                    index,
                    candidates,
                    us,
                    heuristic_us,
                    split_k,
                    kernel,
                    ..
                } => Choice::Tuned {
                    index,
                    candidates,
                    us,
                    heuristic_us,
                    split_k,
                    kernel,
                    cached: true,
                },
                other => other,
            };
            return Ok(());
        }
        let total = self.candidates.len() + self.own.len();
        if total < 2 {
            return Ok(());
        }
        let mut times = Vec::new();
        for algo in self.candidates.clone() {
            times.push(self.time_us(gpu, Some(&algo), None)?);
        }
        for o in 0..self.own.len() {
            times.push(self.time_us(gpu, None, Some(o))?);
        }
        if log {
            let us = |t: &Option<f32>| t.map_or("-".into(), |t| format!("{t:.1}"));
            let lt: Vec<String> = times[..self.candidates.len()].iter().map(us).collect();
            let own: Vec<String> = (self.own.iter().zip(&times[self.candidates.len()..]))
                .map(|((o, _), x)| format!("{} {}", o.name().trim_start_matches("rlx_"), us(x)))
                .collect();
            let lt_len = self.candidates.len();
            let lt = if self.searched.is_empty() {
                lt.join(" ")
            } else {
                // The full search's candidates are too many to list: the
                // fastest of the heuristic's, and of the search's with its
                // configuration.
                let best = |r: std::ops::Range<usize>| {
                    r.filter_map(|i| times[i].map(|t| (i, t)))
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                };
                let h = best(0..self.searched_from);
                let s = best(self.searched_from..lt_len);
                let mut ids: Vec<i32> = self.searched.iter().map(|c| c.id).collect();
                ids.sort_unstable();
                ids.dedup();
                format!(
                    "heuristic+split best {} | search of {} (ids {ids:?}) best {}",
                    h.map_or("-".into(), |(i, t)| format!("#{i} {t:.1}")),
                    self.searched.len(),
                    s.map_or("-".into(), |(i, t)| format!(
                        "{t:.1} ({})",
                        self.searched[i - self.searched_from]
                    )),
                )
            };
            eprintln!(
                "tune {:?}: cuBLASLt [{}] own [{}] us",
                self.key,
                lt,
                own.join(", ")
            );
        }
        let Some(index) = tune::pick(&times) else {
            // No candidate launched outside a graph: keep the first pick
            // (a real run reports the error).
            return Ok(());
        };
        let lt = self.candidates.len();
        let kernel = if index >= lt {
            self.own_pick = Some(index - lt);
            Some(self.own[index - lt].0.name())
        } else {
            self.algo = self.candidates[index];
            None
        };
        self.choice = Choice::Tuned {
            index,
            candidates: total,
            us: times[index].unwrap_or(f32::NAN),
            heuristic_us: times[0],
            split_k: self.splits.get(index).copied().unwrap_or(1),
            kernel,
            cached: false,
        };
        cache()?.insert(
            self.key.clone(),
            TunedAlgo {
                algo: self.algo,
                own: self.own_pick,
                choice: self.choice.clone(),
            },
        );
        Ok(())
    }

    /// GPU time of one launch with `algo` in microseconds: a CUDA graph of
    /// 10 launches (no host launch gaps), replayed once to warm up, then
    /// the best of 3 timed replays. `None` if the algorithm does not
    /// launch here (e.g. not valid for these pointers' alignment).
    fn time_us(
        &self,
        gpu: &Gpu,
        algo: Option<&lt::cublasLtMatmulAlgo_t>,
        own: Option<usize>,
    ) -> Result<Option<f32>, CudaError> {
        const LAUNCHES: usize = 10;
        let algo = algo.unwrap_or(&self.algo);
        if self.launch_timed(gpu, algo, own).is_err() {
            return Ok(None);
        }
        let stream = &gpu.stream;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let (e0, e1) = (gpu.ctx.new_event(flags)?, gpu.ctx.new_event(flags)?);
        stream.synchronize()?;
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let r = (0..LAUNCHES).try_for_each(|_| self.launch_timed(gpu, algo, own));
        let g = stream.end_capture(sys::CUgraphInstantiate_flags(0))?;
        r?;
        let Some(g) = g else { return Ok(None) };
        g.launch()?;
        let mut best = f32::INFINITY;
        for _ in 0..3 {
            e0.record(stream)?;
            g.launch()?;
            e1.record(stream)?;
            stream.synchronize()?;
            best = best.min(e0.elapsed_ms(&e1)?);
        }
        Ok(Some(best * 1e3 / LAUNCHES as f32))
    }

    /// Worth timing the candidates: big enough that the algorithm matters
    /// (the parity tests' tiny GEMMs keep the heuristic's pick).
    fn worth_tuning(g: &crate::plan::Gemm) -> bool {
        g.m as i64 * g.n as i64 * g.k as i64 * g.batch as i64 >= 1 << 21
    }

    fn launch(&self, gpu: &Gpu) -> Result<(), CudaError> {
        self.launch_with(gpu, &self.algo, self.own_pick)
    }

    /// Whether the kernel that runs applies the tail itself: the
    /// schedule then drops the tail's launch.
    fn fused(&self) -> bool {
        self.tail.is_some() && self.own_pick.is_some_and(|o| self.own[o].0.fuses_tail())
    }

    /// What a candidate costs in the schedule: its launch, plus the tail
    /// kernel when it does not apply the tail itself.
    fn launch_timed(
        &self,
        gpu: &Gpu,
        algo: &lt::cublasLtMatmulAlgo_t,
        own: Option<usize>,
    ) -> Result<(), CudaError> {
        self.launch_with(gpu, algo, own)?;
        match &self.tail {
            Some((k, _)) if !own.is_some_and(|o| self.own[o].0.fuses_tail()) => {
                launch_plain(&gpu.stream, k)
            }
            _ => Ok(()),
        }
    }

    /// Launch with cuBLASLt's `algo`, or with `own[o]` when `own` is `Some(o)`.
    fn launch_with(
        &self,
        gpu: &Gpu,
        algo: &lt::cublasLtMatmulAlgo_t,
        own: Option<usize>,
    ) -> Result<(), CudaError> {
        if let Some(o) = own {
            let (kind, f) = &self.own[o];
            let [a, b, c, d] = self.ptrs;
            let c = if self.residual { c } else { 0 };
            let bias = match &self.tail {
                Some((_, tail_bias)) if kind.fuses_tail() => *tail_bias,
                _ => self.bias,
            };
            let (ints, longs) = &self.own_args;
            let (ws, counters) = (gpu.lt_workspace.ptr, gpu.sgemm_counters.ptr);
            let nsplit = match kind {
                Own::S(_, s) => *s as i32,
                Own::H(_) => 1,
            };
            let mut l = gpu.stream.launch_builder(f);
            l.arg(&a).arg(&b).arg(&d).arg(&c).arg(&bias);
            for v in ints {
                l.arg(v);
            }
            for v in longs {
                l.arg(v);
            }
            l.arg(&nsplit).arg(&ws).arg(&counters);
            let cfg = kind.launch_config(&self.grid_of);
            // SAFETY: the arguments are device addresses of this GEMM's
            // buffers (checked aligned by `sgemm::eligible` /
            // `hgemm::eligible`; the bias is the tail's for a kernel that
            // applies the tail, sized like the cuBLASLt bias), the GPU's
            // workspace (large enough: `sgemm::split_fits`) and zeroed tile
            // counters, and the GEMM's sizes, in the order the kernel
            // declares them.
            unsafe { l.launch(cfg) }?;
            return Ok(());
        }
        let has_residual = self.residual;
        let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
        let beta32 = if has_residual { one32 } else { zero32 };
        let beta64 = if has_residual { one64 } else { zero64 };
        let (alpha, beta): (*const std::ffi::c_void, *const std::ffi::c_void) = if self.f64 {
            (
                &one64 as *const f64 as *const _,
                &beta64 as *const f64 as *const _,
            )
        } else {
            (
                &one32 as *const f32 as *const _,
                &beta32 as *const f32 as *const _,
            )
        };
        let [a, b, c, d] = self.ptrs;
        // SAFETY: descriptors, algorithm and pointers were set up together in
        // `new` for buffers this executable owns; the workspace is the GPU's.
        unsafe {
            ltr::matmul(
                gpu.lt.0,
                self.desc,
                alpha,
                beta,
                a as *const _,
                self.layouts[0],
                b as *const _,
                self.layouts[1],
                c as *const _,
                self.layouts[2],
                d as *mut _,
                self.layouts[2],
                algo,
                gpu.lt_workspace.ptr as *mut _,
                gpu.lt_workspace.bytes,
                gpu.stream.cu_stream() as _,
            )
        }
        .map_err(lt_err)
    }
}

/// Enqueue a generated kernel's launch (anything else: nothing).
fn launch_plain(stream: &cudarc::driver::CudaStream, l: &Resolved) -> Result<(), CudaError> {
    if let Resolved::Kernel {
        func, cfg, args, ..
    } = l
    {
        let mut b = stream.launch_builder(func);
        for a in args {
            b.arg(a);
        }
        // SAFETY: the arguments are device addresses of buffers this
        // executable owns, in the order the generated kernel declares.
        unsafe { b.launch(*cfg) }?;
    }
    Ok(())
}

enum Resolved {
    Kernel {
        /// The generated kernel's name (`k<N>`), for the profile.
        name: String,
        func: CudaFunction,
        cfg: LaunchConfig,
        args: Vec<u64>,
    },
    Gemm(crate::plan::Gemm, [u64; 3]),
    Lt(Box<LtGemm>),
    /// Pointer arrays (A, B, C) on the device, one entry per batch.
    Batched(crate::plan::Gemm, [DevBuf; 3]),
}

fn blas_type(d: DType) -> blas::cudaDataType {
    match d {
        DType::F16 => blas::cudaDataType::CUDA_R_16F,
        DType::BF16 => blas::cudaDataType::CUDA_R_16BF,
        DType::F64 => blas::cudaDataType::CUDA_R_64F,
        _ => blas::cudaDataType::CUDA_R_32F,
    }
}

fn blas_compute(d: DType, tf32: bool) -> blas::cublasComputeType_t {
    match d {
        DType::F64 => blas::cublasComputeType_t::CUBLAS_COMPUTE_64F,
        DType::F32 if tf32 => blas::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        _ => blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
    }
}

struct Graph(CudaGraph);
// SAFETY: the graph is only touched under the executable's mutex.
unsafe impl Send for Graph {}

struct State {
    graph: Option<Graph>,
    /// Inputs uploaded once and kept (weights).
    resident: Vec<bool>,
    uploaded: Vec<bool>,
    /// (output, input) pairs copied on the device at the end of each run.
    feedback: Vec<(usize, usize)>,
    /// Pinned staging of the inputs copied each run (grown on demand).
    in_stage: Option<Pinned>,
    /// Recorded after the last async uploads out of `in_stage`: the host
    /// waits on it before refilling the staging buffer.
    in_done: Option<CudaEvent>,
    /// Pinned staging of the outputs and the error flag, laid out by
    /// `CudaExecutable::out_offsets`.
    out_stage: Pinned,
}

/// A program compiled for the GPU.
pub struct CudaExecutable {
    gpu: Arc<Gpu>,
    opts: CudaOptions,
    launches: Vec<(usize, Resolved)>,
    /// Each input's type and device address (in `_input_bufs`).
    inputs: Vec<(TensorType, u64)>,
    outputs: Vec<(TensorType, u64)>,
    /// Offsets of the outputs in the output staging buffer, then of the error flag.
    out_offsets: Vec<usize>,
    err: DevBuf,
    node_ops: Vec<String>,
    kernels: Vec<(usize, String)>,
    /// (launch index, description) of every cuBLASLt GEMM: its shape and
    /// which algorithm runs (tuned or the heuristic's pick).
    gemm_algos: Vec<(usize, String)>,
    /// Kernels following a kernel are launched as programmatic
    /// dependents (`pdl.rs`).
    pdl: bool,
    source: String,
    state: Mutex<State>,
    _arena: DevBuf,
    _input_bufs: Vec<DevBuf>,
    _consts: Vec<DevBuf>,
    _scratch: Vec<DevBuf>,
}

/// A synchronous copy from pageable memory: only for data copied once
/// (constants at compile time, resident inputs on their first run).
fn upload_once(dst: u64, t: &HostTensor) -> Result<(), CudaError> {
    let b = bytes_of(t)?;
    if b.is_empty() {
        return Ok(());
    }
    // SAFETY: dst has room for the tensor (sized from the same type); the
    // copy is synchronous with respect to the host slice.
    unsafe { result::memcpy_htod_sync(dst, b) }?;
    Ok(())
}

impl CudaExecutable {
    pub(crate) fn new(gpu: Arc<Gpu>, plan: Plan, opts: CudaOptions) -> Result<Self, CudaError> {
        gpu.ctx.bind_to_thread()?;
        let pdl = crate::pdl::pdl_for(opts.pdl, gpu.cc);
        let module = gpu.module(&plan.source, pdl)?;
        let arena = DevBuf::new(&gpu.ctx, plan.arena_bytes)?;
        // Input buffers: grouped inputs (weights of batched sibling GEMMs)
        // back to back in one allocation, the others in their own.
        let mut input_ptrs: Vec<Option<u64>> = vec![None; plan.inputs.len()];
        let mut input_bufs = Vec::new();
        for group in &plan.input_groups {
            let Some(&first) = group.first() else {
                continue;
            };
            let stride = crate::plan::group_stride(&plan.inputs[first]);
            let buf = DevBuf::new(&gpu.ctx, stride * group.len())?;
            for (t, &k) in group.iter().enumerate() {
                if plan.inputs[k] != plan.inputs[first] || input_ptrs[k].is_some() {
                    return Err(CudaError::Input(format!(
                        "input group {group:?}: member {k} differs or is grouped twice"
                    )));
                }
                input_ptrs[k] = Some(buf.ptr + (t * stride) as u64);
            }
            input_bufs.push(buf);
        }
        let mut inputs = Vec::new();
        for (k, ty) in plan.inputs.iter().enumerate() {
            let ptr = match input_ptrs[k] {
                Some(p) => p,
                None => {
                    let bytes = ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0);
                    let b = DevBuf::new(&gpu.ctx, bytes)?;
                    let p = b.ptr;
                    input_bufs.push(b);
                    p
                }
            };
            inputs.push((ty.clone(), ptr));
        }
        let mut consts = Vec::new();
        for t in &plan.consts {
            let b = DevBuf::new(&gpu.ctx, bytes_of(t)?.len())?;
            upload_once(b.ptr, t)?;
            consts.push(b);
        }
        let scratch: Vec<DevBuf> = plan
            .scratch
            .iter()
            .map(|&n| DevBuf::new(&gpu.ctx, n))
            .collect::<Result<_, _>>()?;
        let err = DevBuf::new(&gpu.ctx, 4)?;
        let addr = |p: &Ptr| -> u64 {
            let base = match p.root {
                Root::Arena(off) => arena.ptr + off as u64,
                Root::Input(i) => inputs[i].1,
                Root::Const(i) => consts[i].ptr,
                Root::Scratch(i) => scratch[i].ptr,
            };
            (base as i64 + p.byte) as u64
        };
        let mut funcs = std::collections::HashMap::new();
        let mut launches = Vec::new();
        let autotune = opts.autotune;
        // (launch index, GEMM shape and its algorithm choice).
        let mut gemm_algos = Vec::new();
        // A generated kernel's launch, its function loaded once.
        let mut resolve_kernel = |l: &Launch| -> Result<Resolved, CudaError> {
            let Launch::Kernel {
                func,
                grid,
                block,
                smem,
                args,
                err: e,
                ..
            } = l
            else {
                return Err(CudaError::Input(format!("not a kernel launch: {l:?}")));
            };
            if !funcs.contains_key(func) {
                funcs.insert(func.clone(), module.load_function(func)?);
            }
            let f: CudaFunction = funcs[func].clone();
            if *smem > 48 * 1024 {
                f.set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    *smem as i32,
                )?;
            }
            let mut a: Vec<u64> = args.iter().map(addr).collect();
            if *e {
                a.push(err.ptr);
            }
            Ok(Resolved::Kernel {
                name: func.clone(),
                func: f,
                cfg: LaunchConfig {
                    grid_dim: *grid,
                    block_dim: (*block, 1, 1),
                    shared_mem_bytes: *smem,
                },
                args: a,
            })
        };
        // Set when a GEMM's own kernel applies its tail: the tail's launch
        // (the next one) is left out.
        let mut skip = false;
        for (at, l) in plan.launches.iter().enumerate() {
            if std::mem::take(&mut skip) {
                continue;
            }
            match l {
                Launch::Kernel { node, .. } => {
                    launches.push((*node, resolve_kernel(l)?));
                }
                Launch::GemmBatched { node, gemm, ptrs } => {
                    let mut arrays = Vec::new();
                    for k in 0..3 {
                        let a: Vec<u64> = ptrs.iter().map(|t| addr(&t[k])).collect();
                        let b = DevBuf::new(&gpu.ctx, a.len() * 8)?;
                        // SAFETY: b holds a.len() u64 values.
                        unsafe { result::memcpy_htod_sync(b.ptr, &a) }?;
                        arrays.push(b);
                    }
                    let arrays: [DevBuf; 3] = arrays
                        .try_into()
                        .map_err(|_| CudaError::Input("pointer arrays".into()))?;
                    launches.push((*node, Resolved::Batched(gemm.clone(), arrays)));
                }
                Launch::Gemm { node, gemm } => {
                    let p = [addr(&gemm.a), addr(&gemm.b), addr(&gemm.c)];
                    // Every GEMM with one output dtype goes through cuBLASLt
                    // (tuned below); mixed-dtype ones through cuBLAS.
                    // (cuBLASLt rejects empty GEMMs: those stay cuBLAS no-ops.)
                    let empty = gemm.m == 0 || gemm.n == 0 || gemm.k == 0 || gemm.batch == 0;
                    if (gemm.c_dtype == gemm.dtype && !empty)
                        || gemm.bias.is_some()
                        || gemm.residual.is_some()
                    {
                        let tail = match (&gemm.tail, plan.launches.get(at + 1)) {
                            (Some(t), Some(next @ Launch::Kernel { .. })) => Some((
                                Box::new(resolve_kernel(next)?),
                                t.bias.as_ref().map_or(0, addr),
                            )),
                            _ => None,
                        };
                        let mut lt = LtGemm::new(
                            &gpu,
                            gemm,
                            p[0],
                            p[1],
                            p[2],
                            gemm.bias.as_ref().map(addr),
                            gemm.residual.as_ref().map(addr),
                            &opts,
                            tail,
                        )?;
                        if autotune && LtGemm::worth_tuning(gemm) {
                            lt.tune(&gpu, opts.tune_log)?;
                        }
                        skip = lt.fused();
                        gemm_algos.push((
                            launches.len(),
                            format!(
                                "{}{} m{} n{} k{}{}: {}",
                                match lt.own_pick.map(|o| &lt.own[o].0) {
                                    Some(Own::S(..)) => "sgemm",
                                    Some(Own::H(..)) => "hgemm",
                                    None => "cublasLt::matmul",
                                },
                                if skip { " + bias + activation" } else { "" },
                                gemm.m,
                                gemm.n,
                                gemm.k,
                                if gemm.batch > 1 {
                                    format!(" batch {}", gemm.batch)
                                } else {
                                    String::new()
                                },
                                lt.choice
                            ),
                        ));
                        launches.push((*node, Resolved::Lt(Box::new(lt))));
                    } else {
                        launches.push((*node, Resolved::Gemm(gemm.clone(), p)));
                    }
                }
            }
        }
        let outputs: Vec<(TensorType, u64)> = plan
            .outputs
            .iter()
            .map(|l| {
                let p = Ptr {
                    root: l.root,
                    byte: l.offset * crate::plan::esize(l.dtype) as i64,
                };
                (TensorType::new(l.dtype, l.dims.clone()), addr(&p))
            })
            .collect();
        let n_in = inputs.len();
        // Output staging: every output, then the 4-byte error flag.
        let mut sizes: Vec<usize> = outputs
            .iter()
            .map(|(ty, _)| ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0))
            .collect();
        sizes.push(4);
        let (out_offsets, out_bytes) = pack(&sizes);
        let out_stage = Pinned::new(&gpu.ctx, out_bytes)?;
        Ok(CudaExecutable {
            gpu,
            opts,
            launches,
            inputs,
            outputs,
            out_offsets,
            err,
            node_ops: plan.node_ops,
            kernels: plan.kernels,
            gemm_algos,
            pdl,
            source: plan.source,
            state: Mutex::new(State {
                graph: None,
                resident: vec![false; n_in],
                uploaded: vec![false; n_in],
                feedback: vec![],
                in_stage: None,
                in_done: None,
                out_stage,
            }),
            _arena: arena,
            _input_bufs: input_bufs,
            _consts: consts,
            _scratch: scratch,
        })
    }

    /// Whether kernels are launched as programmatic dependents of the
    /// launch before them (sm_90+ with [`crate::pdl::PDL_ENV`]=1).
    pub fn pdl(&self) -> bool {
        self.pdl
    }

    /// The generated CUDA C of this program.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// (node, kernel) for every launch: the dispatch report's kernel names.
    pub fn kernels(&self) -> &[(usize, String)] {
        &self.kernels
    }

    /// (node, description) of every cuBLASLt GEMM launch: its shape and
    /// which algorithm runs, tuned (index among the heuristic's
    /// candidates, timed microseconds) or the heuristic's first pick.
    pub fn gemm_algos(&self) -> Vec<(usize, String)> {
        self.gemm_algos
            .iter()
            .map(|(l, d)| (self.launches[*l].0, d.clone()))
            .collect()
    }

    /// Launches per run (kernels and GEMMs).
    pub fn launch_count(&self) -> usize {
        self.launches.len()
    }

    /// Keep input `i` on the device after its first upload (weights): later
    /// runs skip its copy. The caller promises to pass the same values.
    pub fn keep_resident(&self, inputs: &[usize]) {
        if let Ok(mut s) = self.state.lock() {
            for &i in inputs {
                if i < s.resident.len() {
                    s.resident[i] = true;
                }
            }
        }
    }

    fn check_inputs(&self, inputs: &[&HostTensor]) -> Result<(), CudaError> {
        if inputs.len() != self.inputs.len() {
            return Err(CudaError::Input(format!(
                "expected {} inputs, got {}",
                self.inputs.len(),
                inputs.len()
            )));
        }
        for (i, (t, (ty, _))) in inputs.iter().zip(&self.inputs).enumerate() {
            if t.dtype() != ty.dtype || t.shape() != &ty.shape {
                return Err(CudaError::Input(format!(
                    "input {i}: expected {ty}, got {}{}",
                    t.dtype(),
                    t.shape()
                )));
            }
        }
        Ok(())
    }

    /// Feed outputs back into inputs on the device after every run (a
    /// training step's new parameters and optimizer state), and keep those
    /// inputs resident: the step then runs with no host transfer at all.
    /// Each pair is (output index, input index) of the same type.
    pub fn set_feedback(&self, pairs: &[(usize, usize)]) -> Result<(), CudaError> {
        let mut s = self
            .state
            .lock()
            .map_err(|_| CudaError::Input("executable lock poisoned".into()))?;
        for &(o, i) in pairs {
            let (Some((ot, _)), Some((it, _))) = (self.outputs.get(o), self.inputs.get(i)) else {
                return Err(CudaError::Input(format!(
                    "feedback pair ({o}, {i}) out of range"
                )));
            };
            if ot != it {
                return Err(CudaError::Input(format!(
                    "feedback output {o} is {ot}, input {i} is {it}"
                )));
            }
            s.resident[i] = true;
        }
        s.feedback = pairs.to_vec();
        s.graph = None;
        Ok(())
    }

    fn enqueue(&self, feedback: &[(usize, usize)]) -> Result<(), CudaError> {
        let stream = &self.gpu.stream;
        // SAFETY: err is a live 4-byte device buffer.
        unsafe { result::memset_d8_async(self.err.ptr, 0, 4, stream.cu_stream()) }?;
        // Each of our kernels after another launch (ours or a cuBLAS(Lt)
        // GEMM's kernel) may be scheduled before that one ends (PDL): it
        // waits for it in full before reading anything, and a GEMM
        // kernel that never signals its dependents counts as signalling
        // when it completes. GEMMs are launched as usual (they wait for
        // everything before them), and so is the first kernel, after the
        // memset of the error flag.
        let mut after_launch = false;
        for (_, l) in &self.launches {
            let is_kernel = matches!(l, Resolved::Kernel { .. });
            self.launch(l, self.pdl && after_launch && is_kernel)?;
            after_launch = true;
        }
        for &(o, i) in feedback {
            let (ty, src) = &self.outputs[o];
            let dst = self.inputs[i].1;
            let n = ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0);
            if n > 0 && *src != dst {
                // SAFETY: both buffers hold n bytes (types checked in set_feedback).
                unsafe { result::memcpy_dtod_async(dst, *src, n, stream.cu_stream()) }?;
            }
        }
        Ok(())
    }

    /// Enqueue one launch; `programmatic`: as a programmatic dependent
    /// of the kernel before it (`pdl.rs`; only a kernel after a kernel).
    fn launch(&self, l: &Resolved, programmatic: bool) -> Result<(), CudaError> {
        let stream = &self.gpu.stream;
        match l {
            // SAFETY: as below; the kernel waits for its predecessor
            // before its first read (`grid_dep_wait`).
            Resolved::Kernel {
                func, cfg, args, ..
            } if programmatic => unsafe {
                crate::pdl::launch_programmatic(stream, func, cfg, args)?
            },
            Resolved::Kernel { .. } => launch_plain(stream, l)?,
            Resolved::Lt(g) => g.launch(&self.gpu)?,
            Resolved::Batched(g, [pa, pb, pc]) => {
                let op = |t: bool| {
                    if t {
                        blas::cublasOperation_t::CUBLAS_OP_T
                    } else {
                        blas::cublasOperation_t::CUBLAS_OP_N
                    }
                };
                let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
                let (alpha, beta): (*const std::ffi::c_void, *const std::ffi::c_void) =
                    if g.dtype == DType::F64 {
                        (
                            &one64 as *const f64 as *const _,
                            &zero64 as *const f64 as *const _,
                        )
                    } else {
                        (
                            &one32 as *const f32 as *const _,
                            &zero32 as *const f32 as *const _,
                        )
                    };
                // SAFETY: the pointer arrays hold `batch` device addresses of
                // buffers this executable owns, laid out as the plan checked.
                unsafe {
                    blas::cublasGemmBatchedEx(
                        *self.gpu.blas.handle(),
                        op(g.trans_a),
                        op(g.trans_b),
                        g.m,
                        g.n,
                        g.k,
                        alpha,
                        pa.ptr as *const *const _,
                        blas_type(g.dtype),
                        g.lda,
                        pb.ptr as *const *const _,
                        blas_type(g.dtype),
                        g.ldb,
                        beta,
                        pc.ptr as *const *mut _,
                        blas_type(g.c_dtype),
                        g.ldc,
                        g.batch,
                        blas_compute(g.dtype, self.opts.tf32),
                        blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                    .result()
                }?;
            }
            Resolved::Gemm(g, [a, b, c]) => {
                let (ty, compute) = match g.dtype {
                    DType::F16 => (
                        blas::cudaDataType::CUDA_R_16F,
                        blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    ),
                    DType::BF16 => (
                        blas::cudaDataType::CUDA_R_16BF,
                        blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    ),
                    DType::F64 => (
                        blas::cudaDataType::CUDA_R_64F,
                        blas::cublasComputeType_t::CUBLAS_COMPUTE_64F,
                    ),
                    _ if self.opts.tf32 => (
                        blas::cudaDataType::CUDA_R_32F,
                        blas::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                    ),
                    _ => (
                        blas::cudaDataType::CUDA_R_32F,
                        blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    ),
                };
                let op = |t: bool| {
                    if t {
                        blas::cublasOperation_t::CUBLAS_OP_T
                    } else {
                        blas::cublasOperation_t::CUBLAS_OP_N
                    }
                };
                let (one32, zero32) = (1f32, 0f32);
                let (one64, zero64) = (1f64, 0f64);
                let (alpha, beta) = if g.dtype == DType::F64 {
                    (
                        &one64 as *const f64 as *const _,
                        &zero64 as *const f64 as *const _,
                    )
                } else {
                    (
                        &one32 as *const f32 as *const _,
                        &zero32 as *const f32 as *const _,
                    )
                };
                // SAFETY: pointers and strides come from the plan's checked
                // layouts of buffers this executable owns.
                unsafe {
                    cudarc::cublas::result::gemm_strided_batched_ex(
                        *self.gpu.blas.handle(),
                        op(g.trans_a),
                        op(g.trans_b),
                        g.m,
                        g.n,
                        g.k,
                        alpha,
                        *a as *const _,
                        ty,
                        g.lda,
                        g.stride_a,
                        *b as *const _,
                        ty,
                        g.ldb,
                        g.stride_b,
                        beta,
                        *c as *mut _,
                        ty,
                        g.ldc,
                        g.stride_c,
                        g.batch,
                        compute,
                        blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }?;
            }
        }
        Ok(())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>, CudaError> {
        self.state
            .lock()
            .map_err(|_| CudaError::Input("executable lock poisoned".into()))
    }

    /// Upload inputs (skipping resident ones already there) and run the
    /// schedule (through the captured CUDA graph when enabled). Does not wait.
    pub fn launch_async(&self, inputs: &[&HostTensor]) -> Result<(), CudaError> {
        self.check_inputs(inputs)?;
        self.gpu.ctx.bind_to_thread()?;
        let mut s = self.lock()?;
        self.launch_locked(&mut s, inputs)
    }

    /// Copy the inputs a run needs: resident inputs once (synchronously),
    /// every other input through the pinned staging buffer as async copies
    /// on the stream, ordered before the run's kernels.
    fn upload_inputs(&self, s: &mut State, inputs: &[&HostTensor]) -> Result<(), CudaError> {
        let stream = &self.gpu.stream;
        let once: Vec<usize> = (0..inputs.len())
            .filter(|&i| s.resident[i] && !s.uploaded[i])
            .collect();
        if !once.is_empty() {
            // A synchronous copy is not ordered with the stream: it must not
            // overwrite an input a previous run still reads.
            stream.synchronize()?;
            for i in once {
                upload_once(self.inputs[i].1, inputs[i])?;
                s.uploaded[i] = true;
            }
        }
        let per_run: Vec<usize> = (0..inputs.len()).filter(|&i| !s.resident[i]).collect();
        if per_run.is_empty() {
            return Ok(());
        }
        let bytes: Vec<&[u8]> = per_run
            .iter()
            .map(|&i| bytes_of(inputs[i]))
            .collect::<Result<_, _>>()?;
        let (offsets, total) = pack(&bytes.iter().map(|b| b.len()).collect::<Vec<_>>());
        // The previous run's uploads may still be reading the staging buffer.
        if let Some(e) = &s.in_done {
            e.synchronize()?;
        }
        if s.in_stage.as_ref().is_none_or(|p| p.len() < total) {
            s.in_stage = Some(Pinned::new(&self.gpu.ctx, total)?);
        }
        let stage = s
            .in_stage
            .as_mut()
            .ok_or_else(|| CudaError::Driver("no input staging buffer".into()))?;
        for ((&i, &at), b) in per_run.iter().zip(&offsets).zip(&bytes) {
            if b.is_empty() {
                continue;
            }
            stage.slice_mut(at, b.len()).copy_from_slice(b);
            // SAFETY: the device buffer holds the tensor's bytes; the staging
            // range stays untouched until `in_done` (recorded below) completes.
            unsafe {
                result::memcpy_htod_async(
                    self.inputs[i].1,
                    stage.slice(at, b.len()),
                    stream.cu_stream(),
                )
            }?;
        }
        if s.in_done.is_none() {
            s.in_done = Some(
                self.gpu
                    .ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?,
            );
        }
        if let Some(e) = &s.in_done {
            e.record(stream)?;
        }
        for i in per_run {
            s.uploaded[i] = true;
        }
        Ok(())
    }

    fn launch_locked(&self, s: &mut State, inputs: &[&HostTensor]) -> Result<(), CudaError> {
        self.upload_inputs(s, inputs)?;
        if !self.opts.cuda_graph {
            return self.enqueue(&s.feedback);
        }
        if s.graph.is_none() {
            let stream = &self.gpu.stream;
            stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
            let r = self.enqueue(&s.feedback);
            let g = stream.end_capture(sys::CUgraphInstantiate_flags(0))?;
            r?;
            let g = g.ok_or_else(|| CudaError::Driver("graph capture produced no graph".into()))?;
            g.upload()?;
            s.graph = Some(Graph(g));
        }
        if let Some(g) = &s.graph {
            g.0.launch()?;
        }
        Ok(())
    }

    /// Queue async copies of the error flag (and the outputs, if asked)
    /// into the pinned output staging, wait for the stream once, check the
    /// flag, and return the outputs read from the staging buffer.
    fn fetch(&self, s: &mut State, outputs: bool) -> Result<Vec<HostTensor>, CudaError> {
        let stream = &self.gpu.stream;
        let err_at = self.out_offsets[self.outputs.len()];
        let sizes: Vec<usize> = self
            .outputs
            .iter()
            .map(|(ty, _)| ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0))
            .collect();
        if outputs {
            for ((&(_, ptr), &at), &n) in self.outputs.iter().zip(&self.out_offsets).zip(&sizes) {
                if n > 0 {
                    // SAFETY: the output buffer holds n bytes; the host reads
                    // the staging range only after the stream is synchronized.
                    unsafe {
                        result::memcpy_dtoh_async(
                            s.out_stage.slice_mut(at, n),
                            ptr,
                            stream.cu_stream(),
                        )
                    }?;
                }
            }
        }
        // SAFETY: err is a live 4-byte device buffer; read after the sync below.
        unsafe {
            result::memcpy_dtoh_async(
                s.out_stage.slice_mut(err_at, 4),
                self.err.ptr,
                stream.cu_stream(),
            )
        }?;
        stream.synchronize()?;
        let flag = s.out_stage.slice(err_at, 4);
        let code = i32::from_ne_bytes([flag[0], flag[1], flag[2], flag[3]]);
        if code != 0 {
            let node = (code - 1) as usize;
            return Err(CudaError::Runtime {
                node,
                op: self.node_ops.get(node).cloned().unwrap_or_default(),
                msg: "index out of range".into(),
            });
        }
        if !outputs {
            return Ok(vec![]);
        }
        self.outputs
            .iter()
            .zip(&self.out_offsets)
            .zip(&sizes)
            .map(|(((ty, _), &at), &n)| {
                from_bytes(ty.dtype, ty.shape.clone(), s.out_stage.slice(at, n))
            })
            .collect()
    }

    /// Wait for the stream, then check the kernels' error flag.
    pub fn sync(&self) -> Result<(), CudaError> {
        self.gpu.ctx.bind_to_thread()?;
        let mut s = self.lock()?;
        self.fetch(&mut s, false).map(|_| ())
    }

    /// Copy the outputs back (after [`CudaExecutable::launch_async`]; waits
    /// for the stream and checks the error flag).
    pub fn read_outputs(&self) -> Result<Vec<HostTensor>, CudaError> {
        self.gpu.ctx.bind_to_thread()?;
        let mut s = self.lock()?;
        self.fetch(&mut s, true)
    }

    /// Run once and return the outputs: async uploads, the schedule, async
    /// downloads, one wait — all under one lock, so concurrent callers
    /// cannot interleave their runs.
    pub fn run_cuda(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, CudaError> {
        self.check_inputs(inputs)?;
        self.gpu.ctx.bind_to_thread()?;
        let mut s = self.lock()?;
        self.launch_locked(&mut s, inputs)?;
        self.fetch(&mut s, true)
    }

    /// GPU time of every launch: (node, op, kernel, milliseconds). Each
    /// launch is timed alone — a CUDA graph of `REPEATS` copies of it,
    /// replayed between two events — so host launch gaps (which dominate
    /// an eagerly launched run at small batch) are not counted. Inputs must
    /// have been uploaded; intermediate buffers hold garbage afterwards
    /// (in-place epilogues accumulate), so run again before reading outputs.
    pub fn profile(&self) -> Result<Vec<(usize, String, String, f32)>, CudaError> {
        const REPEATS: usize = 5;
        self.gpu.ctx.bind_to_thread()?;
        let _s = self.lock()?;
        let stream = &self.gpu.stream;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let (e0, e1) = (
            self.gpu.ctx.new_event(flags)?,
            self.gpu.ctx.new_event(flags)?,
        );
        let mut names = std::collections::HashMap::new();
        for (n, k) in &self.kernels {
            names.entry(*n).or_insert_with(|| k.clone());
        }
        let algos: std::collections::HashMap<usize, &String> =
            self.gemm_algos.iter().map(|(l, d)| (*l, d)).collect();
        let mut out = Vec::new();
        for (at, (node, l)) in self.launches.iter().enumerate() {
            stream.synchronize()?;
            stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
            let r = (0..REPEATS).try_for_each(|_| self.launch(l, false));
            let g = stream.end_capture(sys::CUgraphInstantiate_flags(0))?;
            r?;
            let g = g.ok_or_else(|| CudaError::Driver("graph capture produced no graph".into()))?;
            g.launch()?;
            e0.record(stream)?;
            g.launch()?;
            e1.record(stream)?;
            stream.synchronize()?;
            let ms = e0.elapsed_ms(&e1)? / REPEATS as f32;
            // A GEMM is named with its algorithm choice, a kernel by its
            // own name (a node's bias + GELU kernel apart from its GEMM).
            let name = match (algos.get(&at), l) {
                (Some(d), _) => (*d).clone(),
                (None, Resolved::Kernel { name, .. }) => name.clone(),
                (None, _) => names.get(node).cloned().unwrap_or_default(),
            };
            out.push((*node, self.node_ops[*node].clone(), name, ms));
        }
        Ok(out)
    }
}

impl Executable for CudaExecutable {
    fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        Ok(self.run_cuda(inputs)?)
    }
}
