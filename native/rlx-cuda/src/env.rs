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
