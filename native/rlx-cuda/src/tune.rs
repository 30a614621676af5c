//! cuBLASLt algorithm autotuning: which of the heuristic's candidates a
//! GEMM runs, decided once per GEMM configuration by timing them.
//!
//! The heuristic's first pick is often not the fastest for small, skinny
//! GEMMs (MiniLM's M = B·128 rows against 384/1152/1536 columns), so the
//! executable times each candidate on the GEMM's own buffers when it is
//! compiled. The choice is cached per [`TuneKey`] on the GPU: the six
//! layers of a model (and its eager, graph and profiled executables)
//! run one tuned algorithm per shape instead of six noisy picks.

use crate::plan::Gemm;
use rlx_ir::DType;

/// `1`: each tuned GEMM prints every candidate's time to stderr (for
/// tuning our own kernels).
pub const TUNE_LOG_ENV: &str = "RLX_CUDA_TUNE_LOG";

/// Everything the candidates and their speed depend on: the GEMM's
/// shape, layouts, types, epilogue and the alignment of its pointers (an
/// algorithm may need 16-byte aligned operands).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TuneKey {
    dtype: DType,
    tf32: bool,
    trans: (bool, bool),
    mnk: (i32, i32, i32),
    ld: (i32, i32, i32),
    strides: (i64, i64, i64),
    batch: i32,
    bias: bool,
    bias_stride: i64,
    residual: bool,
    /// The tail's activation (`plan::Tail`): cuBLASLt candidates are timed
    /// with the tail kernel, ours apply it.
    tail: Option<String>,
    /// Our own kernels timed with cuBLASLt's candidates (by name): a cached
    /// pick indexes this list, which the `RLX_CUDA_SGEMM` / `RLX_CUDA_HGEMM`
    /// modes of the compile that tuned it decided.
    own: Vec<String>,
    /// Whether cuBLASLt's whole configuration space was timed
    /// (`lt_search.rs`): a cached index then points past the heuristic's.
    searched: bool,
    /// log2 of each pointer's alignment (A, B, C, D, bias), capped at 256 bytes.
    align: [u32; 5],
}

impl TuneKey {
    /// The key of `g` at these device addresses (`c` is the residual when
    /// there is one, else D).
    pub fn new(g: &Gemm, ptrs: [u64; 4], bias: Option<u64>, tf32: bool) -> TuneKey {
        let al = |p: u64| p.trailing_zeros().min(8);
        TuneKey {
            dtype: g.dtype,
            tf32: tf32 && g.dtype == DType::F32,
            trans: (g.trans_a, g.trans_b),
            mnk: (g.m, g.n, g.k),
            ld: (g.lda, g.ldb, g.ldc),
            strides: (g.stride_a, g.stride_b, g.stride_c),
            batch: g.batch,
            bias: bias.is_some(),
            bias_stride: g.bias_stride,
            residual: g.residual.is_some(),
            tail: g.tail.as_ref().map(|t| t.act.clone()),
            own: Vec::new(),
            searched: false,
            align: [
                al(ptrs[0]),
                al(ptrs[1]),
                al(ptrs[2]),
                al(ptrs[3]),
                bias.map_or(8, al),
            ],
        }
    }

    /// This key for a GEMM that also times these kernels of ours.
    pub fn with_own(self, own: Vec<String>) -> TuneKey {
        TuneKey { own, ..self }
    }

    /// This key for a GEMM whose candidates include the full search's.
    pub fn with_search(self, searched: bool) -> TuneKey {
        TuneKey { searched, ..self }
    }
}

/// A candidate must beat the heuristic's first pick by this factor to
/// replace it: timing noise alone then rarely changes the choice between
/// runs.
pub const MARGIN: f32 = 0.97;

/// Index of the candidate to run, from each one's time (`None`: it failed
/// to launch). The heuristic's first pick (index 0) unless another is
/// faster than [`MARGIN`] × its time; the fastest valid one if the first
/// failed; `None` if all failed.
pub fn pick(times: &[Option<f32>]) -> Option<usize> {
    let best = times
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.map(|t| (i, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    match times.first().copied().flatten() {
        Some(t0) if best.1 >= MARGIN * t0 => Some(0),
        _ => Some(best.0),
    }
}

/// How a GEMM's algorithm was chosen, for the dispatch report and the profile.
#[derive(Clone, Debug, PartialEq)]
pub enum Choice {
    /// The heuristic's first pick, untimed (small GEMM, one candidate, or
    /// tuning turned off).
    Heuristic { candidates: usize },
    /// Candidate `index` of `candidates` after timing: its time and the
    /// first pick's, in microseconds per launch.
    Tuned {
        index: usize,
        candidates: usize,
        us: f32,
        heuristic_us: Option<f32>,
        /// K split over this many parts (a variant made from a heuristic
        /// candidate, see `exec.rs`), or 1.
        split_k: i32,
        /// Our own kernel that won (`sgemm.rs`, `hgemm.rs`), instead of cuBLASLt.
        kernel: Option<String>,
        /// Reused from an earlier GEMM with the same [`TuneKey`].
        cached: bool,
    },
    /// Our own kernel, named by [`crate::sgemm::SGEMM_ENV`] or
    /// [`crate::hgemm::HGEMM_ENV`] (tests).
    Forced { kernel: String },
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Choice::Forced { kernel } => {
                let env = if kernel.starts_with("rlx_hgemm") {
                    crate::hgemm::HGEMM_ENV
                } else {
                    crate::sgemm::SGEMM_ENV
                };
                write!(f, "nvrtc::{kernel} (forced by {env})")
            }
            Choice::Heuristic { candidates } => {
                write!(f, "algo #0 of {candidates} (heuristic, untimed)")
            }
            Choice::Tuned {
                index,
                candidates,
                us,
                heuristic_us,
                split_k,
                kernel,
                cached,
            } => {
                match kernel {
                    Some(k) => write!(f, "nvrtc::{k}, candidate #{index} of {candidates} (")?,
                    None => write!(f, "algo #{index} of {candidates} (")?,
                }
                if *split_k > 1 {
                    write!(f, "split-K {split_k}, ")?;
                }
                write!(f, "timed {us:.1} us")?;
                if let Some(h) = heuristic_us {
                    if *index != 0 {
                        write!(f, ", heuristic #0 {h:.1} us")?;
                    }
                }
                write!(f, "{})", if *cached { ", cached" } else { "" })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_keeps_the_first_unless_clearly_faster() {
        // 2% faster: within the margin, the heuristic's pick stays.
        assert_eq!(pick(&[Some(10.0), Some(9.8), Some(10.5)]), Some(0));
        // 10% faster: taken.
        assert_eq!(pick(&[Some(10.0), Some(9.8), Some(9.0)]), Some(2));
        // The first failed: the fastest valid one.
        assert_eq!(pick(&[None, Some(12.0), Some(11.0)]), Some(2));
        assert_eq!(pick(&[None, None]), None);
        assert_eq!(pick(&[]), None);
        assert_eq!(pick(&[Some(5.0)]), Some(0));
    }

    #[test]
    fn choice_names_the_index_and_times() {
        let c = Choice::Tuned {
            index: 3,
            candidates: 16,
            us: 4.31,
            heuristic_us: Some(6.0),
            split_k: 1,
            kernel: None,
            cached: true,
        };
        assert_eq!(
            c.to_string(),
            "algo #3 of 16 (timed 4.3 us, heuristic #0 6.0 us, cached)"
        );
        let c = Choice::Tuned {
            index: 9,
            candidates: 20,
            us: 3.0,
            heuristic_us: Some(6.0),
            split_k: 4,
            kernel: None,
            cached: false,
        };
        assert_eq!(
            c.to_string(),
            "algo #9 of 20 (split-K 4, timed 3.0 us, heuristic #0 6.0 us)"
        );
        let c = Choice::Tuned {
            index: 21,
            candidates: 22,
            us: 9.0,
            heuristic_us: Some(20.0),
            split_k: 1,
            kernel: Some("rlx_sgemm_tn_64x64_8x8".into()),
            cached: false,
        };
        assert_eq!(
            c.to_string(),
            "nvrtc::rlx_sgemm_tn_64x64_8x8, candidate #21 of 22 (timed 9.0 us, heuristic #0 20.0 us)"
        );
        assert_eq!(
            Choice::Heuristic { candidates: 8 }.to_string(),
            "algo #0 of 8 (heuristic, untimed)"
        );
    }
}
