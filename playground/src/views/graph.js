// HIR / MIR / LIR as graphs. MIR shows fusion: fused ops outlined, fused
// regions' bodies expandable, and the "unfuse" toggle recompiles with the
// optimizer off so the graph as it would run unfused is drawn instead.
import { GraphView } from '../graph-view.js';
import { flatten, lirAsGraph, bodies, stepOfNode } from '../ir.js';
import { mapDispatch } from './dispatch-map.js';
import { showDetails } from './details.js';

const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

export async function renderGraph(ctx, host, which) {
  const s = ctx.state;
  const unfuse = which === 'mir' && s.unfuse === '1';
  const c = await ctx.compiled(s.device, s.policy, { optimize: !unfuse });
  host.innerHTML = '';
  const bar = document.createElement('div');
  bar.className = 'toolbar';
  host.appendChild(bar);
  if (c.error) {
    // An uncompilable graph still has its HIR (the graph as written): show
    // that, and say why the compile failed.
    bar.innerHTML = `<span class="bad">compile for ${s.device} failed (${c.error.code || 'error'})</span> — see the Dispatch view`;
    if (which !== 'hir') { ctx.drawFallback(host, c); return; }
  }
  const model = c.model;
  const fused = new Set(ctx.opsInfo.filter((o) => o.fused).map((o) => o.name));
  let graph, lir, flat;
  if (which === 'hir') graph = model ? model.ir('hir') : ctx.built.graph.json();
  else if (which === 'mir') { graph = model.ir('mir'); lir = model.ir('lir'); }
  else { lir = model.ir('lir'); graph = lirAsGraph(lir, model.ir('mir')); }
  const report = which === 'mir' && model ? model.dispatchReport() : null;
  const dmap = mapDispatch(graph, report);
  const steps = stepOfNode(lir);
  const expand = new Set();
  if (which === 'mir' && ctx.expandRegions) graph.nodes.forEach((n, i) => bodies(n).length && expand.add(i));
  const hideInputs = graph.inputs.length > 24 && !ctx.showInputs;
  flat = flatten(graph, { expand, hideInputs });

  const nOps = graph.nodes.length;
  // What the passes did (null when the optimizer was off).
  let pr = null;
  try { pr = which === 'mir' ? model.passReport() : null; } catch { pr = null; }
  const passLine = pr && pr.kernels_before != null
    ? `fusion: ${pr.kernels_before} → ${pr.kernels_after} kernels (${Object.entries(pr.ops_after || {}).filter(([k]) => !(k in (pr.ops_before || {}))).map(([k, v]) => `${v}× ${k}`).join(', ') || 'no new fused ops'})`
    : `${lir ? lir.steps.length : '?'} kernels`;
  const passText = pr?.text || '';
  bar.innerHTML = `
    <input type="search" id="search" placeholder="search op / value / shape  ( / )" aria-label="search nodes" size="28">
    <span id="hits" class="muted"></span>
    <span class="mono" data-testid="ir-count">${which.toUpperCase()}: <b id="ir-nodes">${nOps}</b> ${which === 'lir' ? 'steps' : 'nodes'}</span>
    ${which === 'mir' ? `<span title="${esc(passText)}">${passLine}</span>
      <label><input type="checkbox" id="unfuse" ${unfuse ? 'checked' : ''}> unfuse (optimizer off)</label>
      <label><input type="checkbox" id="expand" ${ctx.expandRegions ? 'checked' : ''}> expand fused regions</label>` : ''}
    ${graph.inputs.length > 24 ? `<label><input type="checkbox" id="inputs" ${hideInputs ? '' : 'checked'}> show ${graph.inputs.length} inputs</label>` : ''}
    <button id="fit" title="fit (0)">fit</button>
    ${which === 'mir' && !unfuse ? '<span class="legend"><span class="native">native</span><span class="common_ir">common-IR</span><span class="rewritten">rewritten</span><span class="transfer">transfer</span> outline = fused op</span>' : ''}`;
  const wrap = document.createElement('div');
  wrap.className = 'graph-wrap';
  host.appendChild(wrap);
  const gv = new GraphView(wrap, {
    onSelect: (n) => showDetails(ctx.details, {
      n, graph,
      opInfo: n.node && ctx.opsInfo.find((o) => o.name === n.node.op),
      dispatch: n.index != null ? dmap.get(n.index) : null,
      step: n.index != null && steps.has(n.index) ? { index: steps.get(n.index), kernel: lir.steps[steps.get(n.index)].kernel } : null,
    }),
  });
  gv.render(flat, (n) => {
    if (n.kind === 'cluster') return { cls: 'fused-region' };
    if (n.kind !== 'op') return {};
    const cls = [];
    if (n.node && (fused.has(n.node.op) || n.fused)) cls.push('fused');
    const d = n.index != null ? dmap.get(n.index) : null;
    if (d) cls.push(`path-${d.path}`);
    return { cls: cls.join(' '), badge: d ? d.path.replace('_', '-') : which === 'lir' ? `s${n.index}` : '', title: d?.kernels?.join('\n') };
  });
  ctx.graphView = gv;
  const q = bar.querySelector('#search');
  q.addEventListener('input', () => { const h = gv.search(q.value); bar.querySelector('#hits').textContent = q.value ? `${h.length} found (Enter: next)` : ''; });
  q.addEventListener('keydown', (e) => { if (e.key === 'Enter') gv.nextHit(); });
  bar.querySelector('#fit').onclick = () => gv.fit();
  const on = (id, f) => bar.querySelector(id)?.addEventListener('change', f);
  on('#unfuse', (e) => ctx.set({ unfuse: e.target.checked ? '1' : '0' }));
  on('#expand', (e) => { ctx.expandRegions = e.target.checked; ctx.rerender(); });
  on('#inputs', (e) => { ctx.showInputs = e.target.checked; ctx.rerender(); });
}
