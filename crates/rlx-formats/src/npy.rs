//! NumPy `.npy` files (format versions 1, 2 and 3): the inputs and outputs
//! of `rlx run`, readable and writable by `numpy.load` / `numpy.save`.
//!
//! Only C-ordered little-endian arrays of the dtypes rlx holds are read
//! (`<f2 <f4 <f8 |i1 |u1 <i2 <i4 <i8 |b1 <c8`); anything else is an
//! [`NpyError`] naming the file and what to change, never a panic. The
//! declared shape is checked against the bytes present and against
//! [`rlx_ir::limits`](mod@rlx_ir::limits) before anything is allocated.

use half::f16;
use rlx_ir::{limits, DType, HostTensor, TensorData};

const MAGIC: &[u8] = b"\x93NUMPY";
/// A header longer than this is not a NumPy header (NumPy writes < 1 KiB).
const MAX_HEADER: usize = 1 << 20;

/// An error reading or writing a `.npy` file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct NpyError {
    /// The path, or the label given to a buffer.
    pub file: String,
    /// What is wrong and what to do.
    pub problem: String,
}

fn err(file: &str, problem: impl Into<String>) -> NpyError {
    NpyError {
        file: file.to_string(),
        problem: problem.into(),
    }
}

/// The dtype for a NumPy `descr`.
fn dtype_of(descr: &str) -> Option<DType> {
    Some(match descr {
        "<f2" => DType::F16,
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "|i1" | "<i1" => DType::I8,
        "|u1" | "<u1" => DType::U8,
        "<i2" => DType::I16,
        "<i4" => DType::I32,
        "<i8" => DType::I64,
        "|b1" => DType::Bool,
        "<c8" => DType::C64,
        _ => return None,
    })
}

fn descr_of(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F16 => "<f2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::Bool => "|b1",
        DType::C64 => "<c8",
        _ => return None,
    })
}

fn elem_bytes(dtype: DType) -> usize {
    match dtype {
        DType::I8 | DType::U8 | DType::Bool => 1,
        DType::F16 | DType::I16 => 2,
        DType::F32 | DType::I32 => 4,
        _ => 8,
    }
}

/// The value of `key` in NumPy's header dict, as written by `numpy.save`:
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}':"))? + key.len() + 3;
    let rest = header[at..].trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')')? + 1
    } else if let Some(r) = rest.strip_prefix('\'') {
        r.find('\'')? + 2
    } else {
        rest.find([',', '}']).unwrap_or(rest.len())
    };
    Some(rest[..end].trim())
}

fn parse_shape(file: &str, s: &str) -> Result<Vec<usize>, NpyError> {
    let inner = s
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| err(file, format!("shape `{s}` is not a tuple")))?;
    let dims: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.parse::<usize>()
                .map_err(|_| err(file, format!("shape `{s}`: `{d}` is not a dimension")))
        })
        .collect::<Result<_, _>>()?;
    limits()
        .check_rank(&format!("{file}: shape"), dims.len())
        .map_err(|e| err(file, e.to_string()))?;
    Ok(dims)
}

/// Reads a `.npy` file's bytes; `file` labels errors.
pub fn read(file: &str, bytes: &[u8]) -> Result<HostTensor, NpyError> {
    if bytes.len() < 10 || !bytes.starts_with(MAGIC) {
        return Err(err(
            file,
            "not a .npy file (no \\x93NUMPY magic); save arrays with numpy.save",
        ));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(err(file, format!("format version {v} is not 1, 2 or 3"))),
    };
    if hlen > MAX_HEADER || start + hlen > bytes.len() {
        return Err(err(
            file,
            format!(
                "header of {hlen} bytes does not fit the file's {} bytes: truncated or corrupt",
                bytes.len()
            ),
        ));
    }
    let header = std::str::from_utf8(&bytes[start..start + hlen])
        .map_err(|_| err(file, "header is not text: corrupt file"))?;
    let descr = field(header, "descr")
        .and_then(|d| d.strip_prefix('\'')?.strip_suffix('\''))
        .ok_or_else(|| err(file, "header has no 'descr'"))?;
    let dtype = dtype_of(descr).ok_or_else(|| {
        err(
            file,
            format!(
                "dtype '{descr}' is not one rlx reads (little-endian f2 f4 f8 i1 u1 i2 i4 i8 b1 c8); \
                 convert with arr.astype(...)"
            ),
        )
    })?;
    match field(header, "fortran_order") {
        Some("False") => {}
        Some("True") => {
            return Err(err(
                file,
                "Fortran-ordered array; save np.ascontiguousarray(arr) instead",
            ))
        }
        _ => return Err(err(file, "header has no 'fortran_order'")),
    }
    let dims = parse_shape(
        file,
        field(header, "shape").ok_or_else(|| err(file, "header has no 'shape'"))?,
    )?;
    let numel = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| err(file, format!("shape {dims:?} overflows")))?;
    let want = numel
        .checked_mul(elem_bytes(dtype))
        .ok_or_else(|| err(file, format!("shape {dims:?} overflows")))?;
    limits()
        .check_tensor_bytes(file, want as u64)
        .map_err(|e| err(file, e.to_string()))?;
    let data = &bytes[start + hlen..];
    if data.len() != want {
        return Err(err(
            file,
            format!(
                "{descr} shape {dims:?} needs {want} data bytes, the file holds {}: truncated or corrupt",
                data.len()
            ),
        ));
    }
    let td = decode(dtype, data).ok_or_else(|| {
        err(
            file,
            "a |b1 element is neither 0 nor 1: not a boolean array",
        )
    })?;
    HostTensor::new(dtype, dims, td).map_err(|e| err(file, e.to_string()))
}

fn decode(dtype: DType, d: &[u8]) -> Option<TensorData> {
    macro_rules! le {
        ($t:ty, $n:literal) => {
            d.chunks_exact($n)
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
    }
    Some(match dtype {
        DType::Bool => TensorData::Bool(
            d.iter()
                .map(|&b| match b {
                    0 => Some(false),
                    1 => Some(true),
                    _ => None,
                })
                .collect::<Option<_>>()?,
        ),
        DType::I8 => TensorData::I8(d.iter().map(|&b| b as i8).collect()),
        DType::U8 => TensorData::U8(d.to_vec()),
        DType::I16 => TensorData::I16(le!(i16, 2)),
        DType::I32 => TensorData::I32(le!(i32, 4)),
        DType::I64 => TensorData::I64(le!(i64, 8)),
        DType::F16 => TensorData::F16(
            d.chunks_exact(2)
                .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
        ),
        DType::F32 => TensorData::F32(le!(f32, 4)),
        DType::F64 => TensorData::F64(le!(f64, 8)),
        DType::C64 => TensorData::C64(
            d.chunks_exact(8)
                .map(|c| {
                    [
                        f32::from_le_bytes(c[..4].try_into().unwrap()),
                        f32::from_le_bytes(c[4..].try_into().unwrap()),
                    ]
                })
                .collect(),
        ),
        _ => return None,
    })
}

/// Writes a tensor as `.npy` (version 1.0, C order); `file` labels errors.
pub fn write(file: &str, t: &HostTensor) -> Result<Vec<u8>, NpyError> {
    let descr = descr_of(t.dtype()).ok_or_else(|| {
        err(
            file,
            format!("dtype {} has no .npy equivalent; cast it first", t.dtype()),
        )
    })?;
    let dims = t.shape().dims();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // NumPy pads the header with spaces to a multiple of 64 bytes, ending in '\n'.
    let pad = 64 - (10 + header.len() + 1) % 64;
    header.push_str(&" ".repeat(pad % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + t.numel() * elem_bytes(t.dtype()));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    match t.data() {
        TensorData::Bool(v) => out.extend(v.iter().map(|&b| b as u8)),
        TensorData::I8(v) => out.extend(v.iter().map(|&b| b as u8)),
        TensorData::U8(v) => out.extend_from_slice(v),
        TensorData::I16(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::I32(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::I64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::F16(v) => v.iter().for_each(|x| out.extend(x.to_bits().to_le_bytes())),
        TensorData::F32(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::F64(v) => v.iter().for_each(|x| out.extend(x.to_le_bytes())),
        TensorData::C64(v) => v.iter().for_each(|[re, im]| {
            out.extend(re.to_le_bytes());
            out.extend(im.to_le_bytes())
        }),
        _ => {
            return Err(err(
                file,
                format!("dtype {} has no .npy equivalent", t.dtype()),
            ))
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes `numpy.save` wrote (NumPy 2.x) for
    /// `np.arange(6, dtype='<f4').reshape(2, 3)`.
    fn numpy_f32_2x3() -> Vec<u8> {
        let mut v =
            b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
                .to_vec();
        while v.len() < 127 {
            v.push(b' ');
        }
        v.push(b'\n');
        for i in 0..6 {
            v.extend((i as f32).to_le_bytes());
        }
        v
    }

    #[test]
    fn reads_what_numpy_writes_and_writes_it_back_byte_for_byte() {
        let bytes = numpy_f32_2x3();
        let t = read("a.npy", &bytes).unwrap();
        assert_eq!(t.shape().dims(), &[2, 3]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![0., 1., 2., 3., 4., 5.]);
        assert_eq!(write("a.npy", &t).unwrap(), bytes);
    }

    #[test]
    fn round_trips_every_dtype_and_rank() {
        let ts = [
            HostTensor::from_slice(&[true, false, true], [3]).unwrap(),
            HostTensor::from_slice(&[-1i8, 7], [2, 1]).unwrap(),
            HostTensor::from_slice(&[1i64 << 40, -5], [2]).unwrap(),
            HostTensor::from_slice(&[f16::from_f32(1.5)], [1, 1, 1]).unwrap(),
            HostTensor::scalar(2.5f64),
            HostTensor::from_slice(&[[1.0f32, -2.0]], [1]).unwrap(),
        ];
        for t in ts {
            let b = write("t", &t).unwrap();
            // NumPy aligns the data to 64 bytes.
            let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
            assert_eq!((10 + hlen) % 64, 0);
            assert_eq!(read("t", &b).unwrap(), t);
        }
    }

    /// `bytes` with the first `from` replaced by `to` (same length keeps
    /// the header length valid).
    fn swap(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
        let at = bytes
            .windows(from.len())
            .position(|w| w == from.as_bytes())
            .expect("pattern present");
        [&bytes[..at], to.as_bytes(), &bytes[at + from.len()..]].concat()
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let good = numpy_f32_2x3();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"hello".to_vec(), "magic"),
            (good[..100].to_vec(), "truncated"),
            (good[..good.len() - 1].to_vec(), "needs 24 data bytes"),
            (swap(&good, "<f4", ">f4"), "is not one rlx reads"),
            (swap(&good, "False", "True "), "Fortran"),
            (swap(&good, "(2, 3)", "(2, x)"), "not a dimension"),
        ];
        for (bytes, want) in cases {
            let e = read("bad.npy", &bytes).unwrap_err().to_string();
            assert!(e.contains("bad.npy") && e.contains(want), "{want}: {e}");
        }
        // A huge declared shape is refused before allocating anything.
        let huge = swap(&good, "(2, 3), ", "(99999999999,99999),");
        let e = read("huge.npy", &huge).unwrap_err().to_string();
        assert!(e.contains("max_tensor_bytes"), "{e}");
    }
}
