// One CPU thread of the threaded core (see threads.js): instantiates the
// module on the page's shared memory, says so, then runs its rayon thread
// (which never returns: the worker is the thread).
import initThreaded, { threadWorkerRun } from "../dist/mt/rlx_web.js";

self.addEventListener("message", async ({ data }) => {
  if (data?.type !== "rlx-thread-init") return;
  try {
    await initThreaded({ module_or_path: data.module, memory: data.memory });
  } catch (e) {
    self.postMessage({ type: "rlx-thread-error", message: String(e?.message ?? e) });
    return;
  }
  self.postMessage({ type: "rlx-thread-ready" });
  threadWorkerRun(data.receiver);
});
