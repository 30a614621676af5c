//! A cuBLASLt GEMM made once per program: its descriptors, layouts and
//! chosen algorithm, and how it launches (cuBLASLt, or one of our own
//! kernels the tuner picked).

use super::launch::Resolved;
use super::tuning::{split_k_variants, Own, LT_CANDIDATES};
use super::CudaOptions;
use crate::device::Gpu;
use crate::error::CudaError;
use crate::tune::{Choice, TuneKey};
use cudarc::cublaslt::result as ltr;
use cudarc::cublaslt::sys as lt;
use cudarc::driver::{sys, CudaFunction, PushKernelArg};
use rlx_ir::DType;

/// A cuBLASLt matmul with its descriptors and chosen algorithm, made once.
pub(super) struct LtGemm {
    pub(super) desc: lt::cublasLtMatmulDesc_t,
    pub(super) layouts: [lt::cublasLtMatrixLayout_t; 3],
    pub(super) algo: lt::cublasLtMatmulAlgo_t,
    /// The heuristic's candidates, then split-K variants of them, timed by
    /// [`LtGemm::tune`]; `splits[i]` is candidate i's K split (1: none).
    pub(super) candidates: Vec<lt::cublasLtMatmulAlgo_t>,
    pub(super) splits: Vec<i32>,
    /// Candidates from `searched_from` on came from the full search of
    /// cuBLASLt's configurations (`lt_search.rs`), `searched[i]` each.
    pub(super) searched_from: usize,
    pub(super) searched: Vec<crate::lt_search::Config>,
    pub(super) ptrs: [u64; 4],
    pub(super) f64: bool,
    pub(super) residual: bool,
    /// What the tuning cache knows this GEMM by.
    pub(super) key: TuneKey,
    /// How `algo` was chosen (shown by the profile).
    pub(super) choice: Choice,
    /// Our own kernels this GEMM can run (`sgemm.rs`, `hgemm.rs`), timed
    /// after the cuBLASLt candidates; empty when not eligible.
    pub(super) own: Vec<(Own, CudaFunction)>,
    /// The one of `own` that runs instead of cuBLASLt, when the tuner
    /// measured it fastest.
    pub(super) own_pick: Option<usize>,
    /// (m, n, k, lda, ldb, ldd) and (strides of A, B, D, bias) for `own`.
    pub(super) own_args: ([i32; 6], [i64; 4]),
    pub(super) bias: u64,
    /// The GEMM, for `own`'s launch grids.
    pub(super) grid_of: crate::plan::Gemm,
    /// The GEMM's tail (`plan::Tail`): the schedule's next launch, the
    /// bias + activation kernel that cuBLASLt's and sgemm's results need
    /// (timed with them), and the bias our fused kernels take instead.
    pub(super) tail: Option<(Box<Resolved>, u64)>,
}

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

pub(super) fn lt_err(e: ltr::CublasError) -> CudaError {
    CudaError::Cublas(format!("cuBLASLt: {e}"))
}

impl LtGemm {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
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
            let module = gpu.module(&sgemm::source())?;
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
            let module = gpu.module(&src)?;
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

    pub(super) fn launch(&self, gpu: &Gpu) -> Result<(), CudaError> {
        self.launch_with(gpu, &self.algo, self.own_pick)
    }

    /// Whether the kernel that runs applies the tail itself: the
    /// schedule then drops the tail's launch.
    pub(super) fn fused(&self) -> bool {
        self.tail.is_some() && self.own_pick.is_some_and(|o| self.own[o].0.fuses_tail())
    }

    /// Launch with cuBLASLt's `algo`, or with `own[o]` when `own` is `Some(o)`.
    pub(super) fn launch_with(
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
