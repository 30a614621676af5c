// An explicit init({ wasm }) keeps its meaning: the given bytes load, and
// no probe replaces them with the other build; bytes this engine cannot
// compile are an 'init' error. Its own file (init() loads the module once).
// scripts/test-npm runs it in plain Node 20 and with
// --experimental-wasm-relaxed-simd, which take the two branches.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import * as rlx from "rlx";

const bytesOf = (spec) => fs.readFileSync(fileURLToPath(import.meta.resolve(spec)));

if (rlx.relaxedSimdSupported()) {
  test("relaxed SIMD available: init({ wasm: <plain build> }) runs the plain build", async () => {
    await rlx.init({ wasm: bytesOf("rlx/rlx_web_bg.wasm") });
    assert.equal(rlx.wasmVariant(), "simd128");
  });
} else {
  test("no relaxed SIMD: init({ wasm: <relaxed build> }) is an 'init' error; the plain bytes then load", async () => {
    await assert.rejects(rlx.init({ wasm: bytesOf("rlx/rlx_web_relaxed_bg.wasm") }), (e) => {
      assert.ok(e instanceof rlx.RlxError);
      assert.equal(e.code, "init");
      return true;
    });
    assert.throws(() => rlx.ops(), (e) => e.code === "init");
    await rlx.init({ wasm: bytesOf("rlx/rlx_web_bg.wasm") });
    assert.equal(rlx.wasmVariant(), "simd128");
  });
}
