// `rlx`: the core module (WebGPU + wasm-cpu). See api.js.
import * as glue from "../dist/rlx_web.js";
import { bind } from "./api.js";

bind(glue, new URL("../dist/rlx_web_bg.wasm", import.meta.url));
export * from "./api.js";
/** The package version (stamped by scripts/build-npm). */
export { version } from "../dist/version.js";
