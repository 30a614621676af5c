//! The IDX format: magic `0 0 type ndim`, ndim big-endian u32 extents,
//! then the data. MNIST uses type 0x08 (u8). Gzip is detected by its magic.

use crate::DataError;
use std::io::Read;
use std::path::Path;

/// An IDX array of bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct IdxU8 {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Parse IDX bytes (gunzipping first if they are gzip).
pub fn parse(bytes: &[u8], file: &str) -> Result<IdxU8, DataError> {
    let err = |msg: String| DataError::Format {
        file: file.into(),
        msg,
    };
    let raw;
    let b: &[u8] = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = vec![];
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| err(format!("gzip: {e}")))?;
        raw = out;
        &raw
    } else {
        bytes
    };
    if b.len() < 4 || b[0] != 0 || b[1] != 0 {
        return Err(err("not an IDX file (bad magic)".into()));
    }
    if b[2] != 0x08 {
        return Err(err(format!(
            "element type 0x{:02x}; only u8 (0x08) is supported",
            b[2]
        )));
    }
    let nd = b[3] as usize;
    let head = 4 + 4 * nd;
    if b.len() < head {
        return Err(err("truncated header".into()));
    }
    let dims: Vec<usize> = (0..nd)
        .map(|i| u32::from_be_bytes(b[4 + 4 * i..8 + 4 * i].try_into().unwrap()) as usize)
        .collect();
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| err("extents overflow".into()))?;
    if b.len() - head != n {
        return Err(err(format!(
            "{:?} needs {n} bytes of data, file has {}",
            dims,
            b.len() - head
        )));
    }
    Ok(IdxU8 {
        dims,
        data: b[head..].to_vec(),
    })
}

pub fn read(path: impl AsRef<Path>) -> Result<IdxU8, DataError> {
    let p = path.as_ref();
    let file = p.display().to_string();
    let bytes = std::fs::read(p).map_err(|source| DataError::Io {
        file: file.clone(),
        source,
    })?;
    parse(&bytes, &file)
}
