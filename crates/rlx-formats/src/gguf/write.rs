//! Writing GGUF files, byte for byte as `gguf.GGUFWriter` lays them out:
//! header, metadata in insertion order, tensor infos with offsets padded
//! to the alignment, zero padding to the aligned data section, then each
//! tensor's bytes followed by zero padding to the alignment.

use super::parse::{DEFAULT_ALIGNMENT, MAGIC, MAX_DIMS};
use super::types::GgmlType;
use super::value::Value;
use crate::error::FormatError;
use crate::safetensors::convert::encode;
use rlx_ir::{HostTensor, TensorData};
use std::path::Path;

/// Builds a GGUF file (version 3) in memory.
#[derive(Debug, Default)]
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    tensors: Vec<Pending>,
    alignment: Option<u32>,
}

#[derive(Debug)]
struct Pending {
    name: String,
    ggml_type: GgmlType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

fn refuse(tensor: &str, reason: impl Into<String>) -> FormatError {
    FormatError::CannotWrite {
        tensor: tensor.to_string(),
        reason: reason.into(),
    }
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the data alignment (a power of two; 32 by default) and records
    /// it as `general.alignment`, as `GGUFWriter.add_custom_alignment` does.
    pub fn alignment(&mut self, alignment: u32) -> Result<&mut Self, FormatError> {
        self.metadata("general.alignment", Value::U32(alignment))
    }

    /// Adds a metadata entry (keys are unique; array items must all have
    /// the declared type). `general.alignment` sets the data alignment, as
    /// readers take it from there.
    pub fn metadata(&mut self, key: &str, value: Value) -> Result<&mut Self, FormatError> {
        if self.metadata.iter().any(|(k, _)| k == key) {
            return Err(refuse(key, "this metadata key was already added"));
        }
        check_value(key, &value)?;
        if key == "general.alignment" {
            match value {
                Value::U32(a) if a.is_power_of_two() => self.alignment = Some(a),
                ref v => {
                    return Err(refuse(
                        key,
                        format!("{v} ({}) is not a u32 power of two", v.type_name()),
                    ))
                }
            }
        }
        self.metadata.push((key.to_string(), value));
        Ok(self)
    }

    /// Adds a tensor in the ggml type of its dtype ([`GgmlType::of_dtype`]).
    pub fn tensor(&mut self, name: &str, t: &HostTensor) -> Result<&mut Self, FormatError> {
        let ggml_type = GgmlType::of_dtype(t.dtype()).ok_or_else(|| {
            refuse(
                name,
                format!("GGUF has no type for rlx dtype {}", t.dtype()),
            )
        })?;
        let bytes = match t.data() {
            TensorData::Packed(b) => b.clone(),
            _ => encode(t).ok_or_else(|| refuse(name, "no byte encoding"))?,
        };
        self.raw_tensor(name, ggml_type, t.shape().dims(), bytes)
    }

    /// Adds a tensor from its stored bytes (any ggml type, e.g. copied
    /// from another GGUF file). `shape` is row-major, outermost first.
    pub fn raw_tensor(
        &mut self,
        name: &str,
        ggml_type: GgmlType,
        shape: &[usize],
        bytes: Vec<u8>,
    ) -> Result<&mut Self, FormatError> {
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(refuse(name, "this tensor name was already added"));
        }
        if shape.len() > MAX_DIMS as usize {
            return Err(refuse(
                name,
                format!(
                    "{} dimensions (GGUF readers take at most {MAX_DIMS})",
                    shape.len()
                ),
            ));
        }
        let (block, _) = ggml_type.block();
        if shape.last().is_some_and(|&d| d % block != 0) {
            return Err(refuse(
                name,
                format!(
                    "its last axis ({}) is not a multiple of the {ggml_type} block size {block}",
                    shape[shape.len() - 1]
                ),
            ));
        }
        let numel = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
        let want = numel.and_then(|n| ggml_type.bytes_for(n));
        if want != Some(bytes.len() as u64) {
            return Err(refuse(
                name,
                format!(
                    "{} bytes do not hold shape {shape:?} of {ggml_type} ({want:?} expected)",
                    bytes.len()
                ),
            ));
        }
        self.tensors.push(Pending {
            name: name.to_string(),
            ggml_type,
            shape: shape.to_vec(),
            bytes,
        });
        Ok(self)
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let align = self.alignment.map_or(DEFAULT_ALIGNMENT, u64::from) as usize;
        let pad = |n: usize| n.div_ceil(align) * align;
        let mut out = Vec::new();
        out.extend(MAGIC);
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_string(&mut out, k);
            out.extend(v.value_type().id().to_le_bytes());
            put_value(&mut out, v);
        }
        let mut offset = 0usize;
        for t in &self.tensors {
            put_string(&mut out, &t.name);
            out.extend((t.shape.len() as u32).to_le_bytes());
            for &d in t.shape.iter().rev() {
                out.extend((d as u64).to_le_bytes());
            }
            out.extend(t.ggml_type.id().to_le_bytes());
            out.extend((offset as u64).to_le_bytes());
            offset += pad(t.bytes.len());
        }
        out.resize(pad(out.len()), 0);
        out.reserve(offset);
        for t in &self.tensors {
            out.extend(&t.bytes);
            out.resize(out.len() + pad(t.bytes.len()) - t.bytes.len(), 0);
        }
        out
    }

    /// Writes the file to `path` through a temporary file renamed over it,
    /// so a reader that has the old file mapped keeps its bytes.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<(), FormatError> {
        let path = path.as_ref();
        let io = |source| FormatError::Io {
            file: path.display().to_string(),
            source,
        };
        let tmp = path.with_extension("gguf.partial");
        std::fs::write(&tmp, self.to_bytes()).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

fn check_value(key: &str, v: &Value) -> Result<(), FormatError> {
    if let Value::Array(t, items) = v {
        if items.is_empty() {
            return Err(refuse(key, "an empty array (GGUF readers refuse them)"));
        }
        for item in items {
            if item.value_type() != *t {
                return Err(refuse(
                    key,
                    format!("an array of {t} holds a {}", item.type_name()),
                ));
            }
            check_value(key, item)?;
        }
    }
    Ok(())
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend(x.to_le_bytes()),
        Value::I16(x) => out.extend(x.to_le_bytes()),
        Value::U32(x) => out.extend(x.to_le_bytes()),
        Value::I32(x) => out.extend(x.to_le_bytes()),
        Value::F32(x) => out.extend(x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_string(out, s),
        Value::U64(x) => out.extend(x.to_le_bytes()),
        Value::I64(x) => out.extend(x.to_le_bytes()),
        Value::F64(x) => out.extend(x.to_le_bytes()),
        Value::Array(t, items) => {
            out.extend(t.id().to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
    }
}
