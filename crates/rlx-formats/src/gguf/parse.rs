//! Parsing a GGUF header: magic, version, metadata, tensor infos.
//!
//! Every count and length is checked against the bytes left before
//! anything is allocated, so a hostile header cannot make the reader
//! allocate more than a small multiple of the file's size (and the parsed
//! metadata is bounded by `max_file_bytes`).

use super::types::GgmlType;
use super::value::{Value, ValueType};
use super::TensorInfo;
use crate::error::FormatError;

/// "GGUF" as the first four bytes.
pub(crate) const MAGIC: [u8; 4] = *b"GGUF";
/// Arrays nested deeper than this are refused (real files nest none).
const MAX_ARRAY_DEPTH: usize = 8;
/// Tensors of more dimensions are refused (ggml has 4).
pub(crate) const MAX_DIMS: u32 = 8;
/// Default `general.alignment`.
pub(crate) const DEFAULT_ALIGNMENT: u64 = 32;

pub(crate) struct Header {
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    pub data_start: u64,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    file: &'a str,
    /// Estimated bytes of parsed metadata held in memory.
    held: u64,
}

impl<'a> Cursor<'a> {
    fn fail(&self, at: usize, what: impl Into<String>) -> FormatError {
        FormatError::Gguf {
            file: self.file.to_string(),
            at: at as u64,
            what: what.into(),
        }
    }

    fn left(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], FormatError> {
        if n > self.left() {
            return Err(self.fail(
                self.pos,
                format!(
                    "{what} needs {n} bytes but only {} are left (the file is truncated)",
                    self.left()
                ),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], FormatError> {
        let s = self.take(N as u64, what)?;
        Ok(s.try_into().expect("take returned N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, FormatError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, FormatError> {
        self.array(what).map(u64::from_le_bytes)
    }

    fn string(&mut self, what: &str) -> Result<String, FormatError> {
        let at = self.pos;
        let len = self.u64(what)?;
        let bytes = self.take(len, what)?;
        self.hold(len + 24)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|e| self.fail(at, format!("{what} is not valid UTF-8 ({e})")))
    }

    /// Counts `bytes` more of parsed metadata against `max_file_bytes`.
    fn hold(&mut self, bytes: u64) -> Result<(), FormatError> {
        self.held = self.held.saturating_add(bytes);
        rlx_ir::limits()
            .check_file_bytes("the parsed GGUF metadata", self.held)
            .map_err(|source| FormatError::TooLarge {
                file: self.file.to_string(),
                tensor: None,
                source,
            })
    }

    fn value_type(&mut self, what: &str) -> Result<ValueType, FormatError> {
        let at = self.pos;
        let id = self.u32(what)?;
        ValueType::from_id(id).ok_or_else(|| {
            self.fail(
                at,
                format!("{what} has value type {id}, which GGUF does not define (0..=12)"),
            )
        })
    }

    fn value(&mut self, t: ValueType, what: &str, depth: usize) -> Result<Value, FormatError> {
        self.hold(std::mem::size_of::<Value>() as u64)?;
        Ok(match t {
            ValueType::U8 => Value::U8(self.array::<1>(what)?[0]),
            ValueType::I8 => Value::I8(self.array::<1>(what)?[0] as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            ValueType::U32 => Value::U32(self.u32(what)?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            ValueType::U64 => Value::U64(self.u64(what)?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            ValueType::Bool => {
                let at = self.pos;
                match self.array::<1>(what)?[0] {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    b => {
                        return Err(
                            self.fail(at, format!("{what} is a bool stored as {b}, not 0 or 1"))
                        )
                    }
                }
            }
            ValueType::String => Value::String(self.string(what)?),
            ValueType::Array => {
                let at = self.pos;
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.fail(
                        at,
                        format!("{what} nests arrays deeper than {MAX_ARRAY_DEPTH} levels"),
                    ));
                }
                let item = self.value_type(what)?;
                let count = self.u64(what)?;
                if count > self.left() / item.min_size() {
                    return Err(self.fail(
                        at,
                        format!(
                            "{what} declares {count} items of {item}, more than the {} bytes \
                             left can hold (the file is truncated or corrupt)",
                            self.left()
                        ),
                    ));
                }
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(item, what, depth + 1)?);
                }
                Value::Array(item, items)
            }
        })
    }
}

pub(crate) fn parse(buf: &[u8], file: &str) -> Result<Header, FormatError> {
    let mut c = Cursor {
        buf,
        pos: 0,
        file,
        held: 0,
    };
    let magic = c.array::<4>("the magic number")?;
    if magic != MAGIC {
        return Err(c.fail(
            0,
            format!(
                "the file starts with {magic:02x?}, not \"GGUF\": it is not a GGUF file \
                 (safetensors, ONNX and .npy files are opened by their own readers)"
            ),
        ));
    }
    let version = c.u32("the version")?;
    match version {
        2 | 3 => {}
        1 => return Err(c.fail(4, "GGUF version 1 (32-bit counts) is not supported; convert the file with a current llama.cpp or gguf")),
        v if v.swap_bytes() <= 3 => return Err(c.fail(4, "the file is big-endian GGUF, which rlx does not read; convert it to little-endian")),
        v => return Err(c.fail(4, format!("GGUF version {v} is unknown (rlx reads versions 2 and 3)"))),
    }
    let at = c.pos;
    let n_tensors = c.u64("the tensor count")?;
    let n_kv = c.u64("the metadata count")?;
    // A key/value pair takes at least 8 (key length) + 4 (type) + 1 bytes,
    // a tensor info 8 (name length) + 4 (dims) + 4 (type) + 8 (offset).
    if n_kv > c.left() / 13 || n_tensors > c.left() / 24 {
        return Err(c.fail(
            at,
            format!(
                "the header declares {n_tensors} tensors and {n_kv} metadata entries, more than \
                 the {} bytes of the file can hold (truncated or corrupt)",
                c.left()
            ),
        ));
    }
    let mut metadata: Vec<(String, Value)> = Vec::with_capacity(n_kv as usize);
    let mut keys = std::collections::HashSet::new();
    for i in 0..n_kv {
        let at = c.pos;
        let key = c.string(&format!("metadata key #{i}"))?;
        if !keys.insert(key.clone()) {
            return Err(c.fail(at, format!("metadata key `{key}` appears twice")));
        }
        let what = format!("metadata `{key}`");
        let t = c.value_type(&what)?;
        let v = c.value(t, &what, 0)?;
        metadata.push((key, v));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) if a.is_power_of_two() => *a as u64,
        Some((_, v)) => {
            return Err(c.fail(
                0,
                format!(
                    "`general.alignment` is {v} ({}); it must be a u32 power of two",
                    v.type_name()
                ),
            ))
        }
    };
    let mut tensors = Vec::with_capacity(n_tensors as usize);
    let mut names = std::collections::HashSet::new();
    for i in 0..n_tensors {
        let at = c.pos;
        let name = c.string(&format!("the name of tensor #{i}"))?;
        if !names.insert(name.clone()) {
            return Err(c.fail(at, format!("tensor `{name}` appears twice")));
        }
        let what = format!("tensor `{name}`");
        let dims_at = c.pos;
        let n_dims = c.u32(&what)?;
        if n_dims > MAX_DIMS {
            return Err(c.fail(
                dims_at,
                format!("{what} has {n_dims} dimensions (at most {MAX_DIMS})"),
            ));
        }
        let mut ne = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            ne.push(c.u64(&what)?);
        }
        let type_at = c.pos;
        let id = c.u32(&what)?;
        let ggml_type = GgmlType::from_id(id).ok_or_else(|| {
            c.fail(
                type_at,
                format!("{what} has ggml type {id}, which gguf 0.19.0 does not know"),
            )
        })?;
        let offset = c.u64(&what)?;
        let numel = ne.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let size = numel.and_then(|n| ggml_type.bytes_for(n)).ok_or_else(|| {
            let (block, _) = ggml_type.block();
            c.fail(
                dims_at,
                format!(
                    "{what} of {ggml_type} with ne {ne:?}: the element count overflows or its \
                     innermost dimension is not a multiple of the block size {block}"
                ),
            )
        })?;
        if ne
            .first()
            .is_some_and(|&d| d % ggml_type.block().0 as u64 != 0)
        {
            return Err(c.fail(
                dims_at,
                format!(
                    "{what} of {ggml_type}: its innermost dimension {} is not a multiple of the \
                     block size {}",
                    ne[0],
                    ggml_type.block().0
                ),
            ));
        }
        if offset % alignment != 0 {
            return Err(c.fail(
                type_at + 4,
                format!("{what} starts at data offset {offset}, not a multiple of the alignment {alignment}"),
            ));
        }
        let shape = ne.iter().rev().map(|&d| d as usize).collect::<Vec<_>>();
        if ne.iter().any(|&d| usize::try_from(d).is_err()) {
            return Err(c.fail(
                dims_at,
                format!("{what} has a dimension over this platform's usize"),
            ));
        }
        tensors.push(TensorInfo {
            name,
            ggml_type,
            shape,
            offset,
            size,
        });
    }
    let data_start = (c.pos as u64).div_ceil(alignment) * alignment;
    for t in &tensors {
        let end = data_start
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.size));
        if end.is_none_or(|e| e > buf.len() as u64) {
            return Err(c.fail(
                c.pos,
                format!(
                    "tensor `{}` ({} bytes at data offset {}) ends past the end of the file \
                     ({} bytes; data starts at {data_start}): the file is truncated",
                    t.name,
                    t.size,
                    t.offset,
                    buf.len()
                ),
            ));
        }
    }
    Ok(Header {
        version,
        metadata,
        tensors,
        alignment,
        data_start,
    })
}
