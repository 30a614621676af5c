//! The CPU engine's threads in the browser. The plain build has one; the
//! threaded build (`+atomics`, shared memory; the page must be
//! cross-origin isolated to load it) runs rayon's global pool on Web
//! Workers. Starting it takes three steps, driven by npm/src/threads.js:
//!
//! 1. `ThreadPoolStart::new(n)` here, on the calling thread;
//! 2. n Web Workers, each instantiating this module on the same memory and
//!    calling `thread_worker_run` with `ThreadPoolStart::receiver`,
//!    where it waits for its rayon thread;
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
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::sync::Mutex;

    use rayon::ThreadBuilder;
    use wasm_bindgen::prelude::*;

    /// A pool being started (steps 1 and 3 above).
    #[wasm_bindgen]
    pub struct ThreadPoolStart {
        workers: usize,
        sender: Option<Sender<ThreadBuilder>>,
        // Boxed: the workers hold its address until each took its thread.
        receiver: Box<Mutex<Receiver<ThreadBuilder>>>,
    }

    #[wasm_bindgen]
    impl ThreadPoolStart {
        /// A pool of `workers` threads (at least 1).
        #[wasm_bindgen(constructor)]
        pub fn new(workers: usize) -> ThreadPoolStart {
            let (sender, receiver) = channel();
            ThreadPoolStart {
                workers: workers.max(1),
                sender: Some(sender),
                receiver: Box::new(Mutex::new(receiver)),
            }
        }

        /// What each worker passes to `thread_worker_run`.
        pub fn receiver(&self) -> usize {
            &*self.receiver as *const Mutex<Receiver<ThreadBuilder>> as usize
        }

        /// Builds rayon's global pool on the waiting workers; returns the
        /// CPU engine's thread count from now on (workers + 1).
        pub fn build(&mut self) -> Result<usize, JsError> {
            let sender = self
                .sender
                .take()
                .ok_or_else(|| JsError::new("the thread pool was already started"))?;
            rayon::ThreadPoolBuilder::new()
                .num_threads(self.workers)
                .spawn_handler(move |thread| {
                    sender
                        .send(thread)
                        .map_err(|_| std::io::Error::other("no worker is waiting"))
                })
                .build_global()
                .map_err(|e| JsError::new(&format!("could not start the thread pool: {e}")))?;
            Ok(rlx_cpu::use_web_pool())
        }
    }

    /// In a worker (step 2): waits for a rayon thread and runs it, which
    /// never returns. `receiver` is `ThreadPoolStart::receiver`.
    #[wasm_bindgen(js_name = threadWorkerRun)]
    #[allow(unsafe_code)]
    pub fn thread_worker_run(receiver: usize) {
        // SAFETY: the address of the boxed receiver of a ThreadPoolStart,
        // which npm/src/threads.js keeps alive until every worker has
        // taken its thread (after `build`). Only that code calls this.
        let receiver = unsafe { &*(receiver as *const Mutex<Receiver<ThreadBuilder>>) };
        let thread = receiver.lock().unwrap_or_else(|e| e.into_inner()).recv();
        if let Ok(thread) = thread {
            thread.run();
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
