//! `attention` from `softmax(q @ kᵀ · scale [+ mask]) @ v`.
//!
//! The scores are `matmul(q, kt)` times a scalar constant (`mul`, either
//! order, or `div` by one; none means scale 1), then optionally masked:
//!
//! * `scores + bias` (a float mask of the scores' type at most) → mask_kind
//!   `bias` (also `matmul_bias_act{none}(q, kt, bias)` and
//!   `matmul_residual{none}(q, kt, bias)`, what `matmul_bias` and
//!   `matmul_residual` make of an unscaled `q @ kt + bias`);
//! * `where(keep, scores, -inf)` → `causal` or `sliding_window` when `keep`
//!   is the constant those kinds stand for, else `custom` with `keep`.
//!
//! The softmax runs over the last axis. When `kt` is a `permute` of some
//! `x`, `k` is `x` permuted with the last two axes swapped back — `x`
//! itself for the usual transpose, one permute otherwise (what `simplify`
//! leaves of a head split followed by a transpose); when `kt` is anything
//! else, `k` is a permute of it. A scale equal to 1/√d (in the dtype) is left as the default.

use super::pattern::{closed, prod, round_to, scalar, vanished, with_scalar};
use crate::error::OptError;
use crate::rules::{Candidate, Emitter, Rule, RuleCx};
use crate::simplify::perm_of;
use rlx_ir::ops::fused::attention_mask;
use rlx_ir::shape::normalize_axis;
use rlx_ir::{Attrs, Node, ValueId};

/// What the pattern matched.
struct Found {
    q: ValueId,
    /// `k` is `src` permuted by `perm` (`None`: `src` itself).
    src: ValueId,
    perm: Option<Vec<i64>>,
    v: ValueId,
    mask: Option<ValueId>,
    attrs: Attrs,
}

/// `q @ kt · scale`: `(q, kt, scale, bias of a fused epilogue, nodes)`.
type Scores<'a> = (ValueId, ValueId, f64, Option<ValueId>, Vec<&'a Node>);

fn scores<'a>(cx: &RuleCx<'a>, s: ValueId) -> Option<Scores<'a>> {
    let (mm_v, scale, mut nodes) = match with_scalar(cx, s, "mul", true) {
        Some((m, c, n)) => (m, c, vec![n]),
        None => match with_scalar(cx, s, "div", false) {
            Some((m, c, n)) => (m, 1.0 / c, vec![n]),
            None => (s, 1.0, vec![]),
        },
    };
    if let Some(mm) = prod(cx, mm_v, "matmul") {
        nodes.push(mm);
        return Some((mm.inputs[0], mm.inputs[1], scale, None, nodes));
    }
    // An unscaled `q @ kt + bias` is an epilogue already: a per-column bias
    // (`matmul_bias`) or one of the scores' own type (`matmul_residual`).
    let epilogue = |n: &&Node| {
        n.inputs.len() == 3 && n.attrs.str("activation").ok() == Some("none") && nodes.is_empty()
    };
    let mba = prod(cx, mm_v, "matmul_bias_act")
        .filter(epilogue)
        .or_else(|| prod(cx, mm_v, "matmul_residual").filter(epilogue))?;
    nodes.push(mba);
    Some((
        mba.inputs[0],
        mba.inputs[1],
        scale,
        Some(mba.inputs[2]),
        nodes,
    ))
}

/// The mask kind a constant (Sq, Sk) keep-mask stands for, with its window.
fn builtin_kind(cx: &RuleCx, keep: ValueId, scores: &[usize]) -> Option<(&'static str, i64)> {
    let t = cx.constant(keep)?;
    let &[sq, sk] = t.shape().dims() else {
        return None;
    };
    if scores[scores.len() - 2..] != [sq, sk] {
        return None;
    }
    let m: Vec<bool> = t.to_i64_vec().ok()?.iter().map(|&b| b != 0).collect();
    if attention_mask("causal", sq, sk, 0).as_deref() == Some(&m[..]) {
        return Some(("causal", 0));
    }
    let off = sk as i64 - sq as i64;
    let window = (0..sq * sk)
        .filter(|&i| m[i])
        .map(|i| (i / sk) as i64 + off - (i % sk) as i64 + 1)
        .max()?;
    (window > 0 && attention_mask("sliding_window", sq, sk, window).as_deref() == Some(&m[..]))
        .then_some(("sliding_window", window))
}

fn find(cx: &RuleCx, c: &Candidate) -> Option<Found> {
    let [p, v] = [c.inputs[0], c.inputs[1]];
    let sm = prod(cx, p, "softmax")?;
    let s = sm.inputs[0];
    let rank = cx.ty(s).rank();
    if rank < 2 || normalize_axis(sm.attrs.int("axis").ok()?, rank).ok()? + 1 != rank {
        return None;
    }
    let mut nodes = vec![sm];
    let mut attrs = Attrs::new();
    let (mut mask, mut kind) = (None, "none");
    let mut inner = s;
    if let Some(w) = prod(cx, s, "where") {
        let minus_inf = scalar(cx, w.inputs[2]) == Some(f64::NEG_INFINITY);
        if !minus_inf || cx.ty(w.inputs[1]) != cx.ty(s) {
            return None;
        }
        nodes.push(w);
        inner = w.inputs[1];
        match builtin_kind(cx, w.inputs[0], cx.ty(s).dims()) {
            Some((k, window)) => {
                kind = k;
                attrs.set("window", window);
            }
            None => (kind, mask) = ("custom", Some(w.inputs[0])),
        }
    } else if let Some(a) = prod(cx, s, "add") {
        let split = [(a.inputs[0], a.inputs[1]), (a.inputs[1], a.inputs[0])]
            .into_iter()
            .find(|&(sc, _)| cx.ty(sc) == cx.ty(s) && scores(cx, sc).is_some())?;
        nodes.push(a);
        (inner, kind, mask) = (split.0, "bias", Some(split.1));
    }
    let (q, kt, scale, bias, more) = scores(cx, inner)?;
    if bias.is_some() {
        if mask.is_some() {
            return None;
        }
        (kind, mask) = ("bias", bias);
    }
    nodes.extend(more);
    let (src, perm) = key_source(cx, kt)?;
    attrs.set("mask_kind", kind);
    let (dt, d) = (cx.ty(q).dtype, *cx.ty(q).dims().last()?);
    if round_to(scale, dt) != round_to(1.0 / (d as f64).sqrt(), dt) {
        attrs.set("scale", scale);
    }
    let mut types: Vec<_> = [q, src, v]
        .iter()
        .chain(&mask)
        .map(|&x| cx.ty(x).clone())
        .collect();
    if let Some(p) = &perm {
        let dims = types[1].dims().to_vec();
        types[1].shape = p
            .iter()
            .map(|&a| dims[a as usize])
            .collect::<Vec<_>>()
            .into();
    }
    let ok = super::pattern::infer("attention", &types, &attrs).is_some_and(|t| t == c.out_types);
    (ok && closed(cx, c, &nodes)).then_some(Found {
        q,
        src,
        perm,
        v,
        mask,
        attrs,
    })
}

/// `k` for scores `q @ kt`: `kt` is `permute(x, p)` (then `k` is `x`
/// permuted by `p` with its last two axes swapped, which may be `x`
/// itself) or anything else (then `k` is `kt` with its last two swapped).
fn key_source(cx: &RuleCx, kt: ValueId) -> Option<(ValueId, Option<Vec<i64>>)> {
    let rank = cx.ty(kt).rank();
    if rank < 2 {
        return None;
    }
    let (src, mut perm) = match prod(cx, kt, "permute") {
        Some(n) => (n.inputs[0], perm_of(&n.attrs, rank)?),
        None => (kt, (0..rank).collect()),
    };
    perm.swap(rank - 2, rank - 1);
    let identity = perm.iter().enumerate().all(|(i, &p)| i == p);
    Some((
        src,
        (!identity).then(|| perm.iter().map(|&p| p as i64).collect()),
    ))
}

fn replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let f = find(&em.cx(), c).ok_or_else(|| vanished("attention"))?;
    let k = match f.perm {
        None => f.src,
        Some(perm) => em.emit1("permute", &[f.src], Attrs::new().with("perm", perm))?,
    };
    let mut ins = vec![f.q, k, f.v];
    ins.extend(f.mask);
    em.emit("attention", &ins, f.attrs)
}

/// `softmax(q @ kᵀ · scale [+ mask]) @ v` → `attention`.
pub const ATTENTION: Rule = Rule {
    name: "attention",
    ops: &["matmul"],
    matches: |cx, c| find(cx, c).is_some(),
    replace,
    doc: "softmax(q @ kᵀ · scale [+ bias | where(keep, ·, -inf)]) @ v → attention",
};
