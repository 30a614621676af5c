//! Reverse-mode gradients of every op with a rule (and the fused ops,
//! through their decompositions) against central finite differences in
//! f64, on seeded random inputs. The loss is Σ_k Σ out_k ⊙ W_k with random
//! W_k, so every output element gets a different cotangent.

mod common;
use common::*;
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, HostTensor, TensorType};
use std::collections::BTreeSet;

enum In {
    /// A differentiated f64 input: shape, range.
    F(Vec<usize>, f64, f64),
    /// A constant (indices, masks).
    C(HostTensor),
}
use In::*;

struct Case {
    op: &'static str,
    ins: Vec<In>,
    attrs: Attrs,
}

fn c(op: &'static str, ins: Vec<In>, attrs: Attrs) -> Case {
    Case { op, ins, attrs }
}
fn f(d: &[usize]) -> In {
    F(d.to_vec(), -1.0, 1.0)
}
fn pos(d: &[usize]) -> In {
    F(d.to_vec(), 0.5, 2.0)
}
fn ids(v: &[i64], d: &[usize]) -> In {
    C(HostTensor::from_i64(DType::I64, d.to_vec(), v.to_vec()).unwrap())
}
fn a() -> Attrs {
    Attrs::new()
}
fn un(op: &'static str, lo: f64, hi: f64) -> Case {
    c(op, vec![F(vec![3, 4], lo, hi)], a())
}

fn cases() -> Vec<Case> {
    let mut v = vec![];
    for op in [
        "abs", "neg", "square", "relu", "exp", "exp2", "expm1", "sin", "cos", "atan", "sinh",
        "cosh", "tanh", "asinh", "erf", "sigmoid", "softplus", "identity",
    ] {
        v.push(un(op, -1.5, 1.5));
    }
    for op in ["log", "log2", "sqrt", "rsqrt", "reciprocal"] {
        v.push(un(op, 0.5, 2.0));
    }
    v.push(un("log1p", -0.5, 2.0));
    v.push(un("tan", -1.0, 1.0));
    for op in ["asin", "acos", "atanh", "erfinv"] {
        v.push(un(op, -0.8, 0.8));
    }
    v.push(un("acosh", 1.2, 3.0));
    v.push(c(
        "clamp",
        vec![f(&[4, 5])],
        a().with("min", -0.5).with("max", 0.5),
    ));
    v.push(c("clamp", vec![f(&[4, 5])], a().with("min", -0.2)));
    v.push(c("transfer", vec![f(&[2, 3])], a().with("to", "cpu")));
    for op in ["add", "sub", "mul", "max", "min", "atan2"] {
        v.push(c(op, vec![f(&[2, 3, 4]), f(&[3, 1])], a()));
        v.push(c(op, vec![f(&[4]), f(&[2, 3, 4])], a()));
    }
    v.push(c("div", vec![f(&[2, 3, 4]), pos(&[3, 1])], a()));
    v.push(c("pow", vec![pos(&[3, 4]), F(vec![4], -1.5, 1.5)], a()));
    let mask = HostTensor::new(
        DType::Bool,
        vec![3, 1],
        rlx_ir::TensorData::Bool(vec![true, false, true]),
    )
    .unwrap();
    v.push(c("where", vec![C(mask), f(&[3, 4]), f(&[4])], a()));
    // reductions
    for op in [
        "reduce_sum",
        "reduce_mean",
        "reduce_max",
        "reduce_min",
        "reduce_logsumexp",
        "reduce_variance",
    ] {
        v.push(c(op, vec![f(&[3, 4, 5])], a().with("axes", vec![1i64])));
        v.push(c(
            op,
            vec![f(&[3, 4, 5])],
            a().with("axes", vec![0i64, -1]).with("keepdim", true),
        ));
        v.push(c(op, vec![f(&[3, 4])], a()));
    }
    v.push(c(
        "reduce_variance",
        vec![f(&[3, 4, 5])],
        a().with("axes", vec![2i64]).with("correction", 1i64),
    ));
    v.push(c(
        "reduce_prod",
        vec![pos(&[3, 4])],
        a().with("axes", vec![1i64]),
    ));
    for (ex, rev) in [(false, false), (true, false), (false, true), (true, true)] {
        v.push(c(
            "cumsum",
            vec![f(&[3, 4])],
            a().with("axis", 1i64)
                .with("exclusive", ex)
                .with("reverse", rev),
        ));
        v.push(c(
            "cumprod",
            vec![pos(&[3, 4])],
            a().with("axis", 1i64)
                .with("exclusive", ex)
                .with("reverse", rev),
        ));
    }
    // shape
    v.push(c(
        "reshape",
        vec![f(&[3, 4])],
        a().with("shape", vec![2i64, -1]),
    ));
    v.push(c(
        "squeeze",
        vec![f(&[3, 1, 4])],
        a().with("axes", vec![1i64]),
    ));
    v.push(c(
        "unsqueeze",
        vec![f(&[3, 4])],
        a().with("axes", vec![0i64, 2]),
    ));
    v.push(c(
        "permute",
        vec![f(&[2, 3, 4])],
        a().with("perm", vec![2i64, 0, 1]),
    ));
    v.push(c(
        "broadcast",
        vec![f(&[3, 1])],
        a().with("shape", vec![2i64, 3, 4]),
    ));
    v.push(c(
        "narrow",
        vec![f(&[3, 6])],
        a().with("axis", 1i64).with("start", 2i64).with("len", 3i64),
    ));
    v.push(c(
        "slice",
        vec![f(&[5, 7])],
        a().with("starts", vec![1i64, -1])
            .with("ends", vec![5i64, -8])
            .with("steps", vec![2i64, -2]),
    ));
    v.push(c(
        "slice",
        vec![f(&[5, 7])],
        a().with("starts", vec![0i64])
            .with("ends", vec![100i64])
            .with("axes", vec![1i64])
            .with("steps", vec![3i64]),
    ));
    v.push(c(
        "concat",
        vec![f(&[2, 3]), f(&[2, 2])],
        a().with("axis", 1i64),
    ));
    v.push(c(
        "split",
        vec![f(&[5, 3])],
        a().with("axis", 0i64).with("sizes", vec![2i64, 3]),
    ));
    v.push(c(
        "pad",
        vec![f(&[2, 3])],
        a().with("pads", vec![1i64, 0, 2, 1]).with("value", 0.5),
    ));
    v.push(c("flip", vec![f(&[3, 4])], a().with("axes", vec![0i64, 1])));
    v.push(c(
        "roll",
        vec![f(&[3, 4])],
        a().with("shifts", vec![1i64, -3])
            .with("axes", vec![0i64, 1]),
    ));
    v.push(c(
        "tile",
        vec![f(&[2, 3])],
        a().with("repeats", vec![2i64, 3]),
    ));
    // linalg
    v.push(c("matmul", vec![f(&[2, 3, 4]), f(&[4, 5])], a()));
    v.push(c("matmul", vec![f(&[3]), f(&[2, 3, 4])], a()));
    v.push(c("matmul", vec![f(&[2, 1, 3, 4]), f(&[5, 4, 2])], a()));
    v.push(c("matmul", vec![f(&[3, 4]), f(&[4])], a()));
    v.push(c(
        "dot_general",
        vec![f(&[2, 3, 4]), f(&[4, 2, 5])],
        a().with("lhs_batch", vec![0i64])
            .with("rhs_batch", vec![1i64])
            .with("lhs_contract", vec![2i64])
            .with("rhs_contract", vec![0i64]),
    ));
    v.push(c(
        "dot_general",
        vec![f(&[3, 4, 5]), f(&[5, 3, 2])],
        a().with("lhs_batch", Vec::<i64>::new())
            .with("rhs_batch", Vec::<i64>::new())
            .with("lhs_contract", vec![2i64, 0])
            .with("rhs_contract", vec![0i64, 1]),
    ));
    v.push(c(
        "conv",
        vec![f(&[2, 3, 7, 6]), f(&[4, 3, 3, 2]), f(&[4])],
        a().with("strides", vec![2i64, 1])
            .with("pads", vec![1i64, 0, 1, 1])
            .with("dilations", vec![1i64, 2]),
    ));
    v.push(c(
        "conv",
        vec![f(&[1, 4, 5, 5]), f(&[6, 2, 3, 3])],
        a().with("groups", 2i64),
    ));
    v.push(c(
        "conv",
        vec![f(&[2, 2, 9]), f(&[3, 2, 3])],
        a().with("strides", vec![3i64]),
    ));
    v.push(c(
        "conv_transpose",
        vec![f(&[2, 4, 3, 3]), f(&[4, 3, 2, 3]), f(&[3])],
        a().with("strides", vec![2i64, 1])
            .with("pads", vec![0i64, 1, 1, 0])
            .with("output_padding", vec![1i64, 0]),
    ));
    v.push(c(
        "conv_transpose",
        vec![f(&[1, 4, 3]), f(&[4, 1, 3])],
        a().with("groups", 2i64).with("dilations", vec![2i64]),
    ));
    for op in ["max_pool", "avg_pool"] {
        v.push(c(
            op,
            vec![f(&[2, 3, 5, 4])],
            a().with("kernel", vec![2i64, 2])
                .with("strides", vec![2i64, 2]),
        ));
    }
    v.push(c(
        "max_pool",
        vec![f(&[2, 2, 6, 5])],
        a().with("kernel", vec![3i64, 2])
            .with("strides", vec![2i64, 1])
            .with("pads", vec![1i64, 0, 1, 1])
            .with("dilations", vec![1i64, 2]),
    ));
    v.push(c(
        "avg_pool",
        vec![f(&[2, 2, 6, 5])],
        a().with("kernel", vec![3i64, 2])
            .with("strides", vec![2i64, 1])
            .with("pads", vec![1i64, 0, 1, 1]),
    ));
    v.push(c(
        "avg_pool",
        vec![f(&[1, 2, 5, 5])],
        a().with("kernel", vec![3i64, 3])
            .with("strides", vec![2i64, 2])
            .with("pads", vec![1i64, 1, 1, 1])
            .with("count_include_pad", true),
    ));
    v.push(c(
        "max_pool",
        vec![f(&[1, 2, 7])],
        a().with("kernel", vec![3i64]).with("strides", vec![2i64]),
    ));
    v.push(c("global_avg_pool", vec![f(&[2, 3, 4, 2])], a()));
    v.push(c("global_max_pool", vec![f(&[2, 3, 4, 2])], a()));
    // index
    v.push(c(
        "gather",
        vec![f(&[4, 3]), ids(&[0, 2, 3, -1], &[2, 2])],
        a().with("axis", 0i64),
    ));
    v.push(c(
        "gather",
        vec![f(&[2, 4, 3]), ids(&[1, 1, 3], &[3])],
        a().with("axis", 1i64),
    ));
    v.push(c(
        "index_select",
        vec![f(&[4, 3]), ids(&[2, 0, 2], &[3])],
        a().with("axis", 0i64),
    ));
    v.push(c(
        "embedding",
        vec![f(&[5, 3]), ids(&[1, 4, 1, 0], &[2, 2])],
        a(),
    ));
    v.push(c(
        "gather_elements",
        vec![f(&[3, 4]), ids(&[0, 3, 1, 1, 2, 0], &[3, 2])],
        a().with("axis", 1i64),
    ));
    v.push(c(
        "scatter",
        vec![f(&[3, 4]), ids(&[1, 0, 3], &[3, 1]), f(&[3, 1])],
        a().with("axis", 1i64),
    ));
    v.push(c(
        "scatter_add",
        vec![f(&[3, 4]), ids(&[1, 1, 0, 3, 2, 2], &[3, 2]), f(&[3, 2])],
        a().with("axis", 1i64),
    ));
    v.push(c(
        "gather_nd",
        vec![f(&[3, 4, 2]), ids(&[0, 1, 2, 3], &[2, 2])],
        a(),
    ));
    v.push(c(
        "scatter_nd",
        vec![f(&[3, 4]), ids(&[1, 2], &[2, 1]), f(&[2, 4])],
        a(),
    ));
    v.push(c(
        "scatter_nd",
        vec![f(&[3, 4]), ids(&[1, 1], &[2, 1]), f(&[2, 4])],
        a().with("reduction", "add"),
    ));
    v.push(c("sort", vec![f(&[3, 5])], a().with("axis", 1i64)));
    v.push(c(
        "topk",
        vec![f(&[3, 5])],
        a().with("k", 2i64).with("axis", 1i64),
    ));
    // control flow (rewritten into straight-line MIR)
    for cond in [true, false] {
        let c = HostTensor::new(DType::Bool, vec![], rlx_ir::TensorData::Bool(vec![cond])).unwrap();
        v.push(c_if(c));
    }
    v.push(c(
        "scan",
        vec![f(&[3]), f(&[3]), f(&[4, 3])],
        a().with("body", scan_body()).with("num_carry", 2i64),
    ));
    // recurrent cells (rewritten into primitives)
    v.push(c(
        "rnn_cell",
        vec![
            f(&[2, 3]),
            f(&[2, 4]),
            f(&[4, 3]),
            f(&[4, 4]),
            f(&[4]),
            f(&[4]),
        ],
        a(),
    ));
    v.push(c(
        "rnn_cell",
        vec![
            f(&[2, 3]),
            f(&[2, 4]),
            f(&[4, 3]),
            f(&[4, 4]),
            f(&[4]),
            f(&[4]),
        ],
        a().with("nonlinearity", "relu"),
    ));
    v.push(c(
        "lstm_cell",
        vec![
            f(&[2, 3]),
            f(&[2, 4]),
            f(&[2, 4]),
            f(&[16, 3]),
            f(&[16, 4]),
            f(&[16]),
            f(&[16]),
        ],
        a(),
    ));
    v.push(c(
        "gru_cell",
        vec![
            f(&[2, 3]),
            f(&[2, 4]),
            f(&[12, 3]),
            f(&[12, 4]),
            f(&[12]),
            f(&[12]),
        ],
        a(),
    ));
    // fused ops, through their decompositions
    v.push(c("softmax", vec![f(&[3, 5])], a().with("axis", 1i64)));
    v.push(c("log_softmax", vec![f(&[3, 5])], a().with("axis", -1i64)));
    v.push(c("gelu", vec![f(&[3, 4])], a()));
    v.push(c("gelu_tanh", vec![f(&[3, 4])], a()));
    v.push(c("silu", vec![f(&[3, 4])], a()));
    v.push(c("swiglu", vec![f(&[3, 4]), f(&[3, 4])], a()));
    v.push(c(
        "layer_norm",
        vec![f(&[3, 4]), f(&[4]), f(&[4])],
        a().with("axis", -1i64).with("eps", 1e-5),
    ));
    v.push(c(
        "rms_norm",
        vec![f(&[3, 4]), f(&[4])],
        a().with("axis", -1i64).with("eps", 1e-5),
    ));
    v.push(c(
        "matmul_bias_act",
        vec![f(&[3, 4]), f(&[4, 2]), f(&[2])],
        a().with("activation", "gelu"),
    ));
    v.push(c(
        "attention",
        vec![f(&[1, 2, 3, 4]), f(&[1, 2, 3, 4]), f(&[1, 2, 3, 4])],
        a().with("mask_kind", "causal"),
    ));
    v
}

fn branch(then: bool) -> Graph {
    let mut b = GraphBuilder::new(if then { "then" } else { "else" });
    let x = b.input("a", TensorType::new(DType::F64, vec![3]));
    let w = b.input("w", TensorType::new(DType::F64, vec![3]));
    let y = if then {
        let m = b.binary("mul", x, w).unwrap();
        b.unary("tanh", m).unwrap()
    } else {
        let s = b.unary("sin", x).unwrap();
        b.binary("add", s, w).unwrap()
    };
    b.finish(&[y]).unwrap()
}
fn c_if(cond: HostTensor) -> Case {
    c(
        "if",
        vec![C(cond), f(&[3]), f(&[3])],
        a().with("then_branch", branch(true))
            .with("else_branch", branch(false)),
    )
}
/// (h, w, x) -> (tanh(h·w + x), w, h·x)
fn scan_body() -> Graph {
    let mut b = GraphBuilder::new("body");
    let h = b.input("h", TensorType::new(DType::F64, vec![3]));
    let w = b.input("w", TensorType::new(DType::F64, vec![3]));
    let x = b.input("x", TensorType::new(DType::F64, vec![3]));
    let hw = b.binary("mul", h, w).unwrap();
    let s = b.binary("add", hw, x).unwrap();
    let h2 = b.unary("tanh", s).unwrap();
    let y = b.binary("mul", h, x).unwrap();
    b.finish(&[h2, w, y]).unwrap()
}

/// (graph, float inputs) for one case; the loss is Σ out_k ⊙ W_k.
fn build(case: &Case, rng: &mut Rng) -> (Graph, Vec<HostTensor>) {
    let mut b = GraphBuilder::new(case.op);
    let mut ins = vec![];
    let mut vals = vec![];
    for (k, i) in case.ins.iter().enumerate() {
        match i {
            F(d, lo, hi) => {
                let n: usize = d.iter().product();
                vals.push(
                    HostTensor::from_f64(DType::F64, d.clone(), rng.vec(n, *lo, *hi)).unwrap(),
                );
                ins.push(b.input(format!("x{k}"), TensorType::new(DType::F64, d.clone())));
            }
            C(t) => ins.push(b.constant(t.clone()).unwrap()),
        }
    }
    let outs = b
        .op(case.op, &ins, case.attrs.clone())
        .unwrap_or_else(|e| panic!("{}: {e}", case.op));
    let mut loss = None;
    for o in outs {
        if b.dtype(o) != DType::F64 {
            continue;
        }
        let d = b.shape(o).dims().to_vec();
        let n: usize = d.iter().product();
        let w = b
            .constant(HostTensor::from_f64(DType::F64, d, rng.vec(n, -1.0, 1.0)).unwrap())
            .unwrap();
        let p = b.binary("mul", o, w).unwrap();
        let s = b.op1("reduce_sum", &[p], Attrs::new()).unwrap();
        loss = Some(match loss {
            Some(l) => b.binary("add", l, s).unwrap(),
            None => s,
        });
    }
    (b.finish(&[loss.unwrap()]).unwrap(), vals)
}

#[test]
fn every_rule_matches_finite_differences() {
    let mut rng = Rng(0x5EED_0001);
    let mut failures = vec![];
    let all = cases();
    let mut checked = 0;
    for case in &all {
        let (g, vals) = build(case, &mut rng);
        let wrt: Vec<usize> = (0..vals.len()).collect();
        checked += vals.len();
        let gg = rlx_autodiff::grad(&g, &wrt).unwrap_or_else(|e| panic!("{}: grad: {e}", case.op));
        let got = run_compiled(&gg, &vals);
        for k in 0..vals.len() {
            let want = fd_grad(&g, &vals, k, 1e-6);
            let got = got[k].to_f64_vec().unwrap();
            let r = std::panic::catch_unwind(|| {
                assert_close(&format!("{} d/dx{k}", case.op), &got, &want, 1e-6, 1e-5)
            });
            if let Err(e) = r {
                failures.push(e.downcast_ref::<String>().cloned().unwrap_or_default());
            }
        }
    }
    eprintln!("{} cases, {checked} input gradients checked", all.len());
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_rule_has_a_finite_difference_case() {
    let tested: BTreeSet<&str> = cases().iter().map(|c| c.op).collect();
    let missing: Vec<&str> = rlx_autodiff::rules::ops_with_rules()
        .into_iter()
        // cast (f32 round trip) and the f32/c64-only Fourier ops are checked
        // in their own tests (cast_gradient, higher_order::fourier_...).
        .filter(|op| {
            !tested.contains(op)
                && ![
                    "cast", "complex", "real", "imag", "fft", "ifft", "rfft", "irfft",
                ]
                .contains(op)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "rules without a gradient check: {missing:?}"
    );
}

/// cast is checked on its own: f64 → f32 → f64 loses precision, so the
/// difference step and tolerance are those of f32.
#[test]
fn cast_gradient() {
    let mut b = GraphBuilder::new("cast");
    let x = b.input("x", TensorType::new(DType::F64, vec![5]));
    let y = b
        .op1("cast", &[x], Attrs::new().with("dtype", DType::F32))
        .unwrap();
    let y = b.unary("square", y).unwrap();
    let y = b
        .op1("cast", &[y], Attrs::new().with("dtype", DType::F64))
        .unwrap();
    let s = b.op1("reduce_sum", &[y], Attrs::new()).unwrap();
    let g = b.finish(&[s]).unwrap();
    let xs = vec![0.5, -1.25, 2.0, 0.75, -0.125];
    let vals = vec![HostTensor::from_f64(DType::F64, vec![5], xs.clone()).unwrap()];
    let gg = rlx_autodiff::grad(&g, &[0]).unwrap();
    let got = run_compiled(&gg, &vals)[0].to_f64_vec().unwrap();
    let want: Vec<f64> = xs.iter().map(|x| 2.0 * x).collect();
    assert_close("cast", &got, &want, 1e-6, 1e-6);
}

/// Forward mode on the same cases: the JVP of the scalar loss with random
/// tangents on every input equals the central difference along them.
#[test]
fn every_rule_jvp_matches_directional_differences() {
    let mut rng = Rng(0x5EED_0002);
    let mut failures = vec![];
    for case in cases() {
        let (g, vals) = build(&case, &mut rng);
        let wrt: Vec<usize> = (0..vals.len()).collect();
        let tans: Vec<HostTensor> = vals
            .iter()
            .map(|v| {
                HostTensor::from_f64(DType::F64, v.shape().clone(), rng.vec(v.numel(), -1.0, 1.0))
                    .unwrap()
            })
            .collect();
        let j = rlx_autodiff::jvp(&g, &wrt).unwrap_or_else(|e| panic!("{}: jvp: {e}", case.op));
        let mut ins = vals.clone();
        ins.extend(tans.iter().cloned());
        let got = scalar(&run_compiled(&j, &ins)[1]);
        let eps = 1e-6;
        let at = |s: f64| {
            let moved: Vec<HostTensor> = vals
                .iter()
                .zip(&tans)
                .map(|(v, t)| {
                    let x: Vec<f64> = v
                        .to_f64_vec()
                        .unwrap()
                        .iter()
                        .zip(t.to_f64_vec().unwrap())
                        .map(|(a, b)| a + s * b)
                        .collect();
                    HostTensor::from_f64(DType::F64, v.shape().clone(), x).unwrap()
                })
                .collect();
            scalar(&eval(&g, &moved)[0])
        };
        let want = (at(eps) - at(-eps)) / (2.0 * eps);
        if (got - want).abs() > 1e-6 + 1e-5 * want.abs() {
            failures.push(format!("{}: jvp {got} vs {want}", case.op));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// vmap of every case (and of its gradient) over a new innermost axis of
/// input 0, against a loop over the slices.
#[test]
fn vmap_of_every_case_matches_a_loop() {
    let mut rng = Rng(0x5EED_0003);
    let n = 3;
    let mut failures = vec![];
    for case in cases() {
        let (g, vals) = build(&case, &mut rng);
        let gg = rlx_autodiff::grad(&g, &[0]).unwrap();
        for (what, f) in [("f", &g), ("grad f", &gg)] {
            let d = vals[0].shape().dims().to_vec();
            let ax = d.len();
            let slices: Vec<Vec<f64>> = (0..n)
                .map(|_| {
                    rng.vec(vals[0].numel(), -1.0, 1.0)
                        .iter()
                        .map(|v| v * 0.3 + 0.9)
                        .collect()
                })
                .collect();
            // Interleave the slices so the mapped axis is the innermost one.
            let mut batched = vec![];
            for i in 0..vals[0].numel() {
                for s in &slices {
                    batched.push(s[i]);
                }
            }
            let mut bd = d.clone();
            bd.push(n);
            let mut in_axes = vec![None; vals.len()];
            in_axes[0] = Some(ax);
            let v = rlx_autodiff::vmap(f, &in_axes, 0, n)
                .unwrap_or_else(|e| panic!("{}: vmap: {e}", case.op));
            let mut ins = vals.clone();
            ins[0] = HostTensor::from_f64(DType::F64, bd, batched).unwrap();
            let got = run_compiled(&v, &ins)[0].to_f64_vec().unwrap();
            let per = got.len() / n;
            for (k, s) in slices.iter().enumerate() {
                let mut ins = vals.clone();
                ins[0] = HostTensor::from_f64(DType::F64, d.clone(), s.clone()).unwrap();
                let want = eval(f, &ins)[0].to_f64_vec().unwrap();
                let got_k = &got[k * per..(k + 1) * per];
                let ok = got_k.iter().zip(&want).all(|(a, b)| {
                    (a - b).abs() <= 1e-12 + 1e-9 * b.abs() || (a.is_nan() && b.is_nan())
                });
                if !ok {
                    failures.push(format!(
                        "{} ({what}) slice {k}: {:?} vs {:?}",
                        case.op,
                        &got_k[..got_k.len().min(4)],
                        &want[..want.len().min(4)]
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
