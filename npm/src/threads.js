// The CPU engine's threads in the browser: the threaded core (dist/mt/,
// built with shared memory) runs rayon's pool on Web Workers that this file
// starts; web/src/threads.rs is the other half. Each worker instantiates the
// same module on the same memory (thread-worker.js) and waits for its rayon
// thread; once all are waiting, `build()` hands the threads out. The page's
// thread is one more: it takes a share of every loop.

// Kept referenced: Firefox collects a worker that shares memory with the
// page but is not held by a `Worker` object.
let workers = [];
const START_TIMEOUT_MS = 60_000;

/**
 * Starts `count` workers on the threaded module `glue` (already
 * initialized on this thread); `spawn(name)` makes one worker running the
 * entry point's thread-worker script. Returns the engine's thread count
 * (`count + 1`); throws if a worker fails to start (none are left running).
 */
export async function startThreadPool(glue, spawn, count) {
  const start = new glue.ThreadPoolStart(count);
  const init = { type: "rlx-thread-init", module: glue.threadsModule(), memory: glue.threadsMemory(), receiver: start.receiver() };
  const started = [];
  try {
    await Promise.all(
      Array.from({ length: count }, (_, i) => {
        const w = spawn(`rlx-cpu-${i + 1}`);
        started.push(w);
        return new Promise((resolve, reject) => {
          // A worker that never answers (its script blocked, say) must not
          // leave init() waiting forever.
          const timer = setTimeout(() => reject(new Error(`CPU thread ${i + 1} did not start within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
          w.addEventListener("message", ({ data }) => {
            if (data?.type === "rlx-thread-ready" || data?.type === "rlx-thread-error") clearTimeout(timer);
            if (data?.type === "rlx-thread-ready") resolve();
            else if (data?.type === "rlx-thread-error") reject(new Error(`CPU thread ${i + 1}: ${data.message}`));
          });
          w.addEventListener("error", (e) => reject(new Error(`CPU thread ${i + 1} could not start: ${e.message || "the worker script failed to load"}`)));
          w.postMessage({ ...init, index: i });
        });
      }),
    );
  } catch (e) {
    started.forEach((w) => w.terminate());
    start.free();
    throw e;
  }
  // Blocks (spinning) until every worker runs its thread: they all wait already.
  const threads = start.build();
  start.free();
  workers = started;
  return threads;
}
