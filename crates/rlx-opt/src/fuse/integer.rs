//! The integer product's epilogue: `f32(matmul_integer(..)) · scale
//! [+ bias]` → `matmul_integer_scaled`, so that a backend with an integer
//! GEMM writes f32 straight from its accumulators (ONNX's dynamically
//! quantized MatMulInteger → Cast → Mul → Add, and rlx's static int8).
//!
//! * `int_matmul_scale`: `cast(matmul_integer(a, b, za, zb), f32) · s`
//!   (either operand order), `s` f32 with one value per output column or
//!   a single one, the cast read only here → `matmul_integer_scaled`.
//! * `int_matmul_bias`: `matmul_integer_scaled(..) + bias` (bias per
//!   column) → the same with its bias.

use super::pattern::{closed, fits, orders, prod, vanished};
use crate::rules::{Candidate, Rule, RuleCx};
use rlx_ir::{Attrs, DType, TensorType, ValueId};

/// One value, or one per output column (`(N)`, `(1, .., N)`).
fn per_column(t: &TensorType, out: &TensorType) -> bool {
    let (d, n) = (t.dims(), out.dims().last().copied());
    t.dtype == DType::F32
        && (t.shape.numel() == 1
            || (d.last().copied() == n && d[..d.len() - 1].iter().all(|&x| x == 1)))
}

fn scale(cx: &RuleCx, c: &Candidate) -> Option<Vec<ValueId>> {
    orders(&c.inputs).into_iter().find_map(|(y, s)| {
        let cast = prod(cx, y, "cast").filter(|n| cx.ty(n.outputs[0]).dtype == DType::F32)?;
        let mm = prod(cx, cast.inputs[0], "matmul_integer").filter(|n| n.inputs.len() == 4)?;
        let mut ins = mm.inputs.clone();
        ins.push(s);
        let ok = per_column(cx.ty(s), &c.out_types[0])
            && closed(cx, c, &[cast, mm])
            && fits(cx, c, "matmul_integer_scaled", &ins, &Attrs::new());
        ok.then_some(ins)
    })
}

fn bias(cx: &RuleCx, c: &Candidate) -> Option<Vec<ValueId>> {
    orders(&c.inputs).into_iter().find_map(|(y, b)| {
        let mm = prod(cx, y, "matmul_integer_scaled").filter(|n| n.inputs.len() == 5)?;
        let mut ins = mm.inputs.clone();
        ins.push(b);
        let ok = per_column(cx.ty(b), &c.out_types[0])
            && closed(cx, c, &[mm])
            && fits(cx, c, "matmul_integer_scaled", &ins, &Attrs::new());
        ok.then_some(ins)
    })
}

/// `f32(matmul_integer(..)) · scale` → `matmul_integer_scaled`.
pub const INT_MATMUL_SCALE: Rule = Rule {
    name: "int_matmul_scale",
    ops: &["mul"],
    matches: |cx, c| scale(cx, c).is_some(),
    replace: |em, c| {
        let ins = scale(&em.cx(), c).ok_or_else(|| vanished("int_matmul_scale"))?;
        em.emit("matmul_integer_scaled", &ins, Attrs::new())
    },
    doc: "cast(matmul_integer(a, b, za, zb), f32) · scale (per column) → matmul_integer_scaled",
};

/// `matmul_integer_scaled(..) + bias` → the same with its bias.
pub const INT_MATMUL_BIAS: Rule = Rule {
    name: "int_matmul_bias",
    ops: &["add"],
    matches: |cx, c| bias(cx, c).is_some(),
    replace: |em, c| {
        let ins = bias(&em.cx(), c).ok_or_else(|| vanished("int_matmul_bias"))?;
        em.emit("matmul_integer_scaled", &ins, Attrs::new())
    },
    doc: "matmul_integer_scaled(..) + bias (per column) → matmul_integer_scaled with its bias",
};
