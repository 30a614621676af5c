//! The process-wide CPU thread pool (rayon's global pool natively; one
//! thread on wasm32, except in the threaded browser build, whose pool of
//! Web Workers the page starts: `use_web_pool`). It lives here, below both CPU layers, because the
//! reference GEMM and the fast engine's kernels share it: it is sized once,
//! by [`set_threads`] or on first use (all cores up to the `max_threads`
//! limit). Nothing here reads the environment; the edge (`rlx::env`)
//! parses `RLX_NUM_THREADS` and calls [`set_threads`].

use thiserror::Error;

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

/// Sizes the CPU thread pool (process-wide): `n` clamped to the
/// `max_threads` limit and the available cores, with a warning on stderr
/// when lowered. Returns the count in force. Call it before the first
/// compile or run; afterwards only the count already in force is accepted.
/// On wasm32 the page sizes the pool (`use_web_pool` in the threaded
/// build, else one thread): any `n >= 1` gives the count in force.
pub fn set_threads(n: usize) -> Result<usize, ThreadsError> {
    if n == 0 {
        return Err(ThreadsError::Zero);
    }
    let max = rlx_ir::limits::limits().max_threads;
    let (t, warning) = clamp_threads(n, available_parallelism(), max);
    if let Some(w) = warning {
        eprintln!("rlx: warning: {w}");
    }
    init_threads(t)
}

#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// The threaded browser build (`+atomics`): rayon's global pool of `n`
/// Web Workers, built by the page (`initThreadPool` of wasm-bindgen-rayon),
/// is in use from now on. The kernels count the calling thread too (it
/// takes a share of every loop): the count in force is `n + 1`, or the
/// count set before. Until this is called the build runs on one thread.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub fn use_web_pool() -> usize {
    *THREADS.get_or_init(|| rayon::current_num_threads() + 1)
}

/// Builds the global pool with `t` threads (already clamped) unless it
/// was built; the count in force, or an error if it differs from `t`.
fn init_threads(t: usize) -> Result<usize, ThreadsError> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let got = *THREADS.get_or_init(|| build_pool(t));
        if got == t {
            Ok(got)
        } else {
            Err(ThreadsError::AlreadySet {
                current: got,
                asked: t,
            })
        }
    }
    #[cfg(target_arch = "wasm32")]
    {
        // The pool (if any) is the page's (`use_web_pool`).
        let _ = t;
        Ok(threads())
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn build_pool(t: usize) -> usize {
    // Fails only if someone built the global pool first; then that pool's
    // size is what we get, and `current_num_threads` says so.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(t)
        .build_global();
    rayon::current_num_threads()
}

/// Worker threads the CPU kernels use.
pub fn threads() -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    {
        *THREADS.get_or_init(|| {
            let max = rlx_ir::limits::limits().max_threads;
            let (t, _) = clamp_threads(available_parallelism(), usize::MAX, max);
            build_pool(t)
        })
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    {
        THREADS.get().copied().unwrap_or(1)
    }
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    {
        1
    }
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
}
