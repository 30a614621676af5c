//! # rlx-cpu
//!
//! The CPU backend. The reference semantics — a kernel for every op and
//! dtype, computed in f64/i64, and the interpreter over them — live one
//! layer down, in `rlx-ref`, and are re-exported here; this crate adds the
//! fast engine (`fast`): fused and vectorized kernels over the planned LIR
//! that must agree with the reference: f32, and f16/bf16 stored as 16 bits
//! and computed in f32 (see the `fast` module docs for what is widened
//! when, and what is prepared once for resident weights).
// The only unsafe code: the run-time SIMD dispatch (fast/simd.rs), the
// AVX512-BF16 dot-product kernel (fast/bf16dot.rs) and the AMX tile
// instructions (kernels/amx.rs); each module says why.
#![deny(unsafe_code)]

mod backend;
pub mod conformance;
pub mod fast;
pub mod kernels;
mod options;

pub use backend::CpuBackend;
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub use options::use_web_pool;
pub use options::{
    available_parallelism, clamp_threads, set_threads, CpuEngine, CpuOptions, ThreadsError,
};
pub use rlx_ref::profile;
pub use rlx_ref::{
    compiled_out, gemm_calls, gemm_cols, gemm_into, has_kernel, kernel_names, register_kernel,
    run_graph, run_graph_refs, sgemm, CpuError, Kernel, KernelCx, Mat,
};
