// `rlx/full`: the core module plus naga's MSL, HLSL, GLSL and SPIR-V
// translators for `model.kernels(lang)` (the playground uses it). See api.js.
import * as glue from "../dist/full/rlx_web.js";
import { bind } from "./api.js";

bind(glue, new URL("../dist/full/rlx_web_bg.wasm", import.meta.url));
export * from "./api.js";
export { version } from "../dist/version.js";
