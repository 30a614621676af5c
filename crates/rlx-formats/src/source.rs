//! The bytes of a model file: memory-mapped natively (feature `mmap`),
//! read whole otherwise. Shared by the safetensors and GGUF readers.

use crate::error::FormatError;
use std::path::Path;
use std::sync::Arc;

/// Owned, shared or mapped bytes.
pub(crate) type Bytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// (bytes, label, whether mapped). A mapped file must not change while
/// it is open (see `SafetensorsFile::open`).
pub(crate) fn open(path: &Path) -> Result<(Bytes, String, bool), FormatError> {
    #[cfg(all(feature = "mmap", not(target_arch = "wasm32")))]
    {
        let label = path.display().to_string();
        let io = |source| FormatError::Io {
            file: label.clone(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let map = crate::mmap::map(&file).map_err(io)?;
        Ok((Arc::new(map), label, true))
    }
    #[cfg(not(all(feature = "mmap", not(target_arch = "wasm32"))))]
    {
        read(path).map(|(b, l)| (b, l, false))
    }
}

/// The whole file in memory. At most the length the file system reports
/// is read, so an endless file (a device, a pipe) reads as empty or
/// truncated instead of exhausting memory.
pub(crate) fn read(path: &Path) -> Result<(Bytes, String), FormatError> {
    use std::io::Read;
    let label = path.display().to_string();
    let io = |source| FormatError::Io {
        file: label.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut bytes).map_err(io)?;
    Ok((Arc::new(bytes), label))
}
