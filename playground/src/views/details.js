// The details panel: everything known about one drawn node.
import { fmtType, fmtAttr, valueLabel, bodies } from '../ir.js';

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

// The package records where each builder call was made (a stack frame).
// Frames inside the editor's code are `<anonymous>:LINE:COL`; the code runs
// through `new Function` (two header lines) inside one wrapper line.
export const EDITOR_LINE_OFFSET = 3;
export function editorLine(origin) {
  const m = /<anonymous>:(\d+):(\d+)\)?\s*$/.exec(origin || '');
  return m ? Number(m[1]) - EDITOR_LINE_OFFSET : null;
}

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
  const line = editorLine(node.origin);
  const code = line != null ? (document.querySelector('#code')?.value.split('\n')[line - 1] || '') : '';
  row('source', line != null
    ? `<button class="link" data-line="${line}" id="source-line">editor line ${line}</button><br><code>${esc(code.trim().slice(0, 120))}</code>`
    : node.origin ? esc(node.origin) : '<span class="muted">– (made by a pass, not written by you)</span>');
  if (dispatch) {
    row('path', `<span class="path ${esc(dispatch.path)}">${esc(dispatch.path)}</span>` + (dispatch.rewrite ? ` (${esc(dispatch.rewrite)})` : ''));
    row('device', esc(dispatch.device || ''));
    row('kernels', (dispatch.kernels || []).map(esc).join('<br>'));
  }
  if (step) row('LIR step', `${step.index}: <code>${esc(step.kernel)}</code>`);
  host.innerHTML = `<h3>${esc(node.op)}</h3><dl>${rows.join('')}</dl>`;
  host.querySelector('[data-line]')?.addEventListener('click', (e) => showEditorLine(Number(e.target.dataset.line)));
}

// Open the editor and select that line.
export function showEditorLine(line) {
  const box = document.querySelector('#editor-box');
  const ta = document.querySelector('#code');
  if (!box || !ta) return;
  box.open = true;
  const lines = ta.value.split('\n');
  const start = lines.slice(0, line - 1).reduce((a, l) => a + l.length + 1, 0);
  ta.focus();
  ta.setSelectionRange(start, start + (lines[line - 1] || '').length);
  ta.scrollTop = Math.max(0, (line - 5) * 16);
}
