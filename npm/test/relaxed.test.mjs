// init()'s choice between the two builds of the core: `relaxed: false`
// forces the plain simd128 core; `relaxed: true` where the engine lacks
// relaxed SIMD is a typed error, never a quiet switch to the other build.
// Its own file (its own process): init() loads the module once.
// scripts/test-npm runs it in plain Node 20 and with
// --experimental-wasm-relaxed-simd, which take the two branches.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as rlx from "rlx";

// A 3x4 by 4x5 product against a float64 JS reference, on cpu (gemm128).
async function checkMatmul(variant) {
  const g = new rlx.GraphBuilder("mm");
  const a = g.input("a", "f32", [3, 4]);
  const b = g.input("b", "f32", [4, 5]);
  const m = await rlx.compile(g.finish([a.matmul(b)]), { device: "cpu" });
  const av = Float32Array.from({ length: 12 }, (_, i) => Math.sin(i + 0.5));
  const bv = Float32Array.from({ length: 20 }, (_, i) => Math.cos(2 * i + 1));
  const [y] = await m.run({ a: av, b: bv });
  for (let r = 0; r < 3; r++) {
    for (let c = 0; c < 5; c++) {
      let s = 0;
      for (let k = 0; k < 4; k++) s += av[r * 4 + k] * bv[k * 5 + c];
      assert.ok(Math.abs(y.data[r * 5 + c] - s) < 1e-5, `(${r},${c}): ${y.data[r * 5 + c]} vs ${s}`);
    }
  }
  const ks = m.dispatchReport().nodes.flatMap((n) => n.kernels);
  assert.ok(ks.some((k) => k.includes(`gemm128 ${variant} `)), ks.join("; "));
  m.dispose();
}

if (rlx.relaxedSimdSupported()) {
  test("relaxed SIMD available: init({ relaxed: false }) still loads the plain simd128 core", async () => {
    await rlx.init({ relaxed: false });
    assert.equal(rlx.wasmVariant(), "simd128");
    await checkMatmul("simd128");
  });
} else {
  test("no relaxed SIMD: init({ relaxed: true }) is an 'init' error, then init() loads simd128", async () => {
    await assert.rejects(rlx.init({ relaxed: true }), (e) => {
      assert.ok(e instanceof rlx.RlxError);
      assert.equal(e.code, "init");
      assert.match(e.message, /relaxed SIMD/);
      return true;
    });
    assert.throws(() => rlx.ops(), (e) => e.code === "init", "nothing was loaded behind the caller's back");
    await rlx.init();
    assert.equal(rlx.wasmVariant(), "simd128");
    await checkMatmul("simd128");
  });
}
