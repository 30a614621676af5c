//! Writing safetensors files from rlx tensors.

use super::convert::{encode, stored_dtype};
use crate::error::FormatError;
use rlx_ir::HostTensor;
use st::Dtype;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// One tensor handed to the safetensors serializer; its bytes are produced
/// only when the serializer copies them out.
struct Out<'a> {
    dtype: Dtype,
    tensor: &'a HostTensor,
    len: usize,
}

impl st::View for Out<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        self.tensor.shape().dims()
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Owned(encode(self.tensor).unwrap_or_default())
    }
    fn data_len(&self) -> usize {
        self.len
    }
}

/// Serialize tensors and a `__metadata__` map (may be empty) into the bytes
/// of a safetensors file.
///
/// Every dtype with a safetensors equivalent can be written: F64, F32, F16,
/// BF16, I64, I32, I16, I8, U8, Bool, C64. Packed and block-quantized
/// dtypes (I4, Q4_0, ...) cannot, nor can a name used twice or the reserved
/// name `__metadata__`. Tensors are laid out as every safetensors writer
/// does (by decreasing alignment, then name), and the output is
/// deterministic: the same tensors and metadata give the same bytes.
pub fn serialize(
    tensors: &[(&str, &HostTensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<Vec<u8>, FormatError> {
    let mut seen = HashSet::new();
    let mut views = Vec::with_capacity(tensors.len());
    for &(name, t) in tensors {
        let cannot = |reason: String| FormatError::CannotWrite {
            tensor: name.to_string(),
            reason,
        };
        if name == "__metadata__" {
            return Err(cannot(
                "`__metadata__` is reserved for the metadata map; rename the tensor".into(),
            ));
        }
        if !seen.insert(name) {
            return Err(cannot(
                "the name is given twice; each tensor needs its own name".into(),
            ));
        }
        let dtype = stored_dtype(t.dtype()).ok_or_else(|| {
            cannot(format!(
                "safetensors has no {} dtype; dequantize or unpack the tensor first",
                t.dtype()
            ))
        })?;
        let len = t
            .data()
            .len()
            .checked_mul(dtype.bitsize() / 8)
            .ok_or_else(|| cannot("the tensor is too large".into()))?;
        views.push((
            name,
            Out {
                dtype,
                tensor: t,
                len,
            },
        ));
    }
    let info = (!metadata.is_empty()).then(|| {
        metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<HashMap<_, _>>()
    });
    let mut bytes = st::serialize(views, info).map_err(|e| FormatError::CannotWrite {
        tensor: tensors.first().map_or("", |t| t.0).to_string(),
        reason: e.to_string(),
    })?;
    // The crate writes `__metadata__` from a HashMap, in random order; put
    // its keys in sorted order so equal inputs give equal files.
    if metadata.len() > 1 {
        if let Some(canonical) = canonical(&bytes, metadata) {
            bytes = canonical;
        }
    }
    // The output must read back; anything else is a bug, reported, not
    // written.
    if let Err(e) = st::SafeTensors::read_metadata(&bytes) {
        return Err(FormatError::CannotWrite {
            tensor: tensors.first().map_or("", |t| t.0).to_string(),
            reason: format!("the serialized file does not validate ({e}); please report this"),
        });
    }
    Ok(bytes)
}

/// `bytes` with its header re-emitted exactly as the crate emits it, but
/// with the metadata keys sorted. `None` if anything does not line up.
pub(crate) fn canonical(bytes: &[u8], metadata: &BTreeMap<String, String>) -> Option<Vec<u8>> {
    let (n, meta) = st::SafeTensors::read_metadata(bytes).ok()?;
    let mut json = String::from("{");
    if !metadata.is_empty() {
        json.push_str("\"__metadata__\":");
        json.push_str(&serde_json::to_string(metadata).ok()?);
    }
    for name in meta.offset_keys() {
        if json.len() > 1 {
            json.push(',');
        }
        json.push_str(&serde_json::to_string(&name).ok()?);
        json.push(':');
        json.push_str(&serde_json::to_string(meta.info(&name)?).ok()?);
    }
    json.push('}');
    if json.len().next_multiple_of(8) != n {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    out.extend_from_slice(&(n as u64).to_le_bytes());
    out.extend_from_slice(json.as_bytes());
    out.resize(8 + n, b' ');
    out.extend_from_slice(bytes.get(8 + n..)?);
    Some(out)
}

/// [`serialize`] into a file. The file is written next to `path` under a
/// temporary name and renamed over it, so a reader that has the old file
/// memory-mapped keeps seeing the old bytes.
pub fn write_file(
    path: impl AsRef<Path>,
    tensors: &[(&str, &HostTensor)],
    metadata: &BTreeMap<String, String>,
) -> Result<(), FormatError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let path = path.as_ref();
    let label = path.display().to_string();
    let io = |source| FormatError::Io {
        file: label.clone(),
        source,
    };
    let bytes = serialize(tensors, metadata)?;
    let Some(name) = path.file_name() else {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a file path",
        )));
    };
    #[cfg(not(target_arch = "wasm32"))]
    let pid = std::process::id();
    #[cfg(target_arch = "wasm32")]
    let pid = 0u32;
    let tmp = path.with_file_name(format!(
        ".{}.{pid}.{}.tmp",
        name.to_string_lossy(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&tmp, &bytes).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_header_matches_the_crate_byte_for_byte() {
        let a = HostTensor::from_slice(&[1.0f32, 2.0], [2]).unwrap();
        let b = HostTensor::from_slice(&[1i64, 2, 3], [3]).unwrap();
        let c = HostTensor::from_slice(&[true], [1]).unwrap();
        let tensors = [("z", &a), ("b\"q\\uote", &b), ("c", &c)];
        for meta in [
            BTreeMap::new(),
            BTreeMap::from([("format".to_string(), "pt \"x\"".to_string())]),
        ] {
            let info = (!meta.is_empty()).then(|| meta.clone().into_iter().collect());
            let views: Vec<_> = tensors
                .iter()
                .map(|&(n, t)| {
                    let dtype = stored_dtype(t.dtype()).unwrap();
                    let len = t.data().len() * dtype.bitsize() / 8;
                    (
                        n,
                        Out {
                            dtype,
                            tensor: t,
                            len,
                        },
                    )
                })
                .collect();
            let crate_bytes = st::serialize(views, info).unwrap();
            assert_eq!(canonical(&crate_bytes, &meta).unwrap(), crate_bytes);
        }
    }

    #[test]
    fn many_metadata_keys_are_deterministic() {
        let a = HostTensor::from_slice(&[1.0f32, 2.0], [2]).unwrap();
        let meta: BTreeMap<String, String> = (0..20)
            .map(|i| (format!("key{i}"), format!("value{i}")))
            .collect();
        let first = serialize(&[("a", &a)], &meta).unwrap();
        for _ in 0..10 {
            assert_eq!(serialize(&[("a", &a)], &meta).unwrap(), first);
        }
        let text = String::from_utf8_lossy(&first);
        assert!(text.contains("\"key0\":\"value0\",\"key1\":\"value1\",\"key10\""));
    }
}
