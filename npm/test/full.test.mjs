// `rlx/full` (the module with naga's translators) loads and runs like `rlx`.
// Its own file: Node's test runner gives each file a process, and the two
// entry points share the wrapper's state.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as rlx from "rlx/full";

test("rlx/full: init, a graph, and the same results as the core entry's contract", async () => {
  await rlx.init();
  // rlx/full ships one build, plain simd128, whatever the engine runs.
  assert.equal(rlx.wasmVariant(), "simd128");
  const g = new rlx.GraphBuilder("full");
  const x = g.input("x", "f32", [2, 2]);
  const m = await rlx.compile(g.finish([x.matmul(x)]), { device: "cpu" });
  const [y] = await m.run({ x: new Float32Array([1, 2, 3, 4]) });
  assert.deepEqual(Array.from(y.data), [7, 10, 15, 22]);
  // Kernel source languages exist only for WebGPU models; a cpu model lists kernels by name.
  assert.ok(m.kernels("msl").every((k) => k.lang === "cpu"));
});
