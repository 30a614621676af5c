//! Checks on the raw JSON header that run before the `safetensors` crate
//! parses it, for what that crate cannot or does not refuse:
//!
//! * **Duplicate names.** The crate reads the header into a map, so of two
//!   entries named alike the last silently wins and the first tensor's
//!   bytes are ignored (or, when the offsets happen to line up, the file
//!   loads with the wrong tensor). Here the header is read as a list of
//!   entries, keeping duplicates, so they can be refused by name.
//! * **Limits.** The header is bounded by `max_file_bytes` (it is read
//!   whole and parsed), and every tensor's size *as rlx will load it*
//!   (after widening, e.g. F8_E4M3 → F16) by `max_tensor_bytes` — from the
//!   declared shape, before any data is touched or allocated.
//!
//! Anything else malformed is left to the crate and to `diagnose`, which
//! already name the fault precisely; these checks only speak when they are
//! sure.

use super::convert::loaded_dtype;
use super::diagnose::MAX_HEADER;
use crate::error::FormatError;
use rlx_ir::limits::{tensor_bytes, Limits};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use st::Dtype;
use std::collections::HashSet;
use std::fmt;

/// The header's top-level entries in file order, duplicates kept.
struct Entries(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of tensor entries")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    if k == "__metadata__" {
                        m.next_value::<IgnoredAny>()?;
                    } else {
                        out.push((k, m.next_value::<Value>()?));
                    }
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Run the checks on `bytes` (a whole file) under `lim`.
pub(crate) fn check(bytes: &[u8], file: &str, lim: &Limits) -> Result<(), FormatError> {
    let Some(len_field) = bytes.get(..8) else {
        return Ok(()); // `Truncated`, from diagnose
    };
    let mut a = [0u8; 8];
    a.copy_from_slice(len_field);
    let declared = u64::from_le_bytes(a);
    if declared > MAX_HEADER as u64 {
        return Ok(()); // `HeaderTooLarge`, from diagnose
    }
    lim.check_file_bytes("the JSON header", declared)
        .map_err(|source| FormatError::TooLarge {
            file: file.to_string(),
            tensor: None,
            source,
        })?;
    let Some(header) = bytes.get(8..8 + declared as usize) else {
        return Ok(()); // `HeaderPastEnd`
    };
    let Ok(Entries(entries)) = serde_json::from_slice::<Entries>(header) else {
        return Ok(()); // not UTF-8, not JSON, not an object: diagnose says where
    };
    let mut seen = HashSet::with_capacity(entries.len());
    for (name, v) in &entries {
        if !seen.insert(name.as_str()) {
            return Err(FormatError::DuplicateName {
                file: file.to_string(),
                tensor: name.clone(),
            });
        }
        let Some(dtype) = v
            .get("dtype")
            .and_then(|d| serde_json::from_value::<Dtype>(d.clone()).ok())
            .and_then(loaded_dtype)
        else {
            continue;
        };
        let Some(shape) = v.get("shape").and_then(usizes) else {
            continue;
        };
        // An overflowing size is `ShapeOverflow`, from diagnose.
        let Some(b) = tensor_bytes(dtype, &shape) else {
            continue;
        };
        lim.check_tensor_bytes(
            &format!("tensor `{name}` ({dtype} {shape:?}, as loaded)"),
            b,
        )
        .map_err(|source| FormatError::TooLarge {
            file: file.to_string(),
            tensor: Some(name.clone()),
            source,
        })?;
    }
    Ok(())
}

/// A JSON list of non-negative integers that fit `usize`.
fn usizes(v: &Value) -> Option<Vec<usize>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|u| usize::try_from(u).ok()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str) -> Vec<u8> {
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header.as_bytes());
        b
    }

    #[test]
    fn a_header_over_max_file_bytes_is_refused_before_parsing() {
        let h = r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
        let lim = Limits {
            max_file_bytes: 10,
            ..Limits::DEFAULT
        };
        let e = check(&file(h), "f", &lim).unwrap_err();
        let FormatError::TooLarge { source, tensor, .. } = &e else {
            panic!("{e}")
        };
        assert_eq!(tensor, &None);
        assert_eq!(
            (source.limit, source.value),
            ("max_file_bytes", h.len() as u64)
        );
        assert!(check(&file(h), "f", &Limits::DEFAULT).is_ok());
    }

    #[test]
    fn widened_dtypes_count_as_loaded() {
        // 8 F8_E4M3 elements: 8 bytes in the file, 16 as the F16 rlx loads.
        let h = r#"{"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}}"#;
        let lim = Limits {
            max_tensor_bytes: 15,
            ..Limits::DEFAULT
        };
        let e = check(&file(h), "f", &lim).unwrap_err();
        assert!(
            matches!(&e, FormatError::TooLarge { source, .. } if source.value == 16),
            "{e}"
        );
    }
}
