//! Parity with the CPU reference on seeded random inputs, for every op and
//! dtype the wgpu backend claims, run on the machine's Vulkan adapter
//! (Mesa lavapipe in CI). Shapes are small: lavapipe runs on the CPU.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use common::*;
use rlx::{Attrs, DType};

const F: DType = DType::F32;

/// Input range per unary op (the op's domain, away from poles).
fn domain(op: &str) -> (f64, f64) {
    match op {
        "log" | "log2" | "sqrt" | "rsqrt" | "reciprocal" => (0.05, 4.0),
        "asin" | "acos" | "atanh" => (-0.95, 0.95),
        "acosh" => (1.05, 4.0),
        "log1p" => (-0.9, 3.0),
        "tan" => (-1.2, 1.2),
        "round" | "floor" | "ceil" | "trunc" => (-4.0, 4.0),
        _ => (-3.0, 3.0),
    }
}

#[test]
fn unary_f32() {
    init();
    let ops = [
        "abs",
        "neg",
        "sign",
        "square",
        "relu",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log1p",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "erf",
        "sigmoid",
        "softplus",
        "floor",
        "ceil",
        "round",
        "trunc",
        "isnan",
        "isinf",
        "isfinite",
        "gelu",
        "gelu_tanh",
        "silu",
    ];
    let mut rng = Rng::new(1);
    for op in ops {
        let (lo, hi) = domain(op);
        let g = one_op(op, &[(F, vec![3, 37])], Attrs::new());
        let x = rand(&mut rng, F, &[3, 37], lo, hi);
        parity(op, &g, &[x], 2e-6, 2e-5);
    }
}

#[test]
fn unary_int_and_bool() {
    init();
    let mut rng = Rng::new(2);
    for op in ["abs", "neg", "sign", "square", "relu", "bitwise_not"] {
        let g = one_op(op, &[(DType::I32, vec![50])], Attrs::new());
        parity(
            op,
            &g,
            &[rand(&mut rng, DType::I32, &[50], -100.0, 100.0)],
            0.0,
            0.0,
        );
    }
    for op in ["not", "bitwise_not"] {
        let g = one_op(op, &[(DType::Bool, vec![17])], Attrs::new());
        parity(
            op,
            &g,
            &[rand(&mut rng, DType::Bool, &[17], 0.0, 1.0)],
            0.0,
            0.0,
        );
    }
}

#[test]
fn binary_with_broadcasting() {
    init();
    let mut rng = Rng::new(3);
    let shapes = [(vec![2, 3, 5], vec![3, 1]), (vec![4], vec![2, 4])];
    for op in [
        "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "eq", "ne", "lt", "le",
        "gt", "ge",
    ] {
        for (sa, sb) in &shapes {
            let (lo, hi) = if op == "pow" { (0.1, 2.0) } else { (-3.0, 3.0) };
            let g = one_op(op, &[(F, sa.clone()), (F, sb.clone())], Attrs::new());
            let mut a = rand(&mut rng, F, sa, lo, hi);
            if matches!(op, "eq" | "ne" | "le" | "ge") {
                // Some equal pairs, so equality is exercised.
                a = rand(&mut rng, F, sa, -2.0, 2.0)
                    .to_f64_vec()
                    .map(|v| {
                        HostTensor::from_f64(F, sa.clone(), v.iter().map(|x| x.round()).collect())
                            .unwrap()
                    })
                    .unwrap();
            }
            let b = if matches!(op, "eq" | "ne" | "le" | "ge") {
                HostTensor::from_f64(
                    F,
                    sb.clone(),
                    rand(&mut rng, F, sb, -2.0, 2.0)
                        .to_f64_vec()
                        .unwrap()
                        .iter()
                        .map(|x| x.round())
                        .collect(),
                )
                .unwrap()
            } else {
                rand(&mut rng, F, sb, if op == "pow" { -2.0 } else { lo }, hi)
            };
            parity(&format!("{op} {sa:?} {sb:?}"), &g, &[a, b], 2e-6, 2e-5);
        }
    }
    let g = one_op(
        "swiglu",
        &[(F, vec![3, 11]), (F, vec![3, 11])],
        Attrs::new(),
    );
    parity(
        "swiglu",
        &g,
        &[
            rand(&mut rng, F, &[3, 11], -3.0, 3.0),
            rand(&mut rng, F, &[3, 11], -3.0, 3.0),
        ],
        2e-6,
        2e-5,
    );
    // pow of a negative base with integral exponents (sign by parity).
    let g = one_op("pow", &[(F, vec![6]), (F, vec![6])], Attrs::new());
    let a = HostTensor::from_slice(&[-2.0f32, -2.0, -1.5, 0.0, 0.0, -3.0], vec![6]).unwrap();
    let b = HostTensor::from_slice(&[3.0f32, 2.0, 0.5, -1.0, 2.0, 0.0], vec![6]).unwrap();
    parity("pow negative base", &g, &[a, b], 1e-6, 1e-6);
    for op in [
        "add",
        "sub",
        "mul",
        "max",
        "min",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "shl",
        "shr",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
    ] {
        let g = one_op(
            op,
            &[(DType::I32, vec![3, 8]), (DType::I32, vec![8])],
            Attrs::new(),
        );
        let (lo, hi) = if matches!(op, "shl" | "shr") {
            (-2.0, 35.0)
        } else {
            (-1e9, 1e9)
        };
        let a = rand(&mut rng, DType::I32, &[3, 8], -1e9, 1e9);
        let b = rand(&mut rng, DType::I32, &[8], lo, hi);
        parity(&format!("{op} i32"), &g, &[a, b], 0.0, 0.0);
    }
    for op in [
        "and",
        "or",
        "xor",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "eq",
        "ne",
    ] {
        let g = one_op(
            op,
            &[(DType::Bool, vec![2, 9]), (DType::Bool, vec![9])],
            Attrs::new(),
        );
        let a = rand(&mut rng, DType::Bool, &[2, 9], 0.0, 1.0);
        let b = rand(&mut rng, DType::Bool, &[9], 0.0, 1.0);
        parity(&format!("{op} bool"), &g, &[a, b], 0.0, 0.0);
    }
    // i64 equality is exact on both words.
    let g = one_op(
        "ne",
        &[(DType::I64, vec![6]), (DType::I64, vec![6])],
        Attrs::new(),
    );
    let a = HostTensor::from_slice(&[0i64, 1, -1, 1 << 40, (1 << 40) + 1, 7], vec![6]).unwrap();
    let b = HostTensor::from_slice(&[0i64, 1, 1, 1 << 40, 1 << 40, 8], vec![6]).unwrap();
    parity("ne i64", &g, &[a, b], 0.0, 0.0);
}

use rlx::HostTensor;

#[test]
fn where_clamp_cast() {
    init();
    let mut rng = Rng::new(4);
    let g = one_op(
        "where",
        &[(DType::Bool, vec![4, 1]), (F, vec![4, 6]), (F, vec![6])],
        Attrs::new(),
    );
    let ins = [
        rand(&mut rng, DType::Bool, &[4, 1], 0.0, 1.0),
        rand(&mut rng, F, &[4, 6], -1.0, 1.0),
        rand(&mut rng, F, &[6], -1.0, 1.0),
    ];
    parity("where", &g, &ins, 0.0, 0.0);
    for (d, lo, hi) in [(F, -5.0, 5.0), (DType::I32, -50.0, 50.0)] {
        let g = one_op(
            "clamp",
            &[(d, vec![40])],
            Attrs::new().with("min", -1.5).with("max", 2.5),
        );
        parity("clamp", &g, &[rand(&mut rng, d, &[40], lo, hi)], 0.0, 0.0);
    }
    let casts = [
        (F, DType::I32, -1e3, 1e3),
        (F, DType::Bool, -1.0, 1.0),
        (DType::I32, F, -1e6, 1e6),
        (DType::Bool, F, 0.0, 1.0),
        (DType::I64, F, -1e6, 1e6),
        (DType::I64, DType::I32, -1e6, 1e6),
        (DType::I32, DType::Bool, -2.0, 2.0),
    ];
    for (from, to, lo, hi) in casts {
        let g = one_op("cast", &[(from, vec![33])], Attrs::new().with("dtype", to));
        parity(
            &format!("cast {from}->{to}"),
            &g,
            &[rand(&mut rng, from, &[33], lo, hi)],
            0.0,
            0.0,
        );
    }
}

#[test]
fn reductions() {
    init();
    let mut rng = Rng::new(5);
    let ops = [
        "reduce_sum",
        "reduce_mean",
        "reduce_prod",
        "reduce_max",
        "reduce_min",
        "reduce_logsumexp",
        "reduce_variance",
    ];
    for op in ops {
        for (axes, keep) in [(vec![1i64], false), (vec![0, 2], true), (vec![], false)] {
            let mut a = Attrs::new()
                .with("axes", axes.clone())
                .with("keepdim", keep);
            if op == "reduce_variance" {
                a = a.with("correction", 1i64);
            }
            let g = one_op(op, &[(F, vec![3, 300, 4])], a);
            let (lo, hi) = if op == "reduce_prod" {
                (0.9, 1.1)
            } else {
                (-2.0, 2.0)
            };
            parity(
                &format!("{op} {axes:?}"),
                &g,
                &[rand(&mut rng, F, &[3, 300, 4], lo, hi)],
                1e-5,
                1e-4,
            );
        }
    }
    for op in ["reduce_any", "reduce_all"] {
        let g = one_op(
            op,
            &[(DType::Bool, vec![5, 3])],
            Attrs::new().with("axes", vec![1i64]),
        );
        parity(
            op,
            &g,
            &[rand(&mut rng, DType::Bool, &[5, 3], 0.0, 1.0)],
            0.0,
            0.0,
        );
    }
    for op in ["argmax", "argmin"] {
        for ax in [0i64, -1] {
            let g = one_op(op, &[(F, vec![7, 301])], Attrs::new().with("axis", ax));
            // Rounded values: ties, where the first index must win.
            let x = rand(&mut rng, F, &[7, 301], -3.0, 3.0)
                .to_f64_vec()
                .unwrap();
            let x = HostTensor::from_f64(F, vec![7, 301], x.iter().map(|v| v.round()).collect())
                .unwrap();
            parity(&format!("{op} axis {ax}"), &g, &[x], 0.0, 0.0);
        }
    }
}

#[test]
fn softmax_and_norms() {
    init();
    let mut rng = Rng::new(6);
    for op in ["softmax", "log_softmax"] {
        for ax in [1i64, -1] {
            let g = one_op(op, &[(F, vec![3, 20, 7])], Attrs::new().with("axis", ax));
            parity(
                &format!("{op} {ax}"),
                &g,
                &[rand(&mut rng, F, &[3, 20, 7], -4.0, 4.0)],
                1e-6,
                1e-5,
            );
        }
    }
    let g = one_op(
        "layer_norm",
        &[(F, vec![4, 3, 10]), (F, vec![3, 10]), (F, vec![3, 10])],
        Attrs::new().with("axis", 1i64).with("eps", 1e-5),
    );
    let ins = [
        rand(&mut rng, F, &[4, 3, 10], -2.0, 2.0),
        rand(&mut rng, F, &[3, 10], 0.5, 1.5),
        rand(&mut rng, F, &[3, 10], -1.0, 1.0),
    ];
    parity("layer_norm", &g, &ins, 1e-5, 1e-4);
    let g = one_op(
        "rms_norm",
        &[(F, vec![6, 33]), (F, vec![33])],
        Attrs::new().with("eps", 1e-6),
    );
    let ins = [
        rand(&mut rng, F, &[6, 33], -2.0, 2.0),
        rand(&mut rng, F, &[33], 0.5, 1.5),
    ];
    parity("rms_norm", &g, &ins, 1e-5, 1e-4);
}

#[test]
fn matmul_shapes_and_epilogues() {
    init();
    let mut rng = Rng::new(7);
    let cases: [(Vec<usize>, Vec<usize>); 5] = [
        (vec![2, 5, 7], vec![7, 9]),
        (vec![5, 7], vec![2, 7, 3]),
        (vec![7], vec![7, 4]),
        (vec![3, 7], vec![7]),
        (vec![70, 130], vec![130, 67]),
    ];
    for (sa, sb) in cases {
        let g = one_op("matmul", &[(F, sa.clone()), (F, sb.clone())], Attrs::new());
        let ins = [
            rand(&mut rng, F, &sa, -1.0, 1.0),
            rand(&mut rng, F, &sb, -1.0, 1.0),
        ];
        parity(&format!("matmul {sa:?} {sb:?}"), &g, &ins, 1e-5, 1e-4);
    }
    for act in [
        "none",
        "relu",
        "gelu",
        "gelu_tanh",
        "silu",
        "sigmoid",
        "tanh",
    ] {
        let g = one_op(
            "matmul_bias_act",
            &[(F, vec![2, 17, 40]), (F, vec![40, 33]), (F, vec![33])],
            Attrs::new().with("activation", act),
        );
        let ins = [
            rand(&mut rng, F, &[2, 17, 40], -1.0, 1.0),
            rand(&mut rng, F, &[40, 33], -1.0, 1.0),
            rand(&mut rng, F, &[33], -1.0, 1.0),
        ];
        parity(&format!("matmul_bias_act {act}"), &g, &ins, 1e-5, 1e-4);
    }
}

#[test]
fn attention_masks() {
    init();
    let mut rng = Rng::new(8);
    let (b, h, sq, sk, d) = (2, 3, 5, 7, 8);
    let qkv = |rng: &mut Rng| {
        [
            rand(rng, F, &[b, h, sq, d], -1.0, 1.0),
            rand(rng, F, &[b, h, sk, d], -1.0, 1.0),
            rand(rng, F, &[b, h, sk, d], -1.0, 1.0),
        ]
    };
    let shapes = vec![
        (F, vec![b, h, sq, d]),
        (F, vec![b, h, sk, d]),
        (F, vec![b, h, sk, d]),
    ];
    for kind in ["none", "causal"] {
        let g = one_op("attention", &shapes, Attrs::new().with("mask_kind", kind));
        parity(&format!("attention {kind}"), &g, &qkv(&mut rng), 1e-5, 1e-4);
    }
    let g = one_op(
        "attention",
        &shapes,
        Attrs::new()
            .with("mask_kind", "sliding_window")
            .with("window", 3i64),
    );
    parity("attention sliding_window", &g, &qkv(&mut rng), 1e-5, 1e-4);
    let mut s = shapes.clone();
    s.push((DType::Bool, vec![b, 1, 1, sk]));
    let g = one_op("attention", &s, Attrs::new().with("mask_kind", "custom"));
    let mut ins = qkv(&mut rng).to_vec();
    // Keep key 0 so no row is fully masked.
    let keep: Vec<bool> = (0..b * sk)
        .map(|i| i % sk == 0 || rng.next_f64() < 0.6)
        .collect();
    ins.push(HostTensor::from_slice(&keep, vec![b, 1, 1, sk]).unwrap());
    parity("attention custom", &g, &ins, 1e-5, 1e-4);
    let mut s = shapes.clone();
    s.push((F, vec![sq, sk]));
    let g = one_op(
        "attention",
        &s,
        Attrs::new().with("mask_kind", "bias").with("scale", 0.5),
    );
    let mut ins = qkv(&mut rng).to_vec();
    ins.push(rand(&mut rng, F, &[sq, sk], -2.0, 0.0));
    parity("attention bias", &g, &ins, 1e-5, 1e-4);
}

#[test]
fn gather_embedding() {
    init();
    let mut rng = Rng::new(9);
    let g = one_op(
        "gather",
        &[(F, vec![3, 10, 4]), (DType::I64, vec![2, 5])],
        Attrs::new().with("axis", 1i64),
    );
    let idx = HostTensor::from_slice(&[0i64, 9, -1, 3, 3, -10, 5, 2, 1, 8], vec![2, 5]).unwrap();
    parity(
        "gather",
        &g,
        &[rand(&mut rng, F, &[3, 10, 4], -1.0, 1.0), idx],
        0.0,
        0.0,
    );
    let g = one_op(
        "embedding",
        &[(F, vec![50, 6]), (DType::I64, vec![2, 7])],
        Attrs::new(),
    );
    parity(
        "embedding",
        &g,
        &[
            rand(&mut rng, F, &[50, 6], -1.0, 1.0),
            rand(&mut rng, DType::I64, &[2, 7], 0.0, 50.0),
        ],
        0.0,
        0.0,
    );
    let g = one_op(
        "index_select",
        &[(DType::I32, vec![6, 5]), (DType::I32, vec![4])],
        Attrs::new().with("axis", 0i64),
    );
    parity(
        "index_select i32",
        &g,
        &[
            rand(&mut rng, DType::I32, &[6, 5], -9.0, 9.0),
            rand(&mut rng, DType::I32, &[4], 0.0, 6.0),
        ],
        0.0,
        0.0,
    );
}

#[test]
fn gather_out_of_range_is_a_typed_error() {
    init();
    let g = one_op(
        "embedding",
        &[(F, vec![5, 2]), (DType::I64, vec![3])],
        Attrs::new(),
    );
    let c = rlx::compile(&g, rlx::Device::Vulkan).unwrap();
    let table = HostTensor::from_slice(&[0f32; 10], vec![5, 2]).unwrap();
    let err = c
        .run(&[
            table,
            HostTensor::from_slice(&[1i64, 5, 0], vec![3]).unwrap(),
        ])
        .unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn shape_ops_and_views() {
    init();
    let mut rng = Rng::new(10);
    let x = || (F, vec![2, 3, 4]);
    type Case = (&'static str, Vec<(DType, Vec<usize>)>, Attrs);
    let cases: Vec<Case> = vec![
        (
            "permute",
            vec![x()],
            Attrs::new().with("perm", vec![2i64, 0, 1]),
        ),
        (
            "broadcast",
            vec![(F, vec![3, 1])],
            Attrs::new().with("shape", vec![2i64, 3, 5]),
        ),
        (
            "narrow",
            vec![x()],
            Attrs::new()
                .with("axis", 2i64)
                .with("start", 1i64)
                .with("len", 2i64),
        ),
        (
            "slice",
            vec![x()],
            Attrs::new()
                .with("starts", vec![2i64, 0])
                .with("ends", vec![-4i64, 3])
                .with("axes", vec![2i64, 1])
                .with("steps", vec![-1i64, 2]),
        ),
        ("flip", vec![x()], Attrs::new().with("axes", vec![0i64, 2])),
        (
            "concat",
            vec![x(), (F, vec![2, 1, 4])],
            Attrs::new().with("axis", 1i64),
        ),
        (
            "split",
            vec![x()],
            Attrs::new().with("axis", 2i64).with("sizes", vec![1i64, 3]),
        ),
        (
            "squeeze",
            vec![(F, vec![2, 1, 3])],
            Attrs::new().with("axes", vec![1i64]),
        ),
        (
            "unsqueeze",
            vec![x()],
            Attrs::new().with("axes", vec![0i64]),
        ),
        (
            "reshape",
            vec![x()],
            Attrs::new().with("shape", vec![4i64, 6]),
        ),
    ];
    for (op, ins, attrs) in cases {
        let g = one_op(op, &ins, attrs);
        let vals: Vec<_> = ins
            .iter()
            .map(|(d, s)| rand(&mut rng, *d, s, -1.0, 1.0))
            .collect();
        parity(op, &g, &vals, 0.0, 0.0);
    }
    // reshape of a permuted (non-contiguous) value: a strided copy.
    let t = rlx::Trace::new("reshape_of_permute");
    let a = t.input("a", F, vec![2, 3, 4]);
    let y = a
        .permute(&[1, 0, 2])
        .unwrap()
        .reshape(&[3, 8])
        .unwrap()
        .apply1("exp", &[], Attrs::new())
        .unwrap();
    let g = t.finish(&[&y]).unwrap();
    parity(
        "reshape of permute",
        &g,
        &[rand(&mut rng, F, &[2, 3, 4], -1.0, 1.0)],
        1e-6,
        1e-5,
    );
}

#[test]
fn fused_region_is_one_kernel() {
    init();
    let mut rng = Rng::new(11);
    let t = rlx::Trace::new("region");
    let a = t.input("a", F, vec![4, 9]);
    let b = t.input("b", F, vec![9]);
    let y = a
        .apply1("mul", &[&b], Attrs::new())
        .unwrap()
        .apply1("tanh", &[], Attrs::new())
        .unwrap();
    let y = y
        .apply1("add", &[&a], Attrs::new())
        .unwrap()
        .apply1("exp", &[], Attrs::new())
        .unwrap();
    let g = t.finish(&[&y]).unwrap();
    let c = rlx::compile(&g, rlx::Device::Vulkan).unwrap();
    let ops: Vec<_> = c
        .program()
        .graph
        .nodes
        .iter()
        .map(|n| n.op.name())
        .filter(|o| *o != "transfer")
        .collect();
    assert_eq!(ops, vec!["fused_elementwise"], "the chain is fused");
    parity(
        "fused region",
        &g,
        &[
            rand(&mut rng, F, &[4, 9], -1.0, 1.0),
            rand(&mut rng, F, &[9], -1.0, 1.0),
        ],
        1e-6,
        1e-5,
    );
}

#[test]
fn unclaimed_ops_decompose_or_fail_with_the_dispatch_error() {
    init();
    let mut rng = Rng::new(12);
    // group_norm has no WGSL kernel: it runs through its decomposition.
    let g = one_op(
        "group_norm",
        &[(F, vec![2, 4, 3]), (F, vec![4]), (F, vec![4])],
        Attrs::new().with("groups", 2i64),
    );
    let c = rlx::compile(&g, rlx::Device::Vulkan).unwrap();
    let report = c.dispatch_report().to_string();
    assert!(report.contains("group_norm"), "{report}");
    let ins = [
        rand(&mut rng, F, &[2, 4, 3], -1.0, 1.0),
        rand(&mut rng, F, &[4], 0.5, 1.5),
        rand(&mut rng, F, &[4], -1.0, 1.0),
    ];
    parity("group_norm via common IR", &g, &ins, 1e-5, 1e-4);
    // cumsum has neither a kernel nor a decomposition: a dispatch error.
    let g = one_op("cumsum", &[(F, vec![5])], Attrs::new().with("axis", 0i64));
    let err = rlx::compile(&g, rlx::Device::Vulkan)
        .unwrap_err()
        .to_string();
    assert!(err.contains("cumsum") && err.contains("no kernel"), "{err}");
}

#[test]
fn every_claimed_op_has_a_parity_case() {
    let claims = rlx_wgpu::claims::claims();
    assert!(
        claims.ops.len() >= 80,
        "{} op kinds claimed",
        claims.ops.len()
    );
    let src = include_str!("parity.rs");
    // Exercised by every graph (transfers), by MiniLM (constant, arange),
    // or removed by the optimizer before reaching a backend.
    let implicit = [
        "transfer",
        "constant",
        "arange",
        "identity",
        "stop_gradient",
    ];
    for op in claims.ops.keys() {
        if implicit.contains(&op.as_str()) {
            continue;
        }
        assert!(
            src.contains(&format!("\"{op}\"")),
            "claimed op `{op}` has no parity case"
        );
    }
    eprintln!("{} op kinds claimed natively", claims.ops.len());
}

#[test]
fn oversized_tensors_and_missing_adapters_are_typed_errors() {
    init();
    // One input over lavapipe's 128 MiB storage binding (the limit comes
    // from the adapter, so this is checked against whatever it reports).
    let limit = rlx_wgpu::WgpuBackend::new(rlx::Device::Vulkan)
        .context()
        .unwrap()
        .info
        .max_storage_binding;
    let n = (limit / 4 + 1024) as usize;
    let g = one_op("exp", &[(F, vec![n])], Attrs::new());
    let Err(err) = rlx::compile(&g, rlx::Device::Vulkan) else {
        panic!("an oversized input compiled")
    };
    let err = err.to_string();
    assert!(
        err.contains("maxStorageBufferBindingSize") && err.contains(&limit.to_string()),
        "{err}"
    );
    // This build has no GL backend: a typed "no adapter" error, not a panic.
    let Err(e) = pollster::block_on(rlx_wgpu::GpuContext::create(rlx::Device::OpenGl)) else {
        panic!("a GL adapter in a Vulkan-only build")
    };
    assert!(matches!(e, rlx_wgpu::WgpuError::NoAdapter { .. }), "{e}");
}

#[test]
fn gpu_device_picks_the_best_adapter() {
    init();
    let mut rng = Rng::new(13);
    let g = one_op("softmax", &[(F, vec![3, 5])], Attrs::new());
    let x = rand(&mut rng, F, &[3, 5], -1.0, 1.0);
    let want = run_on(&g, rlx::Device::Cpu, std::slice::from_ref(&x)).unwrap();
    let got = run_on(&g, rlx::Device::Gpu, &[x]).unwrap();
    assert_close("softmax on `gpu`", &got[0], &want[0], 1e-6, 1e-5);
}
