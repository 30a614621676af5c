// The example app: what a user writes to embed sentences with rlx.
import * as rlx from "rlx";

const log = (s) => (document.getElementById("log").textContent += s + "\n");
const bar = document.getElementById("progress");
const params = new URLSearchParams(location.search);
const model = params.get("model") ?? "/models/all-MiniLM-L6-v2/";
const sentences = JSON.parse(params.get("texts") ?? '["This is an example sentence.", "Each sentence is converted."]');

function onProgress(p) {
  if (p.total) bar.value = p.loaded / p.total;
  if (p.stage !== "download") log(`${p.stage}: ${p.message}`);
}

async function inPage(device) {
  const t0 = performance.now();
  const emb = await rlx.pipelines.createEmbedder({ model, device, onProgress });
  const vecs = await emb.embed(sentences);
  const out = { device: emb.device, ms: performance.now() - t0, vecs: vecs.map((v) => Array.from(v)), report: emb.dispatchReport() };
  emb.dispose();
  log(`${device} → ran on ${out.device} in ${out.ms.toFixed(0)} ms`);
  return out;
}

// The same in a Web Worker: the page keeps painting while it runs.
function inWorker(device) {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
    let ticks = 0;
    const timer = setInterval(() => ticks++, 20);
    w.onmessage = (e) => {
      if (e.data.progress) return onProgress(e.data.progress);
      clearInterval(timer);
      w.terminate();
      if (e.data.error) reject(Object.assign(new Error(e.data.error.message), e.data.error));
      else resolve({ ...e.data, ticks });
    };
    w.postMessage({ model: new URL(model, location.href).href, device, sentences });
  });
}

// A little-endian .npy file (numpy.save, C order) as {shape, data}.
function readNpy(buf) {
  const b = new Uint8Array(buf);
  const hlen = b[8] | (b[9] << 8);
  const header = new TextDecoder().decode(b.subarray(10, 10 + hlen));
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(",").filter((s) => s.trim()).map(Number);
  const kind = { "<f4": Float32Array, "|u1": Uint8Array }[descr];
  return { shape, data: new kind(buf.slice(10 + hlen)) };
}

// Bring your own model: an ONNX detector (?onnx=URL&input=URL.npy) on
// wasm-cpu, and what WebGPU says about it.
async function onnxDemo(url, inputUrl) {
  await rlx.init();
  const bytes = await (await fetch(url)).arrayBuffer();
  const x8 = readNpy(await (await fetch(inputUrl)).arrayBuffer());
  const x = Float32Array.from(x8.data, (v) => v / 255);
  const t0 = performance.now();
  const m = await rlx.Model.fromOnnx(bytes, { shapes: { images: x8.shape }, device: "cpu" });
  const [out] = await m.run({ images: { data: x, shape: x8.shape } });
  const ms = performance.now() - t0;
  const kernels = m.dispatchReport().nodes.filter((n) => n.op === "conv" || n.op === "conv_act").flatMap((n) => n.kernels);
  m.dispose();
  log(`onnx: ${url} on cpu in ${ms.toFixed(0)} ms (import, compile, run): ${out.name} [${out.shape}]`);
  const result = { shape: out.shape, data: Array.from(out.data), ms, kernels };
  try {
    // The same model on WebGPU (direct WGSL convs and pools): its largest
    // difference from the cpu's output.
    const g = await rlx.Model.fromOnnx(bytes, { shapes: { images: x8.shape }, device: "webgpu" });
    const [gout] = await g.run({ images: { data: x, shape: x8.shape } });
    let maxDiff = 0;
    gout.data.forEach((v, i) => (maxDiff = Math.max(maxDiff, Math.abs(v - out.data[i]))));
    result.webgpu = { device: g.device, maxDiff };
    g.dispose();
  } catch (e) {
    result.webgpu = { error: { name: e.name, code: e.code, message: e.message } };
  }
  return result;
}

// Text generation in the page (?llm=URL.gguf&prompt=...[&device=webgpu]):
// a GGUF decoder streaming tokens, greedy.
async function llmDemo(url, prompt, maxTokens, device, amp = "auto") {
  await rlx.init();
  const t0 = performance.now();
  const llm = await rlx.loadLlm(url, { onProgress, device, amp });
  const loadMs = performance.now() - t0;
  const ids = [];
  let text = "";
  for await (const t of llm.generate(prompt, { maxTokens, stopAtEos: false })) {
    ids.push(t.id);
    text += t.text;
    log(`token ${t.id} ${JSON.stringify(t.text)}`);
  }
  const result = { ids, text, loadMs, stats: llm.stats, config: llm.config, device: llm.device, amp: llm.amp, report: llm.decodeReport(64) };
  if (llm.device === "webgpu") result.shaderF16 = (await rlx.devices()).find((d) => d.device === "webgpu")?.adapter?.shader_f16;
  llm.dispose();
  return result;
}

// Mixed precision on WebGPU: x (4, 64) @ w (64, 32) with f16 autocast,
// against the cpu's f16 autocast and f32 (both inputs given per run, so
// the package rounds them to f16 before each run).
async function ampDemo() {
  const x = Float32Array.from({ length: 4 * 64 }, (_, i) => Math.sin(i * 0.37) * 3);
  const w = Float32Array.from({ length: 64 * 32 }, (_, i) => Math.cos(i * 0.11));
  const build = () => {
    const g = new rlx.GraphBuilder("amp");
    const a = g.input("x", "f32", [4, 64]);
    const b = g.input("w", "f32", [64, 32]);
    return g.finish([a.matmul(b)]);
  };
  const run = async (device, amp) => {
    const m = await rlx.compile(build(), { device, amp });
    const [y] = await m.run({ x, w });
    const out = { device: m.device, dtype: y.dtype, data: Array.from(y.data), kernels: m.dispatchReport().nodes.flatMap((n) => n.kernels) };
    m.dispose();
    return out;
  };
  const gpu = await run("webgpu", "f16");
  const cpu = await run("cpu", "f16");
  const f32 = await run("cpu", "none");
  const diff = (a, b) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
  log(`amp f16 on webgpu: kernels ${gpu.kernels.join(", ")}; vs cpu f16 ${diff(gpu.data, cpu.data).toExponential(2)}, vs f32 ${diff(gpu.data, f32.data).toExponential(2)}`);
  return { device: gpu.device, dtype: gpu.dtype, kernels: gpu.kernels, vsCpuAmp: diff(gpu.data, cpu.data), vsF32: diff(gpu.data, f32.data), cpuVsF32: diff(cpu.data, f32.data) };
}

// A lost GPU device (?lose): `GPUDevice.destroy()` on the page's device,
// as a driver reset would do. The model that used it fails with the typed
// error, and compiling again gets a new device, without reloading the page.
async function loseDemo() {
  await rlx.init();
  const x = Float32Array.from({ length: 4 * 64 }, (_, i) => Math.sin(i * 0.37));
  const w = Float32Array.from({ length: 64 * 32 }, (_, i) => Math.cos(i * 0.11));
  const build = () => {
    const g = new rlx.GraphBuilder("lose");
    return g.finish([g.input("x", "f32", [4, 64]).matmul(g.input("w", "f32", [64, 32])).relu()]);
  };
  const run = async (m) => Array.from((await m.run({ x, w }))[0].data);
  const errorOf = async (f) => {
    try {
      await f();
      return null;
    } catch (e) {
      return { name: e.name, code: e.code, message: e.message };
    }
  };
  const cpu = await rlx.compile(build(), { device: "cpu" });
  const want = await run(cpu);
  const m1 = await rlx.compile(build(), { device: "webgpu" });
  const before = await run(m1);
  const destroyed = rlx.__testDestroyWebGpu();
  const lost = await errorOf(() => run(m1));
  const lostAgain = await errorOf(() => run(m1));
  const m2 = await rlx.compile(build(), { device: "webgpu" });
  const after = await run(m2);
  const diff = (a) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0);
  const out = { destroyed, lost, lostAgain, device: m2.device, before: diff(before), after: diff(after) };
  log(`device loss: ${JSON.stringify(out)}`);
  return out;
}

async function main() {
  if (params.has("lose")) {
    try {
      window.__rlx = { lose: await loseDemo() };
    } catch (e) {
      window.__rlx = { lose: { error: { code: e.code, message: e.message } } };
    }
    document.title = "done";
    return;
  }
  if (params.has("llm")) {
    try {
      window.__rlx = { llm: await llmDemo(params.get("llm"), params.get("prompt"), Number(params.get("max") ?? 16), params.get("device") ?? "cpu", params.get("amp") ?? "auto") };
    } catch (e) {
      window.__rlx = { llm: { error: { code: e.code, message: e.message } } };
    }
    document.title = "done";
    return;
  }
  if (params.has("onnx")) {
    window.__rlx = { onnx: await onnxDemo(params.get("onnx"), params.get("input")) };
    document.title = "done";
    return;
  }
  await rlx.init();
  // Which build of the module init() picked: relaxed SIMD where the engine has it.
  // And threads: the threaded core where the page is cross-origin isolated.
  const wasm = { variant: rlx.wasmVariant(), relaxedSupported: rlx.relaxedSimdSupported(), threads: rlx.threads(), isolated: self.crossOriginIsolated };
  log(`wasm core: ${wasm.variant} (relaxed SIMD supported: ${wasm.relaxedSupported}); ${wasm.threads.build}, ${wasm.threads.threads} CPU threads: ${wasm.threads.reason}`);
  const devices = await rlx.devices();
  log("devices: " + JSON.stringify(devices.map((d) => [d.device, d.available, d.reason ?? d.adapter?.name])));
  const results = { wasm, devices, cpu: await inPage("cpu") };
  const gpu = devices.find((d) => d.device === "webgpu");
  if (gpu.available) {
    results.webgpu = await inPage("webgpu");
    try {
      results.amp = await ampDemo();
    } catch (e) {
      results.amp = { error: { name: e.name, code: e.code, message: e.message } };
    }
  } else {
    // What a user sees without WebGPU: the typed error, and the fallback chain.
    try {
      await rlx.pipelines.embed(sentences, { model, device: "webgpu" });
    } catch (e) {
      results.webgpuError = { name: e.name, code: e.code, message: e.message };
      log(`webgpu: ${e.code}: ${e.message}`);
    }
    results.fallback = await inPage(["webgpu", "cpu"]);
  }
  // f16 in and out: a Float16Array in, a Float16Array out where the
  // browser has it (Chromium 135+), on the cpu and on webgpu.
  results.f16 = {};
  for (const device of ["cpu", ...(gpu.available ? ["webgpu"] : [])]) {
    const g = new rlx.GraphBuilder("f16io");
    const h = g.input("h", "f16", [4]);
    const m = await rlx.compile(g.finish([h.relu()]), { device });
    const input = typeof Float16Array === "function" ? new Float16Array([-1.5, 0.5, 2.25, 65504]) : null;
    const [y] = input ? await m.run({ h: input }) : [{}];
    results.f16[device] = { has: typeof Float16Array === "function", type: y.data?.constructor?.name, dtype: y.dtype, values: y.data ? Array.from(y.data) : null };
    m.dispose();
  }
  // Measured device choice: every device timed (kept in IndexedDB), then
  // 'auto' estimates with those figures and tries the cheapest first.
  try {
    const figs = await rlx.calibrate();
    const t0 = performance.now();
    const again = await rlx.calibrate();
    const againMs = performance.now() - t0;
    const g = rlx.Graph.fromText("graph @g(%a: f32[64,64]) {\n  %b = matmul(%a, %a)\n  return %b\n}");
    const m = await rlx.compile(g, { device: "auto" });
    const [y] = await m.run({ a: new Float32Array(64 * 64).fill(1) });
    results.calib = { figs, again, againMs, device: m.device, auto: m.dispatchReport().auto, y0: y.data[0] };
    m.dispose();
    log(`calibrate: ${JSON.stringify(figs)}; auto chose ${results.calib.device}`);
  } catch (e) {
    results.calib = { error: { name: e.name, code: e.code, message: e.message } };
  }
  results.worker = await inWorker("cpu");
  log(`worker: ${results.worker.vecs.length} embeddings; the page ticked ${results.worker.ticks} times meanwhile`);
  window.__rlx = results;
  document.title = "done";
}

main().catch((e) => {
  window.__rlx = { error: { name: e.name, code: e.code, message: e.message } };
  log(`error: ${e.code ?? ""} ${e.message}`);
  document.title = "done";
});
