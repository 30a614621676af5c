//! The CPU engine's threads in the browser. The plain build has one; the
//! threaded build (`+atomics`, shared memory; the page must be
//! cross-origin isolated to load it) runs rayon's global pool on Web
//! Workers. Starting it takes three steps, driven by npm/src/threads.js:
//!
//! 1. `ThreadPoolStart::new(n)` here, on the calling thread;
//! 2. n Web Workers, each instantiating this module on the same memory and
//!    calling `thread_worker_run` with `ThreadPoolStart::receiver` and its
//!    index, where it waits for its rayon thread;
//! 3. once every worker said it is ready, `ThreadPoolStart::build`:
//!    rayon's global pool, each of its threads handed to a waiting worker.
//!
//! The workers must be waiting before step 3: building the pool blocks
//! (spinning, on the page's main thread) until every thread runs, and a
//! worker that has not started by then never would.

use wasm_bindgen::prelude::*;

/// `rlx.threads()`: the CPU engine's thread count — 1, or in the threaded
/// build once the pool runs, its workers plus the calling thread (which
/// takes a share of every loop).
#[wasm_bindgen(js_name = cpuThreads)]
pub fn cpu_threads() -> usize {
    rlx_cpu::fast::threads()
}

/// Whether this module is the threaded build.
#[wasm_bindgen(js_name = threadedBuild)]
pub fn threaded_build() -> bool {
    cfg!(target_feature = "atomics")
}

#[cfg(target_feature = "atomics")]
mod pool {
    use std::sync::atomic::{AtomicPtr, Ordering};

    use rayon::ThreadBuilder;
    use wasm_bindgen::prelude::*;

    /// A pool being started (steps 1 and 3 above). The threads are handed
    /// over through one atomic slot per worker, not a channel: a channel's
    /// send takes a lock, and the page's main thread contending for one
    /// traps ("Atomics.wait cannot be called in this context"; seen about
    /// once in fifty page loads).
    #[wasm_bindgen]
    pub struct ThreadPoolStart {
        workers: usize,
        slots: Box<[AtomicPtr<ThreadBuilder>]>,
    }

    #[wasm_bindgen]
    impl ThreadPoolStart {
        /// A pool of `workers` threads (at least 1).
        #[wasm_bindgen(constructor)]
        pub fn new(workers: usize) -> ThreadPoolStart {
            let workers = workers.max(1);
            ThreadPoolStart {
                workers,
                slots: (0..workers)
                    .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                    .collect(),
            }
        }

        /// What each worker passes to [`thread_worker_run`], with its index.
        pub fn receiver(&self) -> usize {
            self.slots.as_ptr() as usize
        }

        /// Builds rayon's global pool on the waiting workers; returns the
        /// CPU engine's thread count from now on (workers + 1).
        pub fn build(&mut self) -> Result<usize, JsError> {
            let slots = &self.slots;
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.workers)
                .spawn_handler(|thread| {
                    let slot = slots
                        .get(thread.index())
                        .ok_or_else(|| std::io::Error::other("more threads than workers"))?;
                    slot.store(Box::into_raw(Box::new(thread)), Ordering::Release);
                    Ok(())
                })
                .build_global()
                .map_err(|e| JsError::new(&format!("could not start the thread pool: {e}")))?;
            Ok(rlx_cpu::use_web_pool())
        }
    }

    /// In worker `index` (step 2): waits for its rayon thread and runs it,
    /// which never returns. `slots` is [`ThreadPoolStart::receiver`].
    #[wasm_bindgen(js_name = threadWorkerRun)]
    #[allow(unsafe_code)]
    pub fn thread_worker_run(slots: usize, index: usize) {
        // SAFETY: `slots` is the address of a ThreadPoolStart's slots,
        // which npm/src/threads.js keeps alive until `build` returned
        // (every thread then runs: each worker took its builder), and
        // `index` is below their count (threads.js numbers the workers).
        let slot = unsafe { &*(slots as *const AtomicPtr<ThreadBuilder>).add(index) };
        loop {
            let p = slot.swap(std::ptr::null_mut(), Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: made by `Box::into_raw` in `build`, taken once.
                let thread = unsafe { Box::from_raw(p) };
                thread.run();
                return;
            }
            // A worker may block (the page's thread may not): wait a little.
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

#[cfg(target_feature = "atomics")]
pub use pool::{thread_worker_run, ThreadPoolStart};

/// The compiled module, for the workers of the pool.
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = threadsModule)]
pub fn wasm_module() -> JsValue {
    wasm_bindgen::module()
}

/// The shared memory, for the workers of the pool.
#[cfg(target_feature = "atomics")]
#[wasm_bindgen(js_name = threadsMemory)]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}
