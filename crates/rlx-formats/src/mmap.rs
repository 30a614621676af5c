//! The only `unsafe` in rlx-formats: memory-mapping a file read-only.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;

/// Map `file` read-only.
pub(crate) fn map(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the mapping is exposed as an immutable `&[u8]`, which Rust
    // assumes cannot change while borrowed. That holds only as long as no
    // one modifies or truncates the file while it is mapped: another process
    // writing to it would change bytes under live references, and truncating
    // it makes reads past the new end fault (SIGBUS). Callers of
    // `SafetensorsFile::open` are told this in its documentation; writers in
    // this crate (`write_file`) replace a file by renaming a new one over
    // it, which leaves existing mappings of the old file intact.
    unsafe { memmap2::Mmap::map(file) }
}
