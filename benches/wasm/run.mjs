// The wasm32 side of benches/wasm/run.py: p50 ms of one MiniLM-sized
// encoder block (seq 128) in the wasm build of rlx's CPU backend (simd128,
// one thread) under Node. Prints one JSON line per batch, with the matmul
// kernel the dispatch report names. The relaxed-SIMD build
// (`./scripts/build-wasm --relaxed`) needs
// `node --experimental-wasm-relaxed-simd` in Node 20.
// Usage: node benches/wasm/run.mjs path/to/rlx_web.wasm 1 2 4 8
import fs from "node:fs";

const [wasmPath, ...bs] = process.argv.slice(2);
// The raw module imports wasm-bindgen glue the C ABI never calls: stub it.
const mod = await WebAssembly.compile(fs.readFileSync(wasmPath));
const imports = {};
for (const i of WebAssembly.Module.imports(mod)) {
  (imports[i.module] ??= {})[i.name] = () => {
    throw new Error(`wasm import ${i.name} called from the C ABI`);
  };
}
const instance = await WebAssembly.instantiate(mod, imports);
const ex = instance.exports;
const message = () =>
  new TextDecoder().decode(new Uint8Array(ex.memory.buffer, ex.rlx_last_message_ptr(), ex.rlx_last_message_len()));
for (const b of (bs.length ? bs : ["1", "2", "4", "8"]).map(Number)) {
  if (ex.rlx_bench_prepare(b) !== 0) throw new Error(`prepare ${b}: ${message()}`);
  // The dispatch report's matmul kernel (which gemm128 build is timed).
  const gemm = ex.rlx_bench_kernels?.() === 0 ? message().split("\n").find((k) => k.includes("matmul")) : undefined;
  // Warm-up: 2 runs and at least 1 s, so V8's optimizing tier (compiled in
  // the background from the baseline tier) is in place before timing.
  const warm = performance.now();
  for (let i = 0; i < 2 || performance.now() - warm < 1000; i++) if (ex.rlx_bench_run() !== 0) throw new Error(message());
  const t = [];
  for (let i = 0; i < 20; i++) {
    const s = performance.now();
    if (ex.rlx_bench_run() !== 0) throw new Error(message());
    t.push(performance.now() - s);
  }
  t.sort((x, y) => x - y);
  console.log(JSON.stringify({ batch: b, p50_ms: +t[t.length >> 1].toFixed(3), min_ms: +t[0].toFixed(3), gemm }));
}
