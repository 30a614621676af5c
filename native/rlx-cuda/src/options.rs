//! [`CudaOptions`]: everything a CUDA compile may be told, typed. The A/B
//! knobs that were `RLX_CUDA_*` environment reads deep in planning and
//! tuning are fields here; [`CudaOptions::from_lookup`] (in `env.rs`, the
//! crate's one edge) parses those variables' values.

use crate::plan::AttnSplit;
use crate::{hgemm, sgemm};

/// Options of one CUDA compilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// fp32 GEMMs may use TF32 tensor cores (explicit opt-in; default strict fp32).
    pub tf32: bool,
    /// Capture the whole schedule as one CUDA graph on the first run and replay it.
    pub cuda_graph: bool,
    /// Our strict-fp32 GEMM kernels against cuBLASLt's (`RLX_CUDA_SGEMM`).
    pub sgemm: sgemm::Mode,
    /// Our f16/bf16 GEMM kernels against cuBLASLt's (`RLX_CUDA_HGEMM`).
    pub hgemm: hgemm::Mode,
    /// How tensor-core attention spreads a head over blocks: by the grid
    /// size, or a forced width (for tests of each kernel shape).
    pub attn_split: AttnSplit,
    /// Print every tuned candidate's time to stderr (`RLX_CUDA_TUNE_LOG`).
    pub tune_log: bool,
    /// Also time cuBLASLt's whole configuration space (`RLX_CUDA_LT_SEARCH`).
    pub lt_search: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            tf32: false,
            cuda_graph: true,
            sgemm: sgemm::Mode::Auto,
            hgemm: hgemm::Mode::Off,
            attn_split: AttnSplit::Auto,
            tune_log: false,
            lt_search: false,
        }
    }
}
