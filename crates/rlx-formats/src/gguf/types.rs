//! The ggml tensor types a GGUF file can declare: id, name, block layout,
//! and the rlx dtype each loads as.

use rlx_ir::DType;

macro_rules! ggml_types {
    ($($variant:ident = $id:literal, $name:literal, $block:literal, $bytes:literal, $dtype:expr;)*) => {
        /// A ggml tensor type: every type `gguf==0.19.0` knows
        /// (`GGMLQuantizationType`), with its numeric id in the file.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types)]
        pub enum GgmlType {
            $($variant,)*
        }

        impl GgmlType {
            /// Every type, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant,)*];

            /// The type with this id, or `None` for an id gguf does not know.
            pub fn from_id(id: u32) -> Option<GgmlType> {
                match id {
                    $($id => Some(GgmlType::$variant),)*
                    _ => None,
                }
            }

            /// The id stored in the file.
            pub fn id(self) -> u32 {
                match self {
                    $(GgmlType::$variant => $id,)*
                }
            }

            /// The name as gguf and llama.cpp print it (`Q4_K`, `F16`).
            pub fn name(self) -> &'static str {
                match self {
                    $(GgmlType::$variant => $name,)*
                }
            }

            /// (elements per block, bytes per block); (1, size) for plain types.
            pub fn block(self) -> (usize, usize) {
                match self {
                    $(GgmlType::$variant => ($block, $bytes),)*
                }
            }

            /// The rlx dtype a tensor of this type loads as, bit for bit;
            /// `None` for types rlx holds only as raw bytes (IQ*, TQ*,
            /// Q8_1, Q8_K, NVFP4, Q1_0).
            pub fn dtype(self) -> Option<DType> {
                match self {
                    $(GgmlType::$variant => $dtype,)*
                }
            }
        }
    };
}

ggml_types! {
    F32 = 0, "F32", 1, 4, Some(DType::F32);
    F16 = 1, "F16", 1, 2, Some(DType::F16);
    Q4_0 = 2, "Q4_0", 32, 18, Some(DType::Q4_0);
    Q4_1 = 3, "Q4_1", 32, 20, Some(DType::Q4_1);
    Q5_0 = 6, "Q5_0", 32, 22, Some(DType::Q5_0);
    Q5_1 = 7, "Q5_1", 32, 24, Some(DType::Q5_1);
    Q8_0 = 8, "Q8_0", 32, 34, Some(DType::Q8_0);
    Q8_1 = 9, "Q8_1", 32, 40, None;
    Q2_K = 10, "Q2_K", 256, 84, Some(DType::Q2K);
    Q3_K = 11, "Q3_K", 256, 110, Some(DType::Q3K);
    Q4_K = 12, "Q4_K", 256, 144, Some(DType::Q4K);
    Q5_K = 13, "Q5_K", 256, 176, Some(DType::Q5K);
    Q6_K = 14, "Q6_K", 256, 210, Some(DType::Q6K);
    Q8_K = 15, "Q8_K", 256, 292, None;
    IQ2_XXS = 16, "IQ2_XXS", 256, 66, None;
    IQ2_XS = 17, "IQ2_XS", 256, 74, None;
    IQ3_XXS = 18, "IQ3_XXS", 256, 98, None;
    IQ1_S = 19, "IQ1_S", 256, 50, None;
    IQ4_NL = 20, "IQ4_NL", 32, 18, None;
    IQ3_S = 21, "IQ3_S", 256, 110, None;
    IQ2_S = 22, "IQ2_S", 256, 82, None;
    IQ4_XS = 23, "IQ4_XS", 256, 136, None;
    I8 = 24, "I8", 1, 1, Some(DType::I8);
    I16 = 25, "I16", 1, 2, Some(DType::I16);
    I32 = 26, "I32", 1, 4, Some(DType::I32);
    I64 = 27, "I64", 1, 8, Some(DType::I64);
    F64 = 28, "F64", 1, 8, Some(DType::F64);
    IQ1_M = 29, "IQ1_M", 256, 56, None;
    BF16 = 30, "BF16", 1, 2, Some(DType::BF16);
    TQ1_0 = 34, "TQ1_0", 256, 54, None;
    TQ2_0 = 35, "TQ2_0", 256, 66, None;
    MXFP4 = 39, "MXFP4", 32, 17, Some(DType::Mxfp4);
    NVFP4 = 40, "NVFP4", 64, 36, None;
    Q1_0 = 41, "Q1_0", 128, 18, None;
}

impl GgmlType {
    /// The GGUF type holding an rlx dtype, for writing.
    pub fn of_dtype(d: DType) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| t.dtype() == Some(d))
    }

    /// Parses a type name in any case (`q4_k`, `Q4_K`, `f16`).
    pub fn parse(name: &str) -> Option<GgmlType> {
        GgmlType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Bytes of `numel` elements, or `None` when `numel` is not a whole
    /// number of blocks or the size overflows.
    pub fn bytes_for(self, numel: u64) -> Option<u64> {
        let (block, bytes) = self.block();
        let (block, bytes) = (block as u64, bytes as u64);
        numel
            .is_multiple_of(block)
            .then(|| (numel / block).checked_mul(bytes))
            .flatten()
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_layouts_agree_with_rlx_dtypes() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            if let Some(d) = t.dtype() {
                let (block, bytes) = t.block();
                assert_eq!(d.storage_bytes(block), Some(bytes), "{t}");
            }
        }
        assert_eq!(GgmlType::parse("q4_k"), Some(GgmlType::Q4_K));
        assert_eq!(GgmlType::of_dtype(DType::Q6K), Some(GgmlType::Q6_K));
    }
}
