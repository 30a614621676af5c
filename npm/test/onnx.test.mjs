// ONNX models through the npm package (wasm-cpu), against ONNX Runtime's
// outputs on the same inputs (tests/vectors/onnx-models, made by
// generate.py there): YOLOv8n (nudenet 320n) on a real photo, and the
// typed errors of a bad or unsupported file. The models come from
// ./scripts/fetch-models (run by setup).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import * as rlx from "rlx";

const repo = process.env.RLX_REPO ?? path.resolve(import.meta.dirname, "../..");
const vectors = path.join(repo, "tests/vectors/onnx-models");
const yolo = path.join(repo, ".cache/models/nudenet-3.4.2/nudenet/320n.onnx");

await rlx.init();

// A little-endian .npy file (numpy.save, C order) as {dtype, shape, data}.
function readNpy(file) {
  const b = fs.readFileSync(file);
  const hlen = b.readUInt16LE(8);
  const header = b.subarray(10, 10 + hlen).toString("latin1");
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(",").filter((s) => s.trim()).map(Number);
  const body = b.subarray(10 + hlen);
  const copy = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength);
  const data = { "<f4": Float32Array, "|u1": Uint8Array, "<i8": BigInt64Array }[descr];
  assert.ok(data, `npy dtype ${descr}`);
  return { shape, data: new data(copy) };
}

test("Model.fromOnnx runs YOLOv8n as ONNX Runtime does", async () => {
  assert.ok(fs.existsSync(yolo), `${yolo} is missing: run ./scripts/fetch-models`);
  const bytes = fs.readFileSync(yolo);
  const x8 = readNpy(path.join(vectors, "yolov8n/in_astronaut.npy"));
  const x = Float32Array.from(x8.data, (v) => v / 255);
  const model = await rlx.Model.fromOnnx(bytes, { shapes: { images: x8.shape }, device: "cpu" });
  assert.deepEqual(model.inputs().map((i) => [i.name, i.shape]), [["images", [1, 3, 320, 320]]]);
  const [out] = await model.run({ images: { data: x, shape: x8.shape } });
  const want = readNpy(path.join(vectors, "yolov8n/out_astronaut.npy"));
  assert.deepEqual(out.shape, want.shape);
  let err = 0;
  for (let i = 0; i < want.data.length; i++) err = Math.max(err, Math.abs(out.data[i] - want.data[i]));
  // Box coordinates are pixels (up to 320): 2e-3 is 6e-6 relative.
  assert.ok(err < 2e-3, `max abs error ${err} vs ONNX Runtime`);
  // The report says how each node runs: the convs on the fast kernel
  // (`conv_act`: a conv with the SiLU after it folded in, rlx-opt's fold).
  const report = model.dispatchReport();
  const convs = report.nodes.filter((n) => n.op === "conv" || n.op === "conv_act");
  assert.ok(convs.length > 50 && convs.every((n) => n.kernels.every((k) => k.startsWith("cpu::fast::conv"))));
  model.dispose();
});

test("Graph.fromOnnx: typed errors for bad files and missing dimensions", () => {
  const err = (f, code, re) =>
    assert.throws(f, (e) => e.name === "RlxError" && e.code === code && re.test(e.message));
  err(() => rlx.Graph.fromOnnx(new Uint8Array([1, 2, 3, 4, 5])), "format", /not an ONNX model/);
  err(() => rlx.Graph.fromOnnx("model.onnx"), "invalid_argument", /ArrayBuffer or Uint8Array/);
  const bytes = fs.readFileSync(yolo);
  err(() => rlx.Graph.fromOnnx(bytes), "format", /symbolic dimension `batch`/);
  err(() => rlx.Graph.fromOnnx(bytes, { shapes: { images: [1, 3, -1, 2] } }), "shape", /shapes\.images/);
  err(() => rlx.Graph.fromOnnx(bytes, { sizes: {} }), "invalid_argument", /unknown option `sizes`/);
  const unsupported = fs.readFileSync(path.join(repo, "native/rlx-cli/tests/data/unique_unsupported.onnx"));
  // Unique of a run-time input: its output size depends on values known only at run time.
  err(() => rlx.Graph.fromOnnx(unsupported), "unsupported", /`Unique`.*\(`x`\) must be known at import/s);
});

test("ONNX external data: files by location or an async fetch", async () => {
  const dir = path.join(repo, "crates/rlx-onnx/tests/data/external");
  const bytes = fs.readFileSync(path.join(dir, "model.onnx"));
  assert.deepEqual(rlx.Graph.onnxExternalFiles(bytes), ["weights.bin"]);
  const x = readNpy(path.join(dir, "x.npy"));
  const want = readNpy(path.join(dir, "y.npy"));
  const asked = [];
  const model = await rlx.Model.fromOnnx(bytes, {
    device: "cpu",
    externalData: async (loc) => {
      asked.push(loc);
      return fs.readFileSync(path.join(dir, loc));
    },
  });
  assert.deepEqual(asked, ["weights.bin"]);
  const [y] = await model.run({ X: { data: x.data, shape: x.shape } });
  for (let i = 0; i < want.data.length; i++) assert.ok(Math.abs(y.data[i] - want.data[i]) <= 1e-6, `${y.data[i]} vs ${want.data[i]}`);
  model.dispose();
  const g = rlx.Graph.fromOnnx(bytes, { externalData: { "weights.bin": fs.readFileSync(path.join(dir, "weights.bin")) } });
  assert.deepEqual(g.inputs().map((i) => i.name), ["X"]);
  g.dispose();
  const err = (f, code, re) =>
    assert.throws(f, (e) => e.name === "RlxError" && e.code === code && re.test(e.message));
  err(() => rlx.Graph.fromOnnx(bytes), "format", /tensor `W`.*weights\.bin/s);
  err(() => rlx.Graph.fromOnnx(bytes, { externalData: { "other.bin": new Uint8Array(4) } }), "format", /no file `weights\.bin`/);
  err(() => rlx.Graph.fromOnnx(bytes, { externalData: "weights.bin" }), "invalid_argument", /externalData/);
  err(() => rlx.Graph.fromOnnx(bytes, { externalData: { "weights.bin": [1, 2] } }), "invalid_argument", /externalData\.weights\.bin/);
});
