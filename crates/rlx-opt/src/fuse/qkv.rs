//! Packed QKV: an `attention` whose q, k and v are three slices of the last
//! axis of one projection `qkv` (`(..., S, n·D)`, cut by `narrow`, `split`
//! or a step-1 `slice`), each optionally split into heads by
//! `permute(reshape(·, (..., S, H, hd)), swap S and H)`.
//!
//! Slicing the last axis is a gather (a copy) for the memory planner. The
//! rule re-expresses the three operands as views of `qkv`:
//!
//! ```text
//! t  = permute(reshape(qkv, (..., S, n, H, hd)), (n, ..., H, S, hd))   // views
//! q5 = narrow(t, axis 0, i_q, 1)   k5 = ..i_k..   v5 = ..i_v..          // offset views
//! y  = reshape(attention(q5, k5, v5 [, mask]), original shape)          // view
//! ```
//!
//! (without heads: `(..., S, n, D)` and `(n, ..., S, D)`). The attention
//! gets one leading batch axis of extent 1; every other node is a reshape,
//! a permute or a leading-axis narrow, which `memory::plan` turns into
//! views — so q, k and v are read in place, with no copies.

use super::pattern::{infer, prod, vanished};
use crate::error::OptError;
use crate::rules::{Candidate, Emitter, Rule, RuleCx};
use rlx_ir::shape::normalize_axis;
use rlx_ir::{Attrs, TensorType, ValueId};

/// `[start, start + len)` of the last axis of `src`.
#[derive(Clone, Copy, PartialEq)]
struct Slice {
    src: ValueId,
    start: usize,
    len: usize,
}

fn last_axis_slice(cx: &RuleCx, v: ValueId) -> Option<Slice> {
    let n = cx.producer(v)?;
    let src = *n.inputs.first()?;
    let ty = cx.ty(src);
    let last = ty.rank().checked_sub(1)?;
    let axis = |n: &rlx_ir::Node| normalize_axis(n.attrs.int("axis").ok()?, ty.rank()).ok();
    let (start, len) = match n.op.name() {
        "narrow" if axis(n)? == last => (n.attrs.int("start").ok()?, n.attrs.int("len").ok()?),
        "split" if axis(n)? == last => {
            let k = n.outputs.iter().position(|&o| o == v)?;
            let sizes = n.attrs.ints("sizes").ok()?;
            (sizes[..k].iter().sum(), sizes[k])
        }
        "slice" => {
            let plan = rlx_ir::ops::shape::slice_plan(&ty.shape, &n.attrs).ok()?;
            let (body, tail) = plan.split_at(last);
            let full = body
                .iter()
                .zip(ty.dims())
                .all(|(&(s, st, c), &d)| (s, st, c) == (0, 1, d));
            let (s, step, count) = tail[0];
            (full && step == 1).then_some((s, count as i64))?
        }
        _ => return None,
    };
    Some(Slice {
        src,
        start: usize::try_from(start).ok()?,
        len: usize::try_from(len).ok()?,
    })
}

/// An attention operand: a slice, split into `(H, hd)` heads or not.
fn operand(cx: &RuleCx, v: ValueId) -> Option<(Slice, Option<(usize, usize)>)> {
    let Some(p) = prod(cx, v, "permute") else {
        return Some((last_axis_slice(cx, v)?, None));
    };
    let r = cx.ty(v).rank();
    let perm = p.attrs.ints("perm").ok()?;
    let mut want: Vec<i64> = (0..r as i64).collect();
    if r < 3 {
        return None;
    }
    want.swap(r - 3, r - 2);
    let rs = prod(cx, p.inputs[0], "reshape").filter(|_| perm == want.as_slice())?;
    let (i, o) = (cx.ty(rs.inputs[0]).dims(), cx.ty(rs.outputs[0]).dims());
    let split = o.len() == i.len() + 1
        && o[..i.len() - 1] == i[..i.len() - 1]
        && o[r - 2] * o[r - 1] == i[i.len() - 1];
    split.then_some((
        last_axis_slice(cx, rs.inputs[0])?,
        Some((o[r - 2], o[r - 1])),
    ))
}

/// The rewrite's plan: the source, reshape and permute of it, the slice
/// index of q, k and v, and the types along the way (checked here).
struct Plan {
    src: ValueId,
    shape: Vec<i64>,
    perm: Vec<i64>,
    index: [i64; 3],
}

fn find(cx: &RuleCx, c: &Candidate) -> Option<Plan> {
    let ops: Vec<_> = (0..3)
        .map(|i| operand(cx, c.inputs[i]))
        .collect::<Option<_>>()?;
    let (first, heads) = ops[0];
    if ops
        .iter()
        .any(|&(s, h)| s.src != first.src || s.len != first.len || h != heads)
    {
        return None;
    }
    let dims = cx.ty(first.src).dims().to_vec();
    let (d, r) = (first.len, dims.len());
    if d == 0
        || r < 2
        || !dims[r - 1].is_multiple_of(d)
        || ops.iter().any(|(s, _)| !s.start.is_multiple_of(d))
    {
        return None;
    }
    let p = (r - 2) as i64;
    let lead = dims[..r - 1].iter().map(|&x| x as i64);
    let n = (dims[r - 1] / d) as i64;
    let (shape, perm): (Vec<i64>, Vec<i64>) = match heads {
        Some((h, hd)) => (
            lead.chain([n, h as i64, hd as i64]).collect(),
            [p + 1]
                .into_iter()
                .chain(0..p)
                .chain([p + 2, p, p + 3])
                .collect(),
        ),
        None => (
            lead.chain([n, d as i64]).collect(),
            [p + 1].into_iter().chain(0..p).chain([p, p + 2]).collect(),
        ),
    };
    let index = [0, 1, 2].map(|i| (ops[i].0.start / d) as i64);
    let plan = Plan {
        src: first.src,
        shape,
        perm,
        index,
    };
    (types(cx, c, &plan)? == c.out_types[0]).then_some(plan)
}

/// The type the rewrite ends with (before its final reshape), or `None`
/// when a step does not type-check.
fn types(cx: &RuleCx, c: &Candidate, plan: &Plan) -> Option<TensorType> {
    let one = |op: &str, t: TensorType, a: Attrs| infer(op, &[t], &a)?.pop();
    let t = one(
        "reshape",
        cx.ty(plan.src).clone(),
        Attrs::new().with("shape", plan.shape.clone()),
    )?;
    let t = one("permute", t, Attrs::new().with("perm", plan.perm.clone()))?;
    let mut ins: Vec<TensorType> = plan
        .index
        .iter()
        .map(|&i| one("narrow", t.clone(), narrow(i)))
        .collect::<Option<_>>()?;
    ins.extend(c.inputs.get(3).map(|&m| cx.ty(m).clone()));
    let y = infer("attention", &ins, &c.attrs)?.pop()?;
    let dims: Vec<i64> = c.out_types[0].dims().iter().map(|&x| x as i64).collect();
    one("reshape", y, Attrs::new().with("shape", dims))
}

fn narrow(i: i64) -> Attrs {
    Attrs::new()
        .with("axis", 0i64)
        .with("start", i)
        .with("len", 1i64)
}

fn replace(em: &mut Emitter, c: &Candidate) -> Result<Vec<ValueId>, OptError> {
    let plan = find(&em.cx(), c).ok_or_else(|| vanished("packed_qkv_attention"))?;
    let r = em.emit1(
        "reshape",
        &[plan.src],
        Attrs::new().with("shape", plan.shape),
    )?;
    let t = em.emit1("permute", &[r], Attrs::new().with("perm", plan.perm))?;
    let mut ins = Vec::new();
    for i in plan.index {
        ins.push(em.emit1("narrow", &[t], narrow(i))?);
    }
    ins.extend(c.inputs.get(3));
    let y = em.emit1("attention", &ins, c.attrs.clone())?;
    let dims: Vec<i64> = c.out_types[0].dims().iter().map(|&x| x as i64).collect();
    em.emit("reshape", &[y], Attrs::new().with("shape", dims))
}

/// Attention on three last-axis slices of one packed projection →
/// attention on views of it.
pub const PACKED_QKV: Rule = Rule {
    name: "packed_qkv_attention",
    ops: &["attention"],
    matches: |cx, c| find(cx, c).is_some(),
    replace,
    doc: "attention(q, k, v) on narrow×3 of one packed (…, n·D) projection → attention on strided views (no copies)",
};
