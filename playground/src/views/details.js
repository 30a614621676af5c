// The details panel: everything known about one drawn node.
import { fmtType, fmtAttr, valueLabel, bodies } from '../ir.js';

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

export function showDetails(host, { n, graph, opInfo, dispatch, step }) {
  if (!n || n.kind === 'cluster') return;
  const rows = [];
  const row = (k, v) => rows.push(`<dt>${esc(k)}</dt><dd>${v}</dd>`);
  if (n.kind !== 'op') {
    row('value', esc(n.label));
    row('type', esc(n.sub || ''));
    if (dispatch?.transfer) row('transfer', esc(dispatch.transfer));
    host.innerHTML = `<h3>${esc(n.kind)}</h3><dl>${rows.join('')}</dl>`;
    return;
  }
  const node = n.node;
  const g = n.inner != null ? graph.nodes[n.index].attrs && bodies(graph.nodes[n.index])[0][1] : graph;
  row('node', n.inner != null ? `${n.index}.${n.inner} (in the body of node ${n.index})` : String(n.index));
  row('op', `<b>${esc(node.op)}</b>`);
  if (opInfo) row('doc', esc(opInfo.doc || '') + (opInfo.category ? ` <span class="muted">(${esc(opInfo.category)}${opInfo.fused ? ', fused' : ''})</span>` : ''));
  row('inputs', node.inputs.map((v) => `${esc(valueLabel(g, v))}: ${esc(fmtType(g.values[v]?.ty))}`).join('<br>') || '–');
  row('outputs', node.outputs.map((v) => `${esc(valueLabel(g, v))}: ${esc(fmtType(g.values[v]?.ty))}`).join('<br>'));
  const attrs = Object.entries(node.attrs || {});
  row('attributes', attrs.length ? attrs.map(([k, a]) => `${esc(k)} = ${esc(fmtAttr(a))}`).join('<br>') : '–');
  row('origin', node.origin ? esc(node.origin) : '<span class="muted">– (not written through an HIR block)</span>');
  if (dispatch) {
    row('path', `<span class="path ${esc(dispatch.path)}">${esc(dispatch.path)}</span>` + (dispatch.rewrite ? ` (${esc(dispatch.rewrite)})` : ''));
    row('device', esc(dispatch.device || ''));
    row('kernels', (dispatch.kernels || []).map(esc).join('<br>'));
  }
  if (step) row('LIR step', `${step.index}: <code>${esc(step.kernel)}</code>`);
  host.innerHTML = `<h3>${esc(node.op)}</h3><dl>${rows.join('')}</dl>`;
}
