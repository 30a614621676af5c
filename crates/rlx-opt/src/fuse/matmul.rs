//! The matmul epilogue: `act(a @ b + bias)` → `matmul_bias_act`.
//!
//! * `matmul_bias`: `a @ b + bias` (either operand order) whose bias varies
//!   along the last axis only (shape `(N)`, `(1, N)`, ..., or a scalar) →
//!   `matmul_bias_act {activation = none}`. A bias that differs between
//!   rows is an ordinary add and stays one.
//! * `matmul_act`: `act(matmul_bias_act{none}(..))` or `act(a @ b)` for an
//!   activation the op knows (relu, gelu, gelu_tanh, silu, sigmoid, tanh)
//!   → `matmul_bias_act {activation = act}`.
//! * `conv_act`: `act(conv(..))`, the conv read only by the activation →
//!   `conv_act` (the activation applied to rows as they are written).
//! * `matmul_residual`: `y + r` where `y` is a `matmul` or `matmul_bias_act`
//!   read by nothing else and `r` has the sum's type exactly (a residual
//!   stream, not a bias) → `matmul_residual(a, b, r, [bias])`: the add
//!   happens in the GEMM's epilogue, and the memory plan may write the
//!   result over `r`. Decided here, once, for every backend; one that does
//!   not take the fused op runs its decomposition (the epilogue, then the
//!   add).

use super::pattern::{closed, fits, orders, prod, vanished};
use crate::rules::{Candidate, Rule, RuleCx};
use rlx_ir::{Attrs, TensorType, ValueId};

/// The activations `matmul_bias_act` and `conv_act` apply (besides `none`).
pub(super) const ACTS: &[&str] = &["relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"];

/// `bias` broadcasts over every axis of `out` but the last.
fn per_column(bias: &TensorType, out: &TensorType) -> bool {
    let (b, o) = (bias.dims(), out.dims());
    match (b.split_last(), o.last()) {
        (None, _) => true,
        (Some((&n, rest)), Some(&m)) => {
            b.len() <= o.len() && rest.iter().all(|&d| d == 1) && (n == m || n == 1)
        }
        (Some(_), None) => false,
    }
}

/// `a @ b + bias`: the inputs of the fused op.
fn matmul_bias(cx: &RuleCx, c: &Candidate) -> Option<Vec<ValueId>> {
    orders(&c.inputs).into_iter().find_map(|(y, bias)| {
        let mm = prod(cx, y, "matmul")?;
        let ins = vec![mm.inputs[0], mm.inputs[1], bias];
        let ok = per_column(cx.ty(bias), &c.out_types[0])
            && closed(cx, c, &[mm])
            && fits(cx, c, "matmul_bias_act", &ins, &Attrs::new());
        ok.then_some(ins)
    })
}

/// `act(matmul_bias_act{none}(..))` or `act(a @ b)`: the fused op's inputs.
fn matmul_act(cx: &RuleCx, c: &Candidate) -> Option<Vec<ValueId>> {
    let y = c.inputs[0];
    let node = prod(cx, y, "matmul_bias_act")
        .filter(|n| n.attrs.str("activation").ok() == Some("none"))
        .or_else(|| prod(cx, y, "matmul"))?;
    let attrs = Attrs::new().with("activation", c.op.name());
    (closed(cx, c, &[node]) && fits(cx, c, "matmul_bias_act", &node.inputs, &attrs))
        .then(|| node.inputs.clone())
}

/// `y + r`, `y` a matmul or its epilogue read only here, `r` of the sum's
/// type: the inputs and attributes of `matmul_residual`.
fn matmul_residual(cx: &RuleCx, c: &Candidate) -> Option<(Vec<ValueId>, Attrs)> {
    orders(&c.inputs).into_iter().find_map(|(y, r)| {
        let node = prod(cx, y, "matmul").or_else(|| prod(cx, y, "matmul_bias_act"))?;
        if r == y || *cx.ty(r) != c.out_types[0] {
            return None;
        }
        let mut ins = vec![node.inputs[0], node.inputs[1], r];
        ins.extend(node.inputs.get(2));
        let attrs = match node.attrs.str("activation") {
            Ok(act) => Attrs::new().with("activation", act),
            Err(_) => Attrs::new(),
        };
        (closed(cx, c, &[node]) && fits(cx, c, "matmul_residual", &ins, &attrs))
            .then_some((ins, attrs))
    })
}

/// `a @ b + bias` (bias along the last axis) → `matmul_bias_act`.
pub const MATMUL_BIAS: Rule = Rule {
    name: "matmul_bias",
    ops: &["add"],
    matches: |cx, c| matmul_bias(cx, c).is_some(),
    replace: |em, c| {
        let ins = matmul_bias(&em.cx(), c).ok_or_else(|| vanished("matmul_bias"))?;
        em.emit("matmul_bias_act", &ins, Attrs::new())
    },
    doc: "a @ b + bias (bias varying along the last axis only) → matmul_bias_act{none}",
};

/// `act(a @ b [+ bias])` → `matmul_bias_act {activation = act}`.
pub const MATMUL_ACT: Rule = Rule {
    name: "matmul_act",
    ops: ACTS,
    matches: |cx, c| matmul_act(cx, c).is_some(),
    replace: |em, c| {
        let ins = matmul_act(&em.cx(), c).ok_or_else(|| vanished("matmul_act"))?;
        em.emit(
            "matmul_bias_act",
            &ins,
            Attrs::new().with("activation", c.op.name()),
        )
    },
    doc: "act(matmul_bias_act{none}(..)) or act(a @ b) → matmul_bias_act{act}",
};

/// `epilogue(..) + r` (r of the sum's type) → `matmul_residual`.
pub const MATMUL_RESIDUAL: Rule = Rule {
    name: "matmul_residual",
    ops: &["add"],
    matches: |cx, c| matmul_residual(cx, c).is_some(),
    replace: |em, c| {
        let (ins, attrs) =
            matmul_residual(&em.cx(), c).ok_or_else(|| vanished("matmul_residual"))?;
        em.emit("matmul_residual", &ins, attrs)
    },
    doc: "act(a @ b [+ bias]) + r (r of the sum's type) → matmul_residual",
};

/// `act(conv(..))` (the conv read only here): the attributes of `conv_act`.
fn conv_act(cx: &RuleCx, c: &Candidate) -> Option<(Vec<ValueId>, Attrs)> {
    let node = prod(cx, c.inputs[0], "conv")?;
    let mut attrs = node.attrs.clone();
    attrs.set("activation", c.op.name());
    (closed(cx, c, &[node]) && fits(cx, c, "conv_act", &node.inputs, &attrs))
        .then(|| (node.inputs.clone(), attrs))
}

/// `act(conv(..))` → `conv_act`: the activation applied to each row of the
/// convolution's output as it is written.
pub const CONV_ACT: Rule = Rule {
    name: "conv_act",
    ops: ACTS,
    matches: |cx, c| conv_act(cx, c).is_some(),
    replace: |em, c| {
        let (ins, attrs) = conv_act(&em.cx(), c).ok_or_else(|| vanished("conv_act"))?;
        em.emit("conv_act", &ins, attrs)
    },
    doc: "act(conv(x, w, [bias])) → conv_act",
};
