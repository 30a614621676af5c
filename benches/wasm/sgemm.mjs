// f32 GEMM throughput inside the wasm32 build (simd128, one thread) under
// Node: the `gemm` crate vs rlx's gemm128 kernel (tile heights 4, 5, 6) on
// MiniLM's shapes, M = 128·batch. Prints one JSON line per (shape, kernel).
// Build the module first (crates/rlx-cpu/examples/wasm_sgemm.rs says how);
// a module built with relaxed SIMD needs `node --experimental-wasm-relaxed-simd`.
// Usage: node benches/wasm/sgemm.mjs path/to/wasm_sgemm.wasm [batch...]
import fs from "node:fs";

const [wasmPath, ...bs] = process.argv.slice(2);
const mod = await WebAssembly.compile(fs.readFileSync(wasmPath));
const imports = {};
for (const i of WebAssembly.Module.imports(mod)) {
  (imports[i.module] ??= {})[i.name] = () => {
    throw new Error(`wasm import ${i.name} called`);
  };
}
const ex = (await WebAssembly.instantiate(mod, imports)).exports;
// The engine's resident-weight path (packed once) against the reference.
const resident = ex.resident_check();
if (!(resident >= 0 && resident < 1e-5)) throw new Error(`resident-weight check: ${resident}`);
console.error(`resident-weight check ok (max relative difference ${resident})`);
// gemm128 against f64 sums within the f32 accumulation bound (holds for
// plain simd128 and for relaxed madd, fused or not).
const f64err = ex.f64_check();
if (!(f64err >= 0 && f64err <= 1)) throw new Error(`gemm128 vs f64: error / bound ${f64err}`);
const relaxed = ex.gemm128_relaxed() === 1;
console.error(`gemm128 (${relaxed ? "simd128+relaxed-madd" : "simd128"}) vs f64 ok (largest error / bound ${f64err.toFixed(3)})`);
const g = relaxed ? "gemm128 relaxed-madd" : "gemm128";
const kernels = { 0: "gemm crate", 4: `${g} 4x8`, 5: `${g} 5x8`, 6: `${g} 6x8` };
const ids = Object.keys(kernels).map(Number);
// Warm-up: V8 first runs a baseline compile and tiers up in the
// background; every kernel (and the packing) runs for at least 1 s first.
ex.sgemm_prepare(128, 384, 384, 0);
for (const w of ids) {
  const t0 = performance.now();
  while (performance.now() - t0 < 1000) {
    ex.sgemm_run(w, 0);
    ex.sgemm_pack();
  }
}
// (m, k, n, weight read transposed): the block's projections and FFN at
// M = 128·batch, then one head's attention products (QKᵀ, P·V).
const shapes = [];
for (const b of (bs.length ? bs : ["1", "8"]).map(Number)) {
  for (const [k, n] of [[384, 384], [384, 1152], [384, 1536], [1536, 384]]) shapes.push([128 * b, k, n, 0]);
}
shapes.push([128, 32, 128, 1], [128, 128, 32, 0]);
{
  for (const [m, k, n, bt] of shapes) {
    ex.sgemm_prepare(m, k, n, bt);
    {
      // Packing the weight alone (gemm128 does it once per product).
      for (let i = 0; i < 5; i++) ex.sgemm_pack();
      const t = [];
      for (let i = 0; i < 9; i++) {
        const s = performance.now();
        ex.sgemm_pack();
        t.push(performance.now() - s);
      }
      t.sort((x, y) => x - y);
      const ms = t[t.length >> 1];
      console.log(JSON.stringify({ m, k, n, bt, kernel: "gemm128 weight packing", p50_ms: +ms.toFixed(3), ns_per_float: +((ms * 1e6) / (k * n)).toFixed(3) }));
    }
    for (const w of ids) {
      const err = ex.sgemm_run(w, 1);
      if (!(err >= 0 && err < 1e-5)) throw new Error(`kernel ${w} ${m}x${k}x${n}: relative error ${err}`);
      const t = [];
      for (let i = 0; i < 7; i++) {
        const s = performance.now();
        ex.sgemm_run(w, 0);
        t.push(performance.now() - s);
      }
      t.sort((x, y) => x - y);
      const ms = t[t.length >> 1];
      console.log(JSON.stringify({ m, k, n, bt, kernel: kernels[w], p50_ms: +ms.toFixed(3), gflops: +((2 * m * k * n) / ms / 1e6).toFixed(1) }));
    }
  }
}
