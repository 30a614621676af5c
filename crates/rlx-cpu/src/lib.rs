//! # rlx-cpu
//!
//! The CPU backend. Its first job is to be the *reference*: a correct
//! kernel for every op and every dtype the op admits, which every other
//! backend is compared against. Kernels widen elements to f64 (floats) or
//! i64 (integers), compute, and narrow back; speed comes later, from fused
//! and vectorized kernels that must agree with these.
// The only unsafe code: the call into `gemm` (kernels/gemm.rs) and the
// run-time SIMD dispatch (fast/simd.rs).
#![deny(unsafe_code)]

mod backend;
pub mod conformance;
mod error;
pub mod fast;
mod interp;
pub mod kernels;
pub mod profile;

pub use backend::CpuBackend;
pub use error::CpuError;
pub use interp::{run_graph, run_graph_refs};
pub use kernels::gemm::{gemm_calls, gemm_into, sgemm, Mat};
pub use kernels::{compiled_out, has_kernel, kernel_names, register_kernel, Kernel, KernelCx};
