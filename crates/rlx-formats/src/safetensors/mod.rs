//! [safetensors](https://github.com/huggingface/safetensors) files: read
//! into rlx [`HostTensor`]s from a byte buffer or a memory map, and write.
//!
//! The file format: an 8-byte little-endian header length `n`, `n` bytes of
//! JSON (`{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
//! ..., "__metadata__": {"key": "value"}}`), then the data section, which the
//! tensors' byte ranges must cover exactly (no holes, no overlaps, no
//! trailing bytes). Elements are little-endian and row-major.
//!
//! Parsing and validation are Hugging Face's `safetensors` crate; this
//! module adds the conversion to rlx dtypes (see the table in
//! [`convert`]), errors that name the file, the tensor and the bytes at
//! fault ([`FormatError`]), and the shape-checked [`SafetensorsFile::expect`]
//! used by model builders.
//!
//! Before the header is parsed, rlx refuses what the `safetensors` crate
//! would accept silently or too late: two tensors of the same name
//! ([`FormatError::DuplicateName`]), a header over
//! `rlx_ir::limits().max_file_bytes`, and a tensor whose size as loaded is
//! over `max_tensor_bytes` ([`FormatError::TooLarge`]) — all from the
//! header, before anything is allocated.
//!
//! **Non-finite weights are an error by default.** Loading a float tensor
//! ([`tensor`](SafetensorsFile::tensor), [`expect`](SafetensorsFile::expect),
//! [`tensors`](SafetensorsFile::tensors)) scans it and refuses NaN or
//! ±infinity with [`FormatError::NonFinite`], naming the tensor and the
//! first bad index: one such weight turns every output into NaN without
//! any error. Files that hold them on purpose (masks of -inf, test data)
//! opt out with [`allow_non_finite`](SafetensorsFile::allow_non_finite).
//! [`raw_bytes`](SafetensorsFile::raw_bytes) is never checked.
//!
//! ```
//! use rlx_formats::safetensors::{serialize, SafetensorsFile};
//! use rlx_ir::{DType, HostTensor};
//!
//! let w = HostTensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]).unwrap();
//! let bytes = serialize(&[("dense.weight", &w)], &Default::default()).unwrap();
//!
//! let file = SafetensorsFile::from_bytes(bytes).unwrap().with_label("demo");
//! assert_eq!(file.names(), ["dense.weight"]);
//! let back = file.expect("dense.weight", DType::F32, [2, 3]).unwrap();
//! assert_eq!(back, w);
//!
//! let err = file.expect("dense.weight", DType::F32, [3, 2]).unwrap_err();
//! assert!(err.to_string().contains("has shape [2, 3], the model expects [3, 2]"));
//! ```

pub mod convert;
mod diagnose;
mod finite;
mod header;
mod write;

pub use convert::{loaded_dtype, stored_dtype};
/// The dtypes a safetensors file can declare (re-exported from the
/// `safetensors` crate).
pub use st::Dtype;
pub use write::{serialize, write_file};

use crate::error::FormatError;
use crate::names;
use convert::DecodeError;
use rlx_ir::{DType, HostTensor, Shape};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// Label used in errors for buffers given to [`SafetensorsFile::from_bytes`].
pub const MEMORY_LABEL: &str = "<memory>";

use crate::source::Bytes;

/// One tensor's header entry.
#[derive(Clone, Debug)]
struct Entry {
    name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    /// Byte range inside the data section.
    start: usize,
    end: usize,
}

/// A parsed safetensors file over its bytes: an owned buffer, a shared one,
/// or (natively, with the `mmap` feature) a memory map.
///
/// Opening validates the whole header (sizes, dtypes, every byte range);
/// tensors are converted only when asked for, one at a time. Cloning is
/// cheap: the bytes are shared.
#[derive(Clone)]
pub struct SafetensorsFile {
    label: String,
    bytes: Bytes,
    mapped: bool,
    /// Where the data section starts in `bytes` (8 + header length).
    data_start: usize,
    /// In file (offset) order.
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    metadata: BTreeMap<String, String>,
    /// Whether loaded float tensors may hold NaN/±inf (off by default).
    allow_non_finite: bool,
}

impl fmt::Debug for SafetensorsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SafetensorsFile")
            .field("label", &self.label)
            .field("bytes", &self.bytes.as_ref().as_ref().len())
            .field("mapped", &self.mapped)
            .field("tensors", &self.entries.len())
            .field("metadata", &self.metadata)
            .field("allow_non_finite", &self.allow_non_finite)
            .finish()
    }
}

impl SafetensorsFile {
    /// Open a file, memory-mapped when the `mmap` feature is on (the default)
    /// and the target is not wasm32; otherwise read into memory.
    ///
    /// While a file is mapped it must not be modified or truncated — by this
    /// process or another — or the bytes change under the reader (a
    /// truncation can even crash it). Replace model files by writing a new
    /// file and renaming it over the old one ([`write_file`] does), or use
    /// [`SafetensorsFile::read`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let (bytes, label, mapped) = crate::source::open(path.as_ref())?;
        let mut f = Self::parse(bytes, label)?;
        f.mapped = mapped;
        Ok(f)
    }

    /// Read a whole file into memory (no memory map).
    ///
    /// At most the length the file system reports is read, so an endless
    /// file (a device, a pipe) reads as empty or truncated instead of
    /// exhausting memory; each tensor is then bounded by the header checks.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, FormatError> {
        let (bytes, label) = crate::source::read(path.as_ref())?;
        Self::parse(bytes, label)
    }

    /// Parse a file held in memory: a `Vec<u8>`, an `Arc<[u8]>`, a
    /// `&'static [u8]` (e.g. `include_bytes!`), or any other byte owner.
    /// Errors name it `<memory>`; see [`with_label`](Self::with_label).
    pub fn from_bytes<B>(bytes: B) -> Result<Self, FormatError>
    where
        B: AsRef<[u8]> + Send + Sync + 'static,
    {
        Self::parse(Arc::new(bytes), MEMORY_LABEL.to_string())
    }

    /// Name this file in later errors (e.g. the URL a wasm build fetched it
    /// from). Errors from parsing already happened under the old label; use
    /// [`from_bytes_labeled`](Self::from_bytes_labeled) to label those too.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// [`from_bytes`](Self::from_bytes) with the label used in every error.
    pub fn from_bytes_labeled<B>(bytes: B, label: impl Into<String>) -> Result<Self, FormatError>
    where
        B: AsRef<[u8]> + Send + Sync + 'static,
    {
        Self::parse(Arc::new(bytes), label.into())
    }

    /// Let loaded float tensors hold NaN and ±infinity (refused by
    /// default; see the module docs).
    pub fn allow_non_finite(mut self, allow: bool) -> Self {
        self.allow_non_finite = allow;
        self
    }

    fn parse(bytes: Bytes, label: String) -> Result<Self, FormatError> {
        let buf: &[u8] = bytes.as_ref().as_ref();
        header::check(buf, &label, &rlx_ir::limits())?;
        let (n, meta) = match st::SafeTensors::read_metadata(buf) {
            Ok(ok) => ok,
            Err(e) => {
                return Err(diagnose::diagnose(buf, &label).unwrap_or_else(|| {
                    FormatError::Invalid {
                        file: label.clone(),
                        reason: e.to_string(),
                    }
                }))
            }
        };
        let mut entries = Vec::new();
        for name in meta.offset_keys() {
            let Some(info) = meta.info(&name) else {
                continue;
            };
            entries.push(Entry {
                dtype: info.dtype,
                shape: info.shape.clone(),
                start: info.data_offsets.0,
                end: info.data_offsets.1,
                name,
            });
        }
        let index = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        let metadata = meta
            .metadata()
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(SafetensorsFile {
            label,
            mapped: false,
            data_start: 8 + n,
            entries,
            index,
            metadata,
            bytes,
            allow_non_finite: false,
        })
    }

    /// The path, or the label of an in-memory buffer.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether the bytes are a memory map of the file.
    pub fn is_mapped(&self) -> bool {
        self.mapped
    }

    /// Tensor names in file order (increasing byte offset).
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.name.as_str()).collect()
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file holds no tensors.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether a tensor of this name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The `__metadata__` string map (empty when the file has none).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    fn entry(&self, name: &str) -> Result<&Entry, FormatError> {
        match self.index.get(name).and_then(|&i| self.entries.get(i)) {
            Some(e) => Ok(e),
            None => Err(FormatError::NotFound {
                file: self.label.clone(),
                tensor: name.to_string(),
                count: self.entries.len(),
                close: names::closest(name, self.entries.iter().map(|e| e.name.as_str()), 3),
            }),
        }
    }

    fn unsupported(&self, e: &Entry) -> FormatError {
        FormatError::UnsupportedDtype {
            file: self.label.clone(),
            tensor: e.name.clone(),
            dtype: e.dtype.to_string(),
        }
    }

    /// The dtype and shape [`tensor`](Self::tensor) will return, without
    /// reading the data. Errors for unknown names and for dtypes rlx cannot
    /// load.
    pub fn info(&self, name: &str) -> Result<(DType, Shape), FormatError> {
        let e = self.entry(name)?;
        let d = loaded_dtype(e.dtype).ok_or_else(|| self.unsupported(e))?;
        Ok((d, Shape::new(e.shape.clone())))
    }

    /// The dtype as stored in the file (`"F32"`, `"U16"`, `"F8_E4M3"`, ...),
    /// which differs from [`info`](Self::info)'s for widened dtypes.
    pub fn file_dtype(&self, name: &str) -> Result<String, FormatError> {
        Ok(self.entry(name)?.dtype.to_string())
    }

    /// The raw little-endian bytes of a tensor, straight from the buffer or
    /// the map (no copy).
    pub fn raw_bytes(&self, name: &str) -> Result<&[u8], FormatError> {
        let e = self.entry(name)?;
        self.slice(e)
    }

    fn slice(&self, e: &Entry) -> Result<&[u8], FormatError> {
        let buf: &[u8] = self.bytes.as_ref().as_ref();
        let data_len = buf.len().saturating_sub(self.data_start);
        let s = self.data_start.checked_add(e.start);
        let t = self.data_start.checked_add(e.end);
        let got = match (s, t) {
            (Some(s), Some(t)) if s <= t => buf.get(s..t),
            _ => None,
        };
        got.ok_or_else(|| FormatError::OffsetOutOfRange {
            file: self.label.clone(),
            tensor: e.name.clone(),
            start: e.start,
            end: e.end,
            data_len,
        })
    }

    /// Copy a tensor into a [`HostTensor`] (dtype conversions: [`convert`]).
    /// A float tensor holding NaN or ±infinity is an error unless
    /// [`allow_non_finite`](Self::allow_non_finite) is set.
    pub fn tensor(&self, name: &str) -> Result<HostTensor, FormatError> {
        let e = self.entry(name)?;
        let t = self.decode(e)?;
        if !self.allow_non_finite {
            if let Some((index, value)) = finite::first_non_finite(t.data()) {
                return Err(FormatError::NonFinite {
                    file: self.label.clone(),
                    tensor: e.name.clone(),
                    index,
                    value,
                });
            }
        }
        Ok(t)
    }

    fn decode(&self, e: &Entry) -> Result<HostTensor, FormatError> {
        let bytes = self.slice(e)?;
        convert::decode(e.dtype, &e.shape, bytes).map_err(|err| match err {
            DecodeError::Unsupported => self.unsupported(e),
            DecodeError::Length { expected } => FormatError::LengthMismatch {
                file: self.label.clone(),
                tensor: e.name.clone(),
                dtype: e.dtype.to_string(),
                shape: e.shape.clone(),
                expected,
                actual: bytes.len(),
            },
            DecodeError::Ir(reason) => FormatError::Invalid {
                file: self.label.clone(),
                reason: format!("tensor `{}`: {reason}", e.name),
            },
        })
    }

    /// Load a tensor the model requires with exactly this dtype and shape.
    /// Checks the header before copying any data; a shape mismatch is
    /// reported before a dtype mismatch.
    pub fn expect(
        &self,
        name: &str,
        dtype: DType,
        shape: impl Into<Shape>,
    ) -> Result<HostTensor, FormatError> {
        let expected = shape.into();
        let (found_dtype, found) = self.info(name)?;
        if found != expected {
            return Err(FormatError::ShapeMismatch {
                file: self.label.clone(),
                tensor: name.to_string(),
                found,
                expected,
            });
        }
        if found_dtype != dtype {
            return Err(FormatError::DTypeMismatch {
                file: self.label.clone(),
                tensor: name.to_string(),
                found: found_dtype,
                expected: dtype,
            });
        }
        self.tensor(name)
    }

    /// Every tensor, in file order.
    pub fn tensors(&self) -> Result<Vec<(String, HostTensor)>, FormatError> {
        self.entries
            .iter()
            .map(|e| Ok((e.name.clone(), self.tensor(&e.name)?)))
            .collect()
    }
}
