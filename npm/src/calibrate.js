// `rlx.calibrate()`: what each device costs in this page, measured by
// timing three small graphs through the public API — a 256³ f32 matrix
// product (GFLOP/s), a chain of 33 one-element kernels against one (µs per
// kernel; the one-kernel run is the fixed cost of a run) and, on WebGPU,
// 16 MiB copied in and out (GB/s) — and put in
// force for `compile(graph, { device: 'auto' })`. In a browser the figures
// are kept in IndexedDB per device and adapter, so a page measures once
// (the key carries the figures' version: older records are measured again).
import { compile, devices, setCalibration, Graph, RlxError, _onFirstAuto } from "./api.js";

const GEMM_N = 256;
const CHAIN = 32;
const COPY_ELEMS = 1 << 22;

async function median(model, inputs) {
  for (let i = 0; i < 2; i++) await model.run(inputs);
  const times = [];
  const start = performance.now();
  while (times.length < 5 || (performance.now() - start < 300 && times.length < 100)) {
    const t = performance.now();
    await model.run(inputs);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return times[times.length >> 1];
}

async function timed(text, device, inputs) {
  const m = await compile(Graph.fromText(text), { device, optimize: false });
  try {
    return await median(m, inputs);
  } finally {
    m.dispose();
  }
}

function filled(n) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = ((i * 7919) % 23) / 23 - 0.5;
  return a;
}

function chain(n) {
  let s = "graph @chain(%x: f32[1]) {\n";
  let prev = "x";
  for (let i = 0; i < n; i++) {
    s += `  %a${i} = add(%${prev}, %x)\n`;
    prev = `a${i}`;
  }
  return s + `  return %${prev}\n}`;
}

async function measure(device) {
  const n = GEMM_N;
  const a = filled(n * n);
  const gemm = await timed(
    `graph @gemm(%a: f32[${n},${n}], %b: f32[${n},${n}]) {\n  %c = matmul(%a, %b)\n  return %c\n}`,
    device,
    { a, b: a },
  );
  const one = { x: new Float32Array([0.5]) };
  const t1 = await timed(chain(1), device, one);
  const tn = await timed(chain(CHAIN + 1), device, one);
  let transfer = null;
  if (device !== "cpu") {
    const big = await timed(`graph @copy(%x: f32[${COPY_ELEMS}]) {\n  %y = neg(%x)\n  return %y\n}`, device, { x: filled(COPY_ELEMS) });
    const small = await timed("graph @copy(%x: f32[1]) {\n  %y = neg(%x)\n  return %y\n}", device, one);
    transfer = (2 * 4 * COPY_ELEMS) / Math.max(big - small, 1e-6) / 1e6;
  }
  return {
    device,
    backend: `${device}, timed in the page`,
    gemm_gflops: (2 * n ** 3) / Math.max(gemm, 1e-6) / 1e6,
    launch_us: Math.max(0, ((tn - t1) / CHAIN) * 1e3),
    run_us: t1 * 1e3,
    transfer_gbps: transfer,
  };
}

// IndexedDB (browsers): one record per device and adapter.
function store() {
  if (typeof indexedDB === "undefined") return null;
  return new Promise((resolve) => {
    const req = indexedDB.open("rlx", 1);
    req.onupgradeneeded = () => req.result.createObjectStore("calibration");
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => resolve(null);
  });
}

function request(db, mode, f) {
  return new Promise((resolve) => {
    const r = f(db.transaction("calibration", mode).objectStore("calibration"));
    r.onsuccess = () => resolve(r.result ?? null);
    r.onerror = () => resolve(null);
  });
}

/**
 * Measure each device (default: every device the page has) and put the
 * figures in force for `device: 'auto'`. `cache` (default true): in a
 * browser, reuse figures kept in IndexedDB for this device and adapter, and
 * keep new ones; `cache: false` measures again. Returns the figures.
 */
export async function calibrate(opts = {}) {
  if (opts === null || typeof opts !== "object" || Array.isArray(opts)) {
    throw new RlxError("invalid_argument", "calibrate: options must be an object ({devices, cache})");
  }
  for (const k of Object.keys(opts)) {
    if (!["devices", "cache"].includes(k)) {
      throw new RlxError("invalid_argument", `calibrate: unknown option \`${k}\` (options: devices, cache)`);
    }
  }
  const have = await devices();
  const names = opts.devices ?? have.filter((d) => d.available).map((d) => d.device);
  if (!Array.isArray(names) || names.some((d) => d !== "cpu" && d !== "webgpu")) {
    throw new RlxError("invalid_argument", `calibrate: \`devices\` must be a list of 'cpu' and 'webgpu', got ${JSON.stringify(names)}`);
  }
  const db = opts.cache === false ? null : await store();
  const out = [];
  for (const device of names) {
    const info = have.find((d) => d.device === device);
    if (!info?.available) {
      throw new RlxError("device", `calibrate: ${device} is not available here${info?.reason ? `: ${info.reason}` : ""}`);
    }
    const key = "v2:" + (device === "cpu" ? `cpu:${globalThis.navigator?.hardwareConcurrency ?? 0}` : `webgpu:${info.adapter?.vendor ?? ""}:${info.adapter?.architecture ?? ""}:${info.adapter?.name ?? ""}`);
    let fig = db ? await request(db, "readonly", (s) => s.get(key)) : null;
    if (!fig) {
      fig = await measure(device);
      if (db) await request(db, "readwrite", (s) => s.put(fig, key));
    }
    setCalibration(fig);
    out.push(fig);
  }
  return out;
}

// The first `device: 'auto'` compile calibrates every device (figures kept
// in IndexedDB in browsers, so later pages reuse them).
_onFirstAuto(() => calibrate());
