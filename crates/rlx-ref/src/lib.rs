//! # rlx-ref
//!
//! What every op means, as code: a kernel for every op and every dtype the
//! op admits, computed by widening elements to f64 (floats) or i64
//! (integers) and narrowing back, and [`run_graph`], which interprets MIR
//! with them. Every backend is compared against it: the conformance runner
//! ([`conformance`]) runs the shared reference vectors (`tests/vectors/`)
//! through any engine. The optimizer folds constants with it, and a
//! backend that needs a value computed at build time (an index table of a
//! movement op, say) asks it, so no backend depends on another.
//!
//! The thread pool the CPU kernels share ([`threads`]) lives here too: the
//! reference GEMM uses it, and so does the fast engine above (`rlx-cpu`).
// The only unsafe code: the call into `gemm` and its column-split output
// (kernels/gemm.rs), which says why.
#![deny(unsafe_code)]

pub mod conformance;
mod error;
mod interp;
pub mod kernels;
pub mod profile;
pub mod threads;

pub use error::CpuError;
pub use interp::{check_inputs, run_graph, run_graph_refs, Interp};
pub use kernels::gemm::{gemm_calls, gemm_cols, gemm_into, sgemm, Mat};
pub use kernels::{compiled_out, has_kernel, kernel_names, register_kernel, Kernel, KernelCx};
