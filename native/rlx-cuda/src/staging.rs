//! Page-locked (pinned) host staging buffers for the copies of a run's
//! inputs and outputs.
//!
//! A copy from pageable memory is synchronous: the driver first copies into
//! its own pinned bounce buffer, and the host waits. Staging through memory
//! we pinned ourselves lets every upload and download be an async memcpy on
//! the executable's stream, ordered with the kernels without a host wait;
//! the host waits once per run, after the last download.
//!
//! [`pack`] is the layout (pure, tested on the host); [`Pinned`] the buffer.

use crate::error::CudaError;
use cudarc::driver::{result, CudaContext};
use std::sync::Arc;

/// Alignment of each tensor inside a staging buffer: the DMA engines copy
/// aligned ranges fastest, and every dtype's alignment divides it.
pub const ALIGN: usize = 256;

/// Byte offsets that pack tensors of `sizes` bytes one after another, each
/// starting at a multiple of [`ALIGN`], and the total bytes needed.
pub fn pack(sizes: &[usize]) -> (Vec<usize>, usize) {
    let mut offsets = Vec::with_capacity(sizes.len());
    let mut end = 0usize;
    for &n in sizes {
        let at = end.div_ceil(ALIGN) * ALIGN;
        offsets.push(at);
        end = at + n;
    }
    (offsets, end)
}

/// A page-locked host allocation (cuMemHostAlloc), freed on drop.
pub struct Pinned {
    ptr: *mut u8,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: the buffer is plain host memory owned by this value; the
// executable only touches it under its state lock.
unsafe impl Send for Pinned {}
unsafe impl Sync for Pinned {}

impl Pinned {
    /// `bytes` of pinned host memory (at least one byte is allocated).
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Pinned, CudaError> {
        ctx.bind_to_thread()?;
        // Flags 0: cacheable memory. Write-combined memory would make the
        // host's reads of downloaded outputs very slow.
        // SAFETY: a fresh allocation owned by this value, freed once in Drop.
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }? as *mut u8;
        if ptr.is_null() {
            return Err(CudaError::Driver(format!(
                "cuMemHostAlloc returned null for {bytes} bytes"
            )));
        }
        Ok(Pinned {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The bytes `[at, at + n)`; the caller must ensure no copy in flight
    /// writes them (the executable waits on the stream before reading).
    pub fn slice(&self, at: usize, n: usize) -> &[u8] {
        assert!(at + n <= self.bytes, "staging range out of bounds");
        // SAFETY: in bounds of a live allocation.
        unsafe { std::slice::from_raw_parts(self.ptr.add(at), n) }
    }

    /// The bytes `[at, at + n)` for writing; the caller must ensure no copy
    /// in flight reads them.
    pub fn slice_mut(&mut self, at: usize, n: usize) -> &mut [u8] {
        assert!(at + n <= self.bytes, "staging range out of bounds");
        // SAFETY: in bounds of a live allocation, borrowed mutably once.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), n) }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from malloc_host and is freed exactly once.
            let _ = unsafe { result::free_host(self.ptr as *mut _) };
        }
    }
}
