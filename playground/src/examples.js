// The example models. Each is the JS-builder code shown in the editor (so
// what you read is what ran): the body of `async (rlx) => {...}` returning
// `{ graph, inputs?, weights? }`. `inputs` maps input names to data; inputs
// it leaves out get deterministic pseudo-random values (seededData).
// `weights: 'minilm'` asks for the real all-MiniLM-L6-v2 checkpoint, served
// from this origin (models/all-MiniLM-L6-v2/model.safetensors).

export const EXAMPLES = [
  {
    id: 'mlp',
    title: 'MLP (2×4 → 8 → 3, softmax)',
    code: `const g = new rlx.GraphBuilder('mlp');
const x  = g.input('x',  'f32', [2, 4]);
const w1 = g.input('w1', 'f32', [4, 8]);
const b1 = g.input('b1', 'f32', [8]);
const w2 = g.input('w2', 'f32', [8, 3]);
const b2 = g.input('b2', 'f32', [3]);
const h = x.matmul(w1).add(b1).relu();
const y = h.matmul(w2).add(b2).softmax(-1);
return { graph: g.finish([y]) };`,
  },
  {
    id: 'attention',
    title: 'Attention block (pre-norm, causal)',
    code: `const g = new rlx.GraphBuilder('attention_block');
const x    = g.input('x',    'f32', [1, 4, 8]);
const ln_g = g.input('ln_g', 'f32', [8]);
const ln_b = g.input('ln_b', 'f32', [8]);
const wqkv = g.input('wqkv', 'f32', [8, 24]);
const wo   = g.input('wo',   'f32', [8, 8]);
const h = x.layerNorm(ln_g, ln_b, 1e-5);
const [q, k, v] = g.op('split', [h.matmul(wqkv)], { axis: -1, sizes: [8, 8, 8] });
const [a] = g.op('attention', [q, k, v], { mask_kind: 'causal' });
const y = x.add(a.matmul(wo));
return { graph: g.finish([y]) };`,
  },
  {
    id: 'minilm-layer',
    title: 'MiniLM layer (primitive ops, seq 8)',
    code: `// One BERT encoder layer written with primitive ops: fusion turns the
// softmax(QK^T)V chain into attention and the linear layers into
// matmul_bias_act. Hidden 384, 12 heads, sequence 8.
const S = 8, H = 384, NH = 12, D = 32;
const g = new rlx.GraphBuilder('encoder_block');
const x = g.input('x', 'f32', [1, S, H]);
const mask = g.input('mask', 'f32', [1, 1, 1, S]);   // additive key mask
const p = (n, s) => g.input(n, 'f32', s);
const wq = p('wq', [H, H]), bq = p('bq', [H]), wk = p('wk', [H, H]), bk = p('bk', [H]);
const wv = p('wv', [H, H]), bv = p('bv', [H]), wo = p('wo', [H, H]), bo = p('bo', [H]);
const ln1g = p('ln1_g', [H]), ln1b = p('ln1_b', [H]);
const w1 = p('w1', [H, 4 * H]), c1 = p('c1', [4 * H]), w2 = p('w2', [4 * H, H]), c2 = p('c2', [H]);
const ln2g = p('ln2_g', [H]), ln2b = p('ln2_b', [H]);
const heads = (t) => t.reshape([1, S, NH, D]).permute([0, 2, 1, 3]);
const q = heads(x.matmul(wq).add(bq));
const k = heads(x.matmul(wk).add(bk));
const v = heads(x.matmul(wv).add(bv));
const scale = g.constant(new Float32Array([1 / Math.sqrt(D)]), []);
const probs = q.matmul(k.permute([0, 1, 3, 2])).mul(scale).add(mask).softmax(-1);
const ctx = probs.matmul(v).permute([0, 2, 1, 3]).reshape([1, S, H]);
const h1 = x.add(ctx.matmul(wo).add(bo)).layerNorm(ln1g, ln1b, 1e-12);
const f = h1.matmul(w1).add(c1).gelu().matmul(w2).add(c2);
const y = h1.add(f).layerNorm(ln2g, ln2b, 1e-12);
return { graph: g.finish([y]), inputs: { mask: new Float32Array(S) } };`,
  },
  {
    id: 'minilm',
    title: 'all-MiniLM-L6-v2 (real weights, 90.9 MB)',
    // Output 1 is the sentence embedding of reference item 0 (same text and ids).
    reference: { url: 'models/minilm-reference.json', item: 0, output: 1 },
    code: `// The whole sentence encoder, 6 layers, with the checkpoint's parameter
// names as graph inputs: compile binds them to the loaded weights.
// Input: "This is an example sentence." as BERT token ids.
const ids = [101, 2023, 2003, 2019, 2742, 6251, 1012, 102];
const S = ids.length, H = 384, NH = 12, D = 32, L = 6;
const g = new rlx.GraphBuilder('bert');
const input_ids = g.input('input_ids', 'i64', [1, S]);
const token_type_ids = g.input('token_type_ids', 'i64', [1, S]);
const mask = g.input('attention_bias', 'f32', [1, 1, 1, S]);
const w = (n, s) => g.input(n, 'f32', s);
const E = 'embeddings.';
const [pos] = g.op('arange', [], { dtype: 'i64', len: S, start: 0, step: 1 });
const emb = (name, idx, rows) => g.op('embedding', [w(E + name + '.weight', [rows, H]), idx])[0];
let x = emb('word_embeddings', input_ids, 30522)
  .add(emb('token_type_embeddings', token_type_ids, 2))
  .add(emb('position_embeddings', pos, 512))
  .layerNorm(w(E + 'LayerNorm.weight', [H]), w(E + 'LayerNorm.bias', [H]), 1e-12);
const linear = (t, n, i, o) => t.matmul(w(n + '.weight', [o, i]).t()).add(w(n + '.bias', [o]));
const norm = (t, n) => t.layerNorm(w(n + '.weight', [H]), w(n + '.bias', [H]), 1e-12);
const heads = (t) => t.reshape([1, S, NH, D]).permute([0, 2, 1, 3]);
for (let l = 0; l < L; l++) {
  const P = 'encoder.layer.' + l + '.';
  const A = P + 'attention.self.';
  const q = heads(linear(x, A + 'query', H, H));
  const k = heads(linear(x, A + 'key', H, H));
  const v = heads(linear(x, A + 'value', H, H));
  const [a] = g.op('attention', [q, k, v, mask], { mask_kind: 'bias' });
  const ctx = a.permute([0, 2, 1, 3]).reshape([1, S, H]);
  x = norm(linear(ctx, P + 'attention.output.dense', H, H).add(x), P + 'attention.output.LayerNorm');
  const f = linear(linear(x, P + 'intermediate.dense', H, 4 * H).gelu(), P + 'output.dense', 4 * H, H);
  x = norm(f.add(x), P + 'output.LayerNorm');
}
// sentence embedding: mean over tokens, L2-normalized
const m = x.mean([1], false);
const [n] = g.op('sqrt', [m.mul(m).sum([-1], true)]);
return {
  graph: g.finish([x, m.div(n)]),
  inputs: { input_ids: BigInt64Array.from(ids, BigInt), token_type_ids: new BigInt64Array(S),
            attention_bias: new Float32Array(S) },
  weights: 'minilm',
};`,
  },
  {
    id: 'unsupported',
    title: 'Unsupported on WebGPU (argsort)',
    code: `// argsort has a CPU kernel but none on WebGPU, no decomposition and no
// rewrite: compiling for webgpu fails and says why and what to do.
const g = new rlx.GraphBuilder('topk_sort');
const x = g.input('x', 'f32', [2, 8]);
const [i] = g.op('argsort', [x.exp()], { axis: -1 });
return { graph: g.finish([i]) };`,
  },
];

export const exampleById = (id) => EXAMPLES.find((e) => e.id === id);

// Deterministic inputs: a small LCG per input name, values in [-1, 1).
// The same function feeds every device, so outputs are comparable.
export function seededData(name, dtype, shape) {
  const n = shape.reduce((a, b) => a * b, 1);
  let s = 2166136261;
  for (const c of name) s = Math.imul(s ^ c.charCodeAt(0), 16777619) >>> 0;
  const next = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32) * 2 - 1;
  if (dtype === 'f32') return Float32Array.from({ length: n }, next);
  if (dtype === 'i64') return BigInt64Array.from({ length: n }, () => BigInt(Math.floor((next() + 1) * 4)));
  if (dtype === 'i32') return Int32Array.from({ length: n }, () => Math.floor((next() + 1) * 4));
  throw new Error(`no generated data for dtype ${dtype} (input ${name}): give it in the example's inputs`);
}

// Run an example's code against the package. The code is trusted (yours).
export async function buildExample(rlx, code) {
  const fn = new Function('rlx', `return (async () => {\n${code}\n})();`);
  const r = await fn(rlx);
  if (!r || !r.graph) throw new Error('the code must return { graph: g.finish([...]) }');
  return r;
}
