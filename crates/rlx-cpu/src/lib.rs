//! # rlx-cpu
//!
//! The CPU backend. Its first job is to be the *reference*: a correct
//! kernel for every op and every dtype the op admits, which every other
//! backend is compared against. Kernels widen elements to f64 (floats) or
//! i64 (integers), compute, and narrow back. Speed comes from the fast
//! engine (`fast`), fused and vectorized kernels that must agree with
//! these: f32, and f16/bf16 stored as 16 bits and computed in f32 (see the
//! `fast` module docs for what is widened when, and what is prepared once
//! for resident weights).
// The only unsafe code: the call into `gemm` and its column-split output
// (kernels/gemm.rs), the run-time SIMD dispatch (fast/simd.rs), the
// AVX512-BF16 dot-product kernel (fast/bf16dot.rs) and the AMX tile
// instructions (kernels/amx.rs); each module says why.
#![deny(unsafe_code)]

mod backend;
pub mod conformance;
mod error;
pub mod fast;
mod interp;
pub mod kernels;
mod options;
pub mod profile;

pub use backend::CpuBackend;
pub use error::CpuError;
pub use interp::{run_graph, run_graph_refs};
pub use kernels::gemm::{gemm_calls, gemm_cols, gemm_into, sgemm, Mat};
pub use kernels::{compiled_out, has_kernel, kernel_names, register_kernel, Kernel, KernelCx};
pub use options::{
    available_parallelism, clamp_threads, set_threads, CpuEngine, CpuOptions, ThreadsError,
};
