//! The crate's edge: the values of the `RLX_CUDA_*` variables parsed into
//! [`CudaOptions`], each bad value a typed error naming the variable.
//! Nothing here (or anywhere in the crate) reads the process environment:
//! the caller's lookup does — `rlx::env` collects the variables, so a
//! binary calls `CudaOptions::from_lookup(|n| env.cuda_var(n))`.

use crate::error::CudaError;
use crate::options::CudaOptions;
use crate::{hgemm, lt_search, sgemm, tune};

impl CudaOptions {
    /// The default options with each `RLX_CUDA_*` variable `lookup` returns
    /// (`None`: unset) applied.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<CudaOptions, CudaError> {
        let get = |name: &str| lookup(name);
        let d = CudaOptions::default();
        Ok(CudaOptions {
            sgemm: sgemm::parse_mode(get(sgemm::SGEMM_ENV).as_deref())?,
            hgemm: hgemm::parse_mode(get(hgemm::HGEMM_ENV).as_deref())?,
            tune_log: switch(
                tune::TUNE_LOG_ENV,
                get(tune::TUNE_LOG_ENV).as_deref(),
                false,
            )?,
            lt_search: switch(
                lt_search::SEARCH_ENV,
                get(lt_search::SEARCH_ENV).as_deref(),
                false,
            )?,
            ..d
        })
    }

    /// The names of the variables [`CudaOptions::from_lookup`] reads.
    pub const VARS: [&'static str; 4] = [
        sgemm::SGEMM_ENV,
        hgemm::HGEMM_ENV,
        tune::TUNE_LOG_ENV,
        lt_search::SEARCH_ENV,
    ];
}

/// The value of the switch `name`: `1` on, `0` off, unset or empty
/// `default`; anything else is a typed error naming the variable.
pub fn switch(name: &str, v: Option<&str>, default: bool) -> Result<bool, CudaError> {
    match v.map(str::trim) {
        None | Some("") => Ok(default),
        Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(other) => Err(CudaError::Input(format!(
            "{name} must be 0 or 1, got {other:?}"
        ))),
    }
}

/// How one of our own kernel families competes with the vendor library's
/// (`RLX_CUDA_SGEMM`, `RLX_CUDA_HGEMM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelMode<K> {
    /// Timed with the library's candidates; the fastest runs.
    Auto,
    /// The library only.
    Off,
    /// This kernel runs wherever it can, untimed (tests).
    Force(K),
}

/// The [`KernelMode`] of variable `name` set to `v`: `auto` or `1`, `0`,
/// unset or empty `default`, else the kernel `find` recognizes; anything
/// else is a typed error listing `expected`.
pub fn kernel_mode<K>(
    name: &str,
    v: Option<&str>,
    default: KernelMode<K>,
    find: impl Fn(&str) -> Option<K>,
    expected: &str,
) -> Result<KernelMode<K>, CudaError> {
    match v.map(str::trim) {
        None | Some("") => Ok(default),
        Some("auto") | Some("1") => Ok(KernelMode::Auto),
        Some("0") => Ok(KernelMode::Off),
        Some(v) => find(v).map(KernelMode::Force).ok_or_else(|| {
            CudaError::Input(format!("{name} must be auto, 0, or {expected}, got {v:?}"))
        }),
    }
}
