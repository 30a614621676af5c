//! vmap against an explicit loop, over leading and inner axes, and
//! composed with grad and jvp.

mod common;
use common::*;
use rlx_autodiff::{grad, jvp, vmap};
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, TensorType};

/// f(x: (3,), w: (3, 2)) = Σ tanh(x·w)² + Σ x³  (scalar)
fn f() -> Graph {
    let mut b = GraphBuilder::new("f");
    let x = b.input("x", TensorType::new(DType::F64, vec![3]));
    let w = b.input("w", TensorType::new(DType::F64, vec![3, 2]));
    let h = b.binary("matmul", x, w).unwrap();
    let t = b.unary("tanh", h).unwrap();
    let t2 = b.binary("mul", t, t).unwrap();
    let s1 = b.op1("reduce_sum", &[t2], Attrs::new()).unwrap();
    let x2 = b.binary("mul", x, x).unwrap();
    let x3 = b.binary("mul", x2, x).unwrap();
    let s2 = b.op1("reduce_sum", &[x3], Attrs::new()).unwrap();
    let s = b.binary("add", s1, s2).unwrap();
    b.finish(&[s]).unwrap()
}

fn t(d: &[usize], v: Vec<f64>) -> HostTensor {
    HostTensor::from_f64(DType::F64, d.to_vec(), v).unwrap()
}

/// Column `k` of a (3, n) batch stored with the mapped axis at 1.
fn column(xs: &[f64], n: usize, k: usize) -> Vec<f64> {
    (0..3).map(|i| xs[i * n + k]).collect()
}

#[test]
fn vmap_grad_over_an_inner_axis_matches_a_loop() {
    let n = 4;
    let mut rng = Rng(11);
    let xs = rng.vec(3 * n, -1.0, 1.0); // (3, n): mapped axis 1
    let w = rng.vec(6, -1.0, 1.0);
    let gf = grad(&f(), &[0]).unwrap();
    // Map over axis 1 of x; w shared; per-example gradients stacked on axis 1.
    let vg = vmap(&gf, &[Some(1), None], 1, n).unwrap();
    let got = run_compiled(&vg, &[t(&[3, n], xs.clone()), t(&[3, 2], w.clone())])[0]
        .to_f64_vec()
        .unwrap();
    for k in 0..n {
        let want = eval(&gf, &[t(&[3], column(&xs, n, k)), t(&[3, 2], w.clone())])[0]
            .to_f64_vec()
            .unwrap();
        assert_close(
            &format!("example {k}"),
            &column(&got, n, k),
            &want,
            0.0,
            1e-14,
        );
    }
}

#[test]
fn vmap_over_the_leading_axis_of_two_inputs_matches_a_loop() {
    let n = 3;
    let mut rng = Rng(12);
    let xs = rng.vec(n * 3, -1.0, 1.0);
    let ws = rng.vec(n * 6, -1.0, 1.0);
    let v = vmap(&f(), &[Some(0), Some(0)], 0, n).unwrap();
    let got = run_compiled(&v, &[t(&[n, 3], xs.clone()), t(&[n, 3, 2], ws.clone())])[0]
        .to_f64_vec()
        .unwrap();
    assert_eq!(got.len(), n);
    for k in 0..n {
        let want = scalar(
            &eval(
                &f(),
                &[
                    t(&[3], xs[3 * k..3 * k + 3].to_vec()),
                    t(&[3, 2], ws[6 * k..6 * k + 6].to_vec()),
                ],
            )[0],
        );
        assert_close(&format!("example {k}"), &[got[k]], &[want], 0.0, 1e-14);
    }
}

/// jvp(grad(f)) mapped over a batch of tangents gives the Hessian columns;
/// grad(vmap(f)) of the batched sum equals the per-example gradients.
#[test]
fn vmap_composes_with_jvp_and_grad() {
    let mut rng = Rng(13);
    let x = rng.vec(3, -1.0, 1.0);
    let w = rng.vec(6, -1.0, 1.0);
    // Hessian of f w.r.t. x by vmap over the identity's rows as tangents.
    let jg = jvp(&grad(&f(), &[0]).unwrap(), &[0]).unwrap(); // (x, w, tx) -> (g, H·tx)
    let hm = vmap(&jg, &[None, None, Some(0)], 0, 3).unwrap();
    let eye = vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    let h = run_compiled(
        &hm,
        &[t(&[3], x.clone()), t(&[3, 2], w.clone()), t(&[3, 3], eye)],
    )[1]
    .to_f64_vec()
    .unwrap();
    // Reference: differences of the gradient.
    let gf = grad(&f(), &[0]).unwrap();
    let eps = 1e-6;
    for j in 0..3 {
        let at = |s: f64| {
            let mut xv = x.clone();
            xv[j] += s;
            eval(&gf, &[t(&[3], xv), t(&[3, 2], w.clone())])[0]
                .to_f64_vec()
                .unwrap()
        };
        let (p, m) = (at(eps), at(-eps));
        let col: Vec<f64> = p
            .iter()
            .zip(&m)
            .map(|(a, b)| (a - b) / (2.0 * eps))
            .collect();
        assert_close(
            &format!("Hessian row {j}"),
            &h[3 * j..3 * j + 3],
            &col,
            1e-7,
            1e-6,
        );
    }
    // grad of Σ_k f(x_k) through vmap = per-example gradients.
    let n = 2;
    let xs = rng.vec(n * 3, -1.0, 1.0);
    let mut b = GraphBuilder::new("sum_vmap");
    let xi = b.input("x", TensorType::new(DType::F64, vec![n, 3]));
    let wi = b.input("w", TensorType::new(DType::F64, vec![3, 2]));
    let vf = vmap(&f(), &[Some(0), None], 0, n).unwrap();
    let outs = rlx_autodiff::emit::inline(&mut b, &vf, &[xi, wi]).unwrap();
    let s = b
        .op1("reduce_sum", &[outs[vf.outputs[0].index()]], Attrs::new())
        .unwrap();
    let sg = b.finish(&[s]).unwrap();
    let got = run_compiled(
        &grad(&sg, &[0]).unwrap(),
        &[t(&[n, 3], xs.clone()), t(&[3, 2], w.clone())],
    )[0]
    .to_f64_vec()
    .unwrap();
    for k in 0..n {
        let want = eval(
            &gf,
            &[
                t(&[3], xs[3 * k..3 * k + 3].to_vec()),
                t(&[3, 2], w.clone()),
            ],
        )[0]
        .to_f64_vec()
        .unwrap();
        assert_close(
            &format!("grad(vmap) example {k}"),
            &got[3 * k..3 * k + 3],
            &want,
            0.0,
            1e-13,
        );
    }
}

#[test]
fn vmap_rejects_bad_axes() {
    assert!(vmap(&f(), &[Some(2), None], 0, 2).is_err());
    assert!(vmap(&f(), &[Some(0)], 0, 2).is_err());
}

/// Ops with batching rules are batched, not unrolled: the mapped MLP layer
/// has no per-index slices, and its size does not grow with the batch.
#[test]
fn batching_rules_avoid_unrolling() {
    let mut b = GraphBuilder::new("layer");
    let x = b.input("x", TensorType::new(DType::F64, vec![2, 3]));
    let w = b.input("w", TensorType::new(DType::F64, vec![3, 4]));
    let h = b.binary("matmul", x, w).unwrap();
    let h = b.unary("tanh", h).unwrap();
    let s = b
        .op1("softmax", &[h], Attrs::new().with("axis", -1i64))
        .unwrap();
    let r = b
        .op1("reduce_sum", &[s], Attrs::new().with("axes", vec![0i64]))
        .unwrap();
    let g = b.finish(&[r]).unwrap();
    let v8 = vmap(&g, &[Some(2), None], 1, 8).unwrap();
    let v2 = vmap(&g, &[Some(2), None], 1, 2).unwrap();
    assert_eq!(v8.nodes.len(), v2.nodes.len());
    assert!(!v8.nodes.iter().any(|n| n.op.name() == "narrow"));
    let mut rng = Rng(5);
    let xs = rng.vec(2 * 3 * 8, -1.0, 1.0);
    let ws = rng.vec(12, -1.0, 1.0);
    let got = run_compiled(&v8, &[t(&[2, 3, 8], xs.clone()), t(&[3, 4], ws.clone())])[0]
        .to_f64_vec()
        .unwrap();
    for k in 0..8 {
        let xk: Vec<f64> = (0..6).map(|i| xs[i * 8 + k]).collect();
        let want = eval(&g, &[t(&[2, 3], xk), t(&[3, 4], ws.clone())])[0]
            .to_f64_vec()
            .unwrap();
        // Output (4,) with the mapped axis at 1 -> (4, 8).
        let col: Vec<f64> = (0..4).map(|i| got[i * 8 + k]).collect();
        assert_close(&format!("index {k}"), &col, &want, 0.0, 1e-13);
    }
}
