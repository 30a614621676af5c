//! The edge: every `RLX_*` environment variable of rlx read once, here,
//! parsed into typed options — or an error naming the variable, its value
//! and what it accepts. No library code reads the environment (a test,
//! `tests/env_edge.rs`, fails listing any that does).
//!
//! Binaries (the CLI, examples, benchmarks) call [`init`] first:
//!
//! ```no_run
//! let env = rlx::env::init().unwrap_or_else(|e| {
//!     eprintln!("rlx: {e}");
//!     std::process::exit(2)
//! });
//! // Backends outside this crate take their part explicitly:
//! // rlx_wgpu::WgpuBackend::register_with(env.wgpu);
//! // rlx_cuda::CudaOptions::from_lookup(|n| env.cuda_var(n))
//! # let _ = env;
//! ```
//!
//! Libraries and tests use [`from_lookup`], which never touches the
//! process environment. Every variable is listed in [`VARS`] and in
//! `docs/environment.md` (a test keeps the two in step).

use crate::compile::{set_default_route, set_print_reports};
use rlx_cpu::{CpuBackend, CpuEngine, CpuOptions, ThreadsError};
use rlx_ir::limits::{limits, set_limits, Limits};
use rlx_runtime::options::{
    CoopTile, WgpuAttention, WgpuF16, WgpuOptions, ATTN_SLICES, COOP_BKS, MATMUL_BLOCKS,
};
use rlx_runtime::{DeviceRouter, DispatchOptions};
use std::collections::BTreeMap;
use thiserror::Error;

mod vars;
pub use vars::{Var, OTHER_VARS, VARS};

/// Every `RLX_*` setting of the process, parsed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnvOptions {
    /// `RLX_CPU_ENGINE`, `RLX_CPU_AMX`, `RLX_CPU_BF16DOT`, `RLX_CPU_Q8_ACTIVATIONS`.
    pub cpu: CpuOptions,
    /// `RLX_NUM_THREADS` (unset: all cores).
    pub threads: Option<usize>,
    /// `RLX_PROFILE`: per-op CPU time profile.
    pub profile: bool,
    /// `RLX_WGPU_*`: pass to `rlx_wgpu::WgpuBackend::register_with`.
    pub wgpu: WgpuOptions,
    /// `RLX_CUDA_*` as set (name → value): rlx does not link rlx-cuda
    /// (native only), which parses them: `rlx_cuda::CudaOptions::from_lookup`.
    pub cuda: BTreeMap<String, String>,
    /// `RLX_DEVICE`: the route of `Target::Auto`.
    pub device: Option<DeviceRouter>,
    /// `RLX_DISPATCH`: overrides every compile's dispatch options.
    pub dispatch: Option<DispatchOptions>,
    /// `RLX_DISPATCH_REPORT`: print the dispatch report at every compile.
    pub print_report: bool,
    /// `RLX_MAX_*`: limits to raise or lower (unset fields keep theirs).
    pub limits: LimitOverrides,
}

/// The `RLX_MAX_*` variables that were set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitOverrides {
    pub max_tensor_bytes: Option<u64>,
    pub max_arena_bytes: Option<u64>,
    pub max_nesting_depth: Option<usize>,
    pub max_file_bytes: Option<u64>,
    pub max_rank: Option<usize>,
}

impl LimitOverrides {
    /// `base` with the overrides applied.
    pub fn over(&self, base: Limits) -> Limits {
        Limits {
            max_tensor_bytes: self.max_tensor_bytes.unwrap_or(base.max_tensor_bytes),
            max_arena_bytes: self.max_arena_bytes.unwrap_or(base.max_arena_bytes),
            max_nesting_depth: self.max_nesting_depth.unwrap_or(base.max_nesting_depth),
            max_file_bytes: self.max_file_bytes.unwrap_or(base.max_file_bytes),
            max_rank: self.max_rank.unwrap_or(base.max_rank),
            ..base
        }
    }
}

impl EnvOptions {
    /// The value of `RLX_CUDA_*` variable `name`, if it was set.
    pub fn cuda_var(&self, name: &str) -> Option<String> {
        self.cuda.get(name).cloned()
    }
}

/// A variable that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnvError {
    /// The value does not parse.
    #[error("{var}={value:?} is not valid: expected {expected}")]
    Invalid {
        var: &'static str,
        value: String,
        expected: String,
    },
    /// The thread count could not be set.
    #[error("RLX_NUM_THREADS: {0}")]
    Threads(#[from] ThreadsError),
}

/// Reads and parses the process environment ([`from_lookup`] over it).
pub fn from_env() -> Result<EnvOptions, EnvError> {
    // A value that is not UTF-8 cannot be any accepted value: kept lossy,
    // so the error shows it.
    from_lookup(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
}

/// [`from_env`] then [`apply`]: what a binary calls first. Also warns on
/// stderr about each `RLX_*` variable rlx does not know ([`unknown_vars`]:
/// a misspelt name would otherwise be ignored without a word).
pub fn init() -> Result<EnvOptions, EnvError> {
    for name in unknown_vars() {
        eprintln!("rlx: warning: {name} is not an rlx variable (ignored; see docs/environment.md)");
    }
    let o = from_env()?;
    apply(&o)?;
    Ok(o)
}

/// The `RLX_*` variables of this process that are neither in [`VARS`]
/// nor [`OTHER_VARS`] (those of binaries, tests and scripts), sorted.
pub fn unknown_vars() -> Vec<String> {
    unknown_among(std::env::vars_os().map(|(k, _)| k.to_string_lossy().into_owned()))
}

/// [`unknown_vars`] over the given names.
pub fn unknown_among(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = names
        .into_iter()
        .filter(|n| n.starts_with("RLX_"))
        .filter(|n| !VARS.iter().any(|v| v.name == n) && !OTHER_VARS.contains(&n.as_str()))
        .collect();
    v.sort();
    v
}

/// Parses the variables `lookup` returns (`None`: unset). An empty value
/// counts as unset.
pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<EnvOptions, EnvError> {
    let get = |var: &'static str| lookup(var).filter(|v| !v.trim().is_empty());
    // CPU.
    let mut o = EnvOptions {
        threads: parse(&get, "RLX_NUM_THREADS", "a whole number >= 1", |s| {
            s.parse::<usize>().ok().filter(|&n| n >= 1)
        })?,
        ..EnvOptions::default()
    };
    if let Some(e) = parse(&get, "RLX_CPU_ENGINE", CpuEngine::NAMES, CpuEngine::parse)? {
        o.cpu.engine = e;
    }
    o.cpu.amx = switch(&get, "RLX_CPU_AMX", o.cpu.amx)?;
    o.cpu.bf16_dot = switch(&get, "RLX_CPU_BF16DOT", o.cpu.bf16_dot)?;
    o.cpu.q8_activations = switch(&get, "RLX_CPU_Q8_ACTIVATIONS", o.cpu.q8_activations)?;
    o.cpu.winograd = switch(&get, "RLX_CPU_WINOGRAD", o.cpu.winograd)?;
    o.profile = switch(&get, "RLX_PROFILE", false)?;

    // wgpu.
    let w = &mut o.wgpu;
    if let Some(f) = parse(&get, "RLX_WGPU_F16", "auto, f32", |s| match s {
        "auto" => Some(WgpuF16::Auto),
        "f32" => Some(WgpuF16::HeldAsF32),
        _ => None,
    })? {
        w.f16 = f;
    }
    w.coop = switch(&get, "RLX_WGPU_COOP", w.coop)?;
    w.subgroups = switch(&get, "RLX_WGPU_SUBGROUPS", w.subgroups)?;
    w.attn_coop = switch(&get, "RLX_WGPU_ATTN_COOP", w.attn_coop)?;
    if let Some(a) = parse(&get, "RLX_WGPU_ATTENTION", "auto, row", |s| match s {
        "auto" => Some(WgpuAttention::Auto),
        "row" => Some(WgpuAttention::Row),
        _ => None,
    })? {
        w.attention = a;
    }
    w.attn_slices = one_of(&get, "RLX_WGPU_ATTN_SLICES", &ATTN_SLICES)?;
    w.matmul_block = one_of(&get, "RLX_WGPU_MATMUL_BLOCK", &MATMUL_BLOCKS)?;
    w.split_k = switch(&get, "RLX_WGPU_SPLITK", w.split_k)?;
    w.coop_bk = one_of(&get, "RLX_WGPU_COOP_BK", &COOP_BKS)?;
    w.coop_tile = parse(&get, "RLX_WGPU_COOP_TILE", CoopTile::NAMES, CoopTile::parse)?;

    // CUDA: collected as set; rlx-cuda parses them.
    for v in VARS.iter().filter(|v| v.name.starts_with("RLX_CUDA_")) {
        if let Some(s) = get(v.name) {
            o.cuda.insert(v.name.to_string(), s);
        }
    }

    // Compilation.
    o.device = parse_with(&get, "RLX_DEVICE", DeviceRouter::parse)?;
    o.dispatch = parse_with(&get, "RLX_DISPATCH", DispatchOptions::parse)?;
    o.print_report = switch(&get, "RLX_DISPATCH_REPORT", false)?;

    // Limits.
    const BYTES: &str = "a byte count (e.g. 1073741824, or 1G: K, M, G, T are powers of 1024)";
    const COUNT: &str = "a whole number >= 1";
    let count = |s: &str| s.parse::<usize>().ok().filter(|&n| n >= 1);
    o.limits = LimitOverrides {
        max_tensor_bytes: parse(&get, "RLX_MAX_TENSOR_BYTES", BYTES, bytes)?,
        max_arena_bytes: parse(&get, "RLX_MAX_ARENA_BYTES", BYTES, bytes)?,
        max_nesting_depth: parse(&get, "RLX_MAX_NESTING_DEPTH", COUNT, count)?,
        max_file_bytes: parse(&get, "RLX_MAX_FILE_BYTES", BYTES, bytes)?,
        max_rank: parse(&get, "RLX_MAX_RANK", COUNT, count)?,
    };
    Ok(o)
}

/// Sets the process-wide state `o` describes: limits, the CPU thread pool
/// (a count above the cores or `max_threads` is lowered, with a warning on
/// stderr), the CPU profile, the registered CPU backend's options, the
/// dispatch override, the default route and report printing. Settings
/// that were not given keep what the process has. The wgpu and CUDA
/// options are the caller's to pass to those backends.
pub fn apply(o: &EnvOptions) -> Result<(), EnvError> {
    if o.limits != LimitOverrides::default() {
        set_limits(o.limits.over(limits()));
    }
    if let Some(n) = o.threads {
        rlx_cpu::set_threads(n)?;
    }
    if o.profile {
        rlx_cpu::profile::set_enabled(true);
    }
    // `init` first: its one-time registration must not replace ours later.
    crate::init();
    CpuBackend::register_with(o.cpu);
    if let Some(d) = &o.dispatch {
        rlx_runtime::policy::set_override(Some(d.clone()));
    }
    if let Some(r) = &o.device {
        set_default_route(Some(r.clone()));
    }
    if o.print_report {
        set_print_reports(true);
    }
    Ok(())
}

/// `var` through `f`; `None` when unset; an error listing `expected`.
fn parse<T>(
    get: &impl Fn(&'static str) -> Option<String>,
    var: &'static str,
    expected: &str,
    f: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, EnvError> {
    parse_with(get, var, |s| f(s).ok_or_else(|| expected.to_string()))
}

/// `var` through a parser whose error says what is expected.
fn parse_with<T>(
    get: &impl Fn(&'static str) -> Option<String>,
    var: &'static str,
    f: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, EnvError> {
    let Some(value) = get(var) else {
        return Ok(None);
    };
    f(value.trim())
        .map(Some)
        .map_err(|expected| EnvError::Invalid {
            var,
            value,
            expected,
        })
}

/// A `0`/`1` switch; unset: `default`.
fn switch(
    get: &impl Fn(&'static str) -> Option<String>,
    var: &'static str,
    default: bool,
) -> Result<bool, EnvError> {
    let v = parse(get, var, "0 (off) or 1 (on)", |s| match s {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    })?;
    Ok(v.unwrap_or(default))
}

/// One of the numbers `allowed`.
fn one_of(
    get: &impl Fn(&'static str) -> Option<String>,
    var: &'static str,
    allowed: &[u32],
) -> Result<Option<u32>, EnvError> {
    let expected = allowed
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    parse(get, var, &expected, |s| {
        s.parse().ok().filter(|n| allowed.contains(n))
    })
}

/// A byte count with an optional binary suffix (K, M, G, T).
fn bytes(s: &str) -> Option<u64> {
    let (digits, shift) = match s.as_bytes().last()?.to_ascii_uppercase() {
        b'K' => (&s[..s.len() - 1], 10),
        b'M' => (&s[..s.len() - 1], 20),
        b'G' => (&s[..s.len() - 1], 30),
        b'T' => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests;
