//! On/off switches read from the environment (A/B knobs), one parser.

use crate::error::CudaError;

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
