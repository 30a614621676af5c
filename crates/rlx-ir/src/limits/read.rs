//! Reading a file whole, bounded by `max_file_bytes`.
//!
//! Configs, tokenizer files and IR files are read whole into memory; a
//! huge or endless file (a mistaken path, `/dev/zero`, a FIFO) must fail
//! with a [`LimitError`] instead of exhausting memory. The size the file
//! system reports is checked first (cheap, and the common case), then the
//! read itself stops one byte past the bound, because character devices,
//! pipes and files still growing report a length that means nothing.
//! std-only, so it builds for wasm32 too.

use super::{limits, LimitError, Limits};
use std::io::Read;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why [`read_bounded`] failed.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The operating system refused to open or read the file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than `max_file_bytes`.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// [`read_bounded_to_string`]: the file is not UTF-8.
    #[error("{}: not valid UTF-8 (bad byte at offset {offset}); the file is not text or is corrupt", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Offset of the first invalid byte.
        offset: usize,
    },
}

impl ReadError {
    /// The file the error is about, when it is not a limit error (those
    /// name the file in their `what`).
    pub fn path(&self) -> Option<&Path> {
        match self {
            ReadError::Io { path, .. } | ReadError::NotUtf8 { path, .. } => Some(path),
            ReadError::Limit(_) => None,
        }
    }
}

/// Read `path` whole, refusing files over [`limits()`]`.max_file_bytes`.
pub fn read_bounded(path: impl AsRef<Path>) -> Result<Vec<u8>, ReadError> {
    limits().read_file(path.as_ref())
}

/// [`read_bounded`], as UTF-8 text.
pub fn read_bounded_to_string(path: impl AsRef<Path>) -> Result<String, ReadError> {
    let path = path.as_ref();
    let bytes = read_bounded(path)?;
    String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

impl Limits {
    /// Read `path` whole under these limits' `max_file_bytes` (the free
    /// function [`read_bounded`] uses the limits in force).
    pub fn read_file(&self, path: &Path) -> Result<Vec<u8>, ReadError> {
        let io = |source| ReadError::Io {
            path: path.to_path_buf(),
            source,
        };
        let what = || format!("file {}", path.display());
        let file = std::fs::File::open(path).map_err(io)?;
        let declared = file.metadata().map_err(io)?.len();
        self.check_file_bytes(&what(), declared)?;
        let max = self.max_file_bytes;
        // The reported length is only a hint (0 for devices and pipes).
        let mut buf = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
        file.take(max.saturating_add(1))
            .read_to_end(&mut buf)
            .map_err(io)?;
        self.check_file_bytes(&what(), buf.len() as u64)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(max: u64) -> Limits {
        Limits {
            max_file_bytes: max,
            ..Limits::DEFAULT
        }
    }

    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let p = std::env::temp_dir().join(format!("rlx-read-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn a_file_within_the_bound_is_read_whole() {
        let p = temp("ok", b"hello");
        assert_eq!(small(5).read_file(&p).unwrap(), b"hello");
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_file_over_the_bound_is_refused_by_its_length() {
        let p = temp("big", &[7u8; 100]);
        let e = small(99).read_file(&p).unwrap_err();
        let ReadError::Limit(l) = &e else {
            panic!("{e}")
        };
        assert_eq!((l.limit, l.value, l.max), ("max_file_bytes", 100, 99));
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
        std::fs::remove_file(p).unwrap();
    }

    /// `/dev/zero` reports length 0 and never ends: the `take` bound stops it.
    #[cfg(unix)]
    #[test]
    fn an_endless_file_stops_at_the_bound() {
        let e = small(4096).read_file(Path::new("/dev/zero")).unwrap_err();
        let ReadError::Limit(l) = e else {
            panic!("{e}")
        };
        assert_eq!((l.value, l.max), (4097, 4096));
    }

    #[test]
    fn missing_files_and_bad_utf8_name_the_path() {
        let e = read_bounded("/nonexistent/rlx/config.json").unwrap_err();
        assert!(matches!(e, ReadError::Io { .. }), "{e}");
        assert!(
            e.to_string().contains("/nonexistent/rlx/config.json"),
            "{e}"
        );
        let p = temp("utf8", b"ok\xff");
        let e = read_bounded_to_string(&p).unwrap_err();
        assert!(matches!(e, ReadError::NotUtf8 { offset: 2, .. }), "{e}");
        std::fs::remove_file(p).unwrap();
    }
}
