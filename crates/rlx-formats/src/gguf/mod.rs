//! [GGUF](https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) files:
//! the container llama.cpp and ggml use for (quantized) weights and the
//! metadata a decoder needs (architecture, hyperparameters, tokenizer).
//!
//! The layout: `"GGUF"`, a u32 version (2 or 3), u64 tensor and metadata
//! counts, the metadata (key string, u32 value type, value), one info per
//! tensor (name, u32 dimension count, u64 dimensions innermost first, u32
//! ggml type, u64 offset into the data section), then the data section,
//! which starts at the next multiple of `general.alignment` (default 32);
//! every tensor's offset is a multiple of it too. All little-endian.
//!
//! Shapes here are the NumPy view, as the `gguf` Python package gives them:
//! row-major, outermost first (the reverse of ggml's `ne`). A quantized
//! tensor's last axis is a whole number of blocks.
//!
//! Reading is bounded: every count and length in the header is checked
//! against the bytes left before anything is allocated, and every
//! tensor's data must lie inside the file at an aligned offset. Errors are
//! [`FormatError::Gguf`] with the byte offset at fault. Tensors are
//! converted only when asked for: [`GgufFile::tensor`] gives a
//! [`HostTensor`] (quantized types as rlx's block dtypes, bit for bit),
//! [`GgufFile::raw_bytes`] the bytes of any type.
//!
//! ```
//! use rlx_formats::gguf::{GgufFile, GgufWriter, Value};
//! use rlx_ir::HostTensor;
//!
//! let mut w = GgufWriter::new();
//! w.metadata("general.architecture", Value::String("llama".into())).unwrap();
//! let t = HostTensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], [2, 2]).unwrap();
//! w.tensor("w", &t).unwrap();
//! let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
//! assert_eq!(file.str("general.architecture").unwrap(), "llama");
//! assert_eq!(file.tensor("w").unwrap(), t);
//! ```

mod parse;
mod types;
mod value;
mod write;

pub use types::GgmlType;
pub use value::{Value, ValueType};
pub use write::GgufWriter;

use crate::error::FormatError;
use crate::names;
use crate::safetensors::convert::{decode, DecodeError};
use rlx_ir::{HostTensor, TensorData};
use st::Dtype;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::source::Bytes;

/// One tensor's entry in the header.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub ggml_type: GgmlType,
    /// Row-major, outermost first (ggml's `ne` reversed).
    pub shape: Vec<usize>,
    /// Offset of the data from the start of the data section.
    pub offset: u64,
    /// Bytes of data.
    pub size: u64,
}

/// A parsed GGUF file over its bytes (owned, shared, or memory-mapped).
#[derive(Clone)]
pub struct GgufFile {
    label: String,
    bytes: Bytes,
    mapped: bool,
    version: u32,
    alignment: u64,
    data_start: u64,
    metadata: Vec<(String, Value)>,
    keys: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("label", &self.label)
            .field("version", &self.version)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Open a file, memory-mapped natively with the `mmap` feature (the
    /// default), read into memory otherwise. The same caveat as
    /// [`SafetensorsFile::open`](crate::SafetensorsFile::open): a mapped
    /// file must not be modified while it is open.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let (bytes, label, mapped) = crate::source::open(path.as_ref())?;
        let mut f = Self::parse(bytes, label)?;
        f.mapped = mapped;
        Ok(f)
    }

    /// Read a whole file into memory (no memory map).
    pub fn read(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let (bytes, label) = crate::source::read(path.as_ref())?;
        Self::parse(bytes, label)
    }

    /// Parse a file held in memory (errors name it `<memory>`).
    pub fn from_bytes<B>(bytes: B) -> Result<Self, FormatError>
    where
        B: AsRef<[u8]> + Send + Sync + 'static,
    {
        Self::from_bytes_labeled(bytes, crate::safetensors::MEMORY_LABEL)
    }

    /// [`from_bytes`](Self::from_bytes) with the label used in every error.
    pub fn from_bytes_labeled<B>(bytes: B, label: impl Into<String>) -> Result<Self, FormatError>
    where
        B: AsRef<[u8]> + Send + Sync + 'static,
    {
        Self::parse(Arc::new(bytes), label.into())
    }

    fn parse(bytes: Bytes, label: String) -> Result<Self, FormatError> {
        let h = parse::parse(bytes.as_ref().as_ref(), &label)?;
        let keys = h
            .metadata
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k.clone(), i))
            .collect();
        let index = h
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(GgufFile {
            label,
            bytes,
            mapped: false,
            version: h.version,
            alignment: h.alignment,
            data_start: h.data_start,
            metadata: h.metadata,
            keys,
            tensors: h.tensors,
            index,
        })
    }

    /// The path, or the label of an in-memory buffer.
    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn is_mapped(&self) -> bool {
        self.mapped
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Where the data section starts, in bytes from the start of the file.
    pub fn data_start(&self) -> u64 {
        self.data_start
    }

    /// Every metadata entry, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.keys.get(key).map(|&i| &self.metadata[i].1)
    }

    /// The value of `key`, or an error naming the key and what was wanted.
    pub fn require(&self, key: &str, wanted: &str) -> Result<&Value, FormatError> {
        self.get(key).ok_or_else(|| FormatError::GgufMetadata {
            file: self.label.clone(),
            key: key.to_string(),
            problem: format!("is missing (expected {wanted})"),
        })
    }

    /// A string value.
    pub fn str(&self, key: &str) -> Result<&str, FormatError> {
        let v = self.require(key, "a string")?;
        v.as_str()
            .ok_or_else(|| self.wrong_type(key, v, "a string"))
    }

    /// An unsigned integer value of any width.
    pub fn uint(&self, key: &str) -> Result<u64, FormatError> {
        let v = self.require(key, "an unsigned integer")?;
        v.as_i128()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| self.wrong_type(key, v, "an unsigned integer"))
    }

    /// A float (or integer) value as f64.
    pub fn float(&self, key: &str) -> Result<f64, FormatError> {
        let v = self.require(key, "a number")?;
        v.as_f64()
            .ok_or_else(|| self.wrong_type(key, v, "a number"))
    }

    /// An array value's items.
    pub fn array(&self, key: &str) -> Result<&[Value], FormatError> {
        let v = self.require(key, "an array")?;
        v.as_array()
            .ok_or_else(|| self.wrong_type(key, v, "an array"))
    }

    fn wrong_type(&self, key: &str, v: &Value, wanted: &str) -> FormatError {
        FormatError::GgufMetadata {
            file: self.label.clone(),
            key: key.to_string(),
            problem: format!("is {} ({}), expected {wanted}", v, v.type_name()),
        }
    }

    /// Every tensor's header entry, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The header entry of `name`, or [`FormatError::NotFound`] with the
    /// closest names.
    pub fn info(&self, name: &str) -> Result<&TensorInfo, FormatError> {
        match self.index.get(name) {
            Some(&i) => Ok(&self.tensors[i]),
            None => Err(FormatError::NotFound {
                file: self.label.clone(),
                tensor: name.to_string(),
                count: self.tensors.len(),
                close: names::closest(name, self.tensors.iter().map(|t| t.name.as_str()), 3),
            }),
        }
    }

    /// The stored bytes of a tensor, of any ggml type.
    pub fn raw_bytes(&self, name: &str) -> Result<&[u8], FormatError> {
        let t = self.info(name)?;
        // The parser checked that the range lies inside the file.
        let start = (self.data_start + t.offset) as usize;
        Ok(&self.bytes.as_ref().as_ref()[start..start + t.size as usize])
    }

    /// A tensor as an rlx [`HostTensor`] in the dtype its ggml type loads
    /// as ([`GgmlType::dtype`]); quantized types keep their blocks as
    /// packed bytes. Types rlx holds only as raw bytes are an error.
    pub fn tensor(&self, name: &str) -> Result<HostTensor, FormatError> {
        let t = self.info(name)?;
        let bytes = self.raw_bytes(name)?;
        let unsupported = || FormatError::GgufType {
            file: self.label.clone(),
            tensor: t.name.clone(),
            ggml_type: t.ggml_type.name().to_string(),
        };
        let dtype = t.ggml_type.dtype().ok_or_else(unsupported)?;
        let limit = |source| FormatError::TooLarge {
            file: self.label.clone(),
            tensor: Some(t.name.clone()),
            source,
        };
        rlx_ir::limits()
            .check_tensor_bytes(&format!("tensor `{}`", t.name), t.size)
            .map_err(limit)?;
        let st_dtype = match t.ggml_type {
            GgmlType::F32 => Dtype::F32,
            GgmlType::F16 => Dtype::F16,
            GgmlType::BF16 => Dtype::BF16,
            GgmlType::F64 => Dtype::F64,
            GgmlType::I8 => Dtype::I8,
            GgmlType::I16 => Dtype::I16,
            GgmlType::I32 => Dtype::I32,
            GgmlType::I64 => Dtype::I64,
            _ => {
                return HostTensor::new(dtype, t.shape.clone(), TensorData::Packed(bytes.to_vec()))
                    .map_err(|e| self.ir_error(t, e.to_string()))
            }
        };
        decode(st_dtype, &t.shape, bytes).map_err(|e| match e {
            DecodeError::Ir(m) => self.ir_error(t, m),
            _ => unsupported(),
        })
    }

    fn ir_error(&self, t: &TensorInfo, problem: String) -> FormatError {
        FormatError::Gguf {
            file: self.label.clone(),
            at: self.data_start + t.offset,
            what: format!("tensor `{}`: {problem}", t.name),
        }
    }
}
