// The rlx npm package: a thin, typed wrapper over a wasm-bindgen module
// built from web/ (scripts/build-npm). The contract is npm/API.md; types
// are in index.d.ts. Two entry points share this file: `rlx` (index.js,
// the core module) and `rlx/full` (full.js, plus naga's MSL/HLSL/GLSL/
// SPIR-V translators); each passes its own glue and .wasm URL, written as
// literals there so bundlers find the files.
import { makeLlm } from "./llm.js";
import { startThreadPool } from "./threads.js";

let initWasm;
let raw;
let wasmUrl;
let relaxedUrl;
let threadedCore;

/**
 * Called once by an entry point with its wasm-bindgen glue, its .wasm URL
 * and, for the core, the URL of the relaxed-SIMD build of the same module
 * (scripts/build-npm checks that both builds share this glue) and the
 * threaded build: `{ glue: () => import(its glue), url, spawn(name) → a
 * Worker running the entry's thread-worker script }`.
 */
export function bind(glue, url, relaxed, threaded) {
  initWasm = glue.default;
  raw = glue;
  wasmUrl = url;
  relaxedUrl = relaxed;
  threadedCore = threaded;
}

// Why init() chose the build it loaded (the build and the thread count are
// the module's own answer: threads()).
let threadsReason = "init() has not run";

/** Why this page can't load the threaded core, or null if it can. */
function threadsUnavailable() {
  if (!threadedCore) return "this entry point ships no threaded build";
  if (isNode) return "threads run in browsers only (Node loads the single-threaded build)";
  if (typeof SharedArrayBuffer !== "function" || globalThis.crossOriginIsolated !== true) {
    return "the page is not cross-origin isolated: serve it with the headers Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp (npm/README.md)";
  }
  if (typeof Worker !== "function") return "this context cannot start Web Workers";
  return null;
}

// The smallest module using relaxed SIMD: one function (v128) -> v128 whose
// body is `f32x4.relaxed_madd(x, x, x)` (opcode 0xfd 0x105). Engines
// without relaxed SIMD (Node 20 without --experimental-wasm-relaxed-simd,
// Safari today) reject it, and would reject the relaxed core the same way.
const RELAXED_PROBE = [
  0, 97, 115, 109, 1, 0, 0, 0, 1, 6, 1, 96, 1, 123, 1, 123, 3, 2, 1, 0, 10, 13, 1, 11, 0, 32, 0, 32, 0, 32, 0,
  253, 133, 2, 11,
];

/** Whether this engine runs WebAssembly relaxed SIMD (what picks the core `init()` loads). */
export function relaxedSimdSupported() {
  try {
    return typeof WebAssembly !== "undefined" && WebAssembly.validate(new Uint8Array(RELAXED_PROBE));
  } catch {
    return false;
  }
}

const isNode =
  typeof process !== "undefined" && !!process.versions?.node && typeof window === "undefined";

/**
 * The codes an {@link RlxError} carries, one per kind of failure (npm/API.md
 * says when each is used). Every error the package throws has one of them.
 */
export const ERROR_CODES = Object.freeze([
  "init", // the wasm module could not load, or rlx.init() was not awaited
  "invalid_argument", // an argument is missing or of the wrong type, or an option is unknown
  "shape", // a shape or dimension is not a list of integers in [0, 2^32 - 1]
  "dtype", // an unknown dtype name
  "disposed", // a method of an object after its dispose() (or a finished GraphBuilder)
  "input", // run()/constant() data that does not fit the graph (kind, length, names, bound weights)
  "unsupported", // an imported model (Graph.fromOnnx) has ops rlx cannot map: every one is listed
  "parse", // the IR text/JSON could not be parsed
  "graph", // the graph breaks a type rule (unknown op or attribute, shapes, element count)
  "limit", // a limit of rlx's policy was exceeded (the message names it and how to raise it)
  "dispatch", // no kernel for a node under the policy (the refusal lists every one)
  "device", // the device is unknown or unavailable, or none of a fallback chain can run the graph
  "device_lost", // the GPU device was lost while a model used it: compile again (a new device is made)
  "format", // a file is malformed or cannot be read (safetensors, config.json, HTTP errors)
  "runtime", // a backend failed while running
  "tokenizer", // tokenizer.json is malformed
  "internal", // an unexpected error inside the package: a bug in rlx
  "panic", // Rust panicked; the module is unusable afterwards
]);

/** Every failure of the package: `code` (one of {@link ERROR_CODES}) says what kind; the message says what and where. */
export class RlxError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = "RlxError";
    this.code = code;
  }
}

// ---- argument checks at the boundary ------------------------------------------
// Everything a caller passes is checked here, before it reaches the wasm
// glue, which would otherwise coerce it (a -1 dimension through a
// Uint32Array is 4294967295, `null` as a text is "null") or fail with a
// bare TypeError. The Rust side checks again what it relies on.

/** What a value is, for messages: `null`, `number 42`, `string "ab"`, `an Array`, `a Float64Array`. */
function describe(v) {
  if (v === null) return "null";
  switch (typeof v) {
    case "undefined": return "undefined";
    case "number": return `number ${v}`;
    case "bigint": return `bigint ${v}n`;
    case "boolean": return `boolean ${v}`;
    case "string": return `string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v)}`;
    case "symbol": return "a symbol";
    case "function": return "a function";
    default: {
      const n = Object.getPrototypeOf(v) === null ? "Object" : v.constructor?.name || "Object";
      return `${/^[AEIOU]/.test(n) ? "an" : "a"} ${n}`;
    }
  }
}

function invalid(where, msg) {
  return new RlxError("invalid_argument", `${where}: ${msg}`);
}

function isTypedArray(v) {
  return ArrayBuffer.isView(v) && !(v instanceof DataView);
}

function isPlainObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !isTypedArray(v);
}

function checkString(where, name, v) {
  if (typeof v !== "string") throw invalid(where, `\`${name}\` must be a string, got ${describe(v)}`);
  return v;
}

function checkOptions(where, opts, known) {
  if (opts === undefined || opts === null) return {};
  if (!isPlainObject(opts)) throw invalid(where, `options must be an object, got ${describe(opts)}`);
  for (const k of Object.keys(opts)) {
    if (!known.includes(k)) {
      throw invalid(where, `unknown option \`${k}\` (options: ${known.join(", ")})`);
    }
  }
  return opts;
}

function checkCallback(where, name, f) {
  if (f !== undefined && f !== null && typeof f !== "function") {
    throw invalid(where, `\`${name}\` must be a function, got ${describe(f)}`);
  }
  return f ?? undefined;
}

// wasm32 addresses 2^32 bytes: no dimension can be larger.
const MAX_DIM = 2 ** 32 - 1;

/**
 * A shape as the wasm module takes it: every dimension an integer in
 * [0, 2^32 - 1] (Float64Array, so nothing wraps on the way; web/ checks
 * again). Negative, fractional, NaN, infinite or too large dimensions are
 * RlxError 'shape' naming the shape and the dimension.
 */
function checkShape(where, shape) {
  if (!Array.isArray(shape) && !isTypedArray(shape)) {
    throw invalid(where, `a shape must be an array of dimensions, got ${describe(shape)}`);
  }
  const dims = Array.from(shape);
  const show = () => `[${dims.map((d) => (typeof d === "string" ? JSON.stringify(d) : String(d))).join(", ")}]`;
  const out = new Float64Array(dims.length);
  dims.forEach((d, i) => {
    let n = d;
    if (typeof d === "bigint") n = d >= 0n && d <= BigInt(MAX_DIM) ? Number(d) : -1;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > MAX_DIM) {
      throw new RlxError(
        "shape",
        `${where}: shape ${show()}: dimension ${i} is ${describe(d)}; every dimension must be an integer from 0 to ${MAX_DIM}`,
      );
    }
    out[i] = n;
  });
  return out;
}

/** A positive count (batch size, sequence length): RlxError 'shape' otherwise. */
function checkCount(where, name, v) {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > MAX_DIM) {
    throw new RlxError("shape", `${where}: \`${name}\` must be an integer from 1 to ${MAX_DIM}, got ${describe(v)}`);
  }
  return v;
}

function checkDevice(where, device) {
  if (device === undefined || device === null) return ["cpu"];
  const list = Array.isArray(device) ? device : [device];
  if (list.length === 0) throw invalid(where, "`device` is an empty list (use 'cpu', 'webgpu' or a list of them)");
  list.forEach((d, i) => {
    if (typeof d !== "string") {
      const at = Array.isArray(device) ? `device[${i}]` : "device";
      throw invalid(where, `\`${at}\` must be a device name ('cpu', 'webgpu'), got ${describe(d)}`);
    }
  });
  return list;
}

let ready = null;
let poisoned = null;
let exports = null;

// A Rust panic aborts the wasm instance (a WebAssembly.RuntimeError trap);
// the panic hook kept its message. After one, the module's state is
// undefined: every later call refuses with the same error.
function wrapError(e) {
  if (e instanceof RlxError) return e;
  if (e && typeof e === "object" && e.name === "RlxError" && typeof e.code === "string") {
    return new RlxError(e.code, e.message);
  }
  if (typeof WebAssembly !== "undefined" && e instanceof WebAssembly.RuntimeError) {
    let msg = "";
    try {
      msg = raw.takePanic();
    } catch {
      /* the instance is gone */
    }
    poisoned = `rlx panicked: ${msg || e.message}. This is a bug in rlx; the module cannot be used any more (reload the page or worker)`;
    return new RlxError("panic", poisoned, { cause: e });
  }
  // Anything else (the glue's own TypeError, a JSON.parse failure): the
  // checks above should have caught it first, so it is a bug, but still an
  // RlxError, with the original as its cause.
  const msg = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  return new RlxError("internal", `internal error in rlx: ${msg} (this is a bug in rlx; please report it)`, { cause: e });
}

function guard() {
  if (poisoned) throw new RlxError("panic", poisoned);
  if (!initialized) throw new RlxError("init", "call `await rlx.init()` first");
}
let initialized = false;
function call(f) {
  guard();
  try {
    return f();
  } catch (e) {
    throw wrapError(e);
  }
}
async function acall(f) {
  guard();
  try {
    return await f();
  } catch (e) {
    throw wrapError(e);
  }
}

/**
 * Load the wasm module. In the browser it is fetched from next to this file
 * (bundlers copy it); in Node it is read from disk. The core entry ships two
 * builds of one module: where the engine runs relaxed SIMD (Chrome/Edge >=
 * 114, Node with --experimental-wasm-relaxed-simd) it loads the one
 * whose matmul kernel uses f32x4.relaxed_madd, else the plain simd128 one.
 * `opts.relaxed`: false forces the plain core; true requires the relaxed
 * one (an 'init' error where the engine lacks it). `opts.wasm` overrides
 * the source (bytes, a URL, or a Response) and the choice.
 */
export async function init(opts = {}) {
  opts = checkOptions("init", opts, ["wasm", "relaxed", "threads"]);
  if (opts.relaxed !== undefined && typeof opts.relaxed !== "boolean") {
    throw invalid("init", `\`relaxed\` must be true or false, got ${describe(opts.relaxed)}`);
  }
  const t = opts.threads;
  if (t !== undefined && (typeof t !== "number" || !Number.isInteger(t) || t < 1 || t > 256)) {
    throw invalid("init", `\`threads\` must be an integer from 1 to 256, got ${describe(t)}`);
  }
  if (ready) return ready;
  // Threads: the threaded core where the page allows it (cross-origin
  // isolated), unless asked otherwise; asked for and not possible, an error.
  const why = threadsUnavailable();
  let threads = 1;
  let reason;
  if (t !== undefined && t > 1) {
    if (why) throw new RlxError("init", `init({ threads: ${t} }): ${why}`);
    if (opts.wasm) throw invalid("init", "`threads` > 1 loads the package's threaded module; it cannot be combined with `wasm`");
    if (opts.relaxed === true) throw invalid("init", "the threaded module is built for plain simd128: `threads` > 1 and `relaxed: true` cannot both hold");
    threads = t;
    reason = `init({ threads: ${t} })`;
  } else if (t === 1) {
    reason = "init({ threads: 1 })";
  } else if (opts.wasm) {
    reason = "init({ wasm }) loads the module given";
  } else if (opts.relaxed === true) {
    reason = "init({ relaxed: true }) loads the single-threaded relaxed-SIMD core";
  } else if (why) {
    reason = why;
  } else {
    threads = Math.max(1, Math.min(navigator.hardwareConcurrency || 1, 16));
    reason = threads > 1 ? `cross-origin isolated page: one thread per core (navigator.hardwareConcurrency = ${navigator.hardwareConcurrency})` : "navigator.hardwareConcurrency is 1";
  }
  if (threads > 1) return (ready = initThreaded(threads, reason));
  let src = opts.wasm;
  let url = wasmUrl;
  let relaxed = false;
  if (!src) {
    if (opts.relaxed === true && !relaxedUrl) {
      throw new RlxError("init", "this entry point ships no relaxed-SIMD build (only `rlx` does, not `rlx/full`)");
    }
    if (opts.relaxed === true && !relaxedSimdSupported()) {
      throw new RlxError(
        "init",
        "init({ relaxed: true }): this engine does not run WebAssembly relaxed SIMD (Node 20 needs --experimental-wasm-relaxed-simd)",
      );
    }
    relaxed = !!relaxedUrl && opts.relaxed !== false && relaxedSimdSupported();
    if (relaxed) url = relaxedUrl;
  }
  ready = (async () => {
    if (!src && isNode) {
      const fsName = "node:fs/promises";
      const fs = await import(/* @vite-ignore */ fsName);
      try {
        src = await fs.readFile(url);
      } catch (e) {
        ready = null;
        throw new RlxError("init", `could not read the rlx wasm module ${url}: ${e.message}`, { cause: e });
      }
    }
    try {
      exports = await initWasm({ module_or_path: src ?? url });
    } catch (e) {
      ready = null;
      // No quiet retry with the plain core: the caller sees what failed
      // and can ask for the plain one.
      const which = relaxed
        ? "the relaxed-SIMD rlx wasm module (the engine passed the relaxed-SIMD probe; init({ relaxed: false }) loads the plain simd128 core)"
        : "the rlx wasm module";
      throw new RlxError("init", `could not load ${which}: ${e.message}`, { cause: e });
    }
    threadsReason = reason;
    initialized = true;
  })();
  return ready;
}

/** The threaded core with `threads` CPU threads (the page's and threads - 1 workers). */
async function initThreaded(threads, reason) {
  try {
    const glue = await threadedCore.glue();
    exports = await glue.default({ module_or_path: threadedCore.url });
    await startThreadPool(glue, threadedCore.spawn, threads - 1);
    raw = glue;
    threadsReason = reason;
  } catch (e) {
    ready = null;
    exports = null;
    // No quiet retry single-threaded: the caller sees what failed.
    throw new RlxError("init", `could not start the threaded rlx module (${threads} threads): ${e.message}. init({ threads: 1 }) loads the single-threaded one`, { cause: e });
  }
  initialized = true;
}

/** A dispatch report with the module that ran it: `wasm: { variant, build, threads, reason }`. */
function withWasm(report) {
  report.wasm = { variant: raw.wasmVariant(), ...threads() };
  return report;
}

/**
 * The CPU engine's threads: `{ build: 'threaded' | 'single', threads, reason }`.
 * init() loads the threaded build, with one thread per core, where the page
 * is cross-origin isolated (COOP/COEP headers), else the single-threaded
 * one; `reason` says why. Dispatch reports carry it as `wasm`.
 */
export function threads() {
  guard();
  return { build: raw.threadedBuild() ? "threaded" : "single", threads: raw.cpuThreads(), reason: threadsReason };
}

/**
 * Which build of the module runs, as the module itself reports it (and as
 * the dispatch report names the matmul kernel): 'simd128' or
 * 'simd128+relaxed-madd'.
 */
export function wasmVariant() {
  return call(() => raw.wasmVariant());
}

/** The op registry: one row per op kind. */
export function ops() {
  return call(() => JSON.parse(raw.opsJson()));
}

/**
 * Memory of the wasm module: `wasmBytes`, the size of its linear memory
 * (it grows and never shrinks), `heapBytes` and `heapAllocations`, what the
 * Rust heap holds now. After dispose() of everything a workload created,
 * `heapBytes` returns to where it was; `wasmBytes` stays at its high-water
 * mark (the allocator reuses it).
 */
export function memoryStats() {
  return call(() => {
    const s = JSON.parse(raw.memoryStats());
    return {
      wasmBytes: exports?.memory?.buffer?.byteLength ?? s.wasm_bytes,
      heapBytes: s.heap_bytes,
      heapAllocations: s.heap_allocations,
    };
  });
}

// The limits by their JS names: maxTensorBytes <-> max_tensor_bytes.
const LIMIT_NAMES = ["maxTensorBytes", "maxArenaBytes", "maxNestingDepth", "maxFileBytes", "maxThreads", "maxRank"];
const snake = (k) => k.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
function limitsFrom(json) {
  return Object.fromEntries(Object.entries(JSON.parse(json)).map(([k, v]) => [camel(k), v]));
}

/**
 * The limits in force (docs/limits.md): how much rlx takes from its input
 * before it refuses with an RlxError 'limit' — `maxTensorBytes`,
 * `maxArenaBytes`, `maxNestingDepth`, `maxFileBytes`, `maxThreads`, `maxRank`.
 */
export function limits() {
  return call(() => limitsFrom(raw.limitsJson()));
}

/**
 * Change some limits for the whole module (a browser has no environment
 * for `RLX_MAX_*`): `setLimits({ maxTensorBytes: 4 << 30 })`. Values are
 * whole numbers >= 1; an unknown name or a bad value throws
 * RlxError 'invalid_argument' and changes nothing. Returns the limits now
 * in force.
 */
export function setLimits(changes) {
  const where = "setLimits";
  if (!isPlainObject(changes)) throw invalid(where, `expected an object of limits, got ${describe(changes)}`);
  for (const [k, v] of Object.entries(changes)) {
    if (!LIMIT_NAMES.includes(k)) throw invalid(where, `unknown limit \`${k}\` (the limits: ${LIMIT_NAMES.join(", ")})`);
    if (!Number.isSafeInteger(v) || v < 1) throw invalid(where, `\`${k}\` must be a whole number >= 1, got ${describe(v)}`);
  }
  const body = JSON.stringify(Object.fromEntries(Object.entries(changes).map(([k, v]) => [snake(k), v])));
  return call(() => limitsFrom(raw.setLimitsJson(body)));
}

/** Devices this page or process can use, with the WebGPU adapter's name and limits. */
export async function devices() {
  return acall(async () => JSON.parse(await raw.devicesJson()));
}

// ---- graphs ----------------------------------------------------------------

// The user's line that built a node, for the playground's "source" link.
// `depth` is how many package frames sit between `_op` and the user's
// frame: counting frames (not matching file names) keeps working when a
// bundler puts the package and the app into one file.
function callSite(depth) {
  const lines = (new Error().stack || "").split("\n").filter((l) => /:\d+:\d+\)?\s*$/.test(l));
  // lines[0] is callSite itself, lines[1] is GraphBuilder._op.
  const line = lines[2 + depth];
  return line ? line.trim().replace(/^at\s+/, "") : undefined;
}

/** A value of a graph being built. Methods add nodes and return new tensors. */
export class Tensor {
  constructor(builder, id) {
    this.builder = builder;
    this.id = id;
    this._type = null;
  }
  _ty() {
    if (!this._type) this._type = JSON.parse(call(() => this.builder._live("Tensor.shape")._b.typeOf(this.id)));
    return this._type;
  }
  get dtype() {
    return this._ty().dtype;
  }
  get shape() {
    return this._ty().shape;
  }
  /** Apply any registry op with this tensor as the first input. */
  apply(op, others = [], attrs = {}, _depth = 0) {
    if (!Array.isArray(others)) throw invalid(`Tensor.apply("${op}")`, `\`others\` must be an array of Tensors, got ${describe(others)}`);
    return this.builder._op(op, [this, ...others], attrs, 1 + _depth);
  }
  apply1(op, others = [], attrs = {}, _depth = 0) {
    const out = this.apply(op, others, attrs, 1 + _depth);
    if (out.length !== 1) throw new RlxError("graph", `op \`${op}\` has ${out.length} outputs; use apply()`);
    return out[0];
  }
  add(o) { return this.apply1("add", [o], {}, 1); }
  sub(o) { return this.apply1("sub", [o], {}, 1); }
  mul(o) { return this.apply1("mul", [o], {}, 1); }
  div(o) { return this.apply1("div", [o], {}, 1); }
  pow(o) { return this.apply1("pow", [o], {}, 1); }
  matmul(o) { return this.apply1("matmul", [o], {}, 1); }
  relu() { return this.apply1("relu", [], {}, 1); }
  gelu() { return this.apply1("gelu", [], {}, 1); }
  silu() { return this.apply1("silu", [], {}, 1); }
  tanh() { return this.apply1("tanh", [], {}, 1); }
  exp() { return this.apply1("exp", [], {}, 1); }
  log() { return this.apply1("log", [], {}, 1); }
  sqrt() { return this.apply1("sqrt", [], {}, 1); }
  sigmoid() { return this.apply1("sigmoid", [], {}, 1); }
  neg() { return this.apply1("neg", [], {}, 1); }
  abs() { return this.apply1("abs", [], {}, 1); }
  softmax(axis = -1) { return this.apply1("softmax", [], { axis }, 1); }
  layerNorm(gamma, beta, eps = 1e-5) { return this.apply1("layer_norm", [gamma, beta], { eps }, 1); }
  sum(axes, keepdim = false) { return this.apply1("reduce_sum", [], { axes, keepdim }, 1); }
  mean(axes, keepdim = false) { return this.apply1("reduce_mean", [], { axes, keepdim }, 1); }
  max(axes, keepdim = false) { return this.apply1("reduce_max", [], { axes, keepdim }, 1); }
  reshape(shape) { return this.apply1("reshape", [], { shape }, 1); }
  permute(perm) { return this.apply1("permute", [], { perm }, 1); }
  t() {
    const r = this.shape.length;
    const p = [...Array(r).keys()];
    if (r >= 2) [p[r - 2], p[r - 1]] = [p[r - 1], p[r - 2]];
    return this.apply1("permute", [], { perm: p }, 1);
  }
  cast(dtype) { return this.apply1("cast", [], { dtype }, 1); }
}

const ARRAY_OF = {
  f32: Float32Array, f64: Float64Array, i32: Int32Array, i64: BigInt64Array, i16: Int16Array,
  i8: Int8Array, u8: Uint8Array, bool: Uint8Array, f16: Uint16Array, bf16: Uint16Array, c64: Float32Array,
};

// Float16Array (where the runtime has it) travels as its bits.
function plainData(data) {
  if (typeof Float16Array !== "undefined" && data instanceof Float16Array) {
    return new Uint16Array(data.buffer, data.byteOffset, data.length);
  }
  return data;
}

/**
 * An f16 output as a Float16Array where the runtime has one (Chrome/Edge
 * 135+, Firefox 129+, Safari 18.2+), else as its bits in a Uint16Array.
 */
function halfOut(o) {
  if (o && o.dtype === "f16" && typeof Float16Array === "function" && o.data instanceof Uint16Array) {
    o.data = new Float16Array(o.data.buffer, o.data.byteOffset, o.data.length);
  }
  return o;
}

/** The typed array a dtype travels in, for messages. */
function arrayNameOf(dtype) {
  const a = ARRAY_OF[dtype]?.name ?? "Uint8Array";
  return dtype === "i64" ? "BigInt64Array or Int32Array" : a;
}

/** Builds a graph; `finish` returns an immutable {@link Graph}. */
export class GraphBuilder {
  constructor(name = "graph") {
    guard();
    checkString("new GraphBuilder(name)", "name", name);
    this._name = name;
    this._b = call(() => new raw.GraphBuilder(name));
  }
  _live(where) {
    if (!this._b) {
      const why = this._disposed ? "was disposed (dispose() was called)" : "already finished its graph (finish() was called)";
      throw new RlxError("disposed", `${where}: GraphBuilder \`${this._name}\` ${why}; start a new GraphBuilder`);
    }
    return this;
  }
  /** Free a builder that will not be finished (finish() frees it by itself). Idempotent. */
  dispose() {
    if (this._b) {
      this._b.free();
      this._b = null;
      this._disposed = true;
    }
  }
  input(name, dtype, shape) {
    const where = `GraphBuilder.input(${JSON.stringify(String(name))})`;
    this._live(where);
    checkString(where, "name", name);
    checkString(where, "dtype", dtype);
    const dims = checkShape(where, shape);
    return new Tensor(this, call(() => this._b.input(name, dtype, dims)));
  }
  constant(data, shape, dtype) {
    const where = "GraphBuilder.constant";
    this._live(where);
    data = plainData(data);
    if (!isTypedArray(data)) {
      throw invalid(where, `\`data\` must be a typed array (Float32Array, Int32Array, ...), got ${describe(data)}`);
    }
    const dims = checkShape(where, shape);
    if (dtype !== undefined && dtype !== null) checkString(where, "dtype", dtype);
    dtype ??= Object.keys(ARRAY_OF).find((k) => data instanceof ARRAY_OF[k]);
    if (!dtype) throw invalid(where, `no dtype travels as ${describe(data)}; pass \`dtype\``);
    return new Tensor(this, call(() => this._b.constant(dtype, dims, data)));
  }
  /** Apply a registry op to `inputs`; returns its outputs. */
  op(name, inputs, attrs = {}) {
    return this._op(name, inputs, attrs, 1);
  }
  _op(name, inputs, attrs, depth) {
    const where = `op ${typeof name === "string" ? `\`${name}\`` : "(no name)"}`;
    this._live(where);
    checkString(where, "name", name);
    if (!Array.isArray(inputs)) throw invalid(where, `\`inputs\` must be an array of Tensors, got ${describe(inputs)}`);
    inputs.forEach((t, i) => {
      if (!(t instanceof Tensor)) throw invalid(where, `input ${i} must be a Tensor, got ${describe(t)}`);
      if (t.builder !== this) {
        throw new RlxError("graph", `${where}: input ${i} is a Tensor of another GraphBuilder (\`${t.builder._name}\`)`);
      }
    });
    if (attrs === undefined || attrs === null) attrs = {};
    if (!isPlainObject(attrs)) throw invalid(where, `\`attrs\` must be an object, got ${describe(attrs)}`);
    let json;
    try {
      json = JSON.stringify(attrs, (_, v) => (typeof v === "bigint" ? Number(v) : v));
    } catch (e) {
      throw invalid(where, `\`attrs\` cannot be written as JSON: ${e.message}`);
    }
    const ids = Uint32Array.from(inputs.map((t) => t.id));
    const site = callSite(depth);
    const out = call(() => this._b.op(name, ids, json, site));
    return Array.from(out, (id) => new Tensor(this, id));
  }
  finish(outputs) {
    const where = "GraphBuilder.finish";
    this._live(where);
    if (!Array.isArray(outputs)) throw invalid(where, `\`outputs\` must be an array of Tensors, got ${describe(outputs)}`);
    outputs.forEach((t, i) => {
      if (!(t instanceof Tensor)) throw invalid(where, `output ${i} must be a Tensor, got ${describe(t)}`);
      if (t.builder !== this) throw new RlxError("graph", `${where}: output ${i} is a Tensor of another GraphBuilder`);
    });
    const g = call(() => this._b.finish(Uint32Array.from(outputs.map((t) => t.id))));
    this._b.free();
    this._b = null;
    return new Graph(g);
  }
}

/** A verified graph. */
export class Graph {
  constructor(g) {
    this._g = g;
  }
  _live(where) {
    if (!this._g) throw new RlxError("disposed", `${where}: this Graph was disposed (graph.dispose() was called)`);
    return this._g;
  }
  static fromText(text) {
    checkString("Graph.fromText", "text", text);
    return new Graph(call(() => raw.Graph.fromText(text)));
  }
  /**
   * Import an ONNX model (bytes: ArrayBuffer or a typed-array view).
   * `dims`: sizes of symbolic dimensions by name; `shapes`: whole input
   * shapes by input name (for `?` / `-1` dimensions). Ops that cannot be
   * imported are all listed in one RlxError 'unsupported'.
   */
  static fromOnnx(bytes, opts = {}) {
    const where = "Graph.fromOnnx";
    const view = bytesView(where, bytes);
    opts = checkOptions(where, opts, ONNX_OPTIONS);
    const json = (name) => {
      const v = opts[name];
      if (v === undefined || v === null) return undefined;
      if (!isPlainObject(v)) throw invalid(where, `\`${name}\` must be an object by name, got ${describe(v)}`);
      for (const [k, x] of Object.entries(v)) {
        const list = name === "dims" ? [x] : x;
        if (!Array.isArray(list) || !list.every((d) => Number.isInteger(d) && d >= 0 && d <= 0xffffffff)) {
          throw new RlxError("shape", `${where}: \`${name}.${k}\` must be ${name === "dims" ? "a size" : "a list of sizes"} (integers >= 0), got ${describe(x)}`);
        }
      }
      return JSON.stringify(v);
    };
    const ext = externalFiles(where, opts.externalData);
    return new Graph(call(() => raw.Graph.fromOnnx(view, json("dims"), json("shapes"), ext)));
  }
  /**
   * The files an ONNX model's external-data tensors live in (locations
   * relative to the model, first use first): what to fetch and pass as
   * `externalData` to `fromOnnx`.
   */
  static onnxExternalFiles(bytes) {
    return call(() => raw.Graph.onnxExternalFiles(bytesView("Graph.onnxExternalFiles", bytes)));
  }
  static fromJson(obj) {
    if (typeof obj !== "string" && !isPlainObject(obj)) {
      throw invalid("Graph.fromJson", `expected the graph's JSON as an object or a string, got ${describe(obj)}`);
    }
    let text = obj;
    if (typeof obj !== "string") {
      try {
        text = JSON.stringify(obj);
      } catch (e) {
        throw invalid("Graph.fromJson", `the object cannot be written as JSON: ${e.message}`);
      }
    }
    return new Graph(call(() => raw.Graph.fromJson(text)));
  }
  get name() { return call(() => this._live("Graph.name").name()); }
  text() { return call(() => this._live("Graph.text").text()); }
  json() { return JSON.parse(call(() => this._live("Graph.json").json())); }
  inputs() { return JSON.parse(call(() => this._live("Graph.inputs").inputs())); }
  outputs() { return JSON.parse(call(() => this._live("Graph.outputs").outputs())); }
  /** Free its wasm memory now; later calls throw RlxError 'disposed'. Idempotent. */
  dispose() { this._g?.free(); this._g = null; }
}

// ---- fetching --------------------------------------------------------------

/** Bytes from an ArrayBuffer/view, a Response, or a URL (fetched; a path in Node), with progress. */
async function bytesOf(src, onProgress, what) {
  const known =
    src instanceof ArrayBuffer || ArrayBuffer.isView(src) || typeof src === "string" || src instanceof URL ||
    (src !== null && typeof src === "object" && typeof src.arrayBuffer === "function");
  if (!known) throw invalid(what, `expected an ArrayBuffer, Uint8Array, Response, URL or path, got ${describe(src)}`);
  try {
    return await readBytes(src, onProgress, what);
  } catch (e) {
    if (e instanceof RlxError || e?.[USER_ERROR]) throw e;
    throw new RlxError("format", `${what}: could not read ${String(src?.url ?? src)}: ${e?.message ?? e}`, { cause: e });
  }
}

// Marks an error thrown by the caller's own onProgress: it reaches the
// caller unchanged (it is theirs, not the package's).
const USER_ERROR = Symbol("rlx.userError");
function progress(onProgress, p) {
  if (!onProgress) return;
  try {
    onProgress(p);
  } catch (e) {
    if (e !== null && (typeof e === "object" || typeof e === "function")) {
      try {
        Object.defineProperty(e, USER_ERROR, { value: true });
      } catch {
        /* frozen: passed on as is */
      }
    }
    throw e;
  }
}

async function readBytes(src, onProgress, what) {
  if (src instanceof Uint8Array) return { bytes: src, label: what };
  if (src instanceof ArrayBuffer) return { bytes: new Uint8Array(src), label: what };
  if (ArrayBuffer.isView(src)) return { bytes: new Uint8Array(src.buffer, src.byteOffset, src.byteLength), label: what };
  let label = String(src?.url ?? src);
  let res = src;
  if (typeof src === "string" || src instanceof URL) {
    if (isNode && !/^(https?|data|blob):/.test(String(src))) {
      const fsName = "node:fs/promises";
      const fs = await import(/* @vite-ignore */ fsName);
      let b;
      try {
        b = await fs.readFile(src instanceof URL ? src : String(src));
      } catch (e) {
        throw new RlxError("format", `${label}: ${e.message}`, { cause: e });
      }
      progress(onProgress, { stage: "download", loaded: b.length, total: b.length, message: `read ${label}` });
      return { bytes: new Uint8Array(b.buffer, b.byteOffset, b.length), label };
    }
    try {
      res = await fetch(src);
    } catch (e) {
      throw new RlxError("format", `${label}: fetch failed: ${e.message}`, { cause: e });
    }
  }
  if (!res.ok) throw new RlxError("format", `${label}: HTTP ${res.status} ${res.statusText}`);
  const total = Number(res.headers.get("content-length")) || 0;
  if (!onProgress || !res.body) {
    const b = new Uint8Array(await res.arrayBuffer());
    progress(onProgress, { stage: "download", loaded: b.length, total: b.length, message: `downloaded ${label}` });
    return { bytes: b, label };
  }
  const reader = res.body.getReader();
  const chunks = [];
  let loaded = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    loaded += value.length;
    progress(onProgress, { stage: "download", loaded, total, message: `downloading ${label}` });
  }
  const bytes = new Uint8Array(loaded);
  let o = 0;
  for (const c of chunks) {
    bytes.set(c, o);
    o += c.length;
  }
  return { bytes, label };
}

async function textOf(src, what) {
  const { bytes } = await bytesOf(src, null, what);
  return new TextDecoder().decode(bytes);
}

// ---- weights, compile, run ---------------------------------------------------

/** Named tensors from a safetensors or GGUF file. */
export class Weights {
  constructor(w) {
    this._w = w;
  }
  _live(where) {
    if (!this._w) throw new RlxError("disposed", `${where}: these Weights were disposed (weights.dispose() was called); load them again`);
    return this._w;
  }
  names() { return call(() => this._live("Weights.names").names()); }
  info(name) {
    const w = this._live("Weights.info");
    checkString("Weights.info", "name", name);
    return JSON.parse(call(() => w.info(name)));
  }
  get(name) {
    const w = this._live("Weights.get");
    checkString("Weights.get", "name", name);
    return call(() => w.get(name));
  }
  get bytes() { return call(() => this._live("Weights.bytes").bytes); }
  /** A GGUF file's metadata (`{}` for safetensors): key → number, boolean, string or array. */
  metadata() { return JSON.parse(call(() => this._live("Weights.metadata").metadataJson())); }
  /** Free them now (models compiled with them keep their own reference). Idempotent. */
  dispose() { this._w?.free(); this._w = null; }
}

/** Load a .safetensors file from an ArrayBuffer, Uint8Array, Response or URL. */
export async function loadSafetensors(src, opts = {}) {
  guard();
  opts = checkOptions("loadSafetensors", opts, ["onProgress"]);
  const onProgress = checkCallback("loadSafetensors", "onProgress", opts.onProgress);
  const { bytes, label } = await bytesOf(src, onProgress, "safetensors");
  onProgress?.({ stage: "weights", message: `parsing ${label}` });
  return new Weights(call(() => raw.Weights.fromSafetensors(bytes, label)));
}

/**
 * Load a .gguf file (llama.cpp's format) from an ArrayBuffer, Uint8Array,
 * Response or URL: every tensor (block types such as q4_0 and q4_k stay
 * packed) and the metadata (`weights.metadata()`).
 */
export async function loadGguf(src, opts = {}) {
  guard();
  opts = checkOptions("loadGguf", opts, ["onProgress"]);
  const onProgress = checkCallback("loadGguf", "onProgress", opts.onProgress);
  const { bytes, label } = await bytesOf(src, onProgress, "gguf");
  onProgress?.({ stage: "weights", message: `parsing ${label}` });
  return new Weights(call(() => raw.Weights.fromGguf(bytes, label)));
}

/** One value of `run()`'s inputs: a typed array, or `{data, shape}` checked against the input. */
function runValue(spec, v, where) {
  const name = `input \`${spec.name}\` (${spec.dtype} [${spec.shape}])`;
  const expected = `a ${arrayNameOf(spec.dtype)} or {data, shape}`;
  let data = v;
  if (!isTypedArray(v)) {
    if (!isPlainObject(v)) throw invalid(where, `${name}: expected ${expected}, got ${describe(v)}`);
    if (!("data" in v)) {
      throw invalid(where, `${name}: the object has no \`data\` (expected ${expected}; its keys: ${Object.keys(v).join(", ") || "none"})`);
    }
    data = v.data;
    if (!isTypedArray(plainData(data))) throw invalid(where, `${name}: \`data\` must be a ${arrayNameOf(spec.dtype)}, got ${describe(data)}`);
    if (v.shape !== undefined) {
      const dims = Array.from(checkShape(`${where}: ${name}`, v.shape));
      if (dims.join(",") !== spec.shape.join(",")) {
        throw new RlxError("input", `${where}: input \`${spec.name}\`: shape [${dims}] but the graph was compiled for [${spec.shape}]`);
      }
    }
  }
  return plainData(data);
}

/** A compiled graph. */
export class Model {
  /**
   * Import an ONNX model and compile it: `Graph.fromOnnx(bytes, {dims,
   * shapes, externalData})` then `compile(graph, {device, policy,
   * optimize})`. `externalData` may also be an async function
   * `(location) => bytes` (a fetch beside the model), called once per file.
   */
  static async fromOnnx(bytes, opts = {}) {
    opts = checkOptions("Model.fromOnnx", opts, [...ONNX_OPTIONS, ...COMPILE_OPTIONS.filter((o) => o !== "weights")]);
    let { dims, shapes, externalData, ...rest } = opts;
    if (typeof externalData === "function") {
      const fetchFile = externalData;
      externalData = {};
      for (const loc of Graph.onnxExternalFiles(bytes)) externalData[loc] = await fetchFile(loc);
    }
    const g = Graph.fromOnnx(bytes, { dims, shapes, externalData });
    try {
      return await compile(g, rest);
    } finally {
      g.dispose();
    }
  }
  constructor(m) {
    this._m = m;
    this._inputs = JSON.parse(call(() => m.inputs()));
  }
  _live(where) {
    if (!this._m) {
      throw new RlxError("disposed", `${where}: this Model was disposed (model.dispose() was called); compile the graph again`);
    }
    return this._m;
  }
  /** The device it really compiled for. */
  get device() { return call(() => this._live("Model.device").device); }
  /** Inputs, with `bound: true` for those bound to weights. */
  inputs() { return this._inputs.map((x) => ({ ...x })); }
  /**
   * Run. `inputs`: an object by input name, or an array in input order
   * (inputs bound to weights are skipped). A value is a typed array or
   * `{data, shape}`. Resolves to `[{name, dtype, shape, data}]`.
   */
  async run(inputs) {
    const where = "Model.run";
    const m = this._live(where);
    const free = this._inputs.filter((x) => !x.bound);
    const sig = free.map((x) => `${x.name}: ${x.dtype} [${x.shape}]`).join(", ") || "none";
    let list;
    if (Array.isArray(inputs)) {
      if (inputs.length !== free.length) {
        throw new RlxError("input", `${where}: the model takes ${free.length} inputs (not bound to weights), got ${inputs.length} (inputs: ${sig})`);
      }
      list = inputs;
    } else if (isPlainObject(inputs)) {
      const names = new Set(free.map((x) => x.name));
      for (const k of Object.keys(inputs)) {
        if (!names.has(k)) {
          throw new RlxError("input", `no input named \`${k}\` (inputs: ${[...names].join(", ")})`);
        }
      }
      list = free.map((x) => {
        if (!(x.name in inputs)) throw new RlxError("input", `missing input \`${x.name}\` (${x.dtype} [${x.shape}])`);
        return inputs[x.name];
      });
    } else {
      throw invalid(
        where,
        `\`inputs\` must be an object {name: data} or an array in input order, got ${describe(inputs)} (inputs: ${sig})`,
      );
    }
    const arr = list.map((v, k) => runValue(free[k], v, where));
    return acall(async () => (await m.run(arr)).map(halfOut));
  }
  /** The IR as JSON: 'hir' (as written), 'mir' (after passes), 'lir' (the schedule). */
  ir(level = "mir") {
    const m = this._live("Model.ir");
    checkString("Model.ir", "level", level);
    return JSON.parse(call(() => m.ir(level)));
  }
  dispatchReport() { return withWasm(JSON.parse(call(() => this._live("Model.dispatchReport").dispatchReport()))); }
  memoryPlan() { return JSON.parse(call(() => this._live("Model.memoryPlan").memoryPlan())); }
  passReport() { return JSON.parse(call(() => this._live("Model.passReport").passReport())); }
  /** Kernels: WGSL (or 'msl' | 'hlsl' | 'glsl' | 'spirv') for WebGPU models; kernel names on cpu. */
  kernels(lang = "wgsl") {
    const m = this._live("Model.kernels");
    checkString("Model.kernels", "lang", lang);
    return JSON.parse(call(() => m.kernels(lang)));
  }
  /** Free wasm and GPU memory now (a run in flight finishes first). Idempotent. */
  dispose() {
    if (this._m) {
      this._m.dispose();
      this._m.free();
    }
    this._m = null;
  }
}

const COMPILE_OPTIONS = ["device", "policy", "weights", "optimize", "amp"];
const ONNX_OPTIONS = ["dims", "shapes", "externalData"];

/** A model's bytes (ArrayBuffer or a typed-array view) as a Uint8Array. */
function bytesView(where, bytes) {
  const view = bytes instanceof ArrayBuffer ? new Uint8Array(bytes)
    : ArrayBuffer.isView(bytes) ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : null;
  if (!view) throw invalid(where, `expected the model's bytes (ArrayBuffer or Uint8Array), got ${describe(bytes)}`);
  return view;
}

/** `externalData` ({location: bytes}) checked, as the wasm side takes it. */
function externalFiles(where, files) {
  if (files === undefined || files === null) return undefined;
  if (!isPlainObject(files)) {
    throw invalid(where, `\`externalData\` must be an object {location: ArrayBuffer | Uint8Array} (Model.fromOnnx also takes an async function of the location), got ${describe(files)}`);
  }
  const out = {};
  for (const [k, v] of Object.entries(files)) out[k] = bytesView(`${where}: \`externalData.${k}\``, v);
  return out;
}

/**
 * Compile a graph. `device`: 'cpu' | 'webgpu' | a fallback list such as
 * ['webgpu', 'cpu'] (the dispatch report's `fallback` says what was skipped
 * and why) | 'auto' (every device the page has, cheapest estimate first,
 * with figures measured on this machine: the first 'auto' compile runs
 * `rlx.calibrate()` unless figures were set or cleared; the report's
 * `auto` lists each estimate). `weights` binds graph inputs of the same names. `amp`: 'f16' or
 * 'bf16' runs matmuls, convolutions and attention in 16 bits (softmax,
 * norms and reductions in f32; inputs and outputs keep their dtypes).
 */
export async function compile(graph, opts = {}) {
  guard();
  if (!(graph instanceof Graph)) {
    throw invalid("compile", `expected an rlx.Graph (GraphBuilder.finish or Graph.fromText), got ${describe(graph)}`);
  }
  const g = graph._live("compile");
  opts = checkOptions("compile", opts, COMPILE_OPTIONS);
  const devices = checkDevice("compile", opts.device);
  if (opts.policy !== undefined && opts.policy !== null) checkString("compile", "policy", opts.policy);
  if (opts.optimize !== undefined && typeof opts.optimize !== "boolean") {
    throw invalid("compile", `\`optimize\` must be true or false, got ${describe(opts.optimize)}`);
  }
  if (opts.amp !== undefined && opts.amp !== null && !["none", "f16", "bf16"].includes(opts.amp)) {
    throw invalid("compile", `\`amp\` must be 'f16', 'bf16' or 'none', got ${describe(opts.amp)}`);
  }
  let w;
  if (opts.weights !== undefined && opts.weights !== null) {
    if (!(opts.weights instanceof Weights)) {
      throw invalid("compile", `\`weights\` must be rlx.Weights (from loadSafetensors), got ${describe(opts.weights)}`);
    }
    const live = opts.weights._live("compile (its `weights`)");
    w = call(() => live.share());
  }
  if (devices.length === 1 && devices[0] === "auto" && !calibrated && autoCalibrate) {
    calibrated = true;
    await autoCalibrate();
  }
  const m = await acall(() => raw.compile(g, devices, opts.policy ?? undefined, opts.optimize ?? true, w, opts.amp ?? undefined));
  return new Model(m);
}

// ---- models and pipelines ----------------------------------------------------

/** The BERT encoder (e.g. all-MiniLM-L6-v2) for benchmarks: inputs input_ids, attention_mask, token_type_ids. */
async function bert(args) {
  guard();
  const where = "models.bert";
  if (!isPlainObject(args)) throw invalid(where, `expected {config, weights, batch, seq, device, pooling, policy}, got ${describe(args)}`);
  const { config, weights, batch = 1, seq = 128, device = "cpu", pooling = true, policy } = checkOptions(where, args, [
    "config", "weights", "batch", "seq", "device", "pooling", "policy",
  ]);
  if (typeof config !== "string" && !isPlainObject(config)) {
    throw invalid(where, `\`config\` (config.json) must be an object or a JSON string, got ${describe(config)}`);
  }
  if (!(weights instanceof Weights)) throw invalid(where, `\`weights\` must be rlx.Weights (from loadSafetensors), got ${describe(weights)}`);
  checkCount(where, "batch", batch);
  checkCount(where, "seq", seq);
  if (typeof pooling !== "boolean") throw invalid(where, `\`pooling\` must be true or false, got ${describe(pooling)}`);
  const cfg = typeof config === "string" ? config : JSON.stringify(config);
  const g = new Graph(call(() => raw.bertGraph(cfg, batch, seq, pooling)));
  try {
    return await compile(g, { device, weights, policy });
  } finally {
    g.dispose();
  }
}

export const models = { bert };

function joinUrl(base, name) {
  if (base instanceof URL) return new URL(name, base.href.endsWith("/") ? base : base.href + "/");
  const b = String(base);
  return b.endsWith("/") ? b + name : `${b}/${name}`;
}

/** `texts` of embed(): one string or an array of strings; anything else names the index and what it found. */
function checkTexts(where, texts) {
  if (typeof texts === "string") return [texts];
  if (!Array.isArray(texts)) throw invalid(where, `\`texts\` must be a string or an array of strings, got ${describe(texts)}`);
  texts.forEach((t, i) => {
    if (typeof t !== "string") throw invalid(where, `texts[${i}] is ${describe(t)}; every text must be a string`);
  });
  return texts;
}

/** A loaded sentence-embedding model (MiniLM-family). */
export class Embedder {
  constructor(e) {
    this._e = e;
  }
  _live(where) {
    if (!this._e) throw new RlxError("disposed", `${where}: this Embedder was disposed (embedder.dispose() was called); create another`);
    return this._e;
  }
  get device() { return call(() => this._live("Embedder.device").device); }
  /** L2-normalized embeddings, one Float32Array per text. */
  async embed(texts) {
    const e = this._live("Embedder.embed");
    const list = checkTexts("Embedder.embed", texts);
    return acall(() => e.embed(list));
  }
  dispatchReport() { return withWasm(JSON.parse(call(() => this._live("Embedder.dispatchReport").dispatchReport()))); }
  /** Free the weights and every compiled shape now. Idempotent. */
  dispose() {
    if (this._e) {
      this._e.dispose();
      this._e.free();
    }
    this._e = null;
  }
}

const EMBEDDER_OPTIONS = ["model", "device", "onProgress"];
const MODEL_PARTS = ["config", "tokenizer", "weights", "sentenceBertConfig"];

/**
 * Load an embedder. `model`: a base URL (a directory in Node) holding
 * config.json, tokenizer.json, model.safetensors (and optionally
 * sentence_bert_config.json), or `{config, tokenizer, weights, sentenceBertConfig}`
 * with each a URL, Response, ArrayBuffer or (for the JSON files) a string.
 */
async function createEmbedder(opts) {
  guard();
  const where = "createEmbedder";
  if (!isPlainObject(opts)) throw invalid(where, `expected {model, device, onProgress}, got ${describe(opts)}`);
  const { model, device = ["webgpu", "cpu"], onProgress } = checkOptions(where, opts, EMBEDDER_OPTIONS);
  const devices = checkDevice(where, device);
  checkCallback(where, "onProgress", onProgress);
  if (model === undefined || model === null) throw invalid(where, "`model` (a base URL or the file parts) is required");
  let parts;
  if (typeof model === "string" || model instanceof URL) {
    parts = {
      config: joinUrl(model, "config.json"),
      tokenizer: joinUrl(model, "tokenizer.json"),
      weights: joinUrl(model, "model.safetensors"),
      sentenceBertConfig: joinUrl(model, "sentence_bert_config.json"),
    };
  } else if (isPlainObject(model)) {
    parts = checkOptions(`${where}: \`model\``, model, MODEL_PARTS);
    for (const k of ["config", "tokenizer", "weights"]) {
      if (parts[k] === undefined || parts[k] === null) {
        throw invalid(where, `\`model.${k}\` is missing (the parts are {config, tokenizer, weights, sentenceBertConfig?})`);
      }
    }
  } else {
    throw invalid(where, `\`model\` must be a base URL, a path or {config, tokenizer, weights}, got ${describe(model)}`);
  }
  const asText = async (v, what) => (typeof v === "string" && v.trimStart().startsWith("{") ? v : textOf(v, what));
  onProgress?.({ stage: "download", loaded: 0, total: 0, message: "fetching config.json and tokenizer.json" });
  const config = await asText(parts.config, "config.json");
  const tokenizer = await asText(parts.tokenizer, "tokenizer.json");
  let sbert;
  if (parts.sentenceBertConfig) {
    try {
      sbert = await asText(parts.sentenceBertConfig, "sentence_bert_config.json");
    } catch {
      sbert = undefined; // optional: without it the encoder's full length is used
    }
  }
  const { bytes, label } = await bytesOf(parts.weights, onProgress, "model.safetensors");
  onProgress?.({ stage: "weights", loaded: bytes.length, total: bytes.length, message: `parsing ${label}` });
  const e = call(() => new raw.Embedder(config, sbert, tokenizer, bytes, label, devices));
  onProgress?.({ stage: "ready", message: "model loaded; each new batch shape compiles on first use" });
  return new Embedder(e);
}

/** Embed texts in one call (loads the model, embeds, frees it). */
async function embed(texts, opts) {
  guard();
  // The texts are checked before the model is fetched.
  const list = checkTexts("pipelines.embed", texts);
  const e = await createEmbedder(opts);
  try {
    opts.onProgress?.({ stage: "compile", message: "compiling and running" });
    const out = await e.embed(list);
    opts.onProgress?.({ stage: "ready", message: `embedded ${out.length} texts on ${e.device}` });
    return out;
  } finally {
    e.dispose();
  }
}

export const pipelines = { embed, createEmbedder };

// ---- decoder LLMs (llm.js) ------------------------------------------------------

const llm = makeLlm({
  call, acall, guard, invalid, checkOptions, checkCallback, checkDevice, bytesOf, isPlainObject, describe, RlxError,
  withWasm, raw: () => raw,
});
/** A decoder LLM from a GGUF file: see llm.js and npm/API.md. */
export const Llm = llm.Llm;
/** Load a decoder LLM (llama, qwen2, gemma3) from a .gguf file. */
export const loadLlm = llm.loadLlm;

/**
 * Put measured figures of a device in force for `device: 'auto'`:
 * `{device: 'cpu' | 'webgpu', backend, gemm_gflops, launch_us,
 * transfer_gbps}` (what `rlx.calibrate()` returns; figures that cannot be
 * costs are RlxError 'invalid_argument').
 */
export function setCalibration(figures) {
  if (!isPlainObject(figures)) throw invalid("setCalibration", `expected {device, backend, gemm_gflops, launch_us, run_us, transfer_gbps}, got ${describe(figures)}`);
  call(() => raw.setCalibrationJson(JSON.stringify(figures)));
  calibrated = true;
}

/** Forget every calibration: `device: 'auto'` estimates with the nominal figures again (and no longer calibrates by itself). */
export function clearCalibrations() {
  call(() => raw.clearCalibrations());
  calibrated = true;
}

// The first `device: 'auto'` compile of a page calibrates (calibrate.js
// registers how; IndexedDB keeps the figures), unless figures were set or
// cleared before.
let calibrated = false;
let autoCalibrate = null;
/** Internal (calibrate.js). */
export function _onFirstAuto(f) {
  autoCalibrate = f;
}

/** Internal: `GPUDevice.destroy()` on the page's WebGPU device (the device-loss test uses it); whether there was one. */
export function __testDestroyWebGpu() {
  return call(() => (raw.__testDestroyWebGpu ? raw.__testDestroyWebGpu() : false));
}

/** Internal: panics inside the module (the panic-boundary test uses it). */
export function __testPanic() {
  return call(() => raw.__testPanic());
}
