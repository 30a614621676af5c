//! Kernel-level fusions the lowering makes where the memory plan allows
//! them, saving a dispatch and a pass over memory each:
//!
//! * **residual add into the matmul epilogue**: `add(matmul(..), r)` whose
//!   matmul result feeds nothing else becomes one matmul kernel that adds
//!   `r` after the activation and stores straight into the add's output;
//! * **attention writing merged heads**: `reshape(permute(attention(..)))`
//!   — the head merge after attention, a strided copy — becomes the
//!   attention kernel storing through the permuted strides of the
//!   reshape's output.
//!
//! Both move a write to an earlier step, into memory the planner only
//! reserved from the later step on. That is safe when no kernel runs in
//! between (the two steps are adjacent kernel steps) and the moved write
//! does not overlap what the earlier kernel reads (checked on byte spans;
//! an in-place residual at identical positions is fine).

use crate::tref::{BufId, TensorRef};
use rlx_ir::lir::Program;
use rlx_ir::ValueId;
use std::collections::{HashMap, HashSet};

/// What the kernel loop does differently.
#[derive(Default)]
pub struct Fusions {
    /// matmul node → (add node, the add's other operand).
    pub residual: HashMap<usize, (usize, ValueId)>,
    /// attention node → where it writes: the (skipped) reshape's output,
    /// through the permuted strides.
    pub heads: HashMap<usize, TensorRef>,
    /// Nodes whose kernel is folded into an earlier one.
    pub skip: HashSet<usize>,
}

/// Byte span `[lo, hi)` of a tensor in its buffer.
fn span(r: &TensorRef) -> (BufId, i64, i64) {
    let eb = r.elem_bytes() as i64;
    let (mut lo, mut hi) = (r.offset, r.offset);
    for (&d, &s) in r.dims.iter().zip(&r.strides) {
        let ext = (d.max(1) as i64 - 1) * s;
        lo += ext.min(0);
        hi += ext.max(0);
    }
    (r.buf, lo * eb, (hi + 1) * eb)
}

fn overlap(a: &TensorRef, b: &TensorRef) -> bool {
    let (ba, la, ha) = span(a);
    let (bb, lb, hb) = span(b);
    ba == bb && la < hb && lb < ha && a.numel() > 0 && b.numel() > 0
}

/// Find the fusions of `p`, given where every value lives (`loc`) and which
/// values are views (no kernel of their own).
pub fn find(
    p: &Program,
    loc: &HashMap<ValueId, TensorRef>,
    is_view: &dyn Fn(ValueId) -> bool,
    has_kernel: &dyn Fn(usize) -> bool,
) -> Fusions {
    let g = &p.graph;
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    let mut user: HashMap<ValueId, usize> = HashMap::new();
    for (ni, n) in g.nodes.iter().enumerate() {
        for &v in &n.inputs {
            *uses.entry(v).or_default() += 1;
            user.insert(v, ni);
        }
    }
    for &v in &g.outputs {
        *uses.entry(v).or_default() += 2;
    }
    // The node of each kernel step, and the next kernel step's node.
    let order: Vec<usize> = p
        .steps
        .iter()
        .filter_map(|s| match s.nodes[..] {
            [ni] if has_kernel(ni) => Some(ni),
            _ => None,
        })
        .collect();
    let next: HashMap<usize, usize> = order.windows(2).map(|w| (w[0], w[1])).collect();
    let only_user = |v: ValueId| (uses.get(&v) == Some(&1)).then(|| user[&v]);
    let mut f = Fusions::default();
    for (&ni, &nj) in &next {
        let n = &g.nodes[ni];
        let m = &g.nodes[nj];
        // The moved write must not land on anything the kernel reads.
        let reads_clear = |out: &TensorRef| n.inputs.iter().all(|v| !overlap(&loc[v], out));
        match n.op.name() {
            "matmul" | "matmul_bias_act" if m.op.name() == "add" && !f.skip.contains(&ni) => {
                let o = n.outputs[0];
                if only_user(o) != Some(nj) || m.inputs.len() != 2 {
                    continue;
                }
                let other = if m.inputs[0] == o {
                    m.inputs[1]
                } else {
                    m.inputs[0]
                };
                let (out, res) = (&loc[&m.outputs[0]], &loc[&other]);
                // Ranks ≥ 2 throughout: the output is (batch..., m, n).
                let ranked = n.inputs[..2].iter().all(|v| loc[v].dims.len() >= 2);
                let same_dims = ranked && out.dims == loc[&o].dims;
                let res_ok = res == out || !overlap(res, out);
                if same_dims && out.is_contiguous() && res_ok && reads_clear(out) {
                    f.residual.insert(ni, (nj, other));
                    f.skip.insert(nj);
                }
            }
            "attention" if m.op.name() == "reshape" => {
                // attention → permute (a view) → reshape (this copy).
                let o = n.outputs[0];
                let Some(pi) = only_user(o) else { continue };
                let pn = &g.nodes[pi];
                let po = pn.outputs[0];
                if pn.op.name() != "permute" || !is_view(po) || only_user(po) != Some(nj) {
                    continue;
                }
                let Ok(perm) = pn.attrs.ints("perm") else {
                    continue;
                };
                let Some(dst) = heads_ref(&loc[&m.outputs[0]], &loc[&po].dims, perm) else {
                    continue;
                };
                if reads_clear(&dst) {
                    f.heads.insert(ni, dst);
                    f.skip.insert(nj);
                }
            }
            _ => {}
        }
    }
    f
}

/// The attention output as a strided view of the reshape's output: the
/// reshape's contiguous memory seen with the permuted value's dims, then
/// the permutation undone.
fn heads_ref(reshaped: &TensorRef, permuted_dims: &[usize], perm: &[i64]) -> Option<TensorRef> {
    let r = permuted_dims.len();
    let perm: Vec<usize> = perm
        .iter()
        .map(|&p| if p < 0 { p + r as i64 } else { p } as usize)
        .collect();
    if perm.len() != r || perm.iter().any(|&p| p >= r) {
        return None;
    }
    let base = reshaped.reshaped(permuted_dims)?;
    let mut inv = vec![0usize; r];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k;
    }
    Some(base.permuted(&inv))
}
