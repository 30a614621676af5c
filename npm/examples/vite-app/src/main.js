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

async function main() {
  await rlx.init();
  // Which build of the module init() picked: relaxed SIMD where the engine has it.
  const wasm = { variant: rlx.wasmVariant(), relaxedSupported: rlx.relaxedSimdSupported() };
  log(`wasm core: ${wasm.variant} (relaxed SIMD supported: ${wasm.relaxedSupported})`);
  const devices = await rlx.devices();
  log("devices: " + JSON.stringify(devices.map((d) => [d.device, d.available, d.reason ?? d.adapter?.name])));
  const results = { wasm, devices, cpu: await inPage("cpu") };
  const gpu = devices.find((d) => d.device === "webgpu");
  if (gpu.available) results.webgpu = await inPage("webgpu");
  else {
    // What a user sees without WebGPU: the typed error, and the fallback chain.
    try {
      await rlx.pipelines.embed(sentences, { model, device: "webgpu" });
    } catch (e) {
      results.webgpuError = { name: e.name, code: e.code, message: e.message };
      log(`webgpu: ${e.code}: ${e.message}`);
    }
    results.fallback = await inPage(["webgpu", "cpu"]);
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
