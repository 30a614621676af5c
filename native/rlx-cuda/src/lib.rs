//! # rlx-cuda
//!
//! The CUDA backend of rlx (native only). A compiled program becomes:
//! * one NVRTC module of kernels generated for its exact shapes and strides
//!   (elementwise chains and `fused_elementwise` regions, reductions,
//!   softmax, layer/RMS norm, gathers, movement ops, fused attention),
//!   compiled once per distinct source and cached;
//! * cuBLAS strided-batched GEMMs for `matmul`/`matmul_bias_act` (fp32
//!   strict by default, TF32 opt-in; fp16/bf16 with fp32 accumulation);
//! * one device arena laid out by the memory planner, inputs and weights in
//!   their own buffers (optionally resident), and the whole schedule
//!   captured as one CUDA graph.
//!
//! The crate builds without CUDA installed: libraries are opened at run
//! time and a machine without them gets [`CudaError::LibraryMissing`].

pub mod claims;
pub mod codegen;
pub mod ctype;
pub mod device;
pub mod env;
pub mod error;
pub mod exec;
pub mod hgemm;
pub mod host;
pub mod lt_search;
pub mod options;
pub mod plan;
pub mod select;
pub mod sgemm;
pub mod staging;
pub mod tune;

pub use claims::claims;
pub use error::CudaError;
pub use exec::CudaExecutable;
pub use options::CudaOptions;

use device::Gpu;
use rlx_ir::lir::Program;
use rlx_ir::DType;
use rlx_runtime::{Backend, Claims, Device, Executable, NodeQuery, RuntimeError};
use std::sync::Arc;

/// The CUDA backend for one GPU.
pub struct CudaBackend {
    gpu: Arc<Gpu>,
    opts: CudaOptions,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend({}, {:?})", self.gpu.name, self.opts)
    }
}

impl CudaBackend {
    /// GPU 0 with default options; a typed error when there is no driver or device.
    pub fn new() -> Result<CudaBackend, CudaError> {
        Self::with_options(0, CudaOptions::default())
    }

    pub fn with_options(ordinal: usize, opts: CudaOptions) -> Result<CudaBackend, CudaError> {
        Ok(CudaBackend {
            gpu: Gpu::new(ordinal)?,
            opts,
        })
    }

    /// The same GPU with other options.
    pub fn options(&self, opts: CudaOptions) -> CudaBackend {
        CudaBackend {
            gpu: self.gpu.clone(),
            opts,
        }
    }

    /// Register GPU 0 with rlx-runtime (so `Device::Cuda` compiles here).
    pub fn register() -> Result<(), CudaError> {
        rlx_runtime::register_backend(Arc::new(CudaBackend::new()?));
        Ok(())
    }

    /// The device's name (e.g. "NVIDIA H200").
    pub fn name(&self) -> &str {
        &self.gpu.name
    }

    /// Compile to the concrete executable (resident inputs, profiling, graph replay).
    pub fn compile_program(&self, program: &Program) -> Result<CudaExecutable, CudaError> {
        let plan = plan::plan_opts(program, self.gpu.cc.0 >= 8, &self.opts)?;
        CudaExecutable::new(self.gpu.clone(), plan, self.opts)
    }
}

/// The tolerances CUDA results are held to against the reference, for an
/// output of dtype `d` given a case's own `(rtol, atol)`: at least 1e-5
/// relative for f32 (FMA contraction and tree reductions reorder the
/// sums), 1e-2 for f16 and 4e-2 for bf16 (one rounding of the output each).
/// The vector suite, the GPU test binary and the CPU emulation share it.
pub fn tolerance(d: DType, rtol: f64, atol: f64) -> (f64, f64) {
    match d {
        DType::F16 => (rtol.max(1e-2), atol.max(1e-2)),
        DType::BF16 => (rtol.max(4e-2), atol.max(4e-2)),
        DType::F32 => (rtol.max(1e-5), atol.max(1e-6)),
        _ => (rtol, atol),
    }
}

impl Backend for CudaBackend {
    fn device(&self) -> Device {
        Device::Cuda
    }

    fn claims(&self) -> Claims {
        claims::claims()
    }

    fn kernel_name(&self, op: &str, dtype: DType) -> String {
        // The kernel family; which variant a node gets depends on its
        // shapes and neighbours (CudaExecutable::kernels lists each launch).
        match op {
            "matmul" => format!("cuda::cublasLt_matmul<{dtype}> (algorithm timed at compile)"),
            "matmul_bias_act" => format!(
                "cuda::cublasLt_gemm_bias<{dtype}> (other activations: cublasLt + nvrtc epilogue)"
            ),
            "matmul_residual" => format!(
                "cuda::cublasLt_gemm_bias_residual<{dtype}> (D = A·B + bias + R in the epilogue; with an activation: cublasLt to scratch + nvrtc epilogue)"
            ),
            "attention" | "attention_merged" => format!(
                "cuda::nvrtc_attention<{dtype}> (>= 48 heads: cublas_gemm_batched + nvrtc_softmax + cublas_gemm_batched)"
            ),
            "dequant_matmul" => format!(
                "cuda::nvrtc_dequant_matmul<{dtype}> (GGUF blocks decoded in the kernel: gemv up to 8 rows, 64x64 tiles above)"
            ),
            _ => format!("cuda::nvrtc_{op}<{dtype}>"),
        }
    }

    fn select(&self, node: &NodeQuery) -> Result<String, String> {
        select::check(node)?;
        Ok(self.kernel_name(node.op, node.dtype))
    }

    fn throughput_gflops(&self) -> f64 {
        30_000.0
    }

    fn transfer_gbps(&self) -> f64 {
        25.0
    }

    fn launch_overhead_us(&self) -> f64 {
        3.0
    }

    fn compile(&self, program: Program) -> Result<Box<dyn Executable>, RuntimeError> {
        Ok(Box::new(self.compile_program(&program)?))
    }
}
