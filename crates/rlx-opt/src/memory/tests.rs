//! The planner and its checker on small graphs.

use super::*;
use rlx_ir::{Attrs, DType, GraphBuilder};

fn f32t(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

#[test]
fn elementwise_chain_reuses_buffers() {
    let mut b = GraphBuilder::new("chain");
    let x = b.input("x", f32t(&[256]));
    let mut v = x;
    for op in ["exp", "tanh", "neg", "sin", "relu", "abs", "cos", "sigmoid"] {
        v = b.unary(op, v).unwrap();
    }
    let g = b.finish(&[v]).unwrap();
    let (p, r) = plan_with_report(g).unwrap();
    check_plan(&p).unwrap();
    assert_eq!(r.naive_bytes, 8 * 1024);
    // The first op reads the input; everything after runs in place.
    assert_eq!(r.arena_bytes, 1024);
    assert_eq!(r.in_place, 7);
    assert!(r.to_string().contains("8.0x smaller"), "{r}");
}

#[test]
fn non_elementwise_ops_never_write_over_their_inputs() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[16, 16]));
    let w = b.input("w", f32t(&[16, 16]));
    let e = b.unary("exp", x).unwrap(); // 1 KiB
    let m = b.binary("matmul", e, w).unwrap(); // e dies here
    let t = b.unary("tanh", m).unwrap();
    let m2 = b.binary("matmul", t, w).unwrap();
    let g = b.finish(&[m2]).unwrap();
    let (p, r) = plan_with_report(g).unwrap();
    check_plan(&p).unwrap();
    let off = |v: ValueId| p.slots.iter().find(|s| s.value == v).unwrap().offset;
    assert_ne!(off(e), off(m));
    assert_eq!(off(m), off(t)); // tanh in place
    assert_ne!(off(t), off(m2));
    assert_eq!(off(m2), off(e)); // e's buffer, freed after the first matmul
    assert_eq!(r.arena_bytes, 2048);
}

#[test]
fn matmul_residual_writes_over_its_residual_only() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[16, 16]));
    let w = b.input("w", f32t(&[16, 16]));
    let a = b.unary("exp", x).unwrap();
    let r = b.unary("tanh", x).unwrap();
    // a and r both die at the fused node: only r may be taken over.
    let y = b
        .op1("matmul_residual", &[a, w, r], rlx_ir::Attrs::new())
        .unwrap();
    let g = b.finish(&[y]).unwrap();
    let (p, rep) = plan_with_report(g).unwrap();
    check_plan(&p).unwrap();
    let off = |v: ValueId| p.slots.iter().find(|s| s.value == v).unwrap().offset;
    assert_eq!(off(y), off(r));
    assert_ne!(off(y), off(a));
    assert_eq!(rep.in_place, 1);
    // The checker refuses the product written over `a` instead.
    let mut bad = p.clone();
    let (ya, aa) = (off(y), off(a));
    for s in &mut bad.slots {
        if s.value == y {
            s.offset = aa;
        } else if s.value == r {
            s.offset = ya;
        }
    }
    assert!(check_plan(&bad).is_err());
}

#[test]
fn views_alias_and_keep_their_base_alive() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[4, 8]));
    let e = b.unary("exp", x).unwrap();
    let r = b
        .op1("reshape", &[e], Attrs::new().with("shape", vec![8i64, 4]))
        .unwrap();
    let t = b
        .op1("permute", &[r], Attrs::new().with("perm", vec![1i64, 0]))
        .unwrap();
    let nw = b
        .op1(
            "narrow",
            &[t],
            Attrs::new()
                .with("axis", 0i64)
                .with("start", 1i64)
                .with("len", 2i64),
        )
        .unwrap();
    let s = b.unary("sin", x).unwrap(); // allocated while the views live
    let y = b.binary("add", nw, nw).unwrap(); // reads the view
    let g = b.finish(&[y, s]).unwrap();
    let (p, rep) = plan_with_report(g).unwrap();
    check_plan(&p).unwrap();
    assert_eq!(rep.views, 3);
    let v = p.views.iter().find(|v| v.value == nw).unwrap();
    assert_eq!(v.base, e);
    // Row 1 of the transposed [4, 8] view starts at element 1 of e.
    assert_eq!(v.offset, 1);
    assert_eq!(v.strides, vec![1, 4]);
    let off = |v: ValueId| p.slots.iter().find(|s| s.value == v).unwrap().offset;
    assert_ne!(off(e), off(s));
    // No step for the view nodes.
    assert_eq!(p.steps.len(), 3);
}

#[test]
fn reshape_of_a_strided_view_is_a_copy() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[2, 3]));
    let t = b
        .op1("permute", &[x], Attrs::new().with("perm", vec![1i64, 0]))
        .unwrap();
    let r = b
        .op1("reshape", &[t], Attrs::new().with("shape", vec![6i64]))
        .unwrap();
    let g = b.finish(&[r]).unwrap();
    let (p, rep) = plan_with_report(g).unwrap();
    check_plan(&p).unwrap();
    assert_eq!(rep.views, 1);
    assert!(p.slots.iter().any(|s| s.value == r));
    assert_eq!(p.views[0].base, x); // a view of the caller's input
}

#[test]
fn in_place_is_refused_when_another_input_reads_the_buffer() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[3, 3]));
    let e = b.unary("exp", x).unwrap();
    let t = b
        .op1("permute", &[e], Attrs::new().with("perm", vec![1i64, 0]))
        .unwrap();
    let y = b.binary("add", e, t).unwrap();
    let g = b.finish(&[y]).unwrap();
    let (p, rep) = plan_with_report(g).unwrap();
    check_plan(&p).unwrap();
    assert_eq!(rep.in_place, 0);
}

#[test]
fn checker_catches_overlaps_and_bad_views() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[16]));
    let e = b.unary("exp", x).unwrap();
    let s = b.unary("sin", x).unwrap();
    let y = b.binary("atan2", e, s).unwrap();
    let g = b.finish(&[y]).unwrap();
    let good = plan(g).unwrap();
    check_plan(&good).unwrap();
    // e and s are live together: putting them at one offset is wrong.
    let mut bad = good.clone();
    let so = bad.slots.iter().find(|q| q.value == e).unwrap().offset;
    bad.slots.iter_mut().find(|q| q.value == s).unwrap().offset = so;
    assert!(check_plan(&bad).unwrap_err().contains("overlap"));
    // A non-elementwise op may not write over its (dying) input.
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[16]));
    let e = b.unary("exp", x).unwrap();
    let y = b
        .op1("flip", &[e], Attrs::new().with("axes", vec![0i64]))
        .unwrap();
    let g = b.finish(&[y]).unwrap();
    let good = plan(g).unwrap();
    check_plan(&good).unwrap();
    let mut bad = good.clone();
    bad.slots.iter_mut().find(|q| q.value == y).unwrap().offset = 0;
    bad.slots.iter_mut().find(|q| q.value == e).unwrap().offset = 0;
    assert!(check_plan(&bad).unwrap_err().contains("overlap"));

    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[4]));
    let e = b.unary("exp", x).unwrap();
    let r = b
        .op1("reshape", &[e], Attrs::new().with("shape", vec![2i64, 2]))
        .unwrap();
    let g = b.finish(&[r]).unwrap();
    let mut p = plan(g).unwrap();
    check_plan(&p).unwrap();
    p.views[0].offset = 1;
    assert!(check_plan(&p).unwrap_err().contains("reads element"));
}

#[test]
fn zero_sized_and_input_outputs() {
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", f32t(&[0, 3]));
    let y = b.input("y", f32t(&[2]));
    let e = b.unary("exp", x).unwrap();
    let g = b.finish(&[e, y]).unwrap();
    let (p, r) = plan_with_report(g).unwrap();
    check_plan(&p).unwrap();
    assert_eq!(r.arena_bytes, 0);
}

fn limit_of(e: OptError) -> rlx_ir::LimitError {
    match e {
        OptError::Ir(IrError::Limit(l)) => l,
        e => panic!("expected a limit error, got {e}"),
    }
}

#[test]
fn a_huge_value_is_refused_before_planning() {
    let mut b = GraphBuilder::new("huge");
    let x = b.input("x", f32t(&[1_000_000, 1_000_000]));
    let y = b.unary("relu", x).unwrap();
    let g = b.finish(&[y]).unwrap();
    let l = limit_of(plan_with_report(g).unwrap_err());
    assert_eq!((l.limit, l.value), ("max_tensor_bytes", 4_000_000_000_000));
    assert!(l.what.contains("graph input `x`"), "{}", l.what);
}

#[test]
fn values_under_the_tensor_bound_still_fit_the_arena_bound() {
    // Three 12 GiB values live at once: each under max_tensor_bytes
    // (16 GiB by default), together over max_arena_bytes (32 GiB).
    let mut b = GraphBuilder::new("wide");
    let x = b.input("x", f32t(&[3, 1 << 30]));
    let e = b.unary("exp", x).unwrap();
    let s = b.unary("sin", x).unwrap();
    let c = b.unary("cos", x).unwrap();
    let es = b.binary("add", e, s).unwrap();
    let y = b.binary("add", es, c).unwrap();
    let g = b.finish(&[y]).unwrap();
    let l = limit_of(plan_with_report(g).unwrap_err());
    assert_eq!(l.limit, "max_arena_bytes");
    assert_eq!(l.value, 36 << 30);
    assert!(l.what.contains("`cos`"), "{}", l.what);
}

/// `x @ x + x` (found by the fuzzer): the residual is also the GEMM's
/// operands, which it reads whole while it writes, so the output gets a
/// buffer of its own; the checker refuses it written over `x`.
#[test]
fn matmul_residual_over_an_operand_is_never_in_place() {
    let mut b = GraphBuilder::new("g");
    let a = b.input("a", f32t(&[4, 4]));
    let x = b.unary("exp", a).unwrap();
    let y = b.op1("matmul_residual", &[x, x, x], Attrs::new()).unwrap();
    let g = b.finish(&[y]).unwrap();
    let (p, rep) = plan_with_report(g).unwrap();
    check_plan(&p).unwrap();
    let off = |v: ValueId| p.slots.iter().find(|s| s.value == v).unwrap().offset;
    assert_ne!(off(y), off(x));
    assert_eq!(rep.in_place, 0);
    let mut bad = p.clone();
    let xo = off(x);
    bad.slots.iter_mut().find(|s| s.value == y).unwrap().offset = xo;
    assert!(check_plan(&bad).is_err());
}
