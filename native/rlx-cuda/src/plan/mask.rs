//! A keep-mask computed as `x != 0` (BERT's padding mask from the
//! attention-mask ids) is not stored when only attention nodes read it:
//! they read `x` itself, since a keep-mask keeps where it is non-zero and
//! `x != 0` is non-zero exactly where `x` is. One launch fewer per forward.

use super::*;

/// Whether value `u` is a constant scalar zero (its node already lowered).
fn scalar_zero(p: &Planner, u: ValueId) -> bool {
    let Some(n) = p.g.nodes.iter().find(|n| n.outputs.contains(&u)) else {
        return false;
    };
    n.op.name() == "constant"
        && n.attrs
            .tensor("value")
            .is_ok_and(|t| t.numel() == 1 && t.to_f64_vec().is_ok_and(|v| v[0] == 0.0))
}

/// Node `i`, `ne(x, 0)` (or `ne(0, x)`): if its output (directly or
/// through views) is read only as the custom keep-mask of attention
/// nodes and is no graph output, and `x` is a contiguous graph input or
/// constant with the output's dims, record that the attention reads `x` instead and emit nothing.
pub(super) fn fold_nonzero_mask(p: &mut Planner, i: usize, node: &Node) -> Result<bool, CudaError> {
    if node.op.name() != "ne" || node.inputs.len() != 2 || node.outputs.len() != 1 {
        return Ok(false);
    }
    let out = node.outputs[0];
    let x = match (node.inputs[0], node.inputs[1]) {
        (x, z) if scalar_zero(p, z) => x,
        (z, x) if scalar_zero(p, z) => x,
        _ => return Ok(false),
    };
    if p.inline.contains_key(&x) {
        return Ok(false);
    }
    let xl = p.loc(x)?;
    let ol = p.loc(out)?;
    // `x` must still hold its values when the attentions run: a graph
    // input or a constant (no kernel writes those), not an arena value
    // whose slot may be reused once this node has read it.
    let read_only = matches!(xl.root, Root::Input(_) | Root::Const(_));
    if !read_only || xl.dims != ol.dims || !xl.is_contiguous() || !ol.is_contiguous() {
        return Ok(false);
    }
    // The mask value and its views; every reader an attention taking it
    // as its custom mask (input 3) and nothing else.
    let mut values = vec![out];
    values.extend(
        p.view_base
            .iter()
            .filter(|&(_, &b)| b == out)
            .map(|(&v, _)| v),
    );
    if values.iter().any(|v| p.g.outputs.contains(v)) {
        return Ok(false);
    }
    for &v in &values {
        for &u in &p.users[v.index()] {
            let n = &p.g.nodes[u];
            let views_of_out = |w: &ValueId| values.contains(w);
            // The nodes making the views themselves run no kernel.
            if values.contains(&n.outputs[0]) && p.views.contains(&n.outputs[0]) {
                continue;
            }
            let ok = u > i
                && matches!(n.op.name(), "attention" | "attention_merged")
                && n.attrs.str("mask_kind").unwrap_or("none") == "custom"
                && n.inputs.len() == 4
                && !n.inputs[..3].iter().any(views_of_out);
            if !ok {
                return Ok(false);
            }
        }
    }
    if values.iter().all(|v| p.users[v.index()].is_empty()) {
        return Ok(false);
    }
    p.nonzero_masks.insert(out, (xl, ol));
    Ok(true)
}

/// Where attention reads mask value `m` (a view of a folded `x != 0`
/// reads `x` at the same element offsets: both are contiguous with the
/// same dims), else `m`'s own memory.
pub(super) fn mask_loc(p: &Planner, m: ValueId) -> Result<Loc, CudaError> {
    let l = p.loc(m)?;
    let base = p.view_base.get(&m).copied().unwrap_or(m);
    Ok(match p.nonzero_masks.get(&base) {
        Some((x, o)) => Loc {
            root: x.root,
            offset: x.offset + (l.offset - o.offset),
            dtype: x.dtype,
            ..l
        },
        None => l,
    })
}
