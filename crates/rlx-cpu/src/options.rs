//! The CPU backend's options: [`CpuOptions`] per compile, and the thread
//! count, which is process-wide because there is one pool (it lives in
//! `rlx_ref::threads`, shared with the reference GEMM).
//!
//! A compile runs with its backend's options in force on the compiling
//! thread ([`scoped`]): the engine decides every kernel at compile time, so
//! the places that ask "AMX here?" (`amx::available`, `bf16dot::available`)
//! read them there rather than each taking a parameter through the whole
//! planner. Nothing here reads the environment: the edge (`rlx::env`)
//! parses `RLX_*` variables and calls [`set_threads`] and
//! [`crate::CpuBackend::new`].

use std::cell::Cell;

#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub use rlx_ref::threads::use_web_pool;
pub use rlx_ref::threads::{available_parallelism, clamp_threads, set_threads, ThreadsError};
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

#[cfg(test)]
mod tests {
    use super::*;

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
