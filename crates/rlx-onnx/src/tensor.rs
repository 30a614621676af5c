//! ONNX tensors (`TensorProto`) and element types as rlx's.

use crate::proto::tensor_proto::DataType;
use crate::proto::TensorProto;
use crate::OnnxError;
use rlx_ir::limits::limits;
use rlx_ir::{DType, HostTensor};

/// The rlx dtype of an ONNX element type, or why there is none.
pub fn dtype_of(t: i32) -> Result<DType, String> {
    let d = DataType::try_from(t).map_err(|_| format!("unknown element type {t}"))?;
    Ok(match d {
        DataType::Float => DType::F32,
        DataType::Double => DType::F64,
        DataType::Float16 => DType::F16,
        DataType::Bfloat16 => DType::BF16,
        DataType::Int8 => DType::I8,
        DataType::Uint8 => DType::U8,
        DataType::Int16 => DType::I16,
        DataType::Uint16 => DType::U16,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Bool => DType::Bool,
        other => {
            return Err(format!(
                "element type {} has no rlx dtype",
                other.as_str_name()
            ))
        }
    })
}

/// ONNX's small float kinds, kept as their codes in `u8` tensors
/// (`ops::float8`): the four 8-bit floats, the scale type E8M0 (a power of
/// two, 0xFF NaN) and the 4-bit E2M1 (packed two per byte in files, one
/// code per `u8` here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F8 {
    E4M3FN,
    E4M3FNUZ,
    E5M2,
    E5M2FNUZ,
    E8M0,
    E2M1,
}

impl F8 {
    /// The float8 kind of an ONNX element type, if it is one.
    pub fn of(t: i32) -> Option<F8> {
        Some(match DataType::try_from(t).ok()? {
            DataType::Float8e4m3fn => F8::E4M3FN,
            DataType::Float8e4m3fnuz => F8::E4M3FNUZ,
            DataType::Float8e5m2 => F8::E5M2,
            DataType::Float8e5m2fnuz => F8::E5M2FNUZ,
            DataType::Float8e8m0 => F8::E8M0,
            DataType::Float4e2m1 => F8::E2M1,
            _ => return None,
        })
    }
    pub fn mantissa_bits(self) -> u32 {
        match self {
            F8::E4M3FN | F8::E4M3FNUZ => 3,
            F8::E8M0 => 0,
            F8::E2M1 => 1,
            _ => 2,
        }
    }
    pub fn bias(self) -> i32 {
        match self {
            F8::E4M3FN => 7,
            F8::E4M3FNUZ => 8,
            F8::E5M2 => 15,
            F8::E5M2FNUZ => 16,
            F8::E8M0 => 127,
            F8::E2M1 => 1,
        }
    }
    /// Bits per code: 4 for E2M1, else 8.
    pub fn bits(self) -> u32 {
        if self == F8::E2M1 {
            4
        } else {
            8
        }
    }
    /// The sign bit (E8M0 has none; its top bit is exponent).
    pub fn sign_bit(self) -> u32 {
        1 << (self.bits() - 1)
    }
    pub fn fnuz(self) -> bool {
        matches!(self, F8::E4M3FNUZ | F8::E5M2FNUZ)
    }
    pub fn max_value(self) -> f64 {
        match self {
            F8::E4M3FN => 448.0,
            F8::E4M3FNUZ => 240.0,
            F8::E5M2 | F8::E5M2FNUZ => 57344.0,
            F8::E8M0 => 2f64.powi(127),
            F8::E2M1 => 6.0,
        }
    }
    /// The code of the largest finite value.
    pub fn max_code(self) -> u8 {
        match self {
            F8::E4M3FN => 0x7E,
            F8::E5M2 => 0x7B,
            F8::E4M3FNUZ | F8::E5M2FNUZ => 0x7F,
            F8::E8M0 => 0xFE,
            F8::E2M1 => 0x7,
        }
    }
    pub fn nan_code(self) -> u8 {
        match self {
            F8::E4M3FN => 0x7F,
            F8::E5M2 => 0x7E,
            F8::E4M3FNUZ | F8::E5M2FNUZ => 0x80,
            F8::E8M0 => 0xFF,
            // E2M1 has no NaN: the reference (ml_dtypes) gives it −0.
            F8::E2M1 => 0x8,
        }
    }
    /// What a value beyond the range becomes without saturation.
    pub fn overflow_code(self) -> u8 {
        match self {
            F8::E5M2 => 0x7C, // inf
            F8::E2M1 => 0x7,  // no inf or NaN: the largest
            k => k.nan_code(),
        }
    }
}

/// ONNX element types rlx keeps in a wider one: float8 as its bits (`u8`),
/// the 4- and 2-bit integers unpacked, one value per `i8` / `u8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Narrow {
    F8(F8),
    Int { bits: u32, signed: bool },
}

impl Narrow {
    pub fn of(t: i32) -> Option<Narrow> {
        if let Some(k) = F8::of(t) {
            return Some(Narrow::F8(k));
        }
        let (bits, signed) = match DataType::try_from(t).ok()? {
            DataType::Int4 => (4, true),
            DataType::Uint4 => (4, false),
            DataType::Int2 => (2, true),
            DataType::Uint2 => (2, false),
            _ => return None,
        };
        Some(Narrow::Int { bits, signed })
    }
    /// Sub-byte types packed in files (lowest bits first): (bits, signed).
    pub fn packed(self) -> Option<(u32, bool)> {
        match self {
            Narrow::Int { bits, signed } => Some((bits, signed)),
            Narrow::F8(F8::E2M1) => Some((4, false)),
            Narrow::F8(_) => None,
        }
    }
    /// The rlx dtype holding it.
    pub fn storage(self) -> DType {
        match self {
            Narrow::Int { signed: true, .. } => DType::I8,
            _ => DType::U8,
        }
    }
}

/// The rlx dtype that holds an ONNX element type: its own, or the wider
/// one of a [`Narrow`] type (with the kind).
pub fn storage_of(t: i32) -> Result<(DType, Option<Narrow>), String> {
    match Narrow::of(t) {
        Some(k) => Ok((k.storage(), Some(k))),
        None => dtype_of(t).map(|d| (d, None)),
    }
}

/// Packed `bits`-wide integers (lowest bits first in each byte) unpacked,
/// sign-extended when `signed`.
fn unpack(bytes: impl Iterator<Item = u8>, n: usize, bits: u32, signed: bool) -> Vec<i64> {
    let per = (8 / bits) as usize;
    let mask = (1u8 << bits) - 1;
    let mut out = Vec::with_capacity(n);
    for b in bytes {
        for k in 0..per {
            if out.len() == n {
                break;
            }
            let v = ((b >> (k as u32 * bits)) & mask) as i64;
            let half = 1i64 << (bits - 1);
            out.push(if signed && v >= half { v - 2 * half } else { v });
        }
    }
    out
}

/// The ONNX element type of an rlx dtype.
pub fn onnx_type(d: DType) -> Option<DataType> {
    Some(match d {
        DType::F32 => DataType::Float,
        DType::F64 => DataType::Double,
        DType::F16 => DataType::Float16,
        DType::BF16 => DataType::Bfloat16,
        DType::I8 => DataType::Int8,
        DType::U8 => DataType::Uint8,
        DType::I16 => DataType::Int16,
        DType::U16 => DataType::Uint16,
        DType::U32 => DataType::Uint32,
        DType::U64 => DataType::Uint64,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::Bool => DataType::Bool,
        _ => return None,
    })
}

fn dims_of(t: &TensorProto) -> Result<Vec<usize>, OnnxError> {
    t.dims
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                OnnxError::Invalid(format!("tensor `{}`: negative dimension {d}", t.name()))
            })
        })
        .collect()
}

/// A `TensorProto` as a host tensor: `raw_data` (little-endian) or the
/// typed fields. External data is refused here (the importer resolves it).
pub fn to_host(t: &TensorProto) -> Result<HostTensor, OnnxError> {
    let name = t.name();
    let bad = |m: String| OnnxError::Invalid(format!("tensor `{name}`: {m}"));
    // float8 tensors hold their bits (one byte each) as u8; 4- and 2-bit
    // integers are unpacked.
    let (dtype, narrow) = storage_of(t.data_type()).map_err(bad)?;
    let dims = dims_of(t)?;
    limits()
        .check_tensor_shape(&format!("tensor `{name}`"), dtype, &dims)
        .map_err(|e| OnnxError::Ir(e.into()))?;
    if t.data_location() == crate::proto::tensor_proto::DataLocation::External {
        return Err(bad(
            "its data is in an external file: import the model with `import` / \
             `import_model`, which read it through ImportOptions::external"
                .into(),
        ));
    }
    let n: usize = dims.iter().product();
    let raw = t.raw_data();
    if let Some((bits, signed)) = narrow.and_then(Narrow::packed) {
        let need = (n * bits as usize).div_ceil(8);
        let vals = if !raw.is_empty() || n == 0 {
            if raw.len() != need {
                return Err(bad(format!(
                    "raw_data holds {} bytes, {n} packed elements need {need}",
                    raw.len()
                )));
            }
            unpack(raw.iter().copied(), n, bits, signed)
        } else {
            if t.int32_data.len() != need {
                return Err(bad(format!(
                    "{} packed values for {n} elements",
                    t.int32_data.len()
                )));
            }
            unpack(t.int32_data.iter().map(|&v| v as u8), n, bits, signed)
        };
        return HostTensor::from_i64(dtype, dims, vals).map_err(OnnxError::from);
    }
    let floats =
        |v: Vec<f64>| HostTensor::from_f64(dtype, dims.clone(), v).map_err(OnnxError::from);
    let ints = |v: Vec<i64>| HostTensor::from_i64(dtype, dims.clone(), v).map_err(OnnxError::from);
    if !raw.is_empty() || n == 0 {
        // Every dtype held here is plain: its elements' bytes as they are
        // (a non-zero bool byte is true).
        let need = dtype.storage_bytes(n).unwrap_or(usize::MAX);
        if raw.len() != need {
            return Err(bad(format!(
                "raw_data holds {} bytes, {n} elements of {dtype} need {need}",
                raw.len()
            )));
        }
        return HostTensor::from_le_bytes(dtype, dims, raw).map_err(OnnxError::from);
    }
    // Typed fields: float_data (f32), double_data, int64_data, and
    // int32_data for every narrower integer, bool and the 16-bit floats
    // (which it holds as their bit patterns).
    let count = |len: usize| {
        if len == n {
            Ok(())
        } else {
            Err(bad(format!("{len} values for {n} elements")))
        }
    };
    match dtype {
        DType::F32 => {
            count(t.float_data.len())?;
            floats(t.float_data.iter().map(|&x| x as f64).collect())
        }
        DType::F64 => {
            count(t.double_data.len())?;
            floats(t.double_data.clone())
        }
        DType::I64 => {
            count(t.int64_data.len())?;
            ints(t.int64_data.clone())
        }
        // uint32 and uint64 values live in uint64_data.
        DType::U32 | DType::U64 => {
            count(t.uint64_data.len())?;
            ints(t.uint64_data.iter().map(|&x| x as i64).collect())
        }
        DType::F16 | DType::BF16 => {
            count(t.int32_data.len())?;
            let bits = t.int32_data.iter().map(|&b| b as u16);
            floats(if dtype == DType::F16 {
                bits.map(|b| half::f16::from_bits(b).to_f64()).collect()
            } else {
                bits.map(|b| half::bf16::from_bits(b).to_f64()).collect()
            })
        }
        _ => {
            count(t.int32_data.len())?;
            ints(t.int32_data.iter().map(|&x| x as i64).collect())
        }
    }
}
