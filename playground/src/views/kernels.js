// Generated kernels for the chosen device: WGSL and its naga translations
// (MSL, HLSL, GLSL). The CPU has no source to show: its kernel names.
const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const LANGS = ['wgsl', 'msl', 'hlsl', 'glsl'];

export async function renderKernels(ctx, host) {
  const s = ctx.state;
  const c = await ctx.compiled(s.device, s.policy, { optimize: true });
  if (c.error) { ctx.drawFallback(host, c); return; }
  const lang = LANGS.includes(s.lang) ? s.lang : 'wgsl';
  let ks, err = null;
  const gpu = c.model.device !== 'cpu'; // a fallback chain may have landed on the cpu
  try { ks = await c.model.kernels(gpu ? lang : 'wgsl'); } catch (e) { err = e; ks = []; }
  host.innerHTML = `<div class="toolbar">
      ${gpu ? LANGS.map((l) => `<button data-lang="${l}" aria-pressed="${l === lang}">${l.toUpperCase()}</button>`).join('') : '<span>cpu: kernels are Rust functions compiled into the wasm module (names below)</span>'}
      <span class="muted" id="kernel-count">${ks.length} kernels</span>
    </div>
    ${err ? `<pre class="error pane">${esc(err.message)}</pre>` : ''}
    <div class="kernels"><ul role="listbox" aria-label="kernels">${ks.map((k, i) => `<li><button data-i="${i}">${esc(k.name)}</button></li>`).join('')}</ul>
    <pre id="kernel-source" tabindex="0">${gpu ? '' : esc(ks.map((k) => k.name).join('\n'))}</pre></div>`;
  host.querySelectorAll('[data-lang]').forEach((b) => (b.onclick = () => ctx.set({ lang: b.dataset.lang })));
  const pre = host.querySelector('#kernel-source');
  const pick = (i) => {
    host.querySelectorAll('[data-i]').forEach((b) => b.setAttribute('aria-current', String(+b.dataset.i === i)));
    if (gpu && ks[i]) pre.textContent = ks[i].source || '';
  };
  host.querySelectorAll('[data-i]').forEach((b) => (b.onclick = () => pick(+b.dataset.i)));
  if (ks.length && gpu) pick(0);
}
