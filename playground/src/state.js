// View state lives in the URL hash (#model=minilm&device=webgpu&policy=...&view=mir)
// so any view can be shared; back/forward and reload restore it.
export const VIEWS = [
  ['hir', 'HIR'], ['mir', 'MIR + fusion'], ['lir', 'LIR'], ['dispatch', 'Dispatch'],
  ['memory', 'Memory'], ['kernels', 'Kernels'], ['run', 'Run'], ['chat', 'Chat (LLM)'],
];
const DEFAULTS = { model: 'minilm', device: 'webgpu', policy: 'prefer_native', view: 'mir', unfuse: '0', lang: 'wgsl', runs: '10' };
const POLICIES = ['prefer_native', 'common_ir_only', 'native_only'];

export function readState() {
  const p = new URLSearchParams(location.hash.slice(1));
  const s = { ...DEFAULTS };
  for (const k of Object.keys(DEFAULTS)) if (p.has(k)) s[k] = p.get(k);
  if (!VIEWS.some(([v]) => v === s.view)) s.view = DEFAULTS.view;
  if (!POLICIES.includes(s.policy)) s.policy = DEFAULTS.policy;
  if (!['cpu', 'webgpu', 'webgpu,cpu'].includes(s.device)) s.device = DEFAULTS.device;
  return s;
}

export function writeState(s) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(s)) if (v !== DEFAULTS[k] || k === 'model' || k === 'view') p.set(k, v);
  const h = '#' + p.toString();
  if (h !== location.hash) history.replaceState(null, '', h);
}
