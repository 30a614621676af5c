// Dispatch: every node coloured by its path on the chosen device and
// policy, transfers drawn, the report as a table, both devices side by
// side, and — when the graph cannot compile — every unsupported node with
// its reasons and the fixes the compiler suggests.
import { GraphView } from '../graph-view.js';
import { flatten } from '../ir.js';
import { mapDispatch, pathCounts, parseDispatchError } from './dispatch-map.js';
import { showDetails } from './details.js';

const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const DEVICES = ['webgpu', 'cpu'];

function summary(device, c, policy) {
  if (c.error) {
    const p = c.error.code === 'dispatch' ? parseDispatchError(c.error.message) : { nodes: [] };
    return `<div class="card" data-device="${device}"><span class="muted">${device} · ${policy}</span>
      <b class="bad">does not compile</b>${p.nodes.length ? `${p.nodes.length} unsupported node(s): ${p.nodes.map((n) => `<code>${esc(n.op)}</code>`).join(', ')}` : esc(c.error.code)}</div>`;
  }
  const r = c.model.dispatchReport();
  const k = pathCounts(r);
  return `<div class="card" data-device="${device}"><span class="muted">${device} · ${policy}${r.routing ? ` · routed to ${esc(r.routing.chosen)}` : ''}</span>
    <b>${r.nodes.length} nodes</b>
    <span class="path native">${k.native} native</span> · <span class="path common_ir">${k.common_ir} common-IR</span> ·
    <span class="path rewritten">${k.rewritten} rewritten</span> · ${(r.transfers || []).length} transfers</div>`;
}

export function drawUnsupported(ctx, host, c) {
  // The graph as written, with the nodes that cannot run in red.
  const p = parseDispatchError(c.error.message);
  const graph = ctx.built.graph.json();
  const bad = new Set(p.nodes.map((n) => n.op));
  const wrap = document.createElement('div');
  wrap.className = 'graph-fixed';
  host.appendChild(wrap);
  const gv = new GraphView(wrap, { onSelect: (n) => showDetails(ctx.details, { n, graph, opInfo: n.node && ctx.opsInfo.find((o) => o.name === n.node.op) }) });
  gv.render(flatten(graph), (n) => (n.kind === 'op' && bad.has(n.node.op) ? { cls: 'path-unsupported', badge: 'unsupported' } : {}));
}

export async function renderDispatch(ctx, host) {
  const s = ctx.state;
  const both = {};
  for (const d of DEVICES) both[d] = await ctx.compiled(d, s.policy, { optimize: true });
  const c = both[s.device] || (await ctx.compiled(s.device, s.policy, { optimize: true }));
  const chain = !DEVICES.includes(s.device);
  host.innerHTML = `<div class="toolbar">
      <span>device</span>${[...DEVICES, 'webgpu,cpu'].map((d) => `<button data-dev="${d}" aria-pressed="${d === s.device}">${d.replace(',', ' → ')}</button>`).join('')}
      <span>policy <b>${esc(s.policy)}</b> (change it in the header)</span>
      <span class="legend"><span class="native">native</span><span class="common_ir">common-IR</span><span class="rewritten">rewritten</span><span class="unsupported">unsupported</span><span class="transfer">transfer</span></span>
    </div>
    <div class="pane"><div class="cards" id="dispatch-cards">${DEVICES.map((d) => summary(d, both[d], s.policy)).join('')}</div>
    ${chain && c.model ? `<div id="chain">Chain <b>${esc(s.device.replace(',', ' → '))}</b> compiled for <b>${esc(c.model.device)}</b>${(c.model.dispatchReport().fallback || []).map((f) => `; skipped <b>${esc(f.device)}</b>:<pre class="error">${esc(f.reason)}</pre>`).join('')}</div>` : ''}</div>`;
  host.querySelectorAll('[data-dev]').forEach((b) => (b.onclick = () => ctx.set({ device: b.dataset.dev })));
  const pane = document.createElement('div');
  pane.className = 'pane';

  if (c.error) {
    drawUnsupported(ctx, host, c);
    const p = c.error.code === 'dispatch' ? parseDispatchError(c.error.message) : { nodes: [], fixes: [] };
    pane.innerHTML = `<h3 class="bad">Cannot compile for ${esc(s.device)} (policy ${esc(s.policy)})</h3>
      <table id="unsupported"><tr><th>node</th><th>op</th><th>type</th><th>why not</th></tr>
      ${p.nodes.map((n) => `<tr data-op="${esc(n.op)}"><td class="num">${n.index}</td><td><code>${esc(n.op)}</code></td><td><code>${esc(n.type)}</code></td>
        <td>${n.reasons.map(([k, v]) => `<b>${esc(k)}</b>: ${esc(v)}`).join('<br>')}</td></tr>`).join('')}</table>
      ${p.fixes.length ? `<h4>What you can do</h4><ul id="fixes">${p.fixes.map((f) => `<li>${esc(f)}</li>`).join('')}</ul>` : ''}
      <details ${p.nodes.length ? '' : 'open'}><summary>the compiler's message</summary><pre class="error" id="dispatch-error">${esc(c.error.message)}</pre></details>`;
    host.appendChild(pane);
    return;
  }

  const model = c.model;
  const report = model.dispatchReport();
  const mir = model.ir('mir');
  const dmap = mapDispatch(mir, report);
  const wrap = document.createElement('div');
  wrap.className = 'graph-fixed';
  host.appendChild(wrap);
  const gv = new GraphView(wrap, {
    onSelect: (n) => showDetails(ctx.details, { n, graph: mir, opInfo: n.node && ctx.opsInfo.find((o) => o.name === n.node.op), dispatch: dmap.get(n.index) }),
  });
  const flat = flatten(mir, { hideInputs: mir.inputs.length > 24 });
  gv.render(flat, (n) => {
    const d = n.kind === 'op' ? dmap.get(n.index) : null;
    return d ? { cls: `path-${d.path}`, badge: d.path === 'transfer' ? (d.info ? `${d.info.from}→${d.info.to}` : '') : d.path.replace('_', '-'), title: d.transfer || (d.kernels || []).join('\n') } : {};
  });

  // Side by side: the same report node on each device (when both compiled).
  const other = DEVICES.find((d) => d !== model.device);
  const oRep = both[other].model ? both[other].model.dispatchReport() : null;
  pane.innerHTML = `
    ${report.routing ? `<p>Routing: chain ${esc(report.routing.chain.join(' → '))}, chose <b>${esc(report.routing.chosen)}</b> — ${esc(report.routing.reason)}</p>` : ''}
    <h3>Transfers (${(report.transfers || []).length})</h3>
    ${(report.transfers || []).length ? `<table id="transfers"><tr><th>value</th><th>from</th><th>to</th><th>bytes</th></tr>${report.transfers.map((t) => `<tr><td><code>${esc(t.value)}</code></td><td>${esc(t.from)}</td><td>${esc(t.to)}</td><td class="num">${t.bytes}</td></tr>`).join('')}</table>` : '<p class="muted">none: host memory</p>'}
    <h3>Report: ${esc(report.graph)} on ${esc(report.device)}</h3>
    <table id="dispatch-table"><tr><th>node</th><th>op</th><th>dtype</th><th>shape</th><th>${esc(model.device)} path</th><th>kernels</th>${oRep ? `<th>${esc(other)} path</th>` : ''}</tr>
    ${report.nodes.map((n, i) => `<tr><td class="num">${n.node}</td><td><code>${esc(n.op)}</code></td><td>${esc(n.dtype)}</td><td><code>[${(n.shape || []).join(',')}]</code></td>
      <td class="path ${esc(n.path)}">${esc(n.path)}${n.rewrite ? ` (${esc(n.rewrite)})` : ''}</td><td class="mono">${(n.kernels || []).map(esc).join('<br>')}</td>
      ${oRep ? `<td class="path ${esc(oRep.nodes[i]?.path)}">${oRep.nodes[i] && oRep.nodes[i].op === n.op ? esc(oRep.nodes[i].path) : '<span class="muted">(graphs differ)</span>'}</td>` : ''}</tr>`).join('')}
    </table>
    ${!oRep ? `<p><b>${esc(other)}</b>: does not compile — switch device to see why.</p>` : ''}`;
  host.appendChild(pane);
}
