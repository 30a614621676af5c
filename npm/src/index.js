// `rlx`: the core module (WebGPU + wasm-cpu). See api.js.
import * as glue from "../dist/rlx_web.js";
import { bind } from "./api.js";

// Two builds of one module, sharing this glue: plain simd128, and with
// relaxed SIMD's multiply-add in the matmul kernel; init() picks one.
bind(
  glue,
  new URL("../dist/rlx_web_bg.wasm", import.meta.url),
  new URL("../dist/rlx_web_relaxed_bg.wasm", import.meta.url),
);
export * from "./api.js";
/** The package version (stamped by scripts/build-npm). */
export { version } from "../dist/version.js";
