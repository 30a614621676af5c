//! Pinpointing why a buffer is not a valid safetensors file.
//!
//! The `safetensors` crate decides validity; its errors, though, often say
//! neither which tensor nor which bytes (`TensorInvalidInfo`,
//! `InvalidOffset`). When it rejects a buffer, [`diagnose`] walks the same
//! rules over the raw header and reports the first violation with the names
//! and numbers a person needs. It never panics, whatever the bytes.

use crate::error::FormatError;
use serde_json::Value;
use st::Dtype;

/// The safetensors crate's limit on the JSON header.
pub(crate) const MAX_HEADER: usize = 100_000_000;

/// The first rule `bytes` breaks, or `None` when these checks find nothing.
pub(crate) fn diagnose(bytes: &[u8], file: &str) -> Option<FormatError> {
    let file = file.to_string();
    let Some(len_field) = bytes.get(..8) else {
        return Some(FormatError::Truncated {
            file,
            len: bytes.len(),
        });
    };
    let mut a = [0u8; 8];
    a.copy_from_slice(len_field);
    let declared = u64::from_le_bytes(a);
    let n = match usize::try_from(declared) {
        Ok(n) if n <= MAX_HEADER => n,
        _ => {
            return Some(FormatError::HeaderTooLarge {
                file,
                declared,
                limit: MAX_HEADER,
            })
        }
    };
    let available = bytes.len() - 8;
    let Some(header) = bytes.get(8..8 + n) else {
        return Some(FormatError::HeaderPastEnd {
            file,
            declared,
            available,
        });
    };
    let text = match std::str::from_utf8(header) {
        Ok(t) => t,
        Err(e) => {
            return Some(FormatError::HeaderNotUtf8 {
                file,
                offset: e.valid_up_to(),
            })
        }
    };
    let json: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Some(FormatError::HeaderJson {
                file,
                line: e.line(),
                column: e.column(),
                message: e.to_string(),
            })
        }
    };
    let Value::Object(map) = json else {
        return Some(FormatError::HeaderJson {
            file,
            line: 1,
            column: 1,
            message: "the header must be a JSON object of tensor entries".into(),
        });
    };
    let data_len = available - n;

    // (name, start, end) of every tensor.
    let mut ranges: Vec<(&str, usize, usize)> = Vec::with_capacity(map.len());
    for (name, v) in &map {
        let bad = |problem: String| FormatError::BadEntry {
            file: file.clone(),
            tensor: name.clone(),
            problem,
        };
        if name == "__metadata__" {
            let ok = v
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string));
            if !ok {
                return Some(bad(
                    "`__metadata__` must be an object mapping strings to strings".into(),
                ));
            }
            continue;
        }
        let Some(obj) = v.as_object() else {
            return Some(bad(format!("expected an object, found `{v}`")));
        };
        let dtype = match obj.get("dtype") {
            None => return Some(bad("missing `dtype`".into())),
            Some(d) => match serde_json::from_value::<Dtype>(d.clone()) {
                Ok(d) => d,
                Err(_) => {
                    return Some(bad(format!(
                        "unknown dtype {d} (safetensors dtypes: BOOL, U8, I8, I16, U16, I32, \
                         U32, I64, U64, F16, BF16, F32, F64, C64, F8_E4M3, F8_E5M2, ...)"
                    )))
                }
            },
        };
        let shape = match obj.get("shape").map(usizes) {
            None => return Some(bad("missing `shape`".into())),
            Some(None) => {
                return Some(bad("`shape` must be a list of non-negative integers".into()))
            }
            Some(Some(s)) => s,
        };
        let (start, end) = match obj.get("data_offsets").map(usizes) {
            None => return Some(bad("missing `data_offsets`".into())),
            Some(Some(o)) if o.len() == 2 => (o[0], o[1]),
            Some(_) => {
                return Some(bad(
                    "`data_offsets` must be two non-negative integers [start, end]".into(),
                ))
            }
        };
        if end < start {
            return Some(FormatError::BadOffsets {
                file,
                tensor: name.clone(),
                start,
                end,
            });
        }
        let bits = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.bitsize()));
        let Some(bits) = bits else {
            return Some(FormatError::ShapeOverflow {
                file,
                tensor: name.clone(),
                dtype: dtype.to_string(),
                shape,
            });
        };
        if !bits.is_multiple_of(8) {
            return Some(bad(format!(
                "{} elements of {dtype} do not fill a whole number of bytes",
                bits / dtype.bitsize().max(1)
            )));
        }
        if end - start != bits / 8 {
            return Some(FormatError::LengthMismatch {
                file,
                tensor: name.clone(),
                dtype: dtype.to_string(),
                shape,
                expected: bits / 8,
                actual: end - start,
            });
        }
        if end > data_len {
            return Some(FormatError::OffsetOutOfRange {
                file,
                tensor: name.clone(),
                start,
                end,
                data_len,
            });
        }
        ranges.push((name, start, end));
    }

    ranges.sort_by_key(|&(_, s, e)| (s, e));
    let mut covered = 0usize;
    let mut last: Option<(&str, usize, usize)> = None;
    for &(name, start, end) in &ranges {
        if start > covered {
            return Some(FormatError::UncoveredData {
                file,
                start: covered,
                end: start,
            });
        }
        if let Some((other, other_start, other_end)) = last {
            if start < other_end {
                return Some(FormatError::OverlappingOffsets {
                    file,
                    tensor: name.to_string(),
                    start,
                    end,
                    other: other.to_string(),
                    other_start,
                    other_end,
                });
            }
        }
        covered = covered.max(end);
        last = Some((name, start, end));
    }
    if covered < data_len {
        return Some(FormatError::UncoveredData {
            file,
            start: covered,
            end: data_len,
        });
    }
    None
}

/// A JSON list of non-negative integers that fit `usize`.
fn usizes(v: &Value) -> Option<Vec<usize>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|u| usize::try_from(u).ok()))
        .collect()
}
