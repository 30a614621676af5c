// The worker's side of threads.js: instantiates the entry point's threaded
// module on the page's shared memory, says so, then runs its rayon thread
// (which never returns: the worker is the thread). Each entry point has a
// worker script that passes its own glue (thread-worker.js,
// thread-worker-full.js).
export function serveThread({ default: initThreaded, threadWorkerRun }) {
  self.addEventListener("message", async ({ data }) => {
    if (data?.type !== "rlx-thread-init") return;
    try {
      await initThreaded({ module_or_path: data.module, memory: data.memory });
    } catch (e) {
      self.postMessage({ type: "rlx-thread-error", message: String(e?.message ?? e) });
      return;
    }
    self.postMessage({ type: "rlx-thread-ready" });
    threadWorkerRun(data.receiver, data.index);
  });
}
