//! `attention_merged` from the head merge after attention:
//! `reshape(permute(attention(q, k, v, ..)))` where the permute swaps the
//! heads and rows axes, (..., H, S, Dv) → (..., S, H, Dv), and the reshape
//! joins the last two, (..., S, H·Dv) — the layout the output projection
//! reads. The fused op writes that layout directly, so the strided copy
//! the reshape would make is never made. The intermediates must be read
//! only here. A reshape that drops leading unit axes may come between
//! attention and the permute (packed-QKV attention runs on (1, ...) views);
//! it is re-applied after the fused op, as a view.

use super::pattern::{closed, infer, prod, vanished};
use crate::rules::{Candidate, Rule, RuleCx};
use crate::simplify::perm_of;
use rlx_ir::{Attrs, Node};

/// The attention node whose merged heads the reshape candidate is, and
/// the reshape between them that drops leading unit axes, if any (what
/// packed-QKV attention on (1, ...) views leaves).
fn find<'a>(cx: &RuleCx<'a>, c: &Candidate) -> Option<(&'a Node, Option<&'a Node>)> {
    let p = prod(cx, c.inputs[0], "permute")?;
    let squeeze = prod(cx, p.inputs[0], "reshape").filter(|n| {
        let (from, to) = (cx.ty(n.inputs[0]).dims(), cx.ty(n.outputs[0]).dims());
        from.len() > to.len()
            && from[from.len() - to.len()..] == *to
            && from[..from.len() - to.len()].iter().all(|&d| d == 1)
    });
    let att = prod(
        cx,
        squeeze.map_or(p.inputs[0], |n| n.inputs[0]),
        "attention",
    )?;
    let r = cx.ty(p.inputs[0]).rank();
    if r < 3 {
        return None;
    }
    let perm = perm_of(&p.attrs, r)?;
    let swapped = (0..r).all(|i| {
        perm[i]
            == match i {
                _ if i == r - 3 => r - 2,
                _ if i == r - 2 => r - 3,
                _ => i,
            }
    });
    let mut interior = vec![p, att];
    interior.extend(squeeze);
    let types: Vec<_> = att.inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    // The merged result, with the unit axes the reshape drops still on.
    let merged = infer("attention_merged", &types, &att.attrs)?.remove(0);
    (swapped && merged.shape.numel() == c.out_types[0].shape.numel() && closed(cx, c, &interior))
        .then_some((att, squeeze))
}

/// `reshape(permute(attention))` merging the heads → `attention_merged`.
pub const ATTENTION_MERGED: Rule = Rule {
    name: "attention_merged",
    ops: &["reshape"],
    matches: |cx, c| find(cx, c).is_some(),
    replace: |em, c| {
        let (att, squeeze) = find(&em.cx(), c).ok_or_else(|| vanished("attention_merged"))?;
        let (ins, attrs) = (att.inputs.clone(), att.attrs.clone());
        if squeeze.is_none() {
            return em.emit("attention_merged", &ins, attrs);
        }
        // Then the leading unit axes dropped: a view.
        let y = em.emit1("attention_merged", &ins, attrs)?;
        let shape: Vec<i64> = c.out_types[0].dims().iter().map(|&d| d as i64).collect();
        em.emit("reshape", &[y], Attrs::new().with("shape", shape))
    },
    doc: "reshape(permute(attention)) merging the heads, (..., H, S, Dv) → (..., S, H·Dv) → attention_merged",
};
