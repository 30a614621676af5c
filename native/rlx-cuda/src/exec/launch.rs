//! Enqueueing one resolved launch on the executable's stream.

use super::lt_gemm::LtGemm;
use super::CudaExecutable;
use crate::device::DevBuf;
use crate::error::CudaError;
use cudarc::cublas::sys as blas;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use rlx_ir::DType;

/// Enqueue a generated kernel's launch (anything else: nothing).
pub(super) fn launch_plain(
    stream: &cudarc::driver::CudaStream,
    l: &Resolved,
) -> Result<(), CudaError> {
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

pub(super) enum Resolved {
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

impl CudaExecutable {
    /// Enqueue one launch.
    pub(super) fn launch(&self, l: &Resolved) -> Result<(), CudaError> {
        let stream = &self.gpu.stream;
        match l {
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
