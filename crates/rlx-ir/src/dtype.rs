//! Element types: plain numeric types, packed 4-bit integers, and the
//! block-quantized storage types consumed by quantized matmul.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    I8,
    U8,
    I16,
    I32,
    I64,
    /// Unsigned integers (ONNX's UINT16/32/64). Reference kernels compute
    /// in i64: u16 and u32 exactly; u64 arithmetic wraps as it should, and
    /// kernels that order or divide u64 values handle them unsigned or
    /// refuse values above `i64::MAX` with an error.
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    /// Complex number of two f32 (re, im).
    C64,
    /// Signed 4-bit integers, two per byte (low nibble first).
    I4,
    /// Unsigned 4-bit integers, two per byte (low nibble first).
    U4,
    /// GGUF block quantization schemes (32-element blocks).
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    /// GGUF k-quants (256-element super-blocks).
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    /// OCP microscaling formats: 32 elements share one E8M0 scale.
    Mxfp4,
    Mxfp8,
}

/// How a dtype is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// One element per `size` bytes.
    Plain { size: usize },
    /// `block` elements packed into `bytes` bytes.
    Block { block: usize, bytes: usize },
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 28] = [
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::I4,
        DType::U4,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q2K,
        DType::Q3K,
        DType::Q4K,
        DType::Q5K,
        DType::Q6K,
        DType::Mxfp4,
        DType::Mxfp8,
    ];

    /// The packed and block-quantized dtypes (the tail of [`DType::ALL`]).
    pub const PACKED: &'static [DType] = DType::ALL.split_at(14).1;

    /// The name used in the text IR and JSON.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "c64",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::Q4_0 => "q4_0",
            DType::Q4_1 => "q4_1",
            DType::Q5_0 => "q5_0",
            DType::Q5_1 => "q5_1",
            DType::Q8_0 => "q8_0",
            DType::Q2K => "q2_k",
            DType::Q3K => "q3_k",
            DType::Q4K => "q4_k",
            DType::Q5K => "q5_k",
            DType::Q6K => "q6_k",
            DType::Mxfp4 => "mxfp4",
            DType::Mxfp8 => "mxfp8",
        }
    }

    /// The values an integer (or bool, or packed 4-bit) dtype holds, as
    /// an inclusive range; `None` for floats and block types. The one
    /// table behind literal range checks and saturating casts.
    pub fn int_range(self) -> Option<(i64, i64)> {
        use DType::*;
        Some(match self {
            Bool => (0, 1),
            I8 => (i8::MIN as i64, i8::MAX as i64),
            U8 => (0, u8::MAX as i64),
            I16 => (i16::MIN as i64, i16::MAX as i64),
            I32 => (i32::MIN as i64, i32::MAX as i64),
            I64 => (i64::MIN, i64::MAX),
            U16 => (0, u16::MAX as i64),
            U32 => (0, u32::MAX as i64),
            // As far as an i64 reaches: literals and saturating casts above
            // that are not expressible in this table (see `HostTensor`).
            U64 => (0, i64::MAX),
            I4 => (-8, 7),
            U4 => (0, 15),
            _ => return None,
        })
    }

    pub fn storage(self) -> Storage {
        use DType::*;
        match self {
            Bool | I8 | U8 => Storage::Plain { size: 1 },
            I16 | U16 | F16 | BF16 => Storage::Plain { size: 2 },
            I32 | U32 | F32 => Storage::Plain { size: 4 },
            I64 | U64 | F64 | C64 => Storage::Plain { size: 8 },
            I4 | U4 => Storage::Block { block: 2, bytes: 1 },
            Q4_0 => Storage::Block {
                block: 32,
                bytes: 18,
            },
            Q4_1 => Storage::Block {
                block: 32,
                bytes: 20,
            },
            Q5_0 => Storage::Block {
                block: 32,
                bytes: 22,
            },
            Q5_1 => Storage::Block {
                block: 32,
                bytes: 24,
            },
            Q8_0 => Storage::Block {
                block: 32,
                bytes: 34,
            },
            Q2K => Storage::Block {
                block: 256,
                bytes: 84,
            },
            Q3K => Storage::Block {
                block: 256,
                bytes: 110,
            },
            Q4K => Storage::Block {
                block: 256,
                bytes: 144,
            },
            Q5K => Storage::Block {
                block: 256,
                bytes: 176,
            },
            Q6K => Storage::Block {
                block: 256,
                bytes: 210,
            },
            Mxfp4 => Storage::Block {
                block: 32,
                bytes: 17,
            },
            Mxfp8 => Storage::Block {
                block: 32,
                bytes: 33,
            },
        }
    }

    /// Bytes needed for `numel` elements, or `None` when `numel` is not a
    /// whole number of blocks.
    pub fn storage_bytes(self, numel: usize) -> Option<usize> {
        match self.storage() {
            Storage::Plain { size } => Some(size * numel),
            Storage::Block { block, bytes } => {
                numel.is_multiple_of(block).then_some(numel / block * bytes)
            }
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8
                | DType::U8
                | DType::I16
                | DType::I32
                | DType::I64
                | DType::U16
                | DType::U32
                | DType::U64
        )
    }
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }
    pub fn is_complex(self) -> bool {
        self == DType::C64
    }
    /// A block-quantized or packed type: usable only by quantized ops.
    pub fn is_quantized(self) -> bool {
        matches!(self.storage(), Storage::Block { .. })
    }
    /// Plain numeric types (not bool, not complex, not quantized).
    pub fn is_numeric(self) -> bool {
        self.is_float() || self.is_int()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for DType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for DType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("unknown dtype `{s}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{}\"", d.name()));
        }
    }

    #[test]
    fn packed_is_exactly_the_quantized_dtypes() {
        let want: Vec<DType> = DType::ALL
            .iter()
            .copied()
            .filter(|d| d.is_quantized())
            .collect();
        assert_eq!(DType::PACKED, want.as_slice());
    }

    #[test]
    fn block_sizes_match_gguf() {
        // ggml's documented block layouts: Q4_0 = f16 scale + 16 bytes of nibbles.
        assert_eq!(DType::Q4_0.storage_bytes(64), Some(36));
        assert_eq!(DType::Q6K.storage_bytes(256), Some(210));
        assert_eq!(DType::Q4_0.storage_bytes(33), None);
    }
}
