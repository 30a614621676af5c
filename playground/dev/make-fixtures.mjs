// Dev-only: runs the native CLI over the example graphs and writes
// dev/fixtures/*.json in the shapes the npm package returns (npm/API.md),
// so the views can be built before the package exists. Run:
//   node dev/make-fixtures.mjs   (needs ../target/release/rlx)
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseGraph } from './mirtext.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const cli = path.resolve(here, '../../target/release/rlx');
const out = path.join(here, 'fixtures');
fs.mkdirSync(out, { recursive: true });
const env = { ...process.env, XDG_RUNTIME_DIR: '/tmp' };
const run = (args) => {
  try { return { ok: execFileSync(cli, args, { env, encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'pipe'] }) }; }
  catch (e) { return { err: (e.stderr || '') + (e.stdout || '') }; }
};
const section = (t, title) => {
  const s = t.indexOf(`== ${title}`);
  if (s < 0) return null;
  const b = t.indexOf('\n', s) + 1;
  const e = t.indexOf('\n== ', b);
  return t.slice(b, e < 0 ? t.length : e);
};
const units = { B: 1, KiB: 1024, MiB: 1 << 20, GiB: 1 << 30 };
const bytes = (n, u) => Math.round(Number(n) * units[u]);

function lirAndPlan(t, mir) {
  const steps = [];
  for (const l of (section(t, 'LIR') || '').split('\n')) {
    const m = /^\s*(\d+)\s+(\S+)\s+\(([^)]*)\)\s+->\s+(.*)$/.exec(l);
    if (!m) continue;
    const ids = (s) => s.split(',').map((x) => x.trim()).filter(Boolean).map((x) => Number(x.slice(1)));
    const outputs = ids(m[4]);
    const d = mir.values[outputs[0]]?.def?.node;
    steps.push({ nodes: d ? [d.node] : [], kernel: m[2], inputs: ids(m[3]), outputs });
  }
  const planText = section(t, 'memory plan') || '';
  const slots = [], views = [];
  for (const l of planText.split('\n')) {
    let m = /^\s*%(\d+)\s+(\d+)\s+(\d+)\s+%\d+: (.*)$/.exec(l);
    if (m) { slots.push({ value: +m[1], ty: mir.values[+m[1]].ty, offset: +m[2], bytes: +m[3] }); continue; }
    m = /view\s+%(\d+) of %(\d+) at \+(\d+) strides \[([^\]]*)\]/.exec(l);
    if (m) views.push({ value: +m[1], base: +m[2], offset: +m[3], strides: m[4].split(',').map(Number) });
  }
  const h = /arena ([\d.]+) (B|KiB|MiB) \(peak live ([\d.]+) (B|KiB|MiB), naive ([\d.]+) (B|KiB|MiB)[^;]*; (\d+) buffers \((\d+) in place\), (\d+) views/.exec(planText);
  const arena = slots.reduce((a, s) => Math.max(a, s.offset + s.bytes), 0);
  const lir = { graph: mir, steps, slots, views, arena_bytes: arena };
  // first/last step per slot from the step list (the package computes these in Rust).
  const baseOf = new Map(views.map((v) => [v.value, v.base]));
  const root = (v) => { while (baseOf.has(v)) v = baseOf.get(v); return v; };
  const life = new Map();
  steps.forEach((s, i) => {
    for (const v of [...s.inputs, ...s.outputs]) {
      const r = root(v);
      const L = life.get(r) || { first: i, last: i };
      L.first = Math.min(L.first, i); L.last = Math.max(L.last, i);
      life.set(r, L);
    }
  });
  for (const o of mir.outputs) { const L = life.get(root(o)); if (L) L.last = steps.length - 1; }
  const plan = {
    arena_bytes: arena,
    peak_bytes: h ? bytes(h[3], h[4]) : arena,
    naive_bytes: h ? bytes(h[5], h[6]) : null,
    buffers: h ? +h[7] : slots.length,
    in_place: h ? +h[8] : 0,
    views: h ? +h[9] : views.length,
    slots: slots.map((s) => ({ value: s.value, offset: s.offset, bytes: s.bytes, first_step: life.get(s.value)?.first ?? 0, last_step: life.get(s.value)?.last ?? 0 })),
    views_list: views,
  };
  return { lir, plan };
}

function kernels(file, device, lang) {
  const r = run(['kernels', file, '--device', device, '--lang', lang]);
  if (r.err) return { error: r.err };
  const parts = r.ok.split(/^\/\/ ==== kernel (\S+)[^\n]*====\n/m);
  const ks = [];
  for (let i = 1; i < parts.length; i += 2) ks.push({ name: parts[i], source: parts[i + 1].trimEnd() });
  return ks;
}

const graphs = {
  mlp: path.join(here, 'graphs/mlp.mir'),
  attention_block: path.join(here, 'graphs/attention_block.mir'),
  topk_sort: path.join(here, 'graphs/topk_sort.mir'),
  encoder_block: '@encoder-block',
  bert: '@minilm',
};
for (const [name, src] of Object.entries(graphs)) {
  for (const [device, cliDev] of [['cpu', 'cpu'], ['webgpu', 'gpu']]) {
    const fx = { name, device };
    const c = run(['compile', src, '--device', cliDev, '--print', 'all']);
    if (c.err) { fx.error = c.err; }
    else {
      const t = c.ok;
      const inText = section(t, 'MIR (input)');
      const file = src.startsWith('@') ? path.join(out, `${name}.mir`) : src;
      if (src.startsWith('@')) fs.writeFileSync(file, inText);
      fx.hir = parseGraph(inText);
      fx.mir = parseGraph(section(t, 'MIR (optimized'));
      Object.assign(fx, lirAndPlan(t, fx.mir));
      fx.passes = section(t, 'passes and fusion');
      fx.dispatch = {};
      for (const policy of ['prefer_native', 'common_ir_only', 'native_only']) {
        const d = run(['dispatch', file, '--device', cliDev, '--policy', policy, '--json']);
        fx.dispatch[policy] = d.err ? { error: d.err } : JSON.parse(d.ok.replaceAll('"gpu"', '"webgpu"'));
      }
      if (device === 'webgpu') {
        fx.kernels = {};
        for (const lang of ['wgsl', 'msl', 'hlsl', 'glsl']) fx.kernels[lang] = kernels(src, cliDev, lang);
      }
    }
    if (!fx.hir) {
      // the CLI's compile failed (e.g. dispatch error): keep the error text, and the input graph
      fx.hir = parseGraph(fs.readFileSync(src, 'utf8'));
    }
    fs.writeFileSync(path.join(out, `${name}.${device}.json`), JSON.stringify(fx));
    console.log(name, device, fx.error ? 'error' : `${fx.mir.nodes.length} mir nodes, ${fx.lir.steps.length} steps`);
  }
}
