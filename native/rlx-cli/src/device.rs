//! The CLI's edge: the environment read once, the device a command runs
//! on, and the CPU thread count.

use crate::out::{CliError, CliResult};
use crate::RunFlags;
use std::path::PathBuf;

/// What the environment says, read once per command; a bad value is an
/// error naming the variable.
pub struct Env {
    /// RLX_DEVICE: the default device of commands that run a model.
    pub device: Option<String>,
    /// RLX_NUM_THREADS.
    pub threads: Option<usize>,
    /// RLX_HOME: the model cache (default: the user's cache dir + /rlx).
    pub home: PathBuf,
    /// RLX_MINILM: a MiniLM model directory that overrides the cache.
    pub minilm: Option<PathBuf>,
}

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
        let threads = match var("RLX_NUM_THREADS")? {
            None => None,
            Some(v) => Some(match v.trim().parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(CliError::usage(format!(
                        "RLX_NUM_THREADS={v:?}: expected a positive whole number of threads"
                    )))
                }
            }),
        };
        let home = match var("RLX_HOME")? {
            Some(h) => PathBuf::from(h),
            None => default_home(),
        };
        Ok(Env {
            device: var("RLX_DEVICE")?,
            threads,
            home,
            minilm: var("RLX_MINILM")?.map(PathBuf::from),
        })
    }
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
    let name = canonical(name.trim());
    if name == "cuda" {
        register_cuda()?;
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
fn register_cuda() -> CliResult {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| rlx_cuda::CudaBackend::register().map_err(|e| e.to_string()))
        .clone()
        .map_err(|e| {
            CliError::new(
                crate::out::Exit::Unsupported,
                format!("device cuda is not available here: {e}"),
            )
        })
}

#[cfg(not(feature = "cuda"))]
fn register_cuda() -> CliResult {
    Err(CliError::new(
        crate::out::Exit::Unsupported,
        "this rlx was built without CUDA (rebuild with `--features cuda`)",
    ))
}

/// Sets the CPU worker threads for this process: `--threads`, else
/// RLX_NUM_THREADS, else every core. rlx-cpu clamps a request above the
/// machine's cores with a warning (spawning 100,000 threads would hang).
pub fn apply_threads(flags: &RunFlags, env: &Env) -> CliResult {
    let Some(want) = flags.threads.or(env.threads) else {
        return Ok(());
    };
    let from = if flags.threads.is_some() {
        "--threads"
    } else {
        "RLX_NUM_THREADS"
    };
    rlx_cpu::set_threads(want)
        .map(|_| ())
        .map_err(|e| CliError::usage(format!("{from} {want}: {e}")))
}
