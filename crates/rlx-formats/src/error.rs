//! [`FormatError`]: every way reading or writing a model file can fail.
//!
//! Each message names the file (its path, or the label given to an
//! in-memory buffer), the tensor when there is one, what is wrong, and what
//! to do about it. No input makes this crate panic; it returns one of these.

use rlx_ir::{DType, Shape};
use std::fmt;

/// Shapes print as `[384, 768]` in messages.
pub(crate) struct Dims<'a>(pub &'a [usize]);

impl fmt::Display for Dims<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// `(closest names: `a`, `b`)` or nothing.
pub(crate) struct Close<'a>(pub &'a [String]);

impl fmt::Display for Close<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        f.write_str("; closest names: ")?;
        for (i, n) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{n}`")?;
        }
        Ok(())
    }
}

/// An error reading or writing a model file.
///
/// `file` is the path of the file, or the label of an in-memory buffer
/// (`<memory>` unless [`SafetensorsFile::with_label`] set one).
///
/// [`SafetensorsFile::with_label`]: crate::safetensors::SafetensorsFile::with_label
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The operating system refused to open, map, read or write the file.
    #[error("{file}: {source}; check that the path exists and is readable (or writable)")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },

    /// Fewer than the 8 bytes of the header-length field.
    #[error(
        "{file}: only {len} bytes, too short for a safetensors file (it starts with an 8-byte \
         header length); the file is truncated or not safetensors: re-download or re-export it"
    )]
    Truncated { file: String, len: usize },

    /// The header-length field is above the safetensors limit.
    #[error(
        "{file}: the header length field says {declared} bytes, over the {limit}-byte limit \
         of safetensors; the file is corrupt or not safetensors"
    )]
    HeaderTooLarge {
        file: String,
        declared: u64,
        limit: usize,
    },

    /// The header-length field points past the end of the file.
    #[error(
        "{file}: the header length field says {declared} bytes, but only {available} bytes \
         follow it; the file is truncated (re-download it) or not safetensors"
    )]
    HeaderPastEnd {
        file: String,
        declared: u64,
        available: usize,
    },

    /// The JSON header is not UTF-8.
    #[error(
        "{file}: the JSON header is not valid UTF-8 (bad byte at header offset {offset}); \
         the file is corrupt"
    )]
    HeaderNotUtf8 { file: String, offset: usize },

    /// The JSON header does not parse, or is not a JSON object.
    #[error(
        "{file}: the JSON header is malformed at line {line}, column {column}: {message}; \
         the file is corrupt or not safetensors"
    )]
    HeaderJson {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },

    /// One header entry is malformed (unknown dtype, bad shape, missing
    /// field, `__metadata__` that is not a string map).
    #[error("{file}: header entry `{tensor}`: {problem}; the header is corrupt")]
    BadEntry {
        file: String,
        tensor: String,
        problem: String,
    },

    /// `data_offsets` ends before it starts.
    #[error(
        "{file}: tensor `{tensor}` has data_offsets [{start}, {end}], which end before they \
         start; the header is corrupt"
    )]
    BadOffsets {
        file: String,
        tensor: String,
        start: usize,
        end: usize,
    },

    /// `data_offsets` reach past the end of the data section.
    #[error(
        "{file}: tensor `{tensor}` has data_offsets [{start}, {end}], but the data section \
         holds only {data_len} bytes; the file is truncated (re-download it) or its header \
         is corrupt"
    )]
    OffsetOutOfRange {
        file: String,
        tensor: String,
        start: usize,
        end: usize,
        data_len: usize,
    },

    /// Two tensors claim overlapping bytes.
    #[error(
        "{file}: tensors `{tensor}` (bytes {start}..{end}) and `{other}` (bytes \
         {other_start}..{other_end}) overlap; safetensors gives each tensor its own bytes, \
         so the header is corrupt"
    )]
    OverlappingOffsets {
        file: String,
        tensor: String,
        start: usize,
        end: usize,
        other: String,
        other_start: usize,
        other_end: usize,
    },

    /// Bytes of the data section that belong to no tensor (a hole, or
    /// trailing bytes). safetensors forbids both.
    #[error(
        "{file}: bytes {start}..{end} of the data section belong to no tensor (safetensors \
         forbids holes and trailing bytes); the file was damaged, appended to, or not written \
         by a safetensors writer"
    )]
    UncoveredData {
        file: String,
        start: usize,
        end: usize,
    },

    /// The element count times the element size overflows.
    #[error(
        "{file}: tensor `{tensor}` has shape {} of {dtype}, whose byte size overflows; the \
         header is corrupt", Dims(.shape)
    )]
    ShapeOverflow {
        file: String,
        tensor: String,
        dtype: String,
        shape: Vec<usize>,
    },

    /// The byte range does not hold shape × dtype bytes.
    #[error(
        "{file}: tensor `{tensor}` is {dtype} with shape {}, which needs {expected} bytes, but \
         its data_offsets span {actual} bytes; the header is corrupt", Dims(.shape)
    )]
    LengthMismatch {
        file: String,
        tensor: String,
        dtype: String,
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },

    /// The safetensors crate rejected the file for a reason the detailed
    /// checks above did not pin down.
    #[error("{file}: not a valid safetensors file: {reason}")]
    Invalid { file: String, reason: String },

    /// No tensor of that name.
    #[error(
        "{file}: no tensor `{tensor}` among its {count} tensors{}; check that the checkpoint \
         matches the model (names, prefixes)", Close(.close)
    )]
    NotFound {
        file: String,
        tensor: String,
        count: usize,
        close: Vec<String>,
    },

    /// A safetensors dtype rlx cannot hold, even by lossless widening.
    #[error(
        "{file}: tensor `{tensor}` has dtype {dtype}, which rlx cannot load (it reads F64, \
         F32, F16, BF16, I64, I32, I16, I8, U8, U16, U32, U64, BOOL, C64, and widens F8_*); \
         convert the tensor to F16 or F32 before loading"
    )]
    UnsupportedDtype {
        file: String,
        tensor: String,
        dtype: String,
    },

    /// [`expect`](crate::safetensors::SafetensorsFile::expect): wrong dtype.
    #[error(
        "{file}: tensor `{tensor}` has dtype {found}, the model expects {expected}; convert the \
         checkpoint, or build the model in {found}"
    )]
    DTypeMismatch {
        file: String,
        tensor: String,
        found: DType,
        expected: DType,
    },

    /// [`expect`](crate::safetensors::SafetensorsFile::expect): wrong shape.
    #[error(
        "{file}: tensor `{tensor}` has shape {}, the model expects {}; the checkpoint does not \
         match the model configuration (sizes, layer count)", Dims(.found.dims()),
         Dims(.expected.dims())
    )]
    ShapeMismatch {
        file: String,
        tensor: String,
        found: Shape,
        expected: Shape,
    },

    /// Two header entries have the same name. A JSON reader keeps the last
    /// and silently drops the first, so the file is refused instead.
    #[error(
        "{file}: tensor `{tensor}` appears more than once in the header; safetensors names are \
         unique, and reading it would silently keep one of them: the file is corrupt or was \
         written by a broken exporter"
    )]
    DuplicateName { file: String, tensor: String },

    /// The header, or a tensor as rlx would load it, is over a bound of
    /// [`rlx_ir::limits`](mod@rlx_ir::limits) (checked from the header, before any allocation).
    #[error("{file}: {source}")]
    TooLarge {
        file: String,
        /// The tensor, or `None` for the header itself.
        tensor: Option<String>,
        source: rlx_ir::LimitError,
    },

    /// A float tensor holds NaN or ±infinity. rlx refuses these by default:
    /// one such weight silently turns every output into NaN.
    #[error(
        "{file}: tensor `{tensor}` element {index} is {value}; rlx refuses non-finite weights by \
         default (they make outputs NaN without any error): fix the checkpoint, or open it with \
         `SafetensorsFile::allow_non_finite(true)` if the values are meant (e.g. -inf masks)"
    )]
    NonFinite {
        file: String,
        tensor: String,
        /// Flat (row-major) index of the first non-finite element.
        index: usize,
        /// The value (NaN, inf or -inf; a complex element shows its bad part).
        value: f64,
    },

    /// A tensor cannot be written (a dtype safetensors cannot store, a
    /// duplicate or reserved name, a header over the size limit).
    #[error("cannot write tensor `{tensor}`: {reason}")]
    CannotWrite { tensor: String, reason: String },

    /// A GGUF file's structure is wrong at byte `at`: bad magic or
    /// version, a count or length past the end, an unknown value or ggml
    /// type, a misaligned or out-of-file tensor.
    #[error("{file}: at byte {at}: {what}")]
    Gguf { file: String, at: u64, what: String },

    /// A GGUF metadata key a reader needs is missing or of the wrong type.
    #[error("{file}: GGUF metadata `{key}` {problem}; the file was not written for this use (check its architecture and the tool that made it)")]
    GgufMetadata {
        file: String,
        key: String,
        problem: String,
    },

    /// A tensor of a ggml type rlx holds only as raw bytes (IQ*, TQ*,
    /// Q8_1, Q8_K, NVFP4, Q1_0).
    #[error(
        "{file}: tensor `{tensor}` is {ggml_type}, which rlx cannot load as a tensor (it loads \
         F32, F16, BF16, F64, I8-I64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K-Q6_K, MXFP4); \
         requantize the model to one of these (e.g. with `rlx quantize`), or read its bytes \
         with `raw_bytes`"
    )]
    GgufType {
        file: String,
        tensor: String,
        ggml_type: String,
    },
}

impl FormatError {
    /// The file (path or buffer label) the error is about, if any.
    pub fn file(&self) -> Option<&str> {
        use FormatError::*;
        match self {
            Io { file, .. }
            | Truncated { file, .. }
            | HeaderTooLarge { file, .. }
            | HeaderPastEnd { file, .. }
            | HeaderNotUtf8 { file, .. }
            | HeaderJson { file, .. }
            | BadEntry { file, .. }
            | BadOffsets { file, .. }
            | OffsetOutOfRange { file, .. }
            | OverlappingOffsets { file, .. }
            | UncoveredData { file, .. }
            | ShapeOverflow { file, .. }
            | LengthMismatch { file, .. }
            | Invalid { file, .. }
            | NotFound { file, .. }
            | UnsupportedDtype { file, .. }
            | DTypeMismatch { file, .. }
            | ShapeMismatch { file, .. }
            | DuplicateName { file, .. }
            | TooLarge { file, .. }
            | NonFinite { file, .. }
            | Gguf { file, .. }
            | GgufMetadata { file, .. }
            | GgufType { file, .. } => Some(file),
            CannotWrite { .. } => None,
        }
    }

    /// The tensor the error is about, if any.
    pub fn tensor(&self) -> Option<&str> {
        use FormatError::*;
        match self {
            BadEntry { tensor, .. }
            | BadOffsets { tensor, .. }
            | OffsetOutOfRange { tensor, .. }
            | OverlappingOffsets { tensor, .. }
            | ShapeOverflow { tensor, .. }
            | LengthMismatch { tensor, .. }
            | NotFound { tensor, .. }
            | UnsupportedDtype { tensor, .. }
            | DTypeMismatch { tensor, .. }
            | ShapeMismatch { tensor, .. }
            | DuplicateName { tensor, .. }
            | NonFinite { tensor, .. }
            | GgufType { tensor, .. }
            | CannotWrite { tensor, .. } => Some(tensor),
            TooLarge { tensor, .. } => tensor.as_deref(),
            _ => None,
        }
    }
}
