//! A counting allocator for the wasm module: the system allocator
//! (dlmalloc in wasm32) plus two counters, the bytes and the blocks live
//! now. `rlx.memoryStats()` reports them next to the linear memory size,
//! which only grows, so the npm stress tests can tell a leak (live bytes
//! climbing cycle after cycle) from the allocator keeping freed pages.
//! Installed only on wasm32 (relaxed atomics: plain loads and stores in
//! the single-threaded build, atomic adds in the threaded one); natively
//! the counters stay zero.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static BYTES: AtomicUsize = AtomicUsize::new(0);
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// `(bytes, blocks)` held by the Rust heap now.
pub fn live() -> (usize, usize) {
    (BYTES.load(Relaxed), BLOCKS.load(Relaxed))
}

/// Bytes of the module's linear memory (0 natively).
pub fn linear_memory_bytes() -> usize {
    #[cfg(target_arch = "wasm32")]
    {
        core::arch::wasm32::memory_size::<0>() * 65536
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        0
    }
}

#[cfg(target_arch = "wasm32")]
mod counting {
    use super::{Relaxed, BLOCKS, BYTES};
    use std::alloc::{GlobalAlloc, Layout, System};

    struct Counting;

    // SAFETY: every call forwards to `System` with the same arguments; the
    // counters only observe sizes of blocks that were handed out.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            let p = System.alloc(l);
            if !p.is_null() {
                BYTES.fetch_add(l.size(), Relaxed);
                BLOCKS.fetch_add(1, Relaxed);
            }
            p
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            let p = System.alloc_zeroed(l);
            if !p.is_null() {
                BYTES.fetch_add(l.size(), Relaxed);
                BLOCKS.fetch_add(1, Relaxed);
            }
            p
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            System.dealloc(p, l);
            BYTES.fetch_sub(l.size(), Relaxed);
            BLOCKS.fetch_sub(1, Relaxed);
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            let q = System.realloc(p, l, new);
            if !q.is_null() {
                BYTES.fetch_add(new, Relaxed);
                BYTES.fetch_sub(l.size(), Relaxed);
            }
            q
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;
}
