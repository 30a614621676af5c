//! `attention_merged` from the head merge after attention:
//! `reshape(permute(attention(q, k, v, ..)))` where the permute swaps the
//! heads and rows axes, (..., H, S, Dv) → (..., S, H, Dv), and the reshape
//! joins the last two, (..., S, H·Dv) — the layout the output projection
//! reads. The fused op writes that layout directly, so the strided copy
//! the reshape would make is never made. The intermediates must be read
//! only here. A reshape that drops leading unit axes may come between
//! attention and the permute (packed-QKV attention runs on (1, ...) views),
//! and the final reshape may give another shape than (..., S, H·Dv) (rows
//! of the whole batch): the fused op is then followed by that reshape, a
//! view.

use super::pattern::{closed, prod, vanished};
use crate::rules::{Candidate, Rule, RuleCx};
use crate::simplify::perm_of;
use rlx_ir::{Attrs, Node};

/// The attention node whose merged heads the reshape candidate is,
/// possibly through a reshape that drops leading unit axes (what
/// packed-QKV attention on (1, ...) views leaves).
fn find<'a>(cx: &RuleCx<'a>, c: &Candidate) -> Option<&'a Node> {
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
    let mut heads_swapped: Vec<usize> = (0..r).collect();
    heads_swapped.swap(r - 3, r - 2);
    let mut interior = vec![p, att];
    interior.extend(squeeze);
    // The merged result has the permuted value's elements in its row-major
    // order, so any reshape of that value is a reshape of it.
    (perm_of(&p.attrs, r)? == heads_swapped && closed(cx, c, &interior)).then_some(att)
}

/// `reshape(permute(attention))` merging the heads → `attention_merged`.
pub const ATTENTION_MERGED: Rule = Rule {
    name: "attention_merged",
    ops: &["reshape"],
    matches: |cx, c| find(cx, c).is_some(),
    replace: |em, c| {
        let att = find(&em.cx(), c).ok_or_else(|| vanished("attention_merged"))?;
        let (ins, attrs) = (att.inputs.clone(), att.attrs.clone());
        let y = em.emit1("attention_merged", &ins, attrs)?;
        if *em.cx().ty(y) == c.out_types[0] {
            return Ok(vec![y]);
        }
        // Another shape of the same elements (leading unit axes dropped,
        // rows of the whole batch): a reshape of the merged result, a view.
        let shape: Vec<i64> = c.out_types[0].dims().iter().map(|&d| d as i64).collect();
        em.emit("reshape", &[y], Attrs::new().with("shape", shape))
    },
    doc: "reshape(permute(attention)) merging the heads, (..., H, S, Dv) → (..., S, H·Dv) → attention_merged",
};
