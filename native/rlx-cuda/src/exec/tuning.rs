//! Tuning a cuBLASLt GEMM: the candidates (the heuristic's, split-K
//! variants, our own kernels) and timing them on the GEMM's own buffers.

use super::launch::launch_plain;
use super::lt_gemm::LtGemm;
use crate::device::Gpu;
use crate::device::TunedAlgo;
use crate::error::CudaError;
use crate::tune::{self, Choice};
use cudarc::cublaslt::sys as lt;
use cudarc::driver::{sys, LaunchConfig};

/// One of our own GEMM kernels as a tuning candidate.
#[derive(Clone, Copy, Debug)]
pub(super) enum Own {
    /// fp32 on CUDA cores (`sgemm.rs`), with K in this many splits.
    S(crate::sgemm::Tile, u32),
    /// f16/bf16 on tensor cores (`hgemm.rs`); applies the GEMM's tail, if
    /// it has one, in its epilogue.
    H(crate::hgemm::Tile),
}

impl Own {
    pub(super) fn name(&self) -> String {
        match self {
            Own::S(t, s) => t.candidate_name(*s),
            Own::H(t) => t.name(),
        }
    }

    pub(super) fn fuses_tail(&self) -> bool {
        matches!(self, Own::H(_))
    }

    /// Block size and grid (K splits along z).
    pub(super) fn launch_config(&self, g: &crate::plan::Gemm) -> LaunchConfig {
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
pub(super) fn split_k_variants(
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
pub(super) const LT_CANDIDATES: usize = 16;

impl LtGemm {
    /// Run the fastest of the heuristic's candidates (see `tune.rs`):
    /// reused from the GPU's cache when a GEMM with the same [`TuneKey`]
    /// was tuned before, else each candidate timed on this GEMM's own
    /// buffers (their contents become garbage: tuning runs before any real
    /// run) and the choice cached.
    pub(super) fn tune(&mut self, gpu: &Gpu, log: bool) -> Result<(), CudaError> {
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
    pub(super) fn worth_tuning(g: &crate::plan::Gemm) -> bool {
        g.m as i64 * g.n as i64 * g.k as i64 * g.batch as i64 >= 1 << 21
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
}
