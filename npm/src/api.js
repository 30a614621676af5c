// The rlx npm package: a thin, typed wrapper over a wasm-bindgen module
// built from web/ (scripts/build-npm). The contract is npm/API.md; types
// are in index.d.ts. Two entry points share this file: `rlx` (index.js,
// the core module) and `rlx/full` (full.js, plus naga's MSL/HLSL/GLSL/
// SPIR-V translators); each passes its own glue and .wasm URL, written as
// literals there so bundlers find the files.
let initWasm;
let raw;
let wasmUrl;
let relaxedUrl;

/**
 * Called once by an entry point with its wasm-bindgen glue, its .wasm URL
 * and, for the core, the URL of the relaxed-SIMD build of the same module
 * (scripts/build-npm checks that both builds share this glue).
 */
export function bind(glue, url, relaxed) {
  initWasm = glue.default;
  raw = glue;
  wasmUrl = url;
  relaxedUrl = relaxed;
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

/** Every failure of the package: `code` says what kind, the message is the Rust error's text. */
export class RlxError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = "RlxError";
    this.code = code;
  }
}

let ready = null;
let poisoned = null;

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
  return e;
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
  if (ready) return ready;
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
      await initWasm({ module_or_path: src ?? url });
    } catch (e) {
      ready = null;
      // No quiet retry with the plain core: the caller sees what failed
      // and can ask for the plain one.
      const which = relaxed
        ? "the relaxed-SIMD rlx wasm module (the engine passed the relaxed-SIMD probe; init({ relaxed: false }) loads the plain simd128 core)"
        : "the rlx wasm module";
      throw new RlxError("init", `could not load ${which}: ${e.message}`, { cause: e });
    }
    initialized = true;
  })();
  return ready;
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
    if (!this._type) this._type = JSON.parse(call(() => this.builder._b.typeOf(this.id)));
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

/** Builds a graph; `finish` returns an immutable {@link Graph}. */
export class GraphBuilder {
  constructor(name = "graph") {
    guard();
    this._b = new raw.GraphBuilder(name);
  }
  input(name, dtype, shape) {
    return new Tensor(this, call(() => this._b.input(name, dtype, Uint32Array.from(shape))));
  }
  constant(data, shape, dtype) {
    data = plainData(data);
    dtype ??= Object.keys(ARRAY_OF).find((k) => data instanceof ARRAY_OF[k]);
    return new Tensor(this, call(() => this._b.constant(dtype, Uint32Array.from(shape), data)));
  }
  /** Apply a registry op to `inputs`; returns its outputs. */
  op(name, inputs, attrs = {}) {
    return this._op(name, inputs, attrs, 1);
  }
  _op(name, inputs, attrs, depth) {
    for (const t of inputs) {
      if (!(t instanceof Tensor) || t.builder !== this) {
        throw new RlxError("graph", `op \`${name}\`: every input must be a Tensor of this builder`);
      }
    }
    const ids = Uint32Array.from(inputs.map((t) => t.id));
    const json = JSON.stringify(attrs, (_, v) => (typeof v === "bigint" ? Number(v) : v));
    const site = callSite(depth);
    const out = call(() => this._b.op(name, ids, json, site));
    return Array.from(out, (id) => new Tensor(this, id));
  }
  finish(outputs) {
    return new Graph(call(() => this._b.finish(Uint32Array.from(outputs.map((t) => t.id)))));
  }
}

/** A verified graph. */
export class Graph {
  constructor(g) {
    this._g = g;
  }
  static fromText(text) {
    return new Graph(call(() => raw.Graph.fromText(text)));
  }
  static fromJson(obj) {
    return new Graph(call(() => raw.Graph.fromJson(typeof obj === "string" ? obj : JSON.stringify(obj))));
  }
  get name() { return call(() => this._g.name()); }
  text() { return call(() => this._g.text()); }
  json() { return JSON.parse(call(() => this._g.json())); }
  inputs() { return JSON.parse(call(() => this._g.inputs())); }
  outputs() { return JSON.parse(call(() => this._g.outputs())); }
  dispose() { this._g?.free(); this._g = null; }
}

// ---- fetching --------------------------------------------------------------

/** Bytes from an ArrayBuffer/view, a Response, or a URL (fetched; a path in Node), with progress. */
async function bytesOf(src, onProgress, what) {
  if (src instanceof Uint8Array) return { bytes: src, label: what };
  if (src instanceof ArrayBuffer) return { bytes: new Uint8Array(src), label: what };
  if (ArrayBuffer.isView(src)) return { bytes: new Uint8Array(src.buffer, src.byteOffset, src.byteLength), label: what };
  let label = String(src?.url ?? src);
  let res = src;
  if (typeof src === "string" || src instanceof URL) {
    if (isNode && !/^(https?|data|blob):/.test(String(src))) {
      const fsName = "node:fs/promises";
      const fs = await import(/* @vite-ignore */ fsName);
      try {
        const b = await fs.readFile(src instanceof URL ? src : String(src));
        onProgress?.({ stage: "download", loaded: b.length, total: b.length, message: `read ${label}` });
        return { bytes: new Uint8Array(b.buffer, b.byteOffset, b.length), label };
      } catch (e) {
        throw new RlxError("format", `${label}: ${e.message}`, { cause: e });
      }
    }
    try {
      res = await fetch(src);
    } catch (e) {
      throw new RlxError("format", `${label}: fetch failed: ${e.message}`, { cause: e });
    }
  }
  if (!res || typeof res.arrayBuffer !== "function") {
    throw new RlxError("input", `${what}: expected an ArrayBuffer, Uint8Array, Response or URL`);
  }
  if (!res.ok) throw new RlxError("format", `${label}: HTTP ${res.status} ${res.statusText}`);
  const total = Number(res.headers.get("content-length")) || 0;
  if (!onProgress || !res.body) {
    const b = new Uint8Array(await res.arrayBuffer());
    onProgress?.({ stage: "download", loaded: b.length, total: b.length, message: `downloaded ${label}` });
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
    onProgress({ stage: "download", loaded, total, message: `downloading ${label}` });
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

/** Named tensors from a safetensors file. */
export class Weights {
  constructor(w) {
    this._w = w;
  }
  names() { return call(() => this._w.names()); }
  info(name) { return JSON.parse(call(() => this._w.info(name))); }
  get(name) { return call(() => this._w.get(name)); }
  get bytes() { return call(() => this._w.bytes); }
  dispose() { this._w?.free(); this._w = null; }
}

/** Load a .safetensors file from an ArrayBuffer, Uint8Array, Response or URL. */
export async function loadSafetensors(src, opts = {}) {
  guard();
  const { bytes, label } = await bytesOf(src, opts.onProgress, "safetensors");
  opts.onProgress?.({ stage: "weights", message: `parsing ${label}` });
  return new Weights(call(() => raw.Weights.fromSafetensors(bytes, label)));
}

function deviceList(device) {
  const d = device ?? "cpu";
  return Array.isArray(d) ? d.map(String) : [String(d)];
}

/** A compiled graph. */
export class Model {
  constructor(m) {
    this._m = m;
    this._inputs = JSON.parse(call(() => m.inputs()));
  }
  _live() {
    if (!this._m) throw new RlxError("disposed", "this model was disposed");
    return this._m;
  }
  /** The device it really compiled for. */
  get device() { return call(() => this._live().device); }
  /** Inputs, with `bound: true` for those bound to weights. */
  inputs() { return this._inputs.map((x) => ({ ...x })); }
  /**
   * Run. `inputs`: an object by input name, or an array in input order
   * (inputs bound to weights are skipped). A value is a typed array or
   * `{data, shape}`. Resolves to `[{name, dtype, shape, data}]`.
   */
  async run(inputs) {
    const m = this._live();
    const free = this._inputs.filter((x) => !x.bound);
    let list;
    if (Array.isArray(inputs)) {
      list = inputs;
    } else {
      const names = new Set(free.map((x) => x.name));
      for (const k of Object.keys(inputs ?? {})) {
        if (!names.has(k)) {
          throw new RlxError("input", `no input named \`${k}\` (inputs: ${[...names].join(", ")})`);
        }
      }
      list = free.map((x) => {
        if (!(x.name in inputs)) throw new RlxError("input", `missing input \`${x.name}\` (${x.dtype} [${x.shape}])`);
        return inputs[x.name];
      });
    }
    const arr = list.map((v, k) => {
      const spec = free[k];
      const data = plainData(v?.data ?? v);
      if (spec && v?.shape && v.shape.join(",") !== spec.shape.join(",")) {
        throw new RlxError("input", `input \`${spec.name}\`: shape [${v.shape}] but the graph was compiled for [${spec.shape}]`);
      }
      return data;
    });
    return acall(() => m.run(arr));
  }
  /** The IR as JSON: 'hir' (as written), 'mir' (after passes), 'lir' (the schedule). */
  ir(level = "mir") { return JSON.parse(call(() => this._live().ir(level))); }
  dispatchReport() { return JSON.parse(call(() => this._live().dispatchReport())); }
  memoryPlan() { return JSON.parse(call(() => this._live().memoryPlan())); }
  passReport() { return JSON.parse(call(() => this._live().passReport())); }
  /** Kernels: WGSL (or 'msl' | 'hlsl' | 'glsl' | 'spirv') for WebGPU models; kernel names on cpu. */
  kernels(lang = "wgsl") { return JSON.parse(call(() => this._live().kernels(lang))); }
  /** Free wasm and GPU memory now. */
  dispose() {
    if (this._m) {
      this._m.dispose();
      this._m.free();
    }
    this._m = null;
  }
}

/**
 * Compile a graph. `device`: 'cpu' | 'webgpu' | a fallback list such as
 * ['webgpu', 'cpu'] (the dispatch report's `fallback` says what was skipped
 * and why). `weights` binds graph inputs of the same names.
 */
export async function compile(graph, opts = {}) {
  guard();
  if (!(graph instanceof Graph)) throw new RlxError("input", "compile: expected an rlx.Graph (GraphBuilder.finish or Graph.fromText)");
  const w = opts.weights ? call(() => opts.weights._w.share()) : undefined;
  const m = await acall(() =>
    raw.compile(graph._g, deviceList(opts.device), opts.policy ?? undefined, opts.optimize ?? true, w),
  );
  return new Model(m);
}

// ---- models and pipelines ----------------------------------------------------

/** The BERT encoder (e.g. all-MiniLM-L6-v2) for benchmarks: inputs input_ids, attention_mask, token_type_ids. */
async function bert({ config, weights, batch = 1, seq = 128, device = "cpu", pooling = true, policy }) {
  guard();
  const cfg = typeof config === "string" ? config : JSON.stringify(config);
  const g = new Graph(call(() => raw.bertGraph(cfg, batch, seq, pooling)));
  return compile(g, { device, weights, policy });
}

export const models = { bert };

function joinUrl(base, name) {
  if (base instanceof URL) return new URL(name, base.href.endsWith("/") ? base : base.href + "/");
  const b = String(base);
  return b.endsWith("/") ? b + name : `${b}/${name}`;
}

/** A loaded sentence-embedding model (MiniLM-family). */
export class Embedder {
  constructor(e) {
    this._e = e;
  }
  get device() { return call(() => this._e.device); }
  /** L2-normalized embeddings, one Float32Array per text. */
  async embed(texts) {
    if (!this._e) throw new RlxError("disposed", "this embedder was disposed");
    const list = Array.isArray(texts) ? texts : [texts];
    return acall(() => this._e.embed(list.map(String)));
  }
  dispatchReport() { return JSON.parse(call(() => this._e.dispatchReport())); }
  dispose() {
    this._e?.free();
    this._e = null;
  }
}

/**
 * Load an embedder. `model`: a base URL (a directory in Node) holding
 * config.json, tokenizer.json, model.safetensors (and optionally
 * sentence_bert_config.json), or `{config, tokenizer, weights, sentenceBertConfig}`
 * with each a URL, Response, ArrayBuffer or (for the JSON files) a string.
 */
async function createEmbedder({ model, device = ["webgpu", "cpu"], onProgress } = {}) {
  guard();
  if (!model) throw new RlxError("input", "createEmbedder: `model` (a base URL or the file parts) is required");
  const parts =
    typeof model === "string" || model instanceof URL
      ? {
          config: joinUrl(model, "config.json"),
          tokenizer: joinUrl(model, "tokenizer.json"),
          weights: joinUrl(model, "model.safetensors"),
          sentenceBertConfig: joinUrl(model, "sentence_bert_config.json"),
        }
      : model;
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
  const e = call(() => new raw.Embedder(config, sbert, tokenizer, bytes, label, deviceList(device)));
  onProgress?.({ stage: "ready", message: "model loaded; each new batch shape compiles on first use" });
  return new Embedder(e);
}

/** Embed texts in one call (loads the model, embeds, frees it). */
async function embed(texts, opts = {}) {
  const e = await createEmbedder(opts);
  try {
    opts.onProgress?.({ stage: "compile", message: "compiling and running" });
    const out = await e.embed(texts);
    opts.onProgress?.({ stage: "ready", message: `embedded ${out.length} texts on ${e.device}` });
    return out;
  } finally {
    e.dispose();
  }
}

export const pipelines = { embed, createEmbedder };

/** Internal: panics inside the module (the panic-boundary test uses it). */
export function __testPanic() {
  return call(() => raw.__testPanic());
}
