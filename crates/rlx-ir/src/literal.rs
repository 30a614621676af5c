//! Range checks for the elements of tensor literals (the text IR's
//! `tensor<...> [...]` and the JSON form's `data`).
//!
//! Kernels narrow computed values with the documented casting rules of
//! [`HostTensor::from_i64`](crate::HostTensor::from_i64) (integers wrap).
//! A literal is different: the author wrote the number, so `i8 1000`
//! silently becoming −24, `bool 2` becoming `true`, or `f16 70000.0`
//! becoming `inf` would be a wrong program nobody asked for. Every literal
//! element is checked here first, and one that does not fit is an error
//! naming the dtype, the value and the range.

use crate::dtype::DType;
use half::{bf16, f16};
use thiserror::Error;

/// A literal element does not fit its dtype.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{value} is out of range for {dtype} ({range})")]
pub struct LiteralError {
    /// The dtype of the tensor the literal belongs to.
    pub dtype: DType,
    /// The element as written (or as read from JSON).
    pub value: String,
    /// The values the dtype holds.
    pub range: String,
}

fn out_of_range(dtype: DType, value: impl ToString, range: impl Into<String>) -> LiteralError {
    LiteralError {
        dtype,
        value: value.to_string(),
        range: range.into(),
    }
}

/// Check an integer element `v` of a tensor of `dtype`. Float dtypes take
/// any integer that does not overflow them to infinity.
pub fn check_int(dtype: DType, v: i64) -> Result<(), LiteralError> {
    if dtype.is_float() || dtype == DType::C64 {
        return check_float(dtype, v as f64);
    }
    // Packed and block dtypes are written as hex strings, not numbers.
    let Some((lo, hi)) = dtype.int_range().filter(|_| !dtype.is_quantized()) else {
        return Ok(());
    };
    if (lo..=hi).contains(&v) {
        Ok(())
    } else if dtype == DType::Bool {
        Err(out_of_range(dtype, v, "0 or 1, or false/true"))
    } else if dtype == DType::U64 {
        // Its values above i64::MAX arrive as u64, not through here.
        Err(out_of_range(dtype, v, format!("0..={}", u64::MAX)))
    } else {
        Err(out_of_range(dtype, v, format!("{lo}..={hi}")))
    }
}

/// Check a float element `v` of a tensor of `dtype` (c64 parts are f32):
/// a finite value that rounds to infinity in the dtype is out of range.
/// NaN and infinities are kept: they were written as `nan` / `inf`.
pub fn check_float(dtype: DType, v: f64) -> Result<(), LiteralError> {
    if !v.is_finite() {
        return Ok(());
    }
    let (overflows, range) = match dtype {
        DType::F16 => (f16::from_f64(v).is_infinite(), "finite f16: |x| < 65520"),
        DType::BF16 => (
            bf16::from_f64(v).is_infinite(),
            "finite bf16: |x| < 3.3961e38",
        ),
        DType::F32 | DType::C64 => ((v as f32).is_infinite(), "finite f32: |x| < 3.4028236e38"),
        _ => (false, ""),
    };
    if overflows {
        Err(out_of_range(dtype, format!("{v:?}"), range))
    } else {
        Ok(())
    }
}

/// An integer above `i64::MAX`: out of range for every dtype but u64.
pub(crate) fn u64_out_of_range(dtype: DType, v: u64) -> LiteralError {
    out_of_range(dtype, v, "at most i64::MAX")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_ranges_are_the_dtypes() {
        for (d, ok, bad) in [
            (DType::Bool, [0, 1], [2, -1]),
            (DType::I8, [-128, 127], [128, -129]),
            (DType::U8, [0, 255], [256, -1]),
            (DType::I16, [-32768, 32767], [32768, -32769]),
            (
                DType::I32,
                [i32::MIN as i64, i32::MAX as i64],
                [1 << 31, -(1 << 31) - 1],
            ),
            (DType::U16, [0, 65535], [65536, -1]),
            (DType::U32, [0, u32::MAX as i64], [1 << 32, -1]),
            (DType::U64, [0, i64::MAX], [-1, i64::MIN]),
        ] {
            for v in ok {
                assert_eq!(check_int(d, v), Ok(()), "{d} {v}");
            }
            for v in bad {
                let e = check_int(d, v).unwrap_err();
                assert_eq!((e.dtype, e.value.clone()), (d, v.to_string()));
                assert!(e.to_string().contains("out of range for"), "{e}");
            }
        }
        assert_eq!(check_int(DType::I64, i64::MIN), Ok(()));
    }

    #[test]
    fn floats_that_round_to_infinity_are_out_of_range() {
        assert_eq!(check_float(DType::F16, 65504.0), Ok(()));
        assert_eq!(check_float(DType::F16, 65519.0), Ok(()));
        assert!(check_float(DType::F16, 65520.0).is_err());
        assert!(check_int(DType::F16, 70000).is_err());
        assert!(check_float(DType::BF16, 1e39).is_err());
        assert!(check_float(DType::F32, -1e39).is_err());
        assert!(check_float(DType::C64, 1e39).is_err());
        assert_eq!(check_float(DType::F64, 1e300), Ok(()));
        assert_eq!(check_float(DType::F16, f64::INFINITY), Ok(()));
        assert_eq!(check_float(DType::F16, f64::NAN), Ok(()));
    }
}
