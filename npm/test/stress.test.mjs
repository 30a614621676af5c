// 1,000 create/run/dispose cycles of a small model must not leak: after a
// warm-up the Rust heap holds exactly what it held before (bytes and
// blocks), and wasm linear memory (which only grows) does not grow. Each
// cycle loads weights from safetensors bytes, builds a graph, compiles it
// with the weights bound, runs it, checks the numbers and disposes all.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as rlx from "rlx";

await rlx.init();

const CYCLES = Number(process.env.RLX_STRESS_CYCLES ?? 1000);
const WARMUP = 50;

function safetensors(name, data, shape) {
  let json = JSON.stringify({ [name]: { dtype: "F32", shape, data_offsets: [0, data.byteLength] } });
  while ((8 + json.length) % 8) json += " ";
  const hb = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + hb.length + data.byteLength);
  new DataView(out.buffer).setBigUint64(0, BigInt(hb.length), true);
  out.set(hb, 8);
  out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), 8 + hb.length);
  return out;
}

const W = Float32Array.from({ length: 64 }, (_, i) => ((i * 7) % 11) / 10 - 0.5);
const WBYTES = safetensors("w", W, [8, 8]);
const X = Float32Array.from({ length: 16 }, (_, i) => Math.sin(i));
// The reference: relu(x @ w + 1) then softmax over the last axis, in float64.
const REF = (() => {
  const out = [];
  for (let r = 0; r < 2; r++) {
    const h = [];
    for (let c = 0; c < 8; c++) {
      let s = 1;
      for (let k = 0; k < 8; k++) s += X[r * 8 + k] * W[k * 8 + c];
      h.push(Math.max(0, s));
    }
    const m = Math.max(...h);
    const e = h.map((v) => Math.exp(v - m));
    const z = e.reduce((a, v) => a + v, 0);
    out.push(...e.map((v) => v / z));
  }
  return out;
})();

async function cycle(k) {
  const weights = await rlx.loadSafetensors(WBYTES);
  const g = new rlx.GraphBuilder(`cycle${k}`);
  const x = g.input("x", "f32", [2, 8]);
  const w = g.input("w", "f32", [8, 8]);
  const one = g.constant(new Float32Array([1]), [1]);
  const graph = g.finish([x.matmul(w).add(one).relu().softmax(-1)]);
  const model = await rlx.compile(graph, { device: "cpu", weights });
  const [y] = await model.run({ x: X });
  for (let i = 0; i < REF.length; i++) {
    if (Math.abs(y.data[i] - REF[i]) > 1e-5) assert.fail(`cycle ${k}: y[${i}] = ${y.data[i]}, expected ${REF[i]}`);
  }
  model.dispose();
  graph.dispose();
  weights.dispose();
}

test(`${CYCLES} create/run/dispose cycles: wasm memory returns to its plateau`, async (t) => {
  const t0 = performance.now();
  const start = rlx.memoryStats();
  for (let k = 0; k < WARMUP; k++) await cycle(k);
  const plateau = rlx.memoryStats();
  const samples = [];
  for (let k = WARMUP; k < CYCLES; k++) {
    await cycle(k);
    if ((k + 1) % 100 === 0) samples.push({ cycle: k + 1, ...rlx.memoryStats() });
  }
  const end = rlx.memoryStats();
  const s = (m) => `wasm ${m.wasmBytes} B, heap ${m.heapBytes} B in ${m.heapAllocations} blocks`;
  t.diagnostic(`before: ${s(start)}; after ${WARMUP} warm-up cycles: ${s(plateau)}; after ${CYCLES}: ${s(end)}; ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  for (const m of samples) {
    assert.equal(m.wasmBytes, plateau.wasmBytes, `cycle ${m.cycle}: linear memory grew from ${plateau.wasmBytes} to ${m.wasmBytes}`);
    assert.equal(m.heapBytes, plateau.heapBytes, `cycle ${m.cycle}: heap ${m.heapBytes} B, ${m.heapBytes - plateau.heapBytes} B more than after the warm-up`);
    assert.equal(m.heapAllocations, plateau.heapAllocations, `cycle ${m.cycle}: ${m.heapAllocations - plateau.heapAllocations} blocks more than after the warm-up`);
  }
  // The counters see real allocations: a live model holds heap.
  const weights = await rlx.loadSafetensors(WBYTES);
  const held = rlx.memoryStats();
  assert.ok(held.heapBytes >= plateau.heapBytes + W.byteLength, `${held.heapBytes} vs ${plateau.heapBytes}`);
  weights.dispose();
  assert.equal(rlx.memoryStats().heapBytes, plateau.heapBytes);
});
