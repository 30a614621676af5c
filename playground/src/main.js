// The playground: pick a model (or write one), see its IR, fusion,
// dispatch, memory plan and kernels, and run it — all from the JSON the
// `rlx` package exposes (npm/API.md), imported the way users import it.
import { EXAMPLES, exampleById, buildExample } from './examples.js';
import { VIEWS, readState, writeState } from './state.js';
import { renderGraph } from './views/graph.js';
import { renderDispatch, drawUnsupported } from './views/dispatch.js';
import { renderMemory } from './views/memory.js';
import { renderKernels } from './views/kernels.js';
import { renderRun } from './views/run.js';
import { renderChat } from './views/chat.js';
import { fmtBytes } from './ir.js';

const $ = (s) => document.querySelector(s);
const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const MINILM = 'models/all-MiniLM-L6-v2/model.safetensors';
window.__rlxPlayground = { ready: false };
// The package, loaded as its own chunk: rlx records each builder call's
// stack frame outside its own module as the node's source, so the editor's
// code must not share a bundle file with it.
let rlx;

const status = (html) => { $('#status').innerHTML = html; };
const asError = (e) => ({ code: e?.code || 'error', message: e?.message || String(e) });

const ctx = {
  state: readState(),
  details: $('#details'),
  opsInfo: [],
  built: null,        // { graph, inputs, weights } from the current code
  cache: new Map(),   // "device|policy|optimize|weights" -> { model } | { error }
  boundWeights: null, // rlx Weights bound at compile for runs
  dropped: null,      // Weights from a dropped .safetensors
  minilm: null,

  set(patch, { rerender = true } = {}) {
    const prevModel = this.state.model;
    Object.assign(this.state, patch);
    writeState(this.state);
    syncControls();
    if (patch.model && patch.model !== prevModel) loadExample().then(() => this.rerender());
    else if (rerender) this.rerender();
  },

  async devices() {
    if (!this._devices) this._devices = rlx.devices();
    return this._devices;
  },

  async weightsFor(withWeights) {
    if (!withWeights) return undefined;
    if (this.built.weights === 'minilm') {
      if (!this.minilm) {
        status(`loading all-MiniLM-L6-v2 weights…`);
        this.minilm = rlx.loadSafetensors(MINILM, {
          onProgress: (p) => status(`weights: ${fmtBytes(p.loaded ?? 0)} / ${fmtBytes(p.total ?? 0)}`),
        }).then((w) => { status(`weights: ${w.names().length} tensors loaded`); return w; });
      }
      return this.minilm;
    }
    return this.dropped || undefined;
  },

  /** Time every device (rlx.calibrate, kept in IndexedDB) and drop the
   * 'auto' models compiled with the old figures. */
  async calibrate() {
    const figs = await rlx.calibrate({ cache: false });
    for (const k of [...this.cache.keys()]) if (k.startsWith('auto|')) this.cache.delete(k);
    return figs;
  },

  async compiled(device, policy, { optimize = true, weights = false } = {}) {
    const withW = weights && !!(this.built.weights || this.dropped);
    const key = `${device}|${policy}|${optimize}|${withW}`;
    if (!this.cache.has(key)) {
      this.cache.set(key, (async () => {
        const t0 = performance.now();
        try {
          const w = await this.weightsFor(withW);
          if (w) this.boundWeights = w;
          // 'webgpu,cpu' is a fallback chain: the report's `fallback` says what was skipped and why.
          const dev = device.includes(',') ? device.split(',') : device;
          const model = await rlx.compile(this.built.graph, { device: dev, policy, optimize, ...(w ? { weights: w } : {}) });
          status(`compiled <b>${esc(this.built.graph.json().name)}</b> for ${esc(model.device)} in ${(performance.now() - t0).toFixed(0)} ms`);
          return { model };
        } catch (e) {
          return { error: asError(e) };
        }
      })());
    }
    return this.cache.get(key);
  },

  drawFallback(host, c) {
    host.innerHTML = `<div class="pane"><h3 class="bad">Cannot compile for ${esc(this.state.device)} (${esc(c.error.code)})</h3>
      <p>The graph as written, with the nodes that cannot run marked; the Dispatch view lists each reason and fix.</p></div>`;
    if (c.error.code === 'dispatch') drawUnsupported(this, host, c);
    else host.insertAdjacentHTML('beforeend', `<pre class="error pane">${esc(c.error.message)}</pre>`);
  },

  async rerender() {
    const token = (this._render = (this._render || 0) + 1);
    document.body.dataset.busy = '1';
    window.__rlxPlayground.ready = false;
    const host = $('#view');
    host.innerHTML = '<p class="pane muted">working…</p>';
    try {
      if (!this.built) throw new Error(this.buildError || 'no graph');
      const v = this.state.view;
      if (v === 'hir' || v === 'mir' || v === 'lir') await renderGraph(this, host, v);
      else if (v === 'dispatch') await renderDispatch(this, host);
      else if (v === 'memory') await renderMemory(this, host);
      else if (v === 'kernels') await renderKernels(this, host);
      else if (v === 'run') await renderRun(this, host);
      else if (v === 'chat') await renderChat(this, host, rlx);
    } catch (e) {
      console.error(e);
      if (token === this._render) host.innerHTML = `<pre class="error pane" id="view-error">${esc(e.code ? `${e.code}: ` : '')}${esc(e.message || e)}</pre>`;
    }
    if (token === this._render) {
      delete document.body.dataset.busy;
      window.__rlxPlayground.ready = true;
      window.__rlxPlayground.view = this.state.view;
    }
  },
};
window.__rlxPlayground.ctx = ctx;

function currentExample() {
  return ctx.state.model === 'custom' ? null : exampleById(ctx.state.model) || EXAMPLES[0];
}

function currentCode() {
  if (ctx.state.model === 'custom') {
    return sessionStorage.getItem('rlx-playground-code') || exampleById('mlp').code;
  }
  return (exampleById(ctx.state.model) || EXAMPLES[0]).code;
}

async function loadExample(code = currentCode()) {
  if (ctx.onnx) ctx.onnx.active = false;
  for (const c of ctx.cache.values()) c.then((r) => r.model?.dispose?.()).catch(() => {});
  ctx.cache.clear();
  ctx.boundWeights = null;
  ctx.built = null;
  ctx.buildError = null;
  ctx.example = code === currentCode() ? currentExample() : null;
  $('#code').value = code;
  $('#code-error').textContent = '';
  try {
    ctx.built = await buildExample(rlx, code);
  } catch (e) {
    ctx.buildError = `${e.code ? e.code + ': ' : ''}${e.message || e}`;
    $('#code-error').textContent = ctx.buildError;
    $('#editor-box').open = true;
  }
}

function syncControls() {
  $('#model').value = ctx.state.model;
  $('#device').value = ctx.state.device;
  $('#policy').value = ctx.state.policy;
  for (const b of document.querySelectorAll('#tabs button')) b.setAttribute('aria-selected', String(b.dataset.view === ctx.state.view));
}

// Bring your own model: an .onnx file becomes the current graph (every
// view works on it); its symbolic dimensions are asked for when it has any.
async function importOnnx(dimsText) {
  const info = $('#drop-info');
  const dims = {};
  for (const part of (dimsText || '').split(',').map((x) => x.trim()).filter(Boolean)) {
    const [k, v] = part.split('=');
    dims[k.trim()] = Number(v);
  }
  let graph;
  try {
    graph = rlx.Graph.fromOnnx(ctx.onnx.bytes, { dims });
  } catch (e) {
    const needsDims = e.code === 'format' && /dimension/.test(e.message);
    info.innerHTML = `<pre class="error">${esc(e.code)}: ${esc(e.message)}</pre>` + (needsDims
      ? `<p>Sizes of its symbolic dimensions: <input id="onnx-dims" class="mono" size="40" placeholder="batch=1, height=320, width=320" value="${esc(dimsText || '')}" />
         <button id="onnx-import">import</button></p>` : '');
    if (needsDims) $('#onnx-import').onclick = () => importOnnx($('#onnx-dims').value);
    return;
  }
  for (const c of ctx.cache.values()) c.then((r) => r.model?.dispose?.()).catch(() => {});
  ctx.cache.clear();
  ctx.built = { graph, inputs: {} };
  ctx.buildError = null;
  ctx.example = null;
  ctx.state.model = 'custom';
  ctx.onnx.active = true;
  writeState(ctx.state);
  syncControls();
  const ins = graph.inputs();
  info.innerHTML = `<p><b>${esc(ctx.onnx.name)}</b>: imported as ${esc(graph.json().name)} (${graph.json().nodes.length} nodes); inputs ${ins.map((i) => `<span class="mono">${esc(i.name)}: ${esc(i.dtype)}[${i.shape.join(',')}]</span>`).join(', ')} — seeded random values, or drop a <span class="mono">NAME.npy</span> per input.</p>`;
  await ctx.rerender();
}

// A little-endian .npy file (numpy.save, C order) as {shape, data}.
function readNpy(buf) {
  const b = new Uint8Array(buf);
  const hlen = b[8] | (b[9] << 8);
  const header = new TextDecoder().decode(b.subarray(10, 10 + hlen));
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const shape = (/'shape':\s*\(([^)]*)\)/.exec(header)?.[1] ?? '').split(',').filter((x) => x.trim()).map(Number);
  const kind = { '<f4': Float32Array, '<i8': BigInt64Array, '<i4': Int32Array, '|u1': Uint8Array, '|b1': Uint8Array }[descr];
  if (!kind) throw new Error(`.npy dtype ${descr} is not supported here (f4, i8, i4, u1, b1)`);
  return { shape, data: new kind(buf.slice(10 + hlen)) };
}

async function onFile(file) {
  const info = $('#drop-info');
  const ext = file.name.split('.').pop().toLowerCase();
  if (ext === 'onnx') {
    ctx.onnx = { name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) };
    return importOnnx('');
  }
  if (ext === 'npy') {
    // An input value for the current graph, named by the file (images.npy → images).
    const name = file.name.replace(/\.npy$/i, '');
    try {
      const t = readNpy(await file.arrayBuffer());
      const inp = ctx.built?.graph.inputs().find((i) => i.name === name);
      if (!inp) throw new Error(`the graph has no input \`${name}\` (its inputs: ${(ctx.built?.graph.inputs() ?? []).map((i) => i.name).join(', ')})`);
      if (t.shape.join(',') !== inp.shape.join(',')) throw new Error(`${file.name} is [${t.shape}], the input \`${name}\` is ${inp.dtype}[${inp.shape}]`);
      ctx.built.inputs = { ...(ctx.built.inputs || {}), [name]: t.data };
      info.insertAdjacentHTML('beforeend', `<p><b>${esc(file.name)}</b> is input <span class="mono">${esc(name)}</span> at the next run.</p>`);
    } catch (e) {
      info.insertAdjacentHTML('beforeend', `<pre class="error">${esc(e.message)}</pre>`);
    }
    return;
  }
  if (ext !== 'safetensors') { info.innerHTML = `<span class="bad">.${esc(ext)} is not accepted by this build (see the list above)</span>`; return; }
  try {
    const w = await rlx.loadSafetensors(await file.arrayBuffer());
    ctx.dropped?.dispose?.();
    ctx.dropped = w;
    const names = w.names();
    const inputs = new Set(ctx.built ? ctx.built.graph.inputs().map((i) => i.name) : []);
    const bound = names.filter((n) => inputs.has(n));
    info.innerHTML = `<p><b>${esc(file.name)}</b>: ${names.length} tensors; ${bound.length} match graph inputs by name and are bound at the next run.</p>
      <table>${names.slice(0, 200).map((n) => { const t = w.info(n); return `<tr><td class="mono">${esc(n)}</td><td class="mono">${esc(t.dtype)}[${t.shape.join(',')}]</td></tr>`; }).join('')}</table>`;
    for (const k of [...ctx.cache.keys()]) if (k.endsWith('|true')) ctx.cache.delete(k);
  } catch (e) {
    info.innerHTML = `<pre class="error">${esc(e.code ? e.code + ': ' : '')}${esc(e.message)}</pre>`;
  }
}

async function main() {
  $('#version').textContent = '';
  try {
    rlx = await import('rlx/full'); // the full entry: naga's MSL/HLSL/GLSL translators for the Kernels view
    await rlx.init();
  } catch (e) {
    $('#view').innerHTML = `<pre class="error pane">rlx.init() failed: ${esc(e.message)}</pre>`;
    return;
  }
  // Threads: the serving script sends COOP/COEP, so init() loads the
  // threaded module (one CPU thread per core); the tooltip says why.
  const th = rlx.threads();
  $('#version').textContent = `rlx ${rlx.version} · wasm-cpu ${th.threads} thread${th.threads > 1 ? 's' : ''}`;
  $('#version').title = `${th.build} build: ${th.reason}`;
  ctx.opsInfo = rlx.ops().map((o) => ({ ...o, name: o.name || o.kind }));
  // Which formats this build reads: safetensors (weights), ONNX models and
  // .npy inputs; GGUF once the package has that importer.
  const formats = ['.safetensors', ...(typeof rlx.Graph.fromOnnx === 'function' ? ['.onnx', '.npy'] : []), ...(typeof rlx.loadGguf === 'function' ? ['.gguf'] : [])];
  $('#formats').textContent = `this build accepts: ${formats.join(', ')}`;
  $('#file').accept = formats.join(',');

  $('#model').innerHTML = EXAMPLES.map((e) => `<option value="${e.id}">${esc(e.title)}</option>`).join('') + '<option value="custom">custom (editor)</option>';
  $('#tabs').innerHTML = VIEWS.map(([v, t], i) => `<button role="tab" data-view="${v}" title="key ${i + 1}">${t}</button>`).join('');
  for (const b of document.querySelectorAll('#tabs button')) b.onclick = () => ctx.set({ view: b.dataset.view });
  $('#model').onchange = (e) => ctx.set({ model: e.target.value });
  $('#device').onchange = (e) => ctx.set({ device: e.target.value });
  $('#policy').onchange = (e) => {
    // A policy change recompiles; earlier compiles stay cached.
    ctx.set({ policy: e.target.value });
  };
  const build = async () => {
    sessionStorage.setItem('rlx-playground-code', $('#code').value);
    ctx.state.model = 'custom';
    writeState(ctx.state);
    syncControls();
    await loadExample($('#code').value);
    ctx.rerender();
  };
  $('#build').onclick = build;
  $('#code').addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); build(); } });

  const drop = $('#drop');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => { e.preventDefault(); drop.classList.remove('over'); if (e.dataTransfer.files[0]) onFile(e.dataTransfer.files[0]); });
  $('#file').onchange = (e) => e.target.files[0] && onFile(e.target.files[0]);

  // Keys: 1-7 views, / search, e editor, f fit; not while typing.
  document.addEventListener('keydown', (e) => {
    if (e.target.closest('input, textarea, select') || e.ctrlKey || e.metaKey || e.altKey) return;
    const i = Number(e.key);
    if (i >= 1 && i <= VIEWS.length) { ctx.set({ view: VIEWS[i - 1][0] }); return; }
    if (e.key === '/') { e.preventDefault(); $('#search')?.focus(); }
    if (e.key === 'e') { const b = $('#editor-box'); b.open = !b.open; if (b.open) $('#code').focus(); }
    if (e.key === 'f') ctx.graphView?.fit();
  });
  window.addEventListener('hashchange', () => {
    const s = readState();
    // An imported .onnx stays the graph until another model is picked.
    const modelChanged = s.model !== ctx.state.model && !(ctx.onnx?.active && s.model === 'custom');
    if (s.model !== 'custom' && ctx.onnx) ctx.onnx.active = false;
    ctx.state = s;
    syncControls();
    (modelChanged ? loadExample() : Promise.resolve()).then(() => ctx.rerender());
  });

  // WebGPU missing: start on the CPU rather than on an error page.
  const devs = await ctx.devices();
  if (!location.hash.includes('device=') && !devs.find((d) => d.device === 'webgpu')?.available) ctx.state.device = 'cpu';
  writeState(ctx.state);
  syncControls();
  await loadExample();
  await ctx.rerender();
}

function offline() {
  // Works offline once loaded: the worker keeps every same-origin response,
  // and is handed what this page loaded before it took control (the wasm,
  // the chunks), so the first visit is enough.
  if (!('serviceWorker' in navigator) || !import.meta.env.PROD) return;
  navigator.serviceWorker.register('sw.js')
    .then(() => navigator.serviceWorker.ready)
    .then((reg) => {
      const mine = (u) => u.startsWith(location.origin);
      const urls = [location.href.split('#')[0], ...performance.getEntriesByType('resource').map((e) => e.name).filter(mine)];
      reg.active?.postMessage({ cache: [...new Set(urls)] });
    })
    .catch((e) => console.warn('service worker:', e));
}

main().finally(offline);
