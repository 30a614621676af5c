//! The CLI's edge: the environment read once, the device a command runs
//! on, and the CPU thread count.

use crate::out::{CliError, CliResult};
use crate::RunFlags;
use std::path::PathBuf;

/// What the environment says, read once per command through rlx's edge
/// (`rlx::env`, every `RLX_*` variable); a bad value is a usage error
/// naming the variable.
pub struct Env {
    /// Every `RLX_*` setting of rlx, parsed.
    pub rlx: rlx::env::EnvOptions,
    /// RLX_DEVICE as written (a single device; chains are for `dispatch`).
    pub device: Option<String>,
    /// RLX_HOME: the model cache (default: the user's cache dir + /rlx).
    pub home: PathBuf,
    /// RLX_MINILM: a MiniLM model directory that overrides the cache.
    pub minilm: Option<PathBuf>,
}

/// The CLI's own variables (rlx's are in `rlx::env::VARS`).
fn var(name: &str) -> CliResult<Option<String>> {
    match std::env::var(name) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(CliError::usage(format!(
            "environment variable {name} is not valid UTF-8"
        ))),
    }
}

impl Env {
    pub fn read() -> CliResult<Env> {
        let rlx = rlx::env::from_env().map_err(|e| CliError::usage(e.to_string()))?;
        let home = match var("RLX_HOME")? {
            Some(h) => PathBuf::from(h),
            None => default_home(),
        };
        Ok(Env {
            rlx,
            device: var("RLX_DEVICE")?,
            home,
            minilm: var("RLX_MINILM")?.map(PathBuf::from),
        })
    }

    /// Sets what the environment (and `--threads`, which wins over
    /// RLX_NUM_THREADS) says for the process: limits, the CPU thread pool,
    /// the CPU backend's options, the GPU backends' options.
    pub fn apply(&mut self, threads: Option<usize>) -> CliResult {
        // Memory bounds from the machine first; RLX_MAX_* then override.
        if let Some(avail) = available_memory() {
            let mut l = rlx::ir::limits::Limits::with_available_memory(avail);
            let now = rlx::ir::limits();
            (l.max_nesting_depth, l.max_file_bytes) = (now.max_nesting_depth, now.max_file_bytes);
            (l.max_threads, l.max_rank) = (now.max_threads, now.max_rank);
            rlx::ir::limits::set_limits(l);
        }
        if threads.is_some() {
            self.rlx.threads = threads;
        }
        let from = if threads.is_some() {
            "--threads"
        } else {
            "RLX_NUM_THREADS"
        };
        rlx::env::apply(&self.rlx).map_err(|e| match e {
            rlx::env::EnvError::Threads(t) => CliError::usage(format!("{from}: {t}")),
            e => CliError::usage(e.to_string()),
        })?;
        rlx_wgpu::register_with(self.rlx.wgpu);
        Ok(())
    }
}

/// `MemAvailable` of `/proc/meminfo`, in bytes (Linux; `None` elsewhere).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `$XDG_CACHE_HOME/rlx`, else `~/.cache/rlx`, else `./.rlx`.
fn default_home() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("rlx");
    }
    match std::env::var_os("HOME").filter(|x| !x.is_empty()) {
        Some(h) => PathBuf::from(h).join(".cache").join("rlx"),
        None => PathBuf::from(".rlx"),
    }
}

/// Device names the CLI accepts beyond rlx's own (`gl` for OpenGL).
fn canonical(name: &str) -> &str {
    match name {
        "gl" => "opengl",
        "gpu" | "webgpu" | "vulkan" | "opengl" | "metal" | "directx" | "cuda" | "cpu" => name,
        other => other,
    }
}

/// The device of a command: `--device`, else RLX_DEVICE, else the CPU.
/// CUDA is registered only when asked for, so a machine without a GPU
/// pays nothing for it.
pub fn resolve(flags: &RunFlags, env: &Env) -> CliResult<rlx::Device> {
    let (name, from) = match (&flags.device, &env.device) {
        (Some(d), _) => (d.as_str(), "--device"),
        (None, Some(d)) => (d.as_str(), "RLX_DEVICE"),
        (None, None) => return Ok(rlx::Device::Cpu),
    };
    named(name, from, env)
}

/// One device named on the command line (`--device` of a command that
/// takes several).
pub fn parse_one(name: &str, env: &Env) -> CliResult<rlx::Device> {
    named(name, "--device", env)
}

/// The device `name` (given by `from`), registering CUDA when it is
/// named; a device this build lacks is an error listing those it has.
fn named(name: &str, from: &str, env: &Env) -> CliResult<rlx::Device> {
    let name = canonical(name.trim());
    if name == "cuda" {
        register_cuda(env)?;
    }
    let dev = rlx::Device::parse(name).map_err(|e| CliError::usage(format!("{from}: {e}")))?;
    // A known device this build lacks is refused here, by name, instead of
    // failing later inside compile.
    rlx::init();
    let have: Vec<rlx::Device> = rlx::custom::backends_sorted()
        .iter()
        .map(|b| b.device())
        .collect();
    if !have.contains(&dev) {
        let names: Vec<&str> = have.iter().map(|d| d.name()).collect();
        return Err(CliError::new(
            crate::out::Exit::Unsupported,
            format!(
                "{from}: device `{dev}` is not in this build (it has: {})",
                names.join(", ")
            ),
        ));
    }
    Ok(dev)
}

#[cfg(feature = "cuda")]
fn register_cuda(env: &Env) -> CliResult {
    let opts = rlx_cuda::CudaOptions::from_lookup(|n| env.rlx.cuda_var(n))
        .map_err(|e| CliError::usage(e.to_string()))?;
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        rlx_cuda::CudaBackend::with_options(0, opts)
            .map(|b| rlx::custom::register_backend(std::sync::Arc::new(b)))
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(|e| {
        CliError::new(
            crate::out::Exit::Unsupported,
            format!("device cuda is not available here: {e}"),
        )
    })
}

#[cfg(not(feature = "cuda"))]
fn register_cuda(_: &Env) -> CliResult {
    Err(CliError::new(
        crate::out::Exit::Unsupported,
        "this rlx was built without CUDA (rebuild with `--features cuda`)",
    ))
}
