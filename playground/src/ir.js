// Reading the package's IR JSON: MIR (`Graph::to_json`), HIR (the same
// form, nodes carry `origin`) and LIR (`lir::Program`: a graph + steps).
// Everything the views draw comes from here.

export const fmtType = (ty) => (ty ? `${ty.dtype}[${(ty.shape || []).join(',')}]` : '?');

export function fmtBytes(n) {
  if (n == null) return '–';
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1 << 30) return `${(n / (1 << 20)).toFixed(2)} MiB`;
  return `${(n / (1 << 30)).toFixed(2)} GiB`;
}

// An attribute in its externally tagged JSON form ({"int": 3}) as text.
export function fmtAttr(a) {
  if (a == null || typeof a !== 'object') return String(a);
  const [k, v] = Object.entries(a)[0] || [];
  if (k === 'graph') return `graph @${v.name} (${v.nodes.length} nodes)`;
  if (k === 'tensor') return `tensor<${fmtType(v)}>`;
  if (Array.isArray(v)) return `[${v.join(', ')}]`;
  if (k === 'string') return JSON.stringify(v);
  return String(v);
}

export const valueLabel = (g, id) => {
  const v = g.values[id];
  return v && v.name ? `%${v.name}` : `%${id}`;
};

// A graph's sub-graph attributes (bodies of fused regions, if/while/scan).
export const bodies = (node) =>
  Object.entries(node.attrs || {}).filter(([, a]) => a && a.graph).map(([k, a]) => [k, a.graph]);

/**
 * Flatten a MIR graph into drawable nodes and edges.
 * Node ids: `n<i>` for op node i, `in<i>` for graph input i; nodes of an
 * expanded body get `n<i>.<j>` and a `parent` (the fused node's cluster).
 * opts.expand: Set of node indices whose body is drawn instead of the node.
 * opts.hideInputs: don't draw graph inputs (weights) as nodes.
 */
export function flatten(g, opts = {}) {
  const nodes = [];
  const edges = [];
  const producer = new Map(); // value id -> drawable node id
  g.inputs.forEach((v, i) => {
    if (!opts.hideInputs) {
      nodes.push({ id: `in${i}`, kind: 'input', label: valueLabel(g, v), sub: fmtType(g.values[v].ty), value: v });
      producer.set(v, `in${i}`);
    }
  });
  g.nodes.forEach((n, i) => {
    const body = opts.expand && opts.expand.has(i) ? bodies(n)[0] : null;
    if (body) {
      const [, b] = body;
      const cluster = `c${i}`;
      nodes.push({ id: cluster, kind: 'cluster', label: `${n.op} (unfused)`, index: i });
      const inner = new Map();
      b.inputs.forEach((v, k) => inner.set(v, producer.get(n.inputs[k])));
      b.nodes.forEach((bn, j) => {
        const id = `n${i}.${j}`;
        nodes.push({ id, kind: 'op', label: bn.op, sub: fmtType(b.values[bn.outputs[0]]?.ty), parent: cluster, index: i, inner: j, node: bn });
        bn.inputs.forEach((v) => inner.get(v) && edges.push({ from: inner.get(v), to: id, value: v }));
        bn.outputs.forEach((v) => inner.set(v, id));
      });
      n.outputs.forEach((v, k) => producer.set(v, inner.get(b.outputs[k])));
      return;
    }
    const id = `n${i}`;
    // search text: the op, its input and output names (weights are found by name even when hidden)
    const hay = [n.op, ...n.inputs.map((v) => valueLabel(g, v)), ...n.outputs.map((v) => valueLabel(g, v))].join(' ');
    nodes.push({ id, kind: 'op', label: n.op, sub: fmtType(g.values[n.outputs[0]]?.ty), index: i, node: n, fused: bodies(n).length > 0, hay });
    n.inputs.forEach((v) => producer.has(v) && edges.push({ from: producer.get(v), to: id, value: v }));
    n.outputs.forEach((v) => producer.set(v, id));
  });
  g.outputs.forEach((v, i) => {
    nodes.push({ id: `out${i}`, kind: 'output', label: `return ${valueLabel(g, v)}`, sub: fmtType(g.values[v].ty), value: v });
    if (producer.has(v)) edges.push({ from: producer.get(v), to: `out${i}`, value: v });
  });
  return { nodes, edges };
}

// For an LIR program: which step runs MIR node i, and the steps that run
// more than one node (fused at schedule time).
export function stepOfNode(lir) {
  const m = new Map();
  (lir?.steps || []).forEach((s, k) => (s.nodes || []).forEach((n) => m.set(n, k)));
  return m;
}

// An LIR program as a graph of steps (one drawable node per kernel launch),
// so the same view draws it. A view value is wired to the step that wrote
// its base buffer.
export function lirAsGraph(lir, mir) {
  // The package's LIR JSON has no graph of its own: values are the MIR's.
  const g = lir.graph || mir;
  const base = new Map((lir.views || []).map((v) => [v.value, v.base]));
  const root = (v) => { const seen = new Set(); while (base.has(v) && !seen.has(v)) { seen.add(v); v = base.get(v); } return v; };
  const values = g.values.map((v) => ({ ...v }));
  const nodes = lir.steps.map((s) => ({
    op: s.kernel,
    inputs: s.inputs.map(root),
    outputs: s.outputs,
    attrs: { nodes: { ints: s.nodes } },
    step: s,
  }));
  return { name: g.name, values, nodes, inputs: g.inputs, outputs: g.outputs.map(root) };
}
