// Lining the dispatch report up with the legalized MIR.
// The report (schema 1) numbers nodes of the optimized graph *before*
// legalization; `model.ir('mir')` is after it: explicit `transfer` nodes are
// added and a common-IR / rewritten node becomes the nodes of its
// expansion (its `kernels` list, in execution order). So: walk the MIR,
// transfers map to the report's `transfers`, and each report node claims
// one MIR node (native) or as many as it lists kernels (otherwise).
export function mapDispatch(mir, report) {
  const byNode = new Map(); // MIR node index -> report node (+ transfer info)
  if (!report || !mir) return byNode;
  const rn = report.nodes || [];
  const transfers = report.transfers || [];
  let r = 0, t = 0;
  for (let i = 0; i < mir.nodes.length; i++) {
    const n = mir.nodes[i];
    if (n.op === 'transfer') {
      const tr = transfers[t++];
      byNode.set(i, { path: 'transfer', transfer: tr ? `${tr.value}: ${tr.from} → ${tr.to}, ${tr.bytes} B` : 'transfer', info: tr });
      continue;
    }
    const d = rn[r];
    if (!d) break;
    const span = d.path === 'native' || n.op === d.op ? 1 : Math.max(1, (d.kernels || []).length);
    for (let k = 0; k < span && i + k < mir.nodes.length; k++) byNode.set(i + k, d);
    i += span - 1;
    r++;
  }
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
