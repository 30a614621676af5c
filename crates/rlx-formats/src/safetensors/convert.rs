//! Element conversion between safetensors bytes (little-endian, row-major)
//! and rlx [`TensorData`].
//!
//! | safetensors | rlx | how |
//! |---|---|---|
//! | F64 F32 F16 BF16 I64 I32 I16 I8 U8 U16 U32 U64 C64 | same | bit-exact copy |
//! | BOOL | Bool | any non-zero byte is `true` (as numpy's `astype(bool)`) |
//! | F8_E4M3, F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ | F16 | every value is exact in f16 |
//! | F8_E8M0 | F32 | powers of two 2^-127..2^127 are exact in f32 |
//! | F4, F6_E2M3, F6_E3M2 | — | [`UnsupportedDtype`](crate::FormatError::UnsupportedDtype) |
//!
//! Writing goes the other way for the fourteen bit-exact dtypes only.

use half::f16;
use rlx_ir::{DType, HostTensor, TensorData};
use st::Dtype;

/// The rlx dtype a safetensors dtype loads as, or `None` when rlx cannot
/// hold it.
pub fn loaded_dtype(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::F64 => DType::F64,
        Dtype::F32 => DType::F32,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I64 => DType::I64,
        Dtype::I32 => DType::I32,
        Dtype::I16 => DType::I16,
        Dtype::I8 => DType::I8,
        Dtype::U8 => DType::U8,
        Dtype::BOOL => DType::Bool,
        Dtype::C64 => DType::C64,
        Dtype::U16 => DType::U16,
        Dtype::U32 => DType::U32,
        Dtype::U64 => DType::U64,
        Dtype::F8_E4M3 | Dtype::F8_E5M2 | Dtype::F8_E4M3FNUZ | Dtype::F8_E5M2FNUZ => DType::F16,
        Dtype::F8_E8M0 => DType::F32,
        _ => return None,
    })
}

/// The safetensors dtype an rlx dtype is written as, or `None` (packed and
/// block-quantized dtypes have no safetensors equivalent).
pub fn stored_dtype(d: DType) -> Option<Dtype> {
    Some(match d {
        DType::F64 => Dtype::F64,
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I64 => Dtype::I64,
        DType::I32 => Dtype::I32,
        DType::I16 => Dtype::I16,
        DType::I8 => Dtype::I8,
        DType::U8 => Dtype::U8,
        DType::U16 => Dtype::U16,
        DType::U32 => Dtype::U32,
        DType::U64 => Dtype::U64,
        DType::Bool => Dtype::BOOL,
        DType::C64 => Dtype::C64,
        _ => return None,
    })
}

/// Why [`decode`] failed; the caller adds the file and tensor names.
pub(crate) enum DecodeError {
    Unsupported,
    Length { expected: usize },
    Ir(String),
}

/// Decode the little-endian bytes of one tensor.
pub(crate) fn decode(
    dtype: Dtype,
    shape: &[usize],
    bytes: &[u8],
) -> Result<HostTensor, DecodeError> {
    let numel = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or(DecodeError::Length {
            expected: usize::MAX,
        })?;
    let expected =
        numel
            .checked_mul(dtype.bitsize())
            .map(|b| b / 8)
            .ok_or(DecodeError::Length {
                expected: usize::MAX,
            })?;
    let rlx = loaded_dtype(dtype).ok_or(DecodeError::Unsupported)?;
    if bytes.len() != expected || !dtype.bitsize().is_multiple_of(8) {
        return Err(DecodeError::Length { expected });
    }
    let data: TensorData = match dtype {
        Dtype::F8_E4M3 => fp8(bytes, E4M3FN),
        Dtype::F8_E5M2 => fp8(bytes, E5M2),
        Dtype::F8_E4M3FNUZ => fp8(bytes, E4M3FNUZ),
        Dtype::F8_E5M2FNUZ => fp8(bytes, E5M2FNUZ),
        Dtype::F8_E8M0 => bytes.iter().map(|&b| e8m0(b)).collect::<Vec<_>>().into(),
        // Stored as rlx holds it: the bytes as they are (a non-zero BOOL
        // byte is true).
        _ => {
            return HostTensor::from_le_bytes(rlx, shape.to_vec(), bytes)
                .map_err(|e| DecodeError::Ir(e.to_string()))
        }
    };
    HostTensor::new(rlx, shape.to_vec(), data).map_err(|e| DecodeError::Ir(e.to_string()))
}

/// Little-endian bytes of a tensor, for writing. `None` for packed data.
pub(crate) fn encode(t: &HostTensor) -> Option<Vec<u8>> {
    (!matches!(t.data(), TensorData::Packed(_))).then(|| t.to_le_bytes())
}

// ---- 8-bit floats -------------------------------------------------------

/// An 8-bit float layout: 1 sign bit, `exp` exponent bits, `man` mantissa
/// bits, exponent `bias`, and how it spells infinity and NaN.
#[derive(Clone, Copy)]
struct Fp8 {
    exp: u32,
    man: u32,
    bias: i32,
    special: Special,
}

#[derive(Clone, Copy)]
enum Special {
    /// IEEE-style: exponent all ones is ±inf (mantissa 0) or NaN (E5M2).
    Ieee,
    /// "FN": no infinities; only exponent and mantissa all ones is NaN (E4M3FN).
    Fn,
    /// "FNUZ": no infinities, no negative zero; 0x80 is the only NaN.
    Fnuz,
}

const E4M3FN: Fp8 = Fp8 {
    exp: 4,
    man: 3,
    bias: 7,
    special: Special::Fn,
};
const E5M2: Fp8 = Fp8 {
    exp: 5,
    man: 2,
    bias: 15,
    special: Special::Ieee,
};
const E4M3FNUZ: Fp8 = Fp8 {
    exp: 4,
    man: 3,
    bias: 8,
    special: Special::Fnuz,
};
const E5M2FNUZ: Fp8 = Fp8 {
    exp: 5,
    man: 2,
    bias: 16,
    special: Special::Fnuz,
};

/// 2^k as an f64 (exact for the small exponents used here).
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

fn fp8_value(b: u8, f: Fp8) -> f64 {
    let negative = b & 0x80 != 0;
    let e = u32::from(b >> f.man) & ((1 << f.exp) - 1);
    let m = u32::from(b) & ((1 << f.man) - 1);
    let e_max = (1 << f.exp) - 1;
    let m_max = (1 << f.man) - 1;
    match f.special {
        Special::Fnuz if b == 0x80 => return f64::NAN,
        Special::Ieee if e == e_max => {
            return match (m, negative) {
                (0, false) => f64::INFINITY,
                (0, true) => f64::NEG_INFINITY,
                _ => f64::NAN,
            }
        }
        Special::Fn if e == e_max && m == m_max => return f64::NAN,
        _ => {}
    }
    let frac = f64::from(m) / f64::from(1u32 << f.man);
    let mag = if e == 0 {
        frac * pow2(1 - f.bias)
    } else {
        (1.0 + frac) * pow2(e as i32 - f.bias)
    };
    if negative {
        -mag
    } else {
        mag
    }
}

fn fp8(bytes: &[u8], f: Fp8) -> TensorData {
    // Every value of these formats is exactly representable in f16.
    bytes
        .iter()
        .map(|&b| f16::from_f64(fp8_value(b, f)))
        .collect::<Vec<_>>()
        .into()
}

/// OCP E8M0 scale: 2^(b - 127); 0xFF is NaN.
fn e8m0(b: u8) -> f32 {
    if b == 0xff {
        f32::NAN
    } else {
        pow2(i32::from(b) - 127) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_known_values() {
        assert_eq!(fp8_value(0x7e, E4M3FN), 448.0);
        assert!(fp8_value(0x7f, E4M3FN).is_nan());
        assert_eq!(fp8_value(0x01, E4M3FN), pow2(-9));
        assert_eq!(fp8_value(0x7b, E5M2), 57344.0);
        assert_eq!(fp8_value(0x7c, E5M2), f64::INFINITY);
        assert!(fp8_value(0x80, E4M3FNUZ).is_nan());
        assert_eq!(fp8_value(0x7f, E4M3FNUZ), 240.0);
        assert_eq!(e8m0(127), 1.0);
        assert_eq!(e8m0(0), f32::from_bits(1 << 22));
    }

    #[test]
    fn every_written_dtype_reads_back_as_itself() {
        for d in DType::ALL {
            if let Some(s) = stored_dtype(d) {
                assert_eq!(loaded_dtype(s), Some(d));
            }
        }
    }
}
