// Lining the dispatch report up with the legalized MIR (`model.ir('mir')`).
// Each report node lists the MIR nodes it became (`mir_nodes`: one when
// native, its expansion otherwise); the explicit `transfer` nodes that
// legalization added are matched, in order, to the report's `transfers`.
export function mapDispatch(mir, report) {
  const byNode = new Map(); // MIR node index -> report node (+ transfer info)
  if (!report || !mir) return byNode;
  for (const d of report.nodes || []) for (const i of d.mir_nodes || []) byNode.set(i, d);
  const transfers = report.transfers || [];
  let t = 0;
  mir.nodes.forEach((n, i) => {
    if (n.op !== 'transfer' || byNode.has(i)) return;
    const tr = transfers[t++];
    byNode.set(i, { path: 'transfer', transfer: tr ? `${tr.value}: ${tr.from} → ${tr.to}, ${tr.bytes} B` : 'transfer', info: tr });
  });
  return byNode;
}

export function pathCounts(report) {
  const c = { native: 0, common_ir: 0, rewritten: 0 };
  for (const n of report?.nodes || []) c[n.path] = (c[n.path] || 0) + 1;
  return c;
}

// An RlxError of code 'dispatch' carries the Rust DispatchError text:
//   node 1 `argsort` (f32[2,8]):
//     native:    no kernel on this backend ...
//   what you can do:
//     - compile for `cpu`: ...
// Parsed into {nodes: [{index, op, type, reasons: [[path, why]]}], fixes: []}.
export function parseDispatchError(text) {
  const nodes = [], fixes = [];
  let cur = null, inFix = false;
  for (const line of String(text).split('\n')) {
    let m;
    if ((m = /^\s*node (\d+) `([^`]+)` \(([^)]*)\):/.exec(line))) { cur = { index: +m[1], op: m[2], type: m[3], reasons: [] }; nodes.push(cur); inFix = false; continue; }
    if (/^\s*what you can do/.test(line)) { inFix = true; continue; }
    if (inFix && (m = /^\s*-\s*(.*)$/.exec(line))) { fixes.push(m[1]); continue; }
    if (cur && !inFix && (m = /^\s+([a-z-]+):\s+(.*)$/.exec(line))) cur.reasons.push([m[1], m[2]]);
  }
  return { nodes, fixes };
}
