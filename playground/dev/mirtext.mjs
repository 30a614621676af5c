// Dev-only: turns the CLI's MIR text (docs/TEXT_IR.md) into the MIR JSON
// form (`Graph::to_json`), so the fixtures have the package's shapes. The
// shipped app never parses text: it reads `model.ir(...)` JSON.

function parseType(s) {
  const m = /^\s*([a-z0-9_]+)\[([^\]]*)\]\s*$/.exec(s);
  if (!m) throw new Error(`bad type ${s}`);
  return { dtype: m[1], shape: m[2].trim() ? m[2].split(',').map(Number) : [] };
}

// Split at top-level commas (outside (), [], {}, <>, strings).
function splitTop(s, sep = ',') {
  const out = [];
  let depth = 0, cur = '', str = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (str) { cur += c; if (c === '\\') { cur += s[++i]; } else if (c === '"') str = false; continue; }
    if (c === '"') { str = true; cur += c; continue; }
    if ('([{<'.includes(c)) depth++;
    if (')]}>'.includes(c)) depth--;
    if (c === sep && depth === 0) { out.push(cur); cur = ''; continue; }
    cur += c;
  }
  if (cur.trim()) out.push(cur);
  return out.map((x) => x.trim());
}

// Index of the bracket closing the one opened at `open`.
function matchClose(s, open) {
  const o = s[open], c = { '(': ')', '[': ']', '{': '}', '<': '>' }[o];
  let depth = 0, str = false;
  for (let i = open; i < s.length; i++) {
    const ch = s[i];
    if (str) { if (ch === '\\') i++; else if (ch === '"') str = false; continue; }
    if (ch === '"') { str = true; continue; }
    if (ch === o) depth++;
    else if (ch === c && --depth === 0) return i;
  }
  throw new Error(`unclosed ${o} in ${s.slice(open, open + 80)}`);
}

function parseAttr(v) {
  v = v.trim();
  if (v.startsWith('graph ')) return { graph: parseGraph(v) };
  if (v.startsWith('tensor<')) {
    const close = matchClose(v, 6);
    const ty = parseType(v.slice(7, close));
    const data = JSON.parse(v.slice(close + 1).trim().replace(/\bnan\b/g, 'null').replace(/-?\binf\b/g, 'null'));
    return { tensor: { ...ty, data } };
  }
  if (v.startsWith('"')) return { string: JSON.parse(v) };
  if (v === 'true' || v === 'false') return { bool: v === 'true' };
  if (v.startsWith('[')) {
    const items = splitTop(v.slice(1, -1));
    if (items.some((x) => /[.eE]|nan|inf/.test(x))) return { floats: items.map(Number) };
    return { ints: items.map(Number) };
  }
  if (/^-?\d+$/.test(v)) return { int: Number(v) };
  if (/^-?[\d.]+(e[-+]?\d+)?$|^-?inf$|^nan$/i.test(v)) return { float: Number(v) };
  return { dtype: v };
}

export function parseGraph(text) {
  text = text.replace(/\/\/[^\n]*/g, '');
  const head = /graph\s+@([A-Za-z0-9_.]+)\s*\(/.exec(text);
  if (!head) throw new Error('no graph header');
  const po = head.index + head[0].length - 1;
  const pc = matchClose(text, po);
  const bo = text.indexOf('{', pc);
  const bc = matchClose(text, bo);
  const g = { name: head[1], values: [], nodes: [], inputs: [], outputs: [] };
  const ids = new Map();
  const define = (name, ty, def) => {
    const id = g.values.length;
    const v = { ty, def };
    if (!/^\d+$/.test(name)) v.name = name;
    g.values.push(v);
    ids.set(name, id);
    return id;
  };
  splitTop(text.slice(po + 1, pc)).forEach((p, i) => {
    const [n, t] = [p.slice(0, p.indexOf(':')), p.slice(p.indexOf(':') + 1)];
    g.inputs.push(define(n.trim().slice(1), parseType(t), { input: i }));
  });
  // Statements: split the body at newlines that are at brace depth 0.
  const body = text.slice(bo + 1, bc);
  const stmts = [];
  let depth = 0, cur = '', str = false;
  for (const ch of body) {
    if (str) { cur += ch; if (ch === '"') str = false; continue; }
    if (ch === '"') str = true;
    if (ch === '{') depth++;
    if (ch === '}') depth--;
    if (ch === '\n' && depth === 0) { if (cur.trim()) stmts.push(cur.trim()); cur = ''; continue; }
    cur += ch;
  }
  if (cur.trim()) stmts.push(cur.trim());
  const ref = (r) => {
    const n = r.trim().slice(1);
    if (!ids.has(n)) throw new Error(`unknown value %${n}`);
    return ids.get(n);
  };
  for (const s of stmts) {
    if (s.startsWith('return')) {
      g.outputs = splitTop(s.slice(6)).map(ref);
      continue;
    }
    const eq = s.indexOf('=');
    const lhs = s.slice(0, eq).split(',').map((x) => x.trim().slice(1));
    let rest = s.slice(eq + 1).trim();
    const op = /^[a-z0-9_]+/.exec(rest)[0];
    const ao = rest.indexOf('(');
    const ac = matchClose(rest, ao);
    const inputs = splitTop(rest.slice(ao + 1, ac)).map(ref);
    rest = rest.slice(ac + 1).trim();
    const attrs = {};
    if (rest.startsWith('{')) {
      const c = matchClose(rest, 0);
      for (const kv of splitTop(rest.slice(1, c))) {
        const k = kv.slice(0, kv.indexOf('='));
        attrs[k.trim()] = parseAttr(kv.slice(kv.indexOf('=') + 1));
      }
      rest = rest.slice(c + 1).trim();
    }
    const types = rest.startsWith(':') ? splitTop(rest.slice(1)).map(parseType) : lhs.map(() => ({ dtype: 'f32', shape: [] }));
    const node = g.nodes.length;
    const outputs = lhs.map((n, i) => define(n, types[i], { node: { node, output: i } }));
    const nd = { op, inputs, outputs };
    if (Object.keys(attrs).length) nd.attrs = attrs;
    g.nodes.push(nd);
  }
  return g;
}
