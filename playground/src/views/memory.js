// The memory plan: every arena slot as a bar from the step that writes it
// to the last step that reads it, at its byte offset — reuse shows as bars
// stacked at the same offset; plus peak/arena/naive bytes and the views
// (values read through another buffer: no copy).
import { fmtBytes, fmtType, valueLabel } from '../ir.js';

const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

export async function renderMemory(ctx, host) {
  const s = ctx.state;
  const c = await ctx.compiled(s.device, s.policy, { optimize: true });
  if (c.error) { ctx.drawFallback(host, c); return; }
  const plan = c.model.memoryPlan();
  const lir = c.model.ir('lir');
  const g = lir.graph || c.model.ir('mir');
  const tyOf = (sl) => (sl.dtype ? { dtype: sl.dtype, shape: sl.shape } : g.values[sl.value]?.ty);
  const nameOf = (sl) => (sl.name ? `%${sl.name}` : valueLabel(g, sl.value));
  const nSteps = Math.max(1, lir.steps.length);
  const arena = Math.max(1, plan.arena_bytes);
  const W = 900, H = 320, L = 70, T = 10;
  const x = (st) => L + (st / nSteps) * (W - L - 10);
  const y = (off) => T + (off / arena) * (H - T - 24);
  const bars = plan.slots.map((sl) => {
    const w = Math.max(2, x(sl.last_step + 1) - x(sl.first_step));
    const h = Math.max(1.5, y(sl.offset + sl.bytes) - y(sl.offset));
    return `<rect class="slot" data-value="${sl.value}" x="${x(sl.first_step)}" y="${y(sl.offset)}" width="${w}" height="${h}">
      <title>${esc(nameOf(sl))}: ${esc(fmtType(tyOf(sl)))}\n${fmtBytes(sl.bytes)} at +${sl.offset}\nsteps ${sl.first_step}–${sl.last_step}</title></rect>`;
  }).join('');
  const ticks = [];
  const every = Math.max(1, Math.ceil(nSteps / 20));
  for (let i = 0; i <= nSteps; i += every) ticks.push(`<text x="${x(i)}" y="${H - 6}" text-anchor="middle">${i}</text>`);
  const yt = [0, 0.5, 1].map((f) => `<text x="${L - 4}" y="${y(f * arena) + 3}" text-anchor="end">${fmtBytes(Math.round(f * arena))}</text>`).join('');
  const views = plan.views_list || lir.views || [];
  host.innerHTML = `<div class="pane">
    <div class="cards" id="mem-cards">
      <div class="card"><span class="muted">peak live</span><b id="peak-bytes">${fmtBytes(plan.peak_bytes)}</b></div>
      <div class="card"><span class="muted">arena</span><b>${fmtBytes(plan.arena_bytes)}</b></div>
      <div class="card"><span class="muted">naive (no reuse)</span><b>${fmtBytes(plan.naive_bytes)}</b>${plan.naive_bytes ? `${(plan.naive_bytes / Math.max(1, plan.arena_bytes)).toFixed(1)}× the arena` : ''}</div>
      <div class="card"><span class="muted">buffers / in place / views</span><b>${plan.buffers} / ${plan.in_place} / ${plan.views}</b>views alias, no copy</div>
    </div>
    <h3>Buffer lifetimes (x: LIR step, y: arena offset) on ${esc(c.model.device)}</h3>
    <svg class="timeline" viewBox="0 0 ${W} ${H}" width="100%" style="max-width:${W}px;border:1px solid var(--line);background:#fff" role="img" aria-label="buffer lifetimes">
      <line x1="${L}" y1="${H - 22}" x2="${W - 10}" y2="${H - 22}" stroke="#ccc"/>${ticks.join('')}${yt}${bars}</svg>
    <h3>Slots (${plan.slots.length})</h3>
    <table id="slots"><tr><th>value</th><th>type</th><th>offset</th><th>bytes</th><th>steps</th></tr>
      ${plan.slots.map((sl) => `<tr><td><code>${esc(nameOf(sl))}</code></td><td><code>${esc(fmtType(tyOf(sl)))}</code></td><td class="num">${sl.offset}</td><td class="num">${sl.bytes}</td><td>${sl.first_step}–${sl.last_step}</td></tr>`).join('')}</table>
    <h3>Views: no copy (${views.length})</h3>
    <table id="views"><tr><th>value</th><th>of</th><th>offset</th><th>strides</th></tr>
      ${views.map((v) => `<tr><td><code>${esc(valueLabel(g, v.value))}</code></td><td><code>${esc(valueLabel(g, v.base))}</code></td><td class="num">${v.offset}</td><td><code>[${(v.strides || []).join(', ')}]</code></td></tr>`).join('')}</table>
  </div>`;
}
