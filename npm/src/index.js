// `rlx`: the core module (WebGPU + wasm-cpu). See api.js.
import * as glue from "../dist/rlx_web.js";
import { bind } from "./api.js";

// Three builds of one module: plain simd128 and, sharing its glue, with
// relaxed SIMD's multiply-add in the matmul kernel; and the threaded one
// (shared memory, its own glue), for cross-origin isolated pages. init()
// picks one.
bind(
  glue,
  new URL("../dist/rlx_web_bg.wasm", import.meta.url),
  new URL("../dist/rlx_web_relaxed_bg.wasm", import.meta.url),
  {
    glue: () => import("../dist/mt/rlx_web.js"),
    url: new URL("../dist/mt/rlx_web_bg.wasm", import.meta.url),
    // This literal form is what bundlers (Vite, webpack) recognize and
    // bundle as a worker; unbundled, it is a module URL.
    spawn: (name) => new Worker(new URL("./thread-worker.js", import.meta.url), { type: "module", name }),
  },
);
export * from "./api.js";
export { calibrate } from "./calibrate.js";
/** The package version (stamped by scripts/build-npm). */
export { version } from "../dist/version.js";
