// Browser tests of the built playground: headless Chromium (Debian) with
// WebGPU (SwiftShader), driven by playwright-core. Serves dist/ on
// 127.0.0.1, runs each case, saves screenshots to test-results/, prints
// "N passed, M failed" and exits nonzero on any failure.
//   node tests/run.mjs [--filter text] [--chromium /usr/lib/chromium/chromium]
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { seededData } from '../src/examples.js';

const here = path.dirname(new URL(import.meta.url).pathname);
const app = path.resolve(here, '..');
const out = path.join(app, 'test-results');
fs.mkdirSync(out, { recursive: true });
const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1] : d; };
const filter = opt('--filter', '');
const exe = opt('--chromium', process.env.CHROMIUM || '/usr/lib/chromium/chromium');

// ---- serve dist/ ----------------------------------------------------------
const server = spawn(process.execPath, [path.join(app, 'scripts/serve.mjs'), '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const base = await new Promise((resolve, reject) => {
  server.stdout.on('data', (d) => { const m = /http:\/\/127\.0\.0\.1:\d+\//.exec(String(d)); if (m) resolve(m[0]); });
  server.on('exit', (c) => reject(new Error(`server exited ${c}`)));
  setTimeout(() => reject(new Error('server did not start')), 10000);
});

const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rlx-pg-chromium-'));
process.on('exit', () => server.kill());
// A fresh profile per run (persistent context = Playwright's way to give --user-data-dir).
const context = await chromium.launchPersistentContext(userDir, {
  executablePath: exe,
  args: ['--enable-unsafe-webgpu', '--no-sandbox', '--no-first-run', '--disable-quic', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
  headless: true,
  viewport: { width: 1440, height: 900 },
});
context.setDefaultTimeout(120000);

// ---- helpers ----------------------------------------------------------------
const consoleErrors = [];
let lastPage = null;
async function open(hash) {
  const page = await context.newPage();
  lastPage = page;
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  await page.goto(`${base}#${hash}`);
  await waitReady(page);
  return page;
}
async function waitReady(page) {
  await page.waitForFunction(() => window.__rlxPlayground && window.__rlxPlayground.ready === true, null, { timeout: 180000 });
}
async function setHash(page, hash) {
  await page.evaluate((h) => { window.__rlxPlayground.ready = false; location.hash = h; }, hash);
  await waitReady(page);
}
// The package's own JSON for the current example, from inside the page.
const ir = (page, device, policy, which, optimize = true) => page.evaluate(async ([d, p, w, o]) => {
  const c = await window.__rlxPlayground.ctx.compiled(d, p, { optimize: o });
  if (c.error) return { error: c.error };
  const x = c.model.ir(w);
  return { nodes: x.nodes ? x.nodes.length : null, steps: x.steps ? x.steps.length : null, inputs: x.inputs?.length ?? x.graph?.inputs.length };
}, [device, policy, which, optimize]);
const shot = (page, name) => page.screenshot({ path: path.join(out, `${name}.png`) });
function assert(c, msg) { if (!c) throw new Error(msg); }
const close = (a, b, tol) => Math.abs(a - b) <= tol * (1 + Math.abs(b));

const cases = [];
const test = (name, fn) => cases.push({ name, fn });

// ---- cases --------------------------------------------------------------------
test('the cross-origin isolated playground runs the threaded module, one CPU thread per core', async () => {
  const page = await open('model=mlp&device=cpu&view=hir');
  const t = await page.evaluate(() => ({ isolated: self.crossOriginIsolated, cores: navigator.hardwareConcurrency, version: document.querySelector('#version').textContent }));
  const want = Math.min(t.cores, 16);
  assert(t.isolated && t.version.includes(`wasm-cpu ${want} thread`), JSON.stringify(t));
  await page.close();
});
const EX = [['mlp', 'cpu'], ['mlp', 'webgpu'], ['attention', 'webgpu'], ['minilm-layer', 'webgpu'], ['minilm', 'webgpu'], ['minilm', 'cpu'], ['unsupported', 'cpu']];
for (const [model, device] of EX) {
  test(`${model} on ${device}: HIR, MIR and LIR graphs have one drawn node per IR node`, async () => {
    const page = await open(`model=${model}&device=${device}&view=hir`);
    for (const which of ['hir', 'mir', 'lir']) {
      if (which !== 'hir') await setHash(page, `model=${model}&device=${device}&view=${which}`);
      const want = await ir(page, device, 'prefer_native', which);
      assert(!want.error, `compile failed: ${JSON.stringify(want.error)}`);
      const drawn = await page.locator('#view .node[data-kind="op"]').count();
      const expected = which === 'lir' ? want.steps : want.nodes;
      assert(drawn === expected, `${which}: ${drawn} op nodes drawn, the IR has ${expected}`);
      assert(expected > 0, `${which}: empty graph`);
      if (which === 'mir') await shot(page, `${model}-${device}-mir`);
    }
    await page.close();
  });
}

test('chat: SmolLM2 answers in the page on the wasm CPU, with tokens/s and the decode step\'s kernels', async () => {
  const page = await open('model=mlp&device=cpu&view=chat');
  await page.click('#chat-send');
  await page.waitForFunction(() => window.__rlxPlayground.chat, null, { timeout: 300000 });
  const r = await page.evaluate(() => window.__rlxPlayground.chat);
  assert(!r.error, `chat failed: ${r.error}`);
  // Greedy: transformers' SmolLM2 answers this with Paris.
  assert(/Paris/.test(r.text), `reply: ${JSON.stringify(r.text)}`);
  assert(r.stats.generated > 0 && r.stats.tokensPerSecond > 0, `stats: ${JSON.stringify(r.stats)}`);
  assert(r.kernels > 100, `decode-step report lists ${r.kernels} nodes`);
  const table = await page.locator('#chat-dispatch').innerText();
  assert(/dequant_matmul/.test(table), 'the kernel table does not show dequant_matmul');
  await shot(page, 'chat');
  await page.close();
});

test('search highlights and clicking a node shows op, shape, dtype, attributes', async () => {
  const page = await open('model=attention&device=cpu&view=mir');
  await page.fill('#search', 'attention');
  const hits = await page.locator('#view .node.hit').count();
  assert(hits >= 1, `search found ${hits} nodes`);
  await page.locator('#view .node.hit').first().click();
  const d = await page.locator('#details').innerText();
  assert(/op\s+attention/.test(d), `details: ${d}`);
  assert(/f32\[/.test(d), 'details list no dtype/shape');
  assert(/mask_kind/.test(d), 'details list no attributes');
  // keyboard: Tab to a node and Enter selects it
  await page.locator('#view .node[data-kind="op"]').first().focus();
  await page.keyboard.press('Enter');
  assert(await page.locator('#view .node.selected').count() === 1, 'Enter did not select');
  await shot(page, 'details');
  await page.close();
  // weights are graph inputs, hidden in MiniLM's view: search still finds their users by name
  const big = await open('model=minilm&device=cpu&view=mir');
  await big.fill('#search', 'encoder.layer.3.attention.self.query.weight');
  const n = await big.locator('#view .node.hit').count();
  assert(n === 1, `search by weight name found ${n} nodes`);
  await big.keyboard.press('Enter');
  assert(await big.locator('#view .node.selected').count() === 1, 'Enter in search did not select the hit');
  await shot(big, 'search-weight');
  await big.close();
});

test('node details link a builder call to its editor line', async () => {
  const page = await open('model=mlp&device=cpu&view=hir');
  await page.locator('#view .node[data-kind="op"]', { hasText: 'matmul' }).first().click();
  const src = page.locator('#source-line');
  assert(await src.count() === 1, `no source line: ${await page.locator('#details').innerText()}`);
  const line = Number(await src.getAttribute('data-line'));
  const code = await page.locator('#code').inputValue();
  assert(/x\.matmul\(w1\)/.test(code.split('\n')[line - 1]), `line ${line} is: ${code.split('\n')[line - 1]}`);
  await src.click();
  assert(await page.locator('#editor-box').evaluate((d) => d.open), 'editor not opened');
  await shot(page, 'source-line');
  await page.close();
});

test('fusion: fused ops outlined, regions expand, unfuse recompiles without the optimizer', async () => {
  const page = await open('model=minilm&device=cpu&view=mir');
  const fusedOps = await page.locator('#view .node.fused').count();
  assert(fusedOps > 0, 'no fused op outlined');
  const on = await ir(page, 'cpu', 'prefer_native', 'mir', true);
  const regions = await page.evaluate(async () => {
    const g = (await window.__rlxPlayground.ctx.compiled('cpu', 'prefer_native', {})).model.ir('mir');
    return g.nodes.filter((n) => Object.values(n.attrs || {}).some((a) => a && a.graph)).map((n) => Object.values(n.attrs).find((a) => a.graph).graph.nodes.length);
  });
  assert(regions.length > 0, 'MiniLM has no fused_elementwise region');
  await page.check('#expand');
  await waitReady(page);
  assert(await page.locator('#view .cluster').count() === regions.length, 'regions not outlined');
  const drawn = await page.locator('#view .node[data-kind="op"]').count();
  const want = on.nodes - regions.length + regions.reduce((a, b) => a + b, 0);
  assert(drawn === want, `expanded: ${drawn} drawn, want ${want}`);
  await shot(page, 'fusion-expanded');
  await page.check('#unfuse');
  await waitReady(page);
  const off = await ir(page, 'cpu', 'prefer_native', 'mir', false);
  assert(/unfuse=1/.test(page.url()), 'unfuse not in the URL');
  assert(await page.locator('#view .node[data-kind="op"]').count() === off.nodes, 'unfused graph not drawn');
  assert(off.nodes > on.nodes, `unfused ${off.nodes} nodes, fused ${on.nodes}`);
  await page.close();
});

for (const model of ['mlp', 'minilm']) {
  test(`${model}: the dispatch view names the path of every node on webgpu and cpu, transfers drawn`, async () => {
    const page = await open(`model=${model}&device=webgpu&view=dispatch`);
    const rows = await page.locator('#dispatch-table tr').count();
    const rep = await page.evaluate(async () => (await window.__rlxPlayground.ctx.compiled('webgpu', 'prefer_native', {})).model.dispatchReport());
    assert(rows - 1 === rep.nodes.length, `table has ${rows - 1} rows, report ${rep.nodes.length} nodes`);
    const paths = await page.locator('#dispatch-table td.path').allInnerTexts();
    assert(paths.every((p) => /^(native|common_ir|rewritten)/.test(p)), `paths: ${[...new Set(paths)]}`);
    assert(await page.locator('#dispatch-cards [data-device="cpu"]').innerText().then((t) => /native/.test(t)), 'no cpu summary');
    assert(rep.transfers.length > 0, 'webgpu report has no transfers');
    assert(await page.locator('#transfers tr').count() === rep.transfers.length + 1, 'transfers table incomplete');
    assert(await page.locator('#view .node.path-transfer').count() > 0, 'no transfer nodes drawn');
    await shot(page, `${model}-dispatch-webgpu`);
    // switch policy: common_ir_only changes fused ops to common-IR
    await setHash(page, `model=${model}&device=webgpu&view=dispatch&policy=common_ir_only`);
    assert(await page.locator('#policy').inputValue() === 'common_ir_only', 'policy select not synced');
    await shot(page, `${model}-dispatch-webgpu-common-ir`);
    await page.close();
  });
}

test('an unsupported op on webgpu shows the reason and the fix', async () => {
  const page = await open('model=unsupported&device=webgpu&view=dispatch');
  const row = page.locator('#unsupported tr[data-op="argsort"]');
  assert(await row.count() === 1, 'argsort not listed as unsupported');
  const why = await row.innerText();
  assert(/native/.test(why) && /no kernel/i.test(why), `reason: ${why}`);
  const fixes = await page.locator('#fixes').innerText();
  assert(/cpu/.test(fixes), `fix: ${fixes}`);
  assert(await page.locator('#view .node.path-unsupported').count() === 1, 'unsupported node not marked in the graph');
  await shot(page, 'unsupported-webgpu');
  await page.close();
});

test('a fallback chain webgpu → cpu compiles the unsupported graph for the cpu and says why', async () => {
  const page = await open('model=unsupported&device=webgpu,cpu&view=dispatch');
  const chain = await page.locator('#chain').innerText();
  assert(/compiled for cpu/.test(chain) && /skipped webgpu/.test(chain) && /argsort/.test(chain), `chain: ${chain}`);
  assert(await page.locator('#dispatch-table tr').count() === 3, 'report table');
  await shot(page, 'fallback-chain');
  await page.close();
});

test('memory plan: one bar per slot, peak bytes, views', async () => {
  const page = await open('model=minilm-layer&device=webgpu&view=memory');
  const plan = await page.evaluate(async () => (await window.__rlxPlayground.ctx.compiled('webgpu', 'prefer_native', {})).model.memoryPlan());
  assert(await page.locator('.timeline rect.slot').count() === plan.slots.length, 'bar count != slots');
  assert(await page.locator('#views tr').count() - 1 === (plan.views_list || []).length, 'views table');
  assert(plan.peak_bytes > 0 && plan.peak_bytes <= plan.naive_bytes, `peak ${plan.peak_bytes} naive ${plan.naive_bytes}`);
  await shot(page, 'memory');
  await page.close();
});

test('kernels: WGSL and its MSL / HLSL / GLSL translations', async () => {
  const page = await open('model=mlp&device=webgpu&view=kernels&lang=wgsl');
  const n = await page.locator('.kernels li').count();
  assert(n > 0, 'no kernels');
  assert(/@compute/.test(await page.locator('#kernel-source').innerText()), 'WGSL has no @compute entry point');
  for (const [lang, re] of [['msl', /kernel void|\[\[kernel\]\]|metal/], ['hlsl', /numthreads/], ['glsl', /#version/]]) {
    await setHash(page, `model=mlp&device=webgpu&view=kernels&lang=${lang}`);
    const src = await page.locator('#kernel-source').innerText();
    assert(re.test(src), `${lang} source does not look like ${lang}: ${src.slice(0, 200)}`);
  }
  await shot(page, 'kernels-glsl');
  await page.close();
});

// The MLP computed here in float64 from the same deterministic inputs.
function mlpReference(given = {}) {
  const get = (n, s) => given[n] || seededData(n, 'f32', s);
  const x = get('x', [2, 4]), w1 = get('w1', [4, 8]), b1 = get('b1', [8]);
  const w2 = get('w2', [8, 3]), b2 = get('b2', [3]);
  const out = [];
  for (let i = 0; i < 2; i++) {
    const h = Array.from({ length: 8 }, (_, j) => Math.max(0, b1[j] + [0, 1, 2, 3].reduce((s, k) => s + x[i * 4 + k] * w1[k * 8 + j], 0)));
    const y = Array.from({ length: 3 }, (_, j) => b2[j] + h.reduce((s, hv, k) => s + hv * w2[k * 3 + j], 0));
    const m = Math.max(...y), e = y.map((v) => Math.exp(v - m)), s = e.reduce((a, b) => a + b, 0);
    out.push(...e.map((v) => v / s));
  }
  return out;
}

test('run the MLP on webgpu and cpu: outputs equal the float64 reference, p50 shown', async () => {
  const page = await open('model=mlp&device=webgpu&view=run&runs=5');
  const last = await page.evaluate(() => window.__rlxPlayground.lastRun);
  const ref = mlpReference();
  for (const r of last) {
    assert(!r.error, `${r.device}: ${JSON.stringify(r.error)}`);
    const got = r.outputs[0].data;
    assert(got.length === ref.length, `${r.device}: ${got.length} values`);
    got.forEach((v, i) => assert(close(v, ref[i], 1e-5), `${r.device} [${i}] = ${v}, reference ${ref[i]}`));
    assert(Number.isFinite(r.p50) && r.p50 >= 0, `${r.device}: p50 ${r.p50}`);
  }
  assert(/\d+\.\d+ ms/.test(await page.locator('#timings').innerText()), 'no timings');
  assert((await page.locator('#adapter-name').innerText()).length > 3, 'no adapter name');
  // The cost model's estimate beside each measured time; "Calibrate"
  // replaces the nominal figures with measured ones.
  for (const r of last) assert(r.estimate && r.estimate.estimate_ms >= 0, `${r.device}: no estimate ${JSON.stringify(r.estimate)}`);
  await page.click('#calibrate-btn');
  await page.waitForFunction(() => (window.__rlxPlayground.lastRun ?? []).every((r) => r.estimate?.figures === 'measured'), null, { timeout: 120000 });
  assert(/measured/.test(await page.locator('#timings').innerText()), 'no measured estimate in the table');
  await shot(page, 'run-mlp');
  await page.close();
});

// A .safetensors file written here byte by byte (8-byte header length,
// JSON header, little-endian f32 data).
function safetensors(tensors) {
  const header = {};
  let off = 0;
  for (const [name, { shape, data }] of Object.entries(tensors)) {
    header[name] = { dtype: 'F32', shape, data_offsets: [off, off + data.length * 4] };
    off += data.length * 4;
  }
  let h = Buffer.from(JSON.stringify(header));
  h = Buffer.concat([h, Buffer.alloc((8 - (h.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  const body = Buffer.concat(Object.values(tensors).map((t) => Buffer.from(Float32Array.from(t.data).buffer)));
  return Buffer.concat([len, h, body]);
}

test('a dropped .safetensors binds the graph inputs of the same names', async () => {
  const w = {
    w1: { shape: [4, 8], data: Array.from({ length: 32 }, (_, i) => ((i % 7) - 3) / 4) },
    b1: { shape: [8], data: Array.from({ length: 8 }, (_, i) => i / 8) },
    w2: { shape: [8, 3], data: Array.from({ length: 24 }, (_, i) => ((i % 5) - 2) / 3) },
    b2: { shape: [3], data: [0.5, -0.5, 0.25] },
  };
  const file = path.join(out, 'mlp-weights.safetensors');
  fs.writeFileSync(file, safetensors(w));
  const page = await open('model=mlp&device=cpu&view=hir');
  await page.setInputFiles('#file', file);
  await page.waitForFunction(() => /4 tensors; 4 match/.test(document.querySelector('#drop-info').innerText));
  await setHash(page, 'model=mlp&device=cpu&view=run&runs=3');
  const last = await page.evaluate(() => window.__rlxPlayground.lastRun);
  const ref = mlpReference(Object.fromEntries(Object.entries(w).map(([k, v]) => [k, Float32Array.from(v.data)])));
  for (const r of last) {
    assert(!r.error, `${r.device}: ${JSON.stringify(r.error)}`);
    r.outputs[0].data.forEach((v, i) => assert(close(v, ref[i], 1e-5), `${r.device} [${i}] = ${v}, reference with the dropped weights ${ref[i]}`));
  }
  await shot(page, 'dropped-weights');
  await page.close();
});

test('an .onnx file becomes the graph: its dims asked for, every view, a run on the cpu', async () => {
  const repo = path.resolve(app, '..');
  const yolo = path.join(repo, '.cache/models/nudenet-3.4.2/nudenet/320n.onnx');
  assert(fs.existsSync(yolo), `${yolo} is missing: run ./scripts/fetch-models`);
  const page = await open('model=mlp&device=cpu&view=hir');
  await page.setInputFiles('#file', yolo);
  // YOLOv8n's batch, height and width are symbolic: the playground asks.
  await page.waitForSelector('#onnx-dims');
  assert(/symbolic dimension/.test(await page.locator('#drop-info').innerText()), 'no symbolic-dimension message');
  await page.fill('#onnx-dims', 'batch=1, height=320, width=320');
  await page.click('#onnx-import');
  await page.waitForFunction(() => /imported as/.test(document.querySelector('#drop-info').innerText));
  await waitReady(page);
  const inputs = await page.evaluate(() => window.__rlxPlayground.ctx.built.graph.inputs());
  assert(JSON.stringify(inputs.map((i) => [i.name, i.shape])) === '[["images",[1,3,320,320]]]', JSON.stringify(inputs));
  // The views work on it: the dispatch on the cpu (convs on the fast kernel) ...
  await setHash(page, 'model=custom&device=cpu&view=dispatch');
  const r = await page.evaluate(async () => {
    const c = await window.__rlxPlayground.ctx.compiled('cpu', 'prefer_native');
    return c.error ? { error: c.error } : { kernels: c.model.dispatchReport().nodes.filter((n) => n.op === 'conv' || n.op === 'conv_act').flatMap((n) => n.kernels) };
  });
  assert(!r.error && r.kernels.length > 50 && r.kernels.every((k) => k.startsWith('cpu::fast::conv')), JSON.stringify(r).slice(0, 300));
  await shot(page, 'onnx-dispatch');
  // ... and a run on seeded inputs: the detector's output shape.
  await setHash(page, 'model=custom&device=cpu&view=run&runs=1');
  const last = await page.evaluate(() => window.__rlxPlayground.lastRun);
  const cpu = last.find((x) => x.device === 'cpu');
  assert(cpu && !cpu.error && cpu.outputs[0].shape.join(',') === '1,22,2100', JSON.stringify(cpu?.error ?? cpu?.outputs?.[0]?.shape));
  // WebGPU runs it too (direct WGSL convs and pools), and agrees with the
  // cpu: box coordinates are pixels (up to 320), so 1e-2 is 3e-5 relative.
  const gpu = last.find((x) => x.device === 'webgpu');
  assert(gpu && !gpu.error && gpu.outputs[0].shape.join(',') === '1,22,2100', `webgpu: ${JSON.stringify(gpu?.error ?? gpu?.outputs?.[0]?.shape)}`);
  let m = 0;
  gpu.outputs[0].data.forEach((v, i) => (m = Math.max(m, Math.abs(v - cpu.outputs[0].data[i]))));
  assert(m < 1e-2, `max |webgpu - cpu| = ${m}`);
  await shot(page, 'onnx-run');
  await page.close();
});

test('run a MiniLM layer: webgpu agrees with the cpu', async () => {
  const page = await open('model=minilm-layer&device=webgpu&view=run&runs=2');
  const [g, c] = await page.evaluate(() => window.__rlxPlayground.lastRun);
  assert(!g.error && !c.error, JSON.stringify([g.error, c.error]));
  const a = g.outputs[0].data, b = c.outputs[0].data;
  let m = 0;
  a.forEach((v, i) => (m = Math.max(m, Math.abs(v - b[i]))));
  assert(a.length === 8 * 384 && m < 1e-3, `max |webgpu - cpu| = ${m} over ${a.length}`);
  await shot(page, 'run-minilm-layer');
  await page.close();
});

test('full MiniLM with the real weights: the sentence embedding matches sentence-transformers', async () => {
  const ref = JSON.parse(fs.readFileSync(path.resolve(app, '../tests/vectors/minilm/reference.json'), 'utf8')).items[0];
  assert(ref.text === 'This is an example sentence.', 'reference item changed');
  const page = await open('model=minilm&device=cpu&view=run&runs=2');
  const last = await page.evaluate(() => window.__rlxPlayground.lastRun);
  for (const r of last) {
    assert(!r.error, `${r.device}: ${JSON.stringify(r.error)}`);
    const e = r.outputs[1].data;
    const dot = e.reduce((s, v, i) => s + v * ref.embedding[i], 0);
    assert(e.length === 384 && dot > 0.9999, `${r.device}: cosine with sentence-transformers ${dot}`);
  }
  assert(/webgpu cosine (0\.9999|1\.0000)/.test(await page.locator('#reference-check').innerText()), 'no reference check shown');
  await shot(page, 'run-minilm');
  await page.close();
});

test('state lives in the URL; keys switch views', async () => {
  const page = await open('model=attention&device=cpu&policy=common_ir_only&view=memory');
  assert(await page.locator('#model').inputValue() === 'attention', 'model');
  assert(await page.locator('#device').inputValue() === 'cpu', 'device');
  assert(await page.locator('#tabs [aria-selected=true]').innerText() === 'Memory', 'view');
  await page.locator('body').click({ position: { x: 5, y: 880 } });
  await page.keyboard.press('4');
  await waitReady(page);
  assert(/view=dispatch/.test(page.url()), `url after key 4: ${page.url()}`);
  await page.close();
});

test('works offline once loaded (service worker)', async () => {
  const page = await open('model=mlp&device=cpu&view=mir');
  await page.evaluate(() => navigator.serviceWorker.ready);
  // the page hands the worker what it loaded; wait until the wasm is cached
  await page.waitForFunction(async () => {
    const c = await caches.open('rlx-playground-v1');
    return (await c.keys()).some((r) => r.url.endsWith('.wasm'));
  }, null, { timeout: 30000 });
  await context.setOffline(true);
  try {
    await page.reload();
    await waitReady(page);
    const drawn = await page.locator('#view .node[data-kind="op"]').count();
    assert(drawn > 0, 'nothing drawn offline');
    assert(!(await page.locator('#view-error').count()), 'error offline');
  } finally {
    await context.setOffline(false);
  }
  await page.close();
});

test('the editor builds a graph from JS builder code; bad code shows its error', async () => {
  const page = await open('model=mlp&device=cpu&view=mir');
  await page.locator('#editor-box summary').click();
  await page.fill('#code', "const g = new rlx.GraphBuilder('mlp');\nconst x = g.input('x', 'f32', [2, 4]);\nreturn { graph: g.finish([x.tanh().exp()]) };");
  await page.click('#build');
  await waitReady(page);
  const want = await ir(page, 'cpu', 'prefer_native', 'mir');
  assert(!want.error, JSON.stringify(want.error));
  await page.fill('#code', 'return { graph: nope };');
  await page.click('#build');
  await waitReady(page);
  assert(/nope/.test(await page.locator('#code-error').innerText()), 'no error shown for bad code');
  await page.close();
});

// ---- run ---------------------------------------------------------------------------
let passed = 0, failed = 0;
for (const c of cases) {
  if (filter && !c.name.includes(filter)) continue;
  const t0 = Date.now();
  try {
    await c.fn();
    passed++;
    console.log(`ok    ${c.name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  } catch (e) {
    failed++;
    if (lastPage && !lastPage.isClosed()) {
      await shot(lastPage, `FAIL-${c.name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}`).catch(() => {});
      await lastPage.close().catch(() => {});
    }
    console.log(`FAIL  ${c.name} (${((Date.now() - t0) / 1000).toFixed(1)} s)\n      ${String(e.message || e).split('\n').join('\n      ')}`);
  }
}
if (consoleErrors.length) console.log(`page errors:\n  ${consoleErrors.slice(0, 10).join('\n  ')}`);
await context.close();
server.kill();
fs.rmSync(userDir, { recursive: true, force: true });
console.log(`screenshots: ${path.relative(process.cwd(), out)}/`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
