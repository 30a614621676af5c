// The bench page: every engine runs here, in one page, one after another, on
// the same inputs (MiniLM, seq 128, ids from the fixed-seed LCG of
// `rlx bench minilm`, attention mask all ones, token types 0).
//
// What is timed for every engine: one model forward, inputs already built as
// the engine's tensors, until last_hidden_state is back in a JS typed array
// (for the WebGPU engines that includes the read-back). No tokenization.
//
// window.bench: setup(engine, opts), measure(engine, batch), teardown(engine)
// -> {engine, rows, check, info}; run(engine, opts) does all three.

const SEQ = 128;
const HIDDEN = 384;
const MODEL_ID = "all-MiniLM-L6-v2";
const MODEL = `/models/${MODEL_ID}/`;
const NM = "/node_modules/";
const TJS_ORT = `${NM}@huggingface/transformers/node_modules/onnxruntime-web/dist/`;

const logEl = document.getElementById("log");
function log(msg) {
  logEl.textContent += msg + "\n";
  if (window.benchLog) window.benchLog(msg);
  else console.log(msg);
}

/** The ids of `rlx bench minilm` (native/rlx-cli): state 42, 64-bit LCG, (state >> 33) % vocab. */
function lcgIds(batch, seq, vocab) {
  const ids = new BigInt64Array(batch * seq);
  const M = (1n << 64n) - 1n;
  let state = 42n;
  for (let i = 0; i < ids.length; i++) {
    state = (state * 6364136223846793005n + 1442695040888963407n) & M;
    ids[i] = (state >> 33n) % BigInt(vocab);
  }
  return ids;
}

let configCache = null;
async function config() {
  configCache ??= await (await fetch(MODEL + "config.json")).json();
  return configCache;
}

let onnxCache = null;
async function onnxBytes() {
  onnxCache ??= new Uint8Array(await (await fetch(MODEL + "onnx/model.onnx")).arrayBuffer());
  return onnxCache;
}

async function inputs(batch) {
  const n = batch * SEQ;
  return {
    input_ids: lcgIds(batch, SEQ, (await config()).vocab_size),
    attention_mask: new BigInt64Array(n).fill(1n),
    token_type_ids: new BigInt64Array(n),
  };
}

// ---------------------------------------------------------------------------
// Engines. Each: setup(opts) -> {info, prepare(batch) -> {run() -> Float32Array, dispose()}, dispose()}
// ---------------------------------------------------------------------------

/** onnxruntime-web itself, with one execution provider, from one of its builds. */
function ortEngine(ep, file, threads) {
  return async (opts) => {
    // The thread count is fixed when a module instance first starts its wasm;
    // a query string makes a separate instance for a different count.
    const q = threads ? `?threads=${threads}` : "";
    const ort = await import(`${NM}onnxruntime-web/dist/${file}${q}`);
    ort.env.wasm.numThreads = threads ?? opts.threads;
    const session = await ort.InferenceSession.create(await onnxBytes(), {
      executionProviders: [ep],
      graphOptimizationLevel: "all",
    });
    const info = {
      version: ort.env.versions?.web ?? null,
      bundle: file,
      execution_provider: ep,
      num_threads: ort.env.wasm.numThreads,
      graph_optimization_level: "all",
    };
    return {
      info,
      async prepare(batch) {
        const x = await inputs(batch);
        const feeds = {};
        for (const [k, v] of Object.entries(x)) feeds[k] = new ort.Tensor("int64", v, [batch, SEQ]);
        return {
          async run() {
            const out = await session.run(feeds);
            const t = out.last_hidden_state;
            // webgpu: outputs are on the CPU by default (preferredOutputLocation 'cpu').
            const data = t.data;
            t.dispose?.();
            return data;
          },
          dispose() {},
        };
      },
      async dispose() {
        await session.release();
      },
    };
  };
}

/** transformers.js: AutoModel.from_pretrained on the local folder, raw model call (no tokenizer in the loop). */
function transformersEngine(device) {
  return async (opts) => {
    const T = await import(`${NM}@huggingface/transformers/dist/transformers.js`);
    T.env.allowRemoteModels = false;
    T.env.allowLocalModels = true;
    T.env.localModelPath = "/models/";
    T.env.useBrowserCache = false;
    // Its bundled onnxruntime-web would fetch its wasm from a CDN: serve ours.
    T.env.backends.onnx.wasm.wasmPaths = {
      mjs: `${TJS_ORT}ort-wasm-simd-threaded.asyncify.mjs`,
      wasm: `${TJS_ORT}ort-wasm-simd-threaded.asyncify.wasm`,
    };
    T.env.backends.onnx.wasm.numThreads = opts.threads;
    const model = await T.AutoModel.from_pretrained(MODEL_ID, { dtype: "fp32", device });
    // The folder must also serve the tokenizer: check it against the Python tokenizers ids.
    const tok = await T.AutoTokenizer.from_pretrained(MODEL_ID);
    const ref = opts.reference.tokenizer_check;
    const ids = Array.from(tok(ref.text).input_ids.data, Number);
    const info = {
      version: T.env.version,
      onnxruntime_web: T.env.backends.onnx.versions?.web ?? null,
      device,
      dtype: "fp32",
      num_threads: T.env.backends.onnx.wasm.numThreads,
      timed: "model({input_ids, attention_mask, token_type_ids}) of AutoModel (forward only, no tokenizer)",
      tokenizer_matches_python: JSON.stringify(ids) === JSON.stringify(ref.ids),
    };
    return {
      info,
      async prepare(batch) {
        const x = await inputs(batch);
        const feeds = {};
        for (const [k, v] of Object.entries(x)) feeds[k] = new T.Tensor("int64", v, [batch, SEQ]);
        return {
          async run() {
            const out = await model(feeds);
            return out.last_hidden_state.data;
          },
          dispose() {},
        };
      },
      async dispose() {
        await model.dispose();
      },
    };
  };
}

/** Node counts per path (and any fallback) from an rlx dispatch report. */
function summarizeDispatch(r) {
  if (!r || typeof r !== "object") return null;
  const nodes = Array.isArray(r.nodes) ? r.nodes : [];
  const paths = {};
  for (const n of nodes) paths[n.path ?? "?"] = (paths[n.path ?? "?"] ?? 0) + 1;
  return { device: r.device ?? null, nodes: nodes.length, paths, fallback: r.fallback ?? null };
}

/** rlx through its npm package: rlx.models.bert per npm/API.md, compiled once per batch size. */
function rlxEngine(device, initOptions = {}) {
  return async (opts) => {
    if (!opts.rlxEntry) throw new Error("the rlx npm package is not installed in benches/web/node_modules");
    const rlx = await import(opts.rlxEntry);
    await rlx.init(initOptions);
    // devices() makes the page's GPU device: only when the engine uses it
    // (it would count in the cpu engine's start-up otherwise).
    const dev = device === "cpu" ? { available: true } : (await rlx.devices()).find((d) => d.device === device);
    if (!dev?.available) throw new Error(`rlx device ${device} unavailable: ${dev?.reason ?? "not listed"}`);
    const weights = await rlx.loadSafetensors(MODEL + "model.safetensors");
    const cfg = await config();
    // Which wasm core runs the CPU kernels (simd128 or the relaxed-SIMD build the package picks where the engine has it).
    // And on how many threads: the threaded core in this cross-origin isolated page, unless initOptions say otherwise.
    const info = { version: rlx.version, device, adapter: dev.adapter ?? null, wasm_variant: rlx.wasmVariant?.() ?? null, threads: rlx.threads?.() ?? null };
    return {
      info,
      async prepare(batch) {
        // pooling: false -> the graph ends at last_hidden_state, like the ONNX model.
        const enc = await rlx.models.bert({ config: cfg, weights, batch, seq: SEQ, device, pooling: false });
        // One device (no fallback chain) was asked for: record what it compiled
        // for and how the dispatch report says its nodes run.
        if (batch === opts.batches[0]) {
          info.compiled_device = enc.device ?? null;
          info.dispatch = summarizeDispatch(enc.dispatchReport?.());
        }
        const feeds = await inputs(batch);
        return {
          async run() {
            const outs = await enc.run(feeds);
            const o = outs[0];
            return o.data ?? o;
          },
          dispose() {
            enc.dispose();
          },
        };
      },
      async dispose() {
        weights.dispose();
      },
    };
  };
}

const ENGINES = {
  // The wasm-only build for the wasm EP; the webgpu build for the webgpu EP.
  "ort-wasm": ortEngine("wasm", "ort.wasm.bundle.min.mjs"),
  "ort-webgpu": ortEngine("webgpu", "ort.webgpu.bundle.min.mjs"),
  // Diagnostic: the wasm EP inside the webgpu (asyncify) build, the build
  // transformers.js runs even for device 'wasm'.
  "ort-wasm-asyncify": ortEngine("wasm", "ort.webgpu.bundle.min.mjs"),
  // Diagnostic: ORT-web wasm on 1 thread, like rlx's wasm build (per-thread
  // comparison, and one that load from other work hurts alike).
  "ort-wasm-1t": ortEngine("wasm", "ort.wasm.bundle.min.mjs", 1),
  "tjs-wasm": transformersEngine("wasm"),
  "tjs-webgpu": transformersEngine("webgpu"),
  "rlx-cpu": rlxEngine("cpu"),
  // The simd128 core where the engine would load the relaxed-SIMD one (A/B; not in the same page run as rlx-cpu:
  // one page holds one initialized rlx module).
  "rlx-cpu-simd128": rlxEngine("cpu", { relaxed: false }),
  // The single-threaded core (the relaxed-SIMD one where the engine has it) in this isolated page, where rlx-cpu
  // loads the threaded core: the per-thread comparison (not in the same page run as rlx-cpu either).
  "rlx-cpu-1t": rlxEngine("cpu", { threads: 1 }),
  "rlx-webgpu": rlxEngine("webgpu"),
};

// ---------------------------------------------------------------------------
// Measurement and cross-check
// ---------------------------------------------------------------------------

/** cosine and max abs diff of two equally long float arrays (f64 sums). */
function compare(a, b) {
  if (!b) return null;
  if (a.length !== b.length) return { error: `length ${a.length} vs ${b.length}` };
  let dot = 0, na = 0, nb = 0, maxAbs = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
    maxAbs = Math.max(maxAbs, Math.abs(a[i] - b[i]));
  }
  return { cosine: dot / Math.sqrt(na * nb), max_abs_diff: maxAbs, finite: Number.isFinite(dot) };
}

let referenceCache = null;
async function reference() {
  if (!referenceCache) {
    const meta = await (await fetch("/models/reference/reference.json")).json();
    const b1 = new Float32Array(await (await fetch("/models/reference/b1_last_hidden_state.f32")).arrayBuffer());
    referenceCache = { meta, b1 };
  }
  return referenceCache;
}

// The B=1 output of the ORT wasm engine, kept for the other engines' check.
let ortWasmB1 = null;

// Engines set up and not yet torn down, by name. run.mjs interleaves them:
// for each batch size, every engine in turn, so that load from other work on
// the machine lands on all of them alike.
const live = {};

/** Load an engine (model, session, weights). Returns its info. */
async function setup(name, opts = {}) {
  const o = { warmup: 2, runs: 10, threads: 2, maxRunMs: 60000, ...opts };
  const ref = await reference();
  o.reference = ref.meta;
  const t0 = performance.now();
  const engine = await ENGINES[name](o);
  const result = { engine: name, rows: [], check: null, info: engine.info, skipped: [] };
  result.setup_ms = performance.now() - t0;
  live[name] = { engine, o, ref, result, stopped: false };
  log(`${name}: ready in ${result.setup_ms.toFixed(0)} ms ${JSON.stringify(engine.info)}`);
  return engine.info;
}

/** Time one batch size on a set-up engine: warm-up, then the timed runs. Returns the row (or null if skipped). */
async function measure(name, batch) {
  const L = live[name];
  const { engine, o, ref, result } = L;
  // A run slower than the cap ended this engine's sweep.
  if (L.stopped) {
    result.skipped.push(batch);
    return null;
  }
  const tp = performance.now();
  const p = await engine.prepare(batch);
  const prepareMs = performance.now() - tp;
  const tf = performance.now();
  const first = await p.run();
  const firstRunMs = performance.now() - tf;
  if (first.length !== batch * SEQ * HIDDEN) throw new Error(`${name}: output has ${first.length} values`);
  if (batch === 1) {
    const out = Float32Array.from(first);
    if (name === "ort-wasm") ortWasmB1 = out;
    result.check = { vs_pytorch: compare(out, ref.b1), vs_ort_wasm: compare(out, ortWasmB1) };
    log(`${name}: B=1 check ${JSON.stringify(result.check)}`);
  }
  for (let i = 1; i < o.warmup; i++) await p.run();
  const times = [];
  for (let i = 0; i < o.runs; i++) {
    const s = performance.now();
    await p.run();
    times.push(performance.now() - s);
    if (times[times.length - 1] > o.maxRunMs) break;
  }
  p.dispose();
  times.sort((a, b) => a - b);
  const row = {
    batch,
    p50_ms: times[times.length >> 1],
    min_ms: times[0],
    mean_ms: times.reduce((s, t) => s + t, 0) / times.length,
    runs: times.length,
    warmup: Math.max(o.warmup, 1),
    prepare_ms: prepareMs,
    // The first run (its own warm-up): with setup_ms and prepare_ms, the
    // start-up from nothing loaded to a first result (report.mjs).
    first_run_ms: firstRunMs,
  };
  result.rows.push(row);
  log(`${name}: B=${batch} p50 ${row.p50_ms.toFixed(1)} ms (min ${row.min_ms.toFixed(1)}, ${row.runs} runs)`);
  if (row.p50_ms > o.maxRunMs) L.stopped = true;
  return row;
}

/** Free an engine; returns everything measured on it. */
async function teardown(name) {
  const L = live[name];
  delete live[name];
  await L.engine.dispose();
  return L.result;
}

/** One engine over a list of batch sizes (for use by hand in the console). */
async function run(name, opts = {}) {
  await setup(name, opts);
  for (const b of opts.batches ?? [1, 2, 4, 8]) await measure(name, b);
  return teardown(name);
}

async function env() {
  const e = {
    user_agent: navigator.userAgent,
    cross_origin_isolated: self.crossOriginIsolated,
    shared_array_buffer: typeof SharedArrayBuffer !== "undefined",
    hardware_concurrency: navigator.hardwareConcurrency,
    webgpu: null,
  };
  if (navigator.gpu) {
    const a = await navigator.gpu.requestAdapter();
    if (a) {
      const i = a.info ?? {};
      e.webgpu = {
        vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
        is_fallback_adapter: i.isFallbackAdapter ?? a.isFallbackAdapter ?? null,
      };
    }
  }
  return e;
}

window.bench = { setup, measure, teardown, run, env, engines: Object.keys(ENGINES) };
window.benchReady = true;
