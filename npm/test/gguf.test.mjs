// GGUF files through the npm package: tensors and metadata as the `gguf`
// Python package reads them (tests/vectors/gguf/all-types.{gguf,json},
// made by generate.py there), and typed errors for broken files.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import * as rlx from "rlx";

const repo = process.env.RLX_REPO ?? path.resolve(import.meta.dirname, "../..");
const dir = path.join(repo, "tests/vectors/gguf");

await rlx.init();

test("loadGguf reads the tensors and metadata gguf wrote", async () => {
  const bytes = fs.readFileSync(path.join(dir, "all-types.gguf"));
  const want = JSON.parse(fs.readFileSync(path.join(dir, "all-types.json"), "utf8"));
  const w = await rlx.loadGguf(new Uint8Array(bytes));
  assert.equal(w.names().length, want.tensors.length);
  for (const t of want.tensors) {
    const info = w.info(t.name);
    assert.deepEqual(info.shape, [...t.ne].reverse(), t.name);
    // Block types come back as their bytes, f32 as values.
    if (t.type.startsWith("Q") || t.type === "F32") {
      const d = w.get(t.name).data;
      const hex = Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString("hex");
      assert.equal(hex, t.hex, t.name);
    }
  }
  assert.equal(w.info("w.q4_k").dtype, "q4_k");
  const meta = w.metadata();
  assert.equal(meta["general.architecture"], "llama");
  assert.equal(meta["t.str"], "héllo wörld 🦀");
  assert.deepEqual(meta["t.arr.str"], ["a", "", "ü✓", "<|im_start|>"]);
  assert.deepEqual(meta["t.arr.nested"], [[1, 2], [3]]);
  assert.equal(meta["llama.context_length"], 2048);
  w.dispose();
});

test("a truncated or foreign file is RlxError 'format' naming the byte", async () => {
  const bytes = fs.readFileSync(path.join(dir, "all-types.gguf")).subarray(0, 1500);
  await assert.rejects(rlx.loadGguf(new Uint8Array(bytes)), (e) => {
    assert.ok(e instanceof rlx.RlxError, String(e));
    assert.equal(e.code, "format");
    assert.match(e.message, /at byte \d+: .*truncated/);
    return true;
  });
  await assert.rejects(rlx.loadGguf(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])), /not a GGUF file/);
  await assert.rejects(rlx.loadGguf(42), (e) => e.code === "invalid_argument");
});
