// Run: compile for WebGPU and for wasm-cpu, run N times each, show p50 and
// min beside the cost model's estimate for each device (what `device:
// 'auto'` decides by: measured figures after "Calibrate", else nominal),
// the outputs, how far the two devices agree, and the adapter.
import { seededData } from '../examples.js';
import { fmtBytes } from '../ir.js';

const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const DEVICES = ['webgpu', 'cpu'];
const median = (a) => { const b = [...a].sort((x, y) => x - y); return b.length % 2 ? b[b.length >> 1] : (b[b.length / 2 - 1] + b[b.length / 2]) / 2; };
const preview = (data, n = 12) => Array.from(data.slice(0, n), (v) => (typeof v === 'bigint' ? v.toString() : Number(v).toPrecision(6))).join(', ') + (data.length > n ? `, … (${data.length})` : '');

export async function runOnce(ctx, device, runs) {
  const c = await ctx.compiled(device, ctx.state.policy, { optimize: true, weights: true });
  if (c.error) return { device, error: c.error };
  // Inputs bound to weights at compile time are not fed (model.inputs() marks them).
  const feeds = {};
  for (const inp of c.model.inputs()) {
    if (inp.bound) continue;
    const data = ctx.built.inputs?.[inp.name] ?? seededData(inp.name, inp.dtype, inp.shape);
    feeds[inp.name] = { data, shape: inp.shape };
  }
  const times = [];
  let outs;
  try {
    outs = await c.model.run(feeds); // warm-up (first run uploads weights, builds pipelines lazily if any)
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      outs = await c.model.run(feeds);
      times.push(performance.now() - t0);
    }
  } catch (e) { return { device, error: e }; }
  return { device, model: c.model, outs, times, p50: median(times), min: Math.min(...times) };
}

function maxAbsDiff(a, b) {
  if (!a || !b || a.length !== b.length) return null;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(Number(a[i]) - Number(b[i])));
  return m;
}

export async function renderRun(ctx, host) {
  const runs = Math.max(1, Math.min(1000, Number(ctx.state.runs || 10)));
  host.innerHTML = `<div class="toolbar"><button id="run-btn">Run ▸</button>
    <button id="calibrate-btn" title="time a matmul, a kernel chain and copies on each device; 'auto' then estimates with them">Calibrate devices</button>
    <label>runs <input id="runs" type="number" min="1" max="1000" value="${runs}" style="width:5em"></label>
    <span id="run-status" class="muted" aria-live="polite"></span></div>
    <div class="pane"><div id="adapter"></div><div id="results"></div></div>`;
  const st = host.querySelector('#run-status');
  const res = host.querySelector('#results');
  host.querySelector('#runs').onchange = (e) => ctx.set({ runs: e.target.value }, { rerender: false });
  const devs = await ctx.devices();
  const gpu = devs.find((d) => d.device === 'webgpu');
  const a = gpu?.adapter || {};
  // The package reports what wgpu sees; in a browser that leaves the name
  // empty, so the browser's own GPUAdapterInfo, features and limits are shown too.
  let br = null;
  try {
    const ad = navigator.gpu && (await navigator.gpu.requestAdapter());
    if (ad) {
      const limits = {};
      for (const k in ad.limits) limits[k] = ad.limits[k];
      br = { vendor: ad.info?.vendor, architecture: ad.info?.architecture, description: ad.info?.description, features: [...ad.features].sort(), limits };
    }
  } catch { /* no WebGPU in this browser */ }
  const name = a.name?.trim() || [br?.vendor, br?.architecture, br?.description].filter(Boolean).join(' ') || '(unnamed adapter)';
  const limRows = (lim) => Object.entries(lim || {}).map(([k, v]) => `<tr><td>${esc(k)}</td><td class="num">${typeof v === 'number' && v > 65536 ? `${v} (${fmtBytes(v)})` : esc(v)}</td></tr>`).join('');
  host.querySelector('#adapter').innerHTML = `<h3>WebGPU adapter</h3>${gpu?.available
    ? `<p id="adapter-name"><b>${esc(name)}</b> · rlx backend ${esc(a.backend || '?')} · shader-f16 ${a.shader_f16 ? 'yes' : 'no'} · subgroups ${a.subgroups ? 'yes' : 'no'}</p>
       <details><summary>limits rlx uses, and the browser's adapter (${br ? br.features.length : 0} features)</summary>
       <table>${limRows(a.limits)}</table>
       ${br ? `<p class="mono">${br.features.map(esc).join(' ')}</p><table>${limRows(br.limits)}</table>` : ''}</details>`
    : `<p class="bad" id="adapter-name">WebGPU not available: ${esc(gpu?.reason || 'no adapter')}</p>`}`;

  const go = async () => {
    const n = Math.max(1, Number(host.querySelector('#runs').value) || 10);
    res.innerHTML = '';
    const results = [];
    for (const d of DEVICES) {
      st.textContent = `compiling and running on ${d}…`;
      if (d === 'webgpu' && !gpu?.available) { results.push({ device: d, error: { message: `WebGPU not available: ${gpu?.reason || ''}` } }); continue; }
      results.push(await runOnce(ctx, d, n));
    }
    st.textContent = `done (${n} timed runs per device after one warm-up)`;
    // The cost model's estimate per device, as 'auto' compiles it.
    const auto = await ctx.compiled('auto', ctx.state.policy, { optimize: true });
    const estimates = auto.model?.dispatchReport().auto?.estimates ?? [];
    const est = (d) => {
      const e = estimates.find((x) => x.device === d);
      return e?.estimate_ms != null ? `<td class="num estimate">${e.estimate_ms.toFixed(3)} ms <span class="muted">(${esc(e.figures)})</span></td>` : '<td class="muted">—</td>';
    };
    const [g, c] = results;
    const rows = results.map((r) => r.error
      ? `<tr data-device="${r.device}"><td>${r.device}</td><td colspan="3" class="bad">${esc(r.error.code ? `${r.error.code}: ` : '')}${esc((r.error.message || '').split('\n')[0])}</td>${est(r.device)}</tr>`
      : `<tr data-device="${r.device}"><td>${r.device}${r.model.device !== r.device ? ` → ${esc(r.model.device)}` : ''}</td><td class="num p50">${r.p50.toFixed(3)} ms</td><td class="num">${r.min.toFixed(3)} ms</td><td class="num">${r.times.length}</td>${est(r.device)}</tr>`).join('');
    const outs = (r) => r.outs ? r.outs.map((o, i) => `<div class="outputs" data-device="${r.device}" data-output="${i}"><b>${esc(o.name || `output ${i}`)}</b> <code>${esc(o.dtype)}[${o.shape.join(',')}]</code><pre>${esc(preview(o.data))}</pre></div>`).join('') : '';
    const diffs = g.outs && c.outs ? g.outs.map((o, i) => maxAbsDiff(o.data, c.outs[i]?.data)) : [];
    res.innerHTML = `<h3>Timings</h3><table id="timings"><tr><th>device</th><th>p50</th><th>min</th><th>runs</th><th>estimate ('auto' chooses ${esc(auto.model?.device ?? '?')})</th></tr>${rows}</table>
      ${diffs.length ? `<p id="agreement">webgpu vs cpu, max |Δ| per output: ${diffs.map((d) => (d == null ? 'n/a' : d.toExponential(2))).join(', ')}</p>` : ''}
      <h3>Outputs</h3><div style="display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:12px"><div><h4>webgpu</h4>${outs(g)}</div><div><h4>cpu (wasm)</h4>${outs(c)}</div></div>`;
    // The MiniLM example: its embedding against sentence-transformers'.
    const ref = ctx.example?.reference;
    if (ref) {
      try {
        const item = (await (await fetch(ref.url)).json()).items[ref.item];
        const cos = (a) => { let d = 0, na = 0, nb = 0; a.forEach((v, i) => { d += v * item.embedding[i]; na += v * v; nb += item.embedding[i] ** 2; }); return d / Math.sqrt(na * nb); };
        res.insertAdjacentHTML('afterbegin', `<p id="reference-check">Sentence embedding of “${esc(item.text)}” vs sentence-transformers: ${results.filter((r) => r.outs)
          .map((r) => { const c = cos(Array.from(r.outs[ref.output].data)); return `${r.device} cosine <b class="${c > 0.9999 ? 'ok' : 'bad'}">${c.toFixed(9)}</b>`; }).join(' · ')}</p>`);
      } catch (e) {
        res.insertAdjacentHTML('afterbegin', `<p class="muted">reference not available (${esc(e.message)})</p>`);
      }
    }
    // For tests and the console: the full outputs of the last run.
    window.__rlxPlayground.lastRun = results.map((r) => ({ device: r.device, error: r.error ? { code: r.error.code, message: r.error.message } : null,
      p50: r.p50, estimate: estimates.find((x) => x.device === r.device) ?? null,
      outputs: r.outs?.map((o) => ({ name: o.name, dtype: o.dtype, shape: o.shape, data: Array.from(o.data, Number) })) }));
  };
  host.querySelector('#run-btn').onclick = go;
  host.querySelector('#calibrate-btn').onclick = async () => {
    st.textContent = 'calibrating every device…';
    try {
      const figs = await ctx.calibrate();
      st.textContent = `calibrated: ${figs.map((f) => `${f.device} ${f.gemm_gflops.toFixed(1)} GFLOP/s, ${f.launch_us.toFixed(1)} µs/kernel`).join('; ')}`;
      await go();
    } catch (e) {
      st.textContent = `calibration failed: ${e.code ?? ''} ${e.message}`;
    }
  };
  await go();
}
