//! The CPU backend's options: [`CpuOptions`] per compile, and the thread
//! count, which is process-wide because there is one pool.
//!
//! A compile runs with its backend's options in force on the compiling
//! thread ([`scoped`]): the engine decides every kernel at compile time, so
//! the places that ask "AMX here?" (`amx::available`, `bf16dot::available`)
//! read them there rather than each taking a parameter through the whole
//! planner. Nothing here reads the environment: the edge (`rlx::env`)
//! parses `RLX_*` variables and calls [`set_threads`] and
//! [`crate::CpuBackend::new`].

use std::cell::Cell;
use thiserror::Error;

pub use rlx_runtime::options::{CpuEngine, CpuOptions};

thread_local! {
    static CURRENT: Cell<CpuOptions> = Cell::new(CpuOptions::default());
}

/// The options in force on this thread (the defaults outside a compile).
pub(crate) fn current() -> CpuOptions {
    CURRENT.with(Cell::get)
}

/// `f` with `opts` in force on this thread.
pub(crate) fn scoped<R>(opts: CpuOptions, f: impl FnOnce() -> R) -> R {
    let before = CURRENT.with(|c| c.replace(opts));
    // Restored on unwind too, so a panicking compile in a test does not
    // leave its options to the next one on the thread.
    struct Restore(CpuOptions);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(before);
    f()
}

/// A thread count that cannot be set.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ThreadsError {
    #[error("the thread count must be at least 1, got 0")]
    Zero,
    /// The pool is built once per process; it already runs `current`.
    #[error("the CPU thread pool already runs {current} threads (asked for {asked}); set the count before the first compile or run")]
    AlreadySet { current: usize, asked: usize },
}

/// A requested thread count clamped to `max` (the `max_threads` limit) and
/// to the `available` cores: the count, and a warning when it was lowered.
/// More threads than cores only contend, and a count in the tens of
/// thousands would spend minutes spawning threads.
pub fn clamp_threads(asked: usize, available: usize, max: usize) -> (usize, Option<String>) {
    let bound = available.min(max).max(1);
    if asked <= bound {
        return (asked, None);
    }
    let why = if available <= max {
        format!("{available} available cores")
    } else {
        format!("the limit max_threads = {max} (raise it with rlx_ir::limits::set_limits)")
    };
    (
        bound,
        Some(format!(
            "{asked} CPU threads asked for; using {bound} ({why})"
        )),
    )
}

/// The cores this process may use.
pub fn available_parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Sizes the fast engine's thread pool (process-wide): `n` clamped to the
/// `max_threads` limit and the available cores, with a warning on stderr
/// when lowered. Returns the count in force. Call it before the first
/// compile or run; afterwards only the count already in force is accepted.
/// wasm32 has one thread: any `n >= 1` gives 1.
pub fn set_threads(n: usize) -> Result<usize, ThreadsError> {
    if n == 0 {
        return Err(ThreadsError::Zero);
    }
    let max = rlx_ir::limits::limits().max_threads;
    let (t, warning) = clamp_threads(n, available_parallelism(), max);
    if let Some(w) = warning {
        eprintln!("rlx: warning: {w}");
    }
    crate::fast::par::init_threads(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps_to_cores_and_limit_with_a_warning() {
        assert_eq!(clamp_threads(4, 8, 256), (4, None));
        let (t, w) = clamp_threads(100_000, 8, 256);
        assert_eq!(t, 8);
        assert!(w.unwrap().contains("100000 CPU threads asked for; using 8"));
        let (t, w) = clamp_threads(100, 512, 64);
        assert_eq!(t, 64);
        assert!(w.unwrap().contains("max_threads = 64"));
    }

    #[test]
    fn zero_threads_is_an_error() {
        assert_eq!(set_threads(0), Err(ThreadsError::Zero));
    }

    #[test]
    fn a_huge_count_is_clamped_not_spawned() {
        // Whatever the pool already is in this test binary, asking for
        // 100000 threads returns at once with at most the cores.
        let t0 = std::time::Instant::now();
        let r = set_threads(100_000);
        assert!(t0.elapsed().as_secs() < 5);
        match r {
            Ok(t) => assert!(t <= available_parallelism()),
            Err(ThreadsError::AlreadySet { current, .. }) => {
                assert!(current <= available_parallelism().max(1))
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn scoped_options_are_restored() {
        let off = CpuOptions {
            amx: false,
            ..CpuOptions::default()
        };
        scoped(off, || assert!(!current().amx));
        assert!(current().amx);
    }
}
