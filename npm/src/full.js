// `rlx/full`: the core module plus naga's MSL, HLSL, GLSL and SPIR-V
// translators for `model.kernels(lang)` (the playground uses it). See api.js.
// Two builds: single-threaded, and threaded for cross-origin isolated pages.
import * as glue from "../dist/full/rlx_web.js";
import { bind } from "./api.js";

bind(glue, new URL("../dist/full/rlx_web_bg.wasm", import.meta.url), undefined, {
  glue: () => import("../dist/full/mt/rlx_web.js"),
  url: new URL("../dist/full/mt/rlx_web_bg.wasm", import.meta.url),
  spawn: (name) => new Worker(new URL("./thread-worker-full.js", import.meta.url), { type: "module", name }),
});
export * from "./api.js";
export { calibrate } from "./calibrate.js";
export { version } from "../dist/version.js";
