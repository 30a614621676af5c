// DEV ONLY — a stand-in for the `rlx` package built from CLI fixtures
// (dev/make-fixtures.mjs), used by `RLX_FIXTURES=1 npm run dev|build` while
// the package does not exist. It has the package's API shapes (npm/API.md)
// but knows only the fixture graphs, and runs only simple graphs. The app
// shows a red "FIXTURE MODE" badge when this is loaded; tests refuse it.
const fixtures = import.meta.glob('./fixtures/*.json');
const cache = new Map();
async function fixture(file) {
  const k = `./fixtures/${file}`;
  if (!fixtures[k]) return null;
  if (!cache.has(k)) cache.set(k, (await fixtures[k]()).default);
  return cache.get(k);
}

export const __fixtures = true;
export const version = '0.0.0-fixtures';
export class RlxError extends Error {
  constructor(code, message) { super(message); this.code = code; this.name = 'RlxError'; }
}
let OPS = [];
const HIR = new Map();
export async function init() {
  OPS = (await fixture('ops.json')).ops.map((o) => ({ ...o, name: o.kind }));
  for (const n of ['mlp', 'attention_block', 'topk_sort', 'encoder_block', 'bert']) HIR.set(n, (await fixture(`${n}.cpu.json`)).hir);
}
export const ops = () => OPS;
export async function devices() {
  const out = [{ device: 'cpu', available: true }];
  if (!navigator.gpu) { out.push({ device: 'webgpu', available: false, reason: 'navigator.gpu is missing' }); return out; }
  const a = await navigator.gpu.requestAdapter();
  if (!a) { out.push({ device: 'webgpu', available: false, reason: 'no adapter' }); return out; }
  const limits = {};
  for (const k in a.limits) limits[k] = a.limits[k];
  out.push({ device: 'webgpu', available: true, adapter: { name: a.info.description || a.info.device, architecture: a.info.architecture, vendor: a.info.vendor, backend: 'webgpu', features: [...a.features], limits } });
  return out;
}

class Graph {
  constructor(name, inputs, recorded) { this.name = name; this._inputs = inputs; this._rec = recorded; }
  json() { return HIR.get(this.name) || this._rec; }
  text() { return `// fixture mode: no text for ${this.name}`; }
  inputs() { return this._inputs; }
  outputs() { return []; }
}

export class GraphBuilder {
  constructor(name) { this.name = name; this.inputs = []; this.g = { name, values: [], nodes: [], inputs: [], outputs: [] }; }
  _val(ty, def, name) { const id = this.g.values.length; this.g.values.push({ ty, def, ...(name ? { name } : {}) }); return this._t(id, ty); }
  _t(id, ty) {
    const b = this;
    const t = { id, dtype: ty.dtype, shape: ty.shape };
    return new Proxy(t, { get: (o, p) => (p in o || typeof p === 'symbol' ? o[p] : (...args) => b._node(p, [o, ...args.filter((a) => a && a.id != null)])[0]) });
  }
  _node(op, ins, attrs, nout = 1) {
    const node = this.g.nodes.length;
    const outputs = [];
    for (let i = 0; i < nout; i++) outputs.push(this._val({ dtype: 'f32', shape: [] }, { node: { node, output: i } }));
    this.g.nodes.push({ op: op.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase()), inputs: ins.map((t) => t.id), outputs: outputs.map((t) => t.id) });
    return outputs;
  }
  input(name, dtype, shape) { this.inputs.push({ name, dtype, shape }); const t = this._val({ dtype, shape }, { input: this.g.inputs.length }, name); this.g.inputs.push(t.id); return t; }
  constant(data, shape) { return this._node('constant', [], {})[0]; }
  op(name, ins, attrs) { return this._node(name, ins, attrs, name === 'split' ? 3 : 1); }
  finish(outs) { this.g.outputs = outs.map((t) => t.id); return new Graph(this.name, this.inputs, this.g); }
}

export async function loadSafetensors(src) {
  let buf = src;
  if (typeof src === 'string' || src instanceof URL) buf = await (await fetch(src)).arrayBuffer();
  const u8 = buf instanceof Uint8Array ? buf : new Uint8Array(buf);
  const n = Number(new DataView(u8.buffer, u8.byteOffset).getBigUint64(0, true));
  const h = JSON.parse(new TextDecoder().decode(u8.subarray(8, 8 + n)));
  delete h.__metadata__;
  return { names: () => Object.keys(h), info: (k) => ({ dtype: h[k].dtype.toLowerCase(), shape: h[k].shape }), dispose() {} };
}

// Enough of an interpreter for the MLP fixture (matmul, add, relu, softmax).
function interp(g, feeds) {
  const env = new Map();
  g.inputs.forEach((v) => { const n = g.values[v].name; env.set(v, Float64Array.from(feeds[n].data)); });
  const shape = (v) => g.values[v].ty.shape;
  for (const n of g.nodes) {
    const [a, b] = n.inputs.map((v) => env.get(v));
    let out;
    if (n.op === 'matmul') {
      const [M, K] = shape(n.inputs[0]); const N = shape(n.inputs[1])[1];
      out = new Float64Array(M * N);
      for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) { let s = 0; for (let k = 0; k < K; k++) s += a[i * K + k] * b[k * N + j]; out[i * N + j] = s; }
    } else if (n.op === 'add') out = a.map((x, i) => x + b[i % b.length]);
    else if (n.op === 'relu') out = a.map((x) => Math.max(0, x));
    else if (n.op === 'softmax') {
      const N = shape(n.inputs[0]).at(-1); out = new Float64Array(a.length);
      for (let r = 0; r < a.length; r += N) { const row = a.subarray(r, r + N); const m = Math.max(...row); let s = 0; for (let j = 0; j < N; j++) s += out[r + j] = Math.exp(row[j] - m); for (let j = 0; j < N; j++) out[r + j] /= s; }
    } else throw new RlxError('runtime', `fixture mode: cannot run ${n.op}; running needs the rlx package`);
    env.set(n.outputs[0], out);
  }
  return g.outputs.map((v) => ({ name: g.values[v].name || `%${v}`, dtype: 'f32', shape: shape(v), data: Float32Array.from(env.get(v)) }));
}

export async function compile(graph, { device = 'cpu', policy = 'prefer_native', optimize = true } = {}) {
  if (Array.isArray(device)) device = device[0];
  const f = await fixture(`${graph.name}.${device}.json`);
  if (!f) throw new RlxError('graph', `fixture mode: no fixture for graph ${graph.name}`);
  const d = f.dispatch?.[policy];
  if (f.error || d?.error) throw new RlxError('dispatch', (d?.error || f.error).replace(/^error: /, ''));
  return {
    device,
    ir: (k) => (k === 'hir' || (!optimize && k === 'mir') ? f.hir : k === 'mir' ? f.mir : f.lir),
    dispatchReport: () => d,
    memoryPlan: () => f.plan,
    passReport: () => f.passes,
    kernels: (lang) => (device === 'cpu' ? (d?.nodes || []).flatMap((n) => n.kernels.map((name) => ({ name }))) : f.kernels[lang]),
    run: async (feeds) => interp(f.hir, feeds),
    dispose() {},
  };
}
