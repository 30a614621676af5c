// Threads in Node: the threaded core needs Web Workers and a cross-origin
// isolated page, so Node loads the single-threaded core, and asking for
// threads is an 'init' error naming why. (The threaded core itself is
// tested in Chromium: npm/examples/vite-app/test.mjs.) A file of its own: a
// process initializes the module once.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as rlx from "rlx";

test("init({ threads: 2 }) in Node is an init error naming why, then threads: 1 loads the single-threaded core", async () => {
  await assert.rejects(rlx.init({ threads: 2 }), (e) => {
    assert.equal(e.name, "RlxError");
    assert.equal(e.code, "init");
    assert.match(e.message, /init\(\{ threads: 2 \}\): threads run in browsers only/);
    return true;
  });
  await assert.rejects(rlx.init({ threads: "2" }), (e) => e.code === "invalid_argument" && /got string "2"/.test(e.message));
  await rlx.init({ threads: 1 });
  assert.deepEqual(rlx.threads(), { build: "single", threads: 1, reason: "init({ threads: 1 })" });
  // The dispatch report names the module that ran it.
  const g = new rlx.GraphBuilder("t");
  const x = g.input("x", "f32", [2]);
  const m = await rlx.compile(g.finish([x.relu()]), { device: "cpu" });
  const [y] = await m.run({ x: new Float32Array([-1, 2]) });
  assert.deepEqual(Array.from(y.data), [0, 2]);
  const w = m.dispatchReport().wasm;
  assert.equal(w.build, "single");
  assert.equal(w.threads, 1);
  assert.match(w.variant, /^simd128/);
  m.dispose();
});
