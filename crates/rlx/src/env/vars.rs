//! The table of every variable [`super::from_lookup`] reads: the source of
//! `docs/environment.md` (a test checks that the page lists each one).

/// One environment variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Var {
    pub name: &'static str,
    /// What it accepts.
    pub accepts: &'static str,
    /// Unset means this.
    pub default: &'static str,
    /// Where the value goes.
    pub sets: &'static str,
}

const fn v(
    name: &'static str,
    accepts: &'static str,
    default: &'static str,
    sets: &'static str,
) -> Var {
    Var {
        name,
        accepts,
        default,
        sets,
    }
}

/// Every variable, in the order of `docs/environment.md`.
#[rustfmt::skip]
pub const VARS: &[Var] = &[
    v("RLX_NUM_THREADS", "integer >= 1", "all cores", "rlx_cpu::set_threads (clamped to the cores and max_threads, with a warning)"),
    v("RLX_CPU_ENGINE", "fast, reference", "fast", "CpuOptions::engine"),
    v("RLX_CPU_AMX", "0, 1", "1", "CpuOptions::amx"),
    v("RLX_CPU_BF16DOT", "0, 1", "1", "CpuOptions::bf16_dot"),
    v("RLX_CPU_Q8_ACTIVATIONS", "0, 1", "0", "CpuOptions::q8_activations"),
    v("RLX_CPU_WINOGRAD", "0, 1", "1", "CpuOptions::winograd"),
    v("RLX_PROFILE", "0, 1", "0", "rlx_cpu::profile::set_enabled"),
    v("RLX_WGPU_F16", "auto, f32", "auto", "WgpuOptions::f16"),
    v("RLX_WGPU_COOP", "0, 1", "1", "WgpuOptions::coop"),
    v("RLX_WGPU_SUBGROUPS", "0, 1", "1", "WgpuOptions::subgroups"),
    v("RLX_WGPU_ATTN_COOP", "0, 1", "1", "WgpuOptions::attn_coop"),
    v("RLX_WGPU_ATTENTION", "auto, row", "auto", "WgpuOptions::attention"),
    v("RLX_WGPU_ATTN_SLICES", "1, 2, 4, 8", "by tile", "WgpuOptions::attn_slices"),
    v("RLX_WGPU_MATMUL_BLOCK", "2, 4, 8", "by shape", "WgpuOptions::matmul_block"),
    v("RLX_WGPU_SPLITK", "0, 1", "1", "WgpuOptions::split_k"),
    v("RLX_WGPU_COOP_BK", "16, 32", "by K", "WgpuOptions::coop_bk"),
    v("RLX_WGPU_COOP_TILE", "64x64, 128x64, 128x128, 64x128", "by shape", "WgpuOptions::coop_tile"),
    v("RLX_CUDA_SGEMM", "auto, 0, <kernel>[/kN]", "auto", "CudaOptions::sgemm"),
    v("RLX_CUDA_HGEMM", "auto, 0, <kernel>", "0", "CudaOptions::hgemm"),
    v("RLX_CUDA_TUNE_LOG", "0, 1", "0", "CudaOptions::tune_log"),
    v("RLX_CUDA_LT_SEARCH", "0, 1", "0", "CudaOptions::lt_search"),
    v("RLX_DEVICE", "[first:|cheapest:]device,device,...", "cpu", "rlx::set_default_route (Target::Auto)"),
    v("RLX_DISPATCH", "policy[,op=policy...] (prefer_native, common_ir_only, native_only)", "none", "rlx_runtime::policy::set_override"),
    v("RLX_DISPATCH_REPORT", "0, 1", "0", "rlx::set_print_reports"),
    v("RLX_MAX_TENSOR_BYTES", "bytes (K, M, G, T suffixes)", "16G (2G on 32-bit)", "Limits::max_tensor_bytes"),
    v("RLX_MAX_ARENA_BYTES", "bytes (K, M, G, T suffixes)", "32G (3G on 32-bit)", "Limits::max_arena_bytes"),
    v("RLX_MAX_NESTING_DEPTH", "integer >= 1", "256", "Limits::max_nesting_depth"),
    v("RLX_MAX_FILE_BYTES", "bytes (K, M, G, T suffixes)", "256M", "Limits::max_file_bytes"),
    v("RLX_MAX_RANK", "integer >= 1", "32", "Limits::max_rank"),
];

/// `RLX_*` variables read by one binary, test, example or script, not by
/// [`super::from_lookup`]: known, so [`super::unknown_vars`] passes them.
pub const OTHER_VARS: &[&str] = &[
    "RLX_HOME",
    "RLX_MINILM",
    "RLX_VECTOR_OPS",
    "RLX_OPT_GRAPHS",
    "RLX_WGPU_PROFILE",
    "RLX_PRINT_STEP",
    "RLX_DUMP_PTX",
    "RLX_FUZZ_TARGET",
    "RLX_FUZZ_VERBOSE",
    "RLX_FUZZ_MALLOC_MB",
    "RLX_SOAK_SENTENCES",
    "RLX_SOAK_SINGLE_EVERY",
    "RLX_SOAK_LOG",
    "RLX_STRESS_CYCLES",
    // Scripts (scripts/, benches/).
    "RLX_MODEL_CACHE",
    "RLX_REPO",
    "RLX_EXPECT_WASM",
    "RLX_WEB_FEATURES",
    "RLX_FLOP_PER_CYCLE",
    "RLX_CLOCK_GHZ",
];
