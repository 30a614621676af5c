// The interactive graph: dagre layout into SVG, zoom/pan (wheel, drag,
// keys), search, click/Enter for details. One drawable node per IR node,
// marked `data-kind="op"` so tests can count them against the IR.
import dagre from '@dagrejs/dagre';

const SVG = 'http://www.w3.org/2000/svg';
const el = (tag, attrs = {}, parent) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
};

export class GraphView {
  constructor(host, { onSelect } = {}) {
    this.host = host;
    this.onSelect = onSelect || (() => {});
    this.svg = el('svg', { class: 'graph-svg', tabindex: '0', role: 'application', 'aria-label': 'graph (arrows pan, + and - zoom, 0 fits)' }, host);
    this.root = el('g', {}, this.svg);
    this.t = { x: 0, y: 0, k: 1 };
    this.items = new Map();
    this.installPanZoom();
  }

  /**
   * flat: {nodes, edges} from ir.flatten; decorate(node) -> {cls, badge, title}
   * extra: optional [{from, to, cls, label}] drawn dashed (transfers).
   */
  render(flat, decorate = () => ({}), extra = []) {
    this.root.replaceChildren();
    this.fitWhole = null;
    this.items.clear();
    this.flat = flat;
    const g = new dagre.graphlib.Graph({ compound: true });
    g.setGraph({ rankdir: 'TB', nodesep: 18, ranksep: 28, marginx: 20, marginy: 20 });
    g.setDefaultEdgeLabel(() => ({}));
    const deco = new Map(flat.nodes.map((n) => [n.id, decorate(n) || {}]));
    for (const n of flat.nodes) {
      if (n.kind === 'cluster') { g.setNode(n.id, { label: n.label, clusterLabelPos: 'top', paddingTop: 18 }); continue; }
      const badge = deco.get(n.id).badge || '';
      const w = Math.max(90, 7.3 * Math.max(n.label.length + (badge ? badge.length * 0.85 + 2 : 0), (n.sub || '').length) + 18);
      g.setNode(n.id, { width: Math.min(w, 260), height: n.kind === 'op' ? 38 : 30 });
    }
    for (const n of flat.nodes) if (n.parent) g.setParent(n.id, n.parent);
    for (const e of flat.edges) if (g.hasNode(e.from) && g.hasNode(e.to)) g.setEdge(e.from, e.to);
    for (const x of extra) if (g.hasNode(x.from) && g.hasNode(x.to) && !g.hasEdge(x.from, x.to)) g.setEdge(x.from, x.to);
    dagre.layout(g);

    const clusters = el('g', { class: 'clusters' }, this.root);
    const edgesG = el('g', { class: 'edges' }, this.root);
    const nodesG = el('g', { class: 'nodes' }, this.root);
    const line = (pts) => 'M' + pts.map((p) => `${p.x},${p.y}`).join('L');
    for (const e of flat.edges) {
      const le = g.edge(e.from, e.to);
      if (le) el('path', { d: line(le.points), class: 'edge', 'marker-end': 'url(#arrow)' }, edgesG);
    }
    for (const x of extra) {
      const le = g.edge(x.from, x.to);
      if (!le) continue;
      const p = el('path', { d: line(le.points), class: `edge ${x.cls || ''}` }, edgesG);
      if (x.label) {
        const mid = le.points[Math.floor(le.points.length / 2)];
        const t = el('text', { x: mid.x + 4, y: mid.y, class: `edge-label ${x.cls || ''}` }, edgesG);
        t.textContent = x.label;
        p.appendChild(el('title')).textContent = x.label;
      }
    }
    const defs = el('defs', {}, this.root);
    const m = el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' }, defs);
    el('path', { d: 'M0,0L10,5L0,10z', class: 'arrow' }, m);

    for (const n of flat.nodes) {
      const ln = g.node(n.id);
      if (!ln) continue;
      const d = deco.get(n.id);
      if (n.kind === 'cluster') {
        const c = el('g', { class: `cluster ${d.cls || ''}`, 'data-kind': 'cluster' }, clusters);
        el('rect', { x: ln.x - ln.width / 2, y: ln.y - ln.height / 2, width: ln.width, height: ln.height, rx: 6 }, c);
        const t = el('text', { x: ln.x - ln.width / 2 + 6, y: ln.y - ln.height / 2 + 13, class: 'cluster-label' }, c);
        t.textContent = d.label || n.label;
        continue;
      }
      const gNode = el('g', {
        class: `node kind-${n.kind} ${d.cls || ''}`,
        'data-kind': n.kind,
        'data-id': n.id,
        transform: `translate(${ln.x - ln.width / 2},${ln.y - ln.height / 2})`,
        tabindex: n.kind === 'op' ? '0' : '-1',
        role: 'button',
      }, nodesG);
      el('rect', { width: ln.width, height: ln.height, rx: n.kind === 'op' ? 4 : 14 }, gNode);
      const t1 = el('text', { x: 8, y: n.sub ? 15 : 19, class: 'label' }, gNode);
      t1.textContent = n.label.length > 34 ? n.label.slice(0, 33) + '…' : n.label;
      if (n.sub) {
        const t2 = el('text', { x: 8, y: 30, class: 'sub' }, gNode);
        t2.textContent = n.sub;
      }
      if (d.badge) {
        const b = el('text', { x: ln.width - 6, y: 13, class: 'badge', 'text-anchor': 'end' }, gNode);
        b.textContent = d.badge;
      }
      el('title', {}, gNode).textContent = d.title || `${n.label} ${n.sub || ''}`;
      const pick = () => this.select(n.id);
      gNode.addEventListener('click', pick);
      gNode.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); pick(); } });
      this.items.set(n.id, { n, el: gNode, x: ln.x, y: ln.y });
    }
    const gi = g.graph();
    this.size = { w: gi.width || 100, h: gi.height || 100 };
    this.fit();
  }

  select(id, { center = false } = {}) {
    for (const it of this.items.values()) it.el.classList.toggle('selected', it.n.id === id);
    const it = this.items.get(id);
    if (!it) return;
    if (center) this.centerOn(it);
    this.selected = id;
    this.onSelect(it.n);
  }

  // Highlight nodes whose op, value names or shape contain q; returns matches.
  search(q) {
    q = q.trim().toLowerCase();
    const hits = [];
    for (const it of this.items.values()) {
      const hay = `${it.n.label} ${it.n.sub || ''} ${it.n.hay || ''}`.toLowerCase();
      const hit = q && hay.includes(q);
      it.el.classList.toggle('hit', !!hit);
      if (hit) hits.push(it.n.id);
    }
    this.hits = hits;
    this.hitIdx = -1;
    return hits;
  }

  nextHit() {
    if (!this.hits || !this.hits.length) return;
    this.hitIdx = (this.hitIdx + 1) % this.hits.length;
    this.select(this.hits[this.hitIdx], { center: true });
  }

  apply() { this.root.setAttribute('transform', `translate(${this.t.x},${this.t.y}) scale(${this.t.k})`); }

  fit() {
    const r = this.svg.getBoundingClientRect();
    const W = r.width || 800, H = r.height || 600;
    const k = Math.min(W / this.size.w, H / this.size.h, 1.1);
    if (k >= 0.45) {
      this.t = { k, x: (W - this.size.w * k) / 2, y: (H - this.size.h * k) / 2 };
    } else {
      // A big graph (MiniLM) fitted whole is unreadable: start readable at
      // its first op, and let pan/zoom/search do the rest (0 = whole graph).
      const first = [...this.items.values()].filter((it) => it.n.kind === 'op').sort((a, b) => a.y - b.y)[0];
      const kk = 0.8;
      this.t = { k: kk, x: first ? W / 2 - first.x * kk : 10, y: first ? 60 - first.y * kk : 10 };
      this.fitWhole = () => { this.t = { k, x: (W - this.size.w * k) / 2, y: (H - this.size.h * k) / 2 }; this.apply(); };
    }
    this.apply();
  }

  centerOn(it) {
    const r = this.svg.getBoundingClientRect();
    this.t.k = Math.max(this.t.k, 0.8);
    this.t.x = r.width / 2 - it.x * this.t.k;
    this.t.y = r.height / 2 - it.y * this.t.k;
    this.apply();
  }

  zoom(f, cx, cy) {
    const r = this.svg.getBoundingClientRect();
    cx = cx ?? r.width / 2; cy = cy ?? r.height / 2;
    const k = Math.min(4, Math.max(0.05, this.t.k * f));
    this.t.x = cx - ((cx - this.t.x) * k) / this.t.k;
    this.t.y = cy - ((cy - this.t.y) * k) / this.t.k;
    this.t.k = k;
    this.apply();
  }

  installPanZoom() {
    const s = this.svg;
    s.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = s.getBoundingClientRect();
      this.zoom(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
    }, { passive: false });
    let drag = null;
    s.addEventListener('pointerdown', (e) => {
      if (e.target.closest('.node')) return;
      drag = { x: e.clientX, y: e.clientY, tx: this.t.x, ty: this.t.y };
      s.setPointerCapture(e.pointerId);
    });
    s.addEventListener('pointermove', (e) => {
      if (!drag) return;
      this.t.x = drag.tx + e.clientX - drag.x;
      this.t.y = drag.ty + e.clientY - drag.y;
      this.apply();
    });
    s.addEventListener('pointerup', () => { drag = null; });
    s.addEventListener('keydown', (e) => {
      const step = 60;
      const keys = {
        ArrowLeft: () => (this.t.x += step), ArrowRight: () => (this.t.x -= step),
        ArrowUp: () => (this.t.y += step), ArrowDown: () => (this.t.y -= step),
        '+': () => this.zoom(1.2), '=': () => this.zoom(1.2), '-': () => this.zoom(1 / 1.2), '0': () => (this.fitWhole ? this.fitWhole() : this.fit()),
      };
      if (e.target !== s && e.key.startsWith('Arrow')) return;
      if (keys[e.key]) { e.preventDefault(); keys[e.key](); this.apply(); }
    });
  }
}
