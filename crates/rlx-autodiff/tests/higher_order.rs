//! Higher derivatives (grad of grad of grad), forward-over-reverse,
//! Hessian-vector products, vjp with explicit cotangents, and the typed
//! errors for non-differentiable paths.

mod common;
use common::*;
use rlx_autodiff::{grad, hvp, jvp, vjp, AdError};
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, TensorType};

const XS: [f64; 7] = [-2.1, -1.3, -0.6, -0.15, 0.35, 0.9, 1.7];

fn elementwise(name: &str) -> Graph {
    let mut b = GraphBuilder::new(name);
    let x = b.input("x", TensorType::new(DType::F64, vec![XS.len()]));
    let y = match name {
        "cube" => {
            let s = b.binary("mul", x, x).unwrap();
            b.binary("mul", s, x).unwrap()
        }
        op => b.unary(op, x).unwrap(),
    };
    let s = b.op1("reduce_sum", &[y], Attrs::new()).unwrap();
    b.finish(&[s]).unwrap()
}

fn sig(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
fn phi(x: f64) -> f64 {
    (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// f', f'', f''' in closed form.
fn closed(name: &str, x: f64) -> [f64; 3] {
    match name {
        "cube" => [3.0 * x * x, 6.0 * x, 6.0],
        "relu" => [if x > 0.0 { 1.0 } else { 0.0 }, 0.0, 0.0],
        "tanh" => {
            let t = x.tanh();
            let d = 1.0 - t * t;
            [d, -2.0 * t * d, -2.0 * d * (1.0 - 3.0 * t * t)]
        }
        "sigmoid" => {
            let s = sig(x);
            let q = s * (1.0 - s);
            [q, q * (1.0 - 2.0 * s), q * (1.0 - 6.0 * s + 6.0 * s * s)]
        }
        "gelu" => {
            let cdf = 0.5 * (1.0 + erf(x / std::f64::consts::SQRT_2));
            [
                cdf + x * phi(x),
                phi(x) * (2.0 - x * x),
                phi(x) * (x * x * x - 4.0 * x),
            ]
        }
        "silu" => {
            let s = sig(x);
            let q = s * (1.0 - s);
            let u = 1.0 - 2.0 * s;
            [
                s + x * q,
                q * (2.0 + x * u),
                q * (u * (3.0 + x * u) - 2.0 * x * q),
            ]
        }
        _ => unreachable!(),
    }
}

/// erf by its Taylor series (|x| < 2 here), to 1e-15.
fn erf(x: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = x;
    let mut n = 0.0;
    while term.abs() > 1e-17 || n < 5.0 {
        sum += term / (2.0 * n + 1.0);
        n += 1.0;
        term *= -x * x / n;
    }
    2.0 / std::f64::consts::PI.sqrt() * sum
}

fn input() -> Vec<HostTensor> {
    vec![HostTensor::from_f64(DType::F64, vec![XS.len()], XS.to_vec()).unwrap()]
}

#[test]
fn first_to_third_derivatives_match_closed_forms() {
    for name in ["cube", "relu", "tanh", "gelu", "silu", "sigmoid"] {
        let g = elementwise(name);
        // For a non-scalar output, grad differentiates the sum of its
        // elements; for elementwise f that is f^(k+1) elementwise.
        let d1 = grad(&g, &[0]).unwrap();
        let d2 = grad(&d1, &[0]).unwrap();
        let d3 = grad(&d2, &[0]).unwrap();
        for (k, gk) in [d1, d2, d3].iter().enumerate() {
            let got = run_compiled(gk, &input())[0].to_f64_vec().unwrap();
            let want: Vec<f64> = XS.iter().map(|&x| closed(name, x)[k]).collect();
            assert_close(
                &format!("{name} derivative {}", k + 1),
                &got,
                &want,
                1e-12,
                1e-10,
            );
        }
    }
}

/// jvp(grad(grad f)) with tangent 1 is f''' too: forward over reverse.
#[test]
fn forward_over_reverse_third_derivative() {
    for name in ["tanh", "gelu", "silu", "sigmoid", "cube"] {
        let g = elementwise(name);
        let d2 = grad(&grad(&g, &[0]).unwrap(), &[0]).unwrap();
        let j = jvp(&d2, &[0]).unwrap();
        let mut ins = input();
        ins.push(HostTensor::from_f64(DType::F64, vec![XS.len()], vec![1.0; XS.len()]).unwrap());
        let got = run_compiled(&j, &ins)[1].to_f64_vec().unwrap();
        let want: Vec<f64> = XS.iter().map(|&x| closed(name, x)[2]).collect();
        assert_close(
            &format!("{name} jvp(grad(grad))"),
            &got,
            &want,
            1e-12,
            1e-10,
        );
    }
}

/// f(W, x) = Σ tanh(x·W)² + Σ softmax(x·W) ⊙ c: a non-separable function
/// of two inputs.
fn coupled() -> Graph {
    let mut b = GraphBuilder::new("coupled");
    let x = b.input("x", TensorType::new(DType::F64, vec![2, 3]));
    let w = b.input("w", TensorType::new(DType::F64, vec![3, 4]));
    let h = b.binary("matmul", x, w).unwrap();
    let t = b.unary("tanh", h).unwrap();
    let t2 = b.binary("mul", t, t).unwrap();
    let s1 = b.op1("reduce_sum", &[t2], Attrs::new()).unwrap();
    let sm = b
        .op1("softmax", &[h], Attrs::new().with("axis", -1i64))
        .unwrap();
    let c = b
        .constant(HostTensor::from_f64(DType::F64, vec![4], vec![0.3, -1.2, 0.7, 2.0]).unwrap())
        .unwrap();
    let p = b.binary("mul", sm, c).unwrap();
    let s2 = b.op1("reduce_sum", &[p], Attrs::new()).unwrap();
    let s = b.binary("add", s1, s2).unwrap();
    b.finish(&[s]).unwrap()
}

#[test]
fn hvp_matches_finite_differences_of_gradients() {
    let g = coupled();
    let mut rng = Rng(42);
    let x = HostTensor::from_f64(DType::F64, vec![2, 3], rng.vec(6, -1.0, 1.0)).unwrap();
    let w = HostTensor::from_f64(DType::F64, vec![3, 4], rng.vec(12, -1.0, 1.0)).unwrap();
    let vx = rng.vec(6, -1.0, 1.0);
    let vw = rng.vec(12, -1.0, 1.0);
    let h = hvp(&g, &[0, 1]).unwrap();
    let ins = vec![
        x.clone(),
        w.clone(),
        HostTensor::from_f64(DType::F64, vec![2, 3], vx.clone()).unwrap(),
        HostTensor::from_f64(DType::F64, vec![3, 4], vw.clone()).unwrap(),
    ];
    let got = run_compiled(&h, &ins);
    let gr = grad(&g, &[0, 1]).unwrap();
    let eps = 1e-5;
    let at = |s: f64| {
        let mv = |t: &HostTensor, v: &[f64]| {
            let d: Vec<f64> = t
                .to_f64_vec()
                .unwrap()
                .iter()
                .zip(v)
                .map(|(a, b)| a + s * b)
                .collect();
            HostTensor::from_f64(DType::F64, t.shape().clone(), d).unwrap()
        };
        eval(&gr, &[mv(&x, &vx), mv(&w, &vw)])
    };
    let (p, m) = (at(eps), at(-eps));
    for k in 0..2 {
        let want: Vec<f64> = p[k]
            .to_f64_vec()
            .unwrap()
            .iter()
            .zip(m[k].to_f64_vec().unwrap())
            .map(|(a, b)| (a - b) / (2.0 * eps))
            .collect();
        assert_close(
            &format!("hvp block {k}"),
            &got[k].to_f64_vec().unwrap(),
            &want,
            1e-7,
            1e-6,
        );
    }
}

/// vjp with an explicit cotangent equals grad of Σ out ⊙ cotangent.
#[test]
fn vjp_with_cotangent_matches_finite_differences() {
    let mut b = GraphBuilder::new("f");
    let x = b.input("x", TensorType::new(DType::F64, vec![3, 4]));
    let y = b
        .op1("log_softmax", &[x], Attrs::new().with("axis", 0i64))
        .unwrap();
    let g = b.finish(&[y]).unwrap();
    let mut rng = Rng(7);
    let xv = HostTensor::from_f64(DType::F64, vec![3, 4], rng.vec(12, -2.0, 2.0)).unwrap();
    let cv = rng.vec(12, -1.0, 1.0);
    let v = vjp(&g, &[0]).unwrap();
    let out = run_compiled(
        &v,
        &[
            xv.clone(),
            HostTensor::from_f64(DType::F64, vec![3, 4], cv.clone()).unwrap(),
        ],
    );
    // The primal output comes first.
    assert_close(
        "vjp primal",
        &out[0].to_f64_vec().unwrap(),
        &eval(&g, std::slice::from_ref(&xv))[0].to_f64_vec().unwrap(),
        0.0,
        1e-15,
    );
    // Reference: finite differences of Σ f(x) ⊙ c.
    let mut b = GraphBuilder::new("fc");
    let x = b.input("x", TensorType::new(DType::F64, vec![3, 4]));
    let y = b
        .op1("log_softmax", &[x], Attrs::new().with("axis", 0i64))
        .unwrap();
    let c = b
        .constant(HostTensor::from_f64(DType::F64, vec![3, 4], cv).unwrap())
        .unwrap();
    let p = b.binary("mul", y, c).unwrap();
    let s = b.op1("reduce_sum", &[p], Attrs::new()).unwrap();
    let fc = b.finish(&[s]).unwrap();
    let want = fd_grad(&fc, &[xv], 0, 1e-6);
    assert_close("vjp", &out[1].to_f64_vec().unwrap(), &want, 1e-7, 1e-6);
}

fn through(op: &str, stop: bool) -> Graph {
    let mut b = GraphBuilder::new(op);
    let x = b.input("x", TensorType::new(DType::F64, vec![4]));
    let x2 = if stop {
        b.unary("stop_gradient", x).unwrap()
    } else {
        x
    };
    let y = b.unary(op, x2).unwrap();
    let z = b.binary("mul", y, x).unwrap();
    let s = b.op1("reduce_sum", &[z], Attrs::new()).unwrap();
    b.finish(&[s]).unwrap()
}

#[test]
fn non_differentiable_ops_give_a_typed_error_naming_the_op() {
    for op in ["floor", "round", "sign", "ceil"] {
        match grad(&through(op, false), &[0]) {
            Err(AdError::NotDifferentiable { op: o, .. }) => assert_eq!(o, op),
            other => panic!("{op}: expected NotDifferentiable, got {other:?}"),
        }
        // With stop_gradient the path is cut on purpose: d/dx Σ floor(x)·x = floor(x).
        let g = grad(&through(op, true), &[0]).unwrap();
        let xs = vec![-1.4, -0.3, 0.6, 2.5];
        let got = run_compiled(
            &g,
            &[HostTensor::from_f64(DType::F64, vec![4], xs.clone()).unwrap()],
        );
        let f: fn(f64) -> f64 = match op {
            "floor" => f64::floor,
            "ceil" => f64::ceil,
            "sign" => f64::signum,
            _ => |v: f64| v.round_ties_even(),
        };
        let w: Vec<f64> = xs.iter().map(|&v| f(v)).collect();
        assert_close(op, &got[0].to_f64_vec().unwrap(), &w, 0.0, 0.0);
    }
    // Integer outputs (argmax) carry no gradient and need no stop_gradient.
    let mut b = GraphBuilder::new("argmax");
    let x = b.input("x", TensorType::new(DType::F64, vec![4]));
    let i = b
        .op1("argmax", &[x], Attrs::new().with("axis", 0i64))
        .unwrap();
    let fi = b
        .op1("cast", &[i], Attrs::new().with("dtype", DType::F64))
        .unwrap();
    let y = b.binary("mul", fi, x).unwrap();
    let s = b.op1("reduce_sum", &[y], Attrs::new()).unwrap();
    assert!(grad(&b.finish(&[s]).unwrap(), &[0]).is_ok());
}

#[test]
fn bad_arguments_are_typed_errors() {
    let g = elementwise("tanh");
    assert!(matches!(grad(&g, &[3]), Err(AdError::Arg(_))));
    let mut b = GraphBuilder::new("int");
    let x = b.input("x", TensorType::new(DType::I64, vec![2]));
    let s = b.op1("reduce_sum", &[x], Attrs::new()).unwrap();
    assert!(matches!(
        grad(&b.finish(&[s]).unwrap(), &[0]),
        Err(AdError::Arg(_))
    ));
}

/// Every op the registry marks differentiable has a rule (fused ops go
/// through their decomposition); adding a differentiable op without a
/// rule, or a rule for an op marked not differentiable, fails this test.
#[test]
fn rule_coverage_is_pinned() {
    let mut missing = rlx_autodiff::rules::ops_without_rules();
    missing.sort_unstable();
    assert!(
        missing.is_empty(),
        "differentiable ops without a rule: {missing:?}"
    );
    for op in rlx_autodiff::rules::ops_with_rules() {
        let d = rlx_ir::lookup(op).expect("a rule for a registered op");
        assert_eq!(
            d.grad,
            rlx_ir::Grad::Differentiable,
            "{op} has a rule but is marked not differentiable"
        );
    }
}

/// Differentiating an already optimized graph (fused softmax, matmul
/// epilogues, fused_elementwise regions) goes through the fused ops'
/// decompositions and gives the same gradient as the plain graph.
#[test]
fn gradients_of_fused_graphs_match_the_plain_graph() {
    let g = coupled();
    let eval_fn =
        |g: &Graph, ins: &[HostTensor]| rlx_cpu::run_graph(g, ins).map_err(|e| e.to_string());
    let (fused, report) = rlx_opt::compile_pipeline(&g, eval_fn).unwrap();
    assert!(
        fused.nodes.iter().any(|n| n.op.is_fused()),
        "the pipeline fused nothing: {report:?}"
    );
    let mut rng = Rng(99);
    let ins = vec![
        HostTensor::from_f64(DType::F64, vec![2, 3], rng.vec(6, -1.0, 1.0)).unwrap(),
        HostTensor::from_f64(DType::F64, vec![3, 4], rng.vec(12, -1.0, 1.0)).unwrap(),
    ];
    let a = eval(&grad(&g, &[0, 1]).unwrap(), &ins);
    let b = eval(&grad(&fused, &[0, 1]).unwrap(), &ins);
    for k in 0..2 {
        assert_close(
            &format!("d/dx{k}"),
            &b[k].to_f64_vec().unwrap(),
            &a[k].to_f64_vec().unwrap(),
            1e-14,
            1e-12,
        );
    }
}

/// complex/real/imag/fft/ifft/rfft/irfft (f32/c64 only): every map from
/// the inputs to the loss here is linear, so a central difference with
/// step 1 is exact up to f32 rounding.
#[test]
fn fourier_and_complex_gradients_match_differences() {
    use rlx_ir::TensorType as T;
    let build = |which: &str| -> Graph {
        let mut b = GraphBuilder::new(which);
        let a = b.input("a", T::new(DType::F32, vec![2, 6]));
        let c = b.input("c", T::new(DType::F32, vec![2, 6]));
        let out = match which {
            "fft" | "ifft" => {
                let z = b.binary("complex", a, c).unwrap();
                b.op1(which, &[z], Attrs::new().with("axis", 1i64)).unwrap()
            }
            "rfft" => b
                .op1("rfft", &[a], Attrs::new().with("axis", -1i64))
                .unwrap(),
            _ => {
                // irfft of 4 bins (n = 6), built from the first 4 columns.
                let an = b
                    .op1(
                        "narrow",
                        &[a],
                        Attrs::new()
                            .with("axis", 1i64)
                            .with("start", 0i64)
                            .with("len", 4i64),
                    )
                    .unwrap();
                let cn = b
                    .op1(
                        "narrow",
                        &[c],
                        Attrs::new()
                            .with("axis", 1i64)
                            .with("start", 0i64)
                            .with("len", 4i64),
                    )
                    .unwrap();
                let z = b.binary("complex", an, cn).unwrap();
                b.op1("irfft", &[z], Attrs::new().with("axis", 1i64))
                    .unwrap()
            }
        };
        let real_parts = if b.dtype(out) == DType::C64 {
            let r = b.unary("real", out).unwrap();
            let i = b.unary("imag", out).unwrap();
            vec![r, i]
        } else {
            vec![out]
        };
        let mut loss = None;
        for (k, v) in real_parts.into_iter().enumerate() {
            let d = b.shape(v).dims().to_vec();
            let n: usize = d.iter().product();
            let w: Vec<f32> = (0..n)
                .map(|i| ((i * 7 + k * 3) % 11) as f32 / 5.0 - 1.0)
                .collect();
            let wc = b.constant(HostTensor::from_slice(&w, d).unwrap()).unwrap();
            let p = b.binary("mul", v, wc).unwrap();
            let s = b.op1("reduce_sum", &[p], Attrs::new()).unwrap();
            loss = Some(match loss {
                Some(l) => b.binary("add", l, s).unwrap(),
                None => s,
            });
        }
        b.finish(&[loss.unwrap()]).unwrap()
    };
    for which in ["fft", "ifft", "rfft", "irfft"] {
        let g = build(which);
        let mut rng = Rng(3);
        let vals: Vec<HostTensor> = (0..2)
            .map(|_| HostTensor::from_f64(DType::F32, vec![2, 6], rng.vec(12, -1.0, 1.0)).unwrap())
            .collect();
        let gr = run_compiled(&grad(&g, &[0, 1]).unwrap(), &vals);
        for (k, gk) in gr.iter().enumerate() {
            let want = fd_grad(&g, &vals, k, 1.0);
            assert_close(
                &format!("{which} d/dx{k}"),
                &gk.to_f64_vec().unwrap(),
                &want,
                1e-4,
                1e-4,
            );
        }
        // Forward mode agrees with the same differences along a direction.
        let j = jvp(&g, &[0, 1]).unwrap();
        let t: Vec<HostTensor> = (0..2)
            .map(|_| HostTensor::from_f64(DType::F32, vec![2, 6], rng.vec(12, -1.0, 1.0)).unwrap())
            .collect();
        let mut ins = vals.clone();
        ins.extend(t.iter().cloned());
        let got = scalar(&run_compiled(&j, &ins)[1]);
        let want: f64 = (0..2)
            .map(|k| {
                gr[k]
                    .to_f64_vec()
                    .unwrap()
                    .iter()
                    .zip(t[k].to_f64_vec().unwrap())
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            })
            .sum();
        assert!(
            (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "{which} jvp {got} vs {want}"
        );
    }
}
