//! A global allocator that makes "allocated over the limit" a crash.
//!
//! libFuzzer's `-malloc_limit_mb` needs a sanitizer runtime's malloc hooks
//! (nightly-only in Rust), and its `-rss_limit_mb` samples once a second:
//! a single huge allocation can take the machine down first. This wrapper
//! of the system allocator counts live bytes and aborts — which libFuzzer
//! and the replay binary record as a crash — when one allocation is over
//! the limit, or when the live total is over twice the limit.
//!
//! The limit is `RLX_FUZZ_MALLOC_MB` (MiB; default [`DEFAULT_LIMIT_MB`]),
//! read on the first allocation over the default.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The default limit on one allocation, in MiB.
pub const DEFAULT_LIMIT_MB: usize = 1024;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Limit in bytes; 0: not read yet.
static LIMIT: AtomicUsize = AtomicUsize::new(0);
/// Set while reporting (the report allocates).
static REPORTING: AtomicBool = AtomicBool::new(false);

/// The counting allocator; install with `#[global_allocator]`.
pub struct LimitAlloc;

fn limit() -> usize {
    let l = LIMIT.load(Ordering::Relaxed);
    if l != 0 {
        return l;
    }
    // Reading the environment allocates: mark the read in progress with
    // the default first so the nested allocations see a limit.
    LIMIT.store(DEFAULT_LIMIT_MB << 20, Ordering::Relaxed);
    let mb = std::env::var("RLX_FUZZ_MALLOC_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&v| v > 0)
        .unwrap_or(DEFAULT_LIMIT_MB);
    let l = mb.saturating_mul(1 << 20);
    LIMIT.store(l, Ordering::Relaxed);
    l
}

/// Bytes allocated and not yet freed.
pub fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The live peak since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Start a new peak measurement (per input).
pub fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

#[cold]
fn over(size: usize, what: &str) -> ! {
    if REPORTING.swap(true, Ordering::SeqCst) {
        std::process::abort();
    }
    let mut e = std::io::stderr();
    let _ = writeln!(
        e,
        "\n==rlx-fuzz== ERROR: {what}: {size} bytes ({} MiB) over the limit of {} MiB \
         (RLX_FUZZ_MALLOC_MB)\n{}",
        size >> 20,
        limit() >> 20,
        std::backtrace::Backtrace::force_capture()
    );
    std::process::abort();
}

#[inline]
fn check(size: usize) {
    if REPORTING.load(Ordering::Relaxed) {
        return;
    }
    let lim = limit();
    if size > lim {
        over(size, "one allocation");
    }
    let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    if now > PEAK.load(Ordering::Relaxed) {
        PEAK.store(now, Ordering::Relaxed);
    }
    if now > lim.saturating_mul(2) {
        over(now, "live allocations");
    }
}

unsafe impl GlobalAlloc for LimitAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !REPORTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !REPORTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        check(new_size);
        System.realloc(ptr, layout, new_size)
    }
}
