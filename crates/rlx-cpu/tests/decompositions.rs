//! Property test: for every fused op, the native CPU kernel and the op's
//! registered decomposition agree on random inputs (seeded), over several
//! shapes and attribute settings.

use rlx_ir::decompose::expand_all;
use rlx_ir::{Attrs, DType, GraphBuilder, HostTensor, TensorType};

/// A tiny deterministic generator (SplitMix64) so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
    }
    fn tensor(&mut self, dtype: DType, shape: &[usize]) -> HostTensor {
        let n = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|_| self.next()).collect();
        HostTensor::from_f64(dtype, shape.to_vec(), v).unwrap()
    }
}

/// Build a one-node graph, run it natively and decomposed, compare.
fn check(
    op: &str,
    inputs: &[(DType, Vec<usize>)],
    attrs: Attrs,
    extra: Vec<HostTensor>,
    seed: u64,
) {
    let mut rng = Rng(seed);
    let mut b = GraphBuilder::new(op);
    let mut vals = Vec::new();
    let mut data = Vec::new();
    for (k, (d, s)) in inputs.iter().enumerate() {
        vals.push(b.input(format!("x{k}"), TensorType::new(*d, s.clone())));
        data.push(rng.tensor(*d, s));
    }
    for (k, t) in extra.into_iter().enumerate() {
        vals.push(b.input(
            format!("m{k}"),
            TensorType::new(t.dtype(), t.shape().clone()),
        ));
        data.push(t);
    }
    let outs = b
        .op(op, &vals, attrs)
        .unwrap_or_else(|e| panic!("{op}: {e}"));
    let g = b.finish(&outs).unwrap();
    let native = rlx_cpu::run_graph(&g, &data).unwrap();
    let dec = expand_all(&g).unwrap();
    assert!(
        dec.nodes.iter().all(|n| !n.op.is_fused()),
        "{op}: decomposition left fused ops"
    );
    let lowered = rlx_cpu::run_graph(&dec, &data).unwrap();
    for (a, c) in native.iter().zip(&lowered) {
        let (a, c) = (a.to_f64_vec().unwrap(), c.to_f64_vec().unwrap());
        for (i, (x, y)) in a.iter().zip(&c).enumerate() {
            let ok = (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-4 + 1e-4 * y.abs();
            assert!(
                ok,
                "{op} seed {seed}: element {i}: native {x}, decomposed {y}"
            );
        }
    }
}

const F: DType = DType::F32;

#[test]
fn fused_ops_agree_with_their_decompositions() {
    for seed in 0..4u64 {
        let shapes: [Vec<usize>; 3] = [vec![5], vec![3, 4], vec![2, 3, 6]];
        for s in &shapes {
            for op in ["gelu", "gelu_tanh", "silu"] {
                check(op, &[(F, s.clone())], Attrs::new(), vec![], seed);
            }
            check(
                "swiglu",
                &[(F, s.clone()), (F, s.clone())],
                Attrs::new(),
                vec![],
                seed,
            );
            for axis in [0i64, -1] {
                check(
                    "softmax",
                    &[(F, s.clone())],
                    Attrs::new().with("axis", axis),
                    vec![],
                    seed,
                );
                check(
                    "log_softmax",
                    &[(F, s.clone())],
                    Attrs::new().with("axis", axis),
                    vec![],
                    seed,
                );
            }
            let last = *s.last().unwrap();
            check(
                "layer_norm",
                &[(F, s.clone()), (F, vec![last]), (F, vec![last])],
                Attrs::new(),
                vec![],
                seed,
            );
            check(
                "rms_norm",
                &[(F, s.clone()), (F, vec![last])],
                Attrs::new(),
                vec![],
                seed,
            );
        }
        check(
            "layer_norm",
            &[(F, vec![2, 3, 4]), (F, vec![3, 4]), (F, vec![3, 4])],
            Attrs::new().with("axis", 1i64),
            vec![],
            seed,
        );
        check(
            "group_norm",
            &[(F, vec![2, 6, 5]), (F, vec![6]), (F, vec![6])],
            Attrs::new().with("groups", 3i64),
            vec![],
            seed,
        );
        let bn: Vec<(DType, Vec<usize>)> = vec![
            (F, vec![2, 3, 2, 2]),
            (F, vec![3]),
            (F, vec![3]),
            (F, vec![3]),
        ];
        let var = HostTensor::from_slice(&[0.5f32, 1.0, 2.0], [3]).unwrap();
        check("batch_norm", &bn, Attrs::new(), vec![var], seed);
        for kind in ["none", "causal", "sliding_window"] {
            for (sq, sk) in [(4, 4), (2, 5)] {
                let a = Attrs::new().with("mask_kind", kind).with("window", 2i64);
                check(
                    "attention",
                    &[
                        (F, vec![2, sq, 8]),
                        (F, vec![2, sk, 8]),
                        (F, vec![2, sk, 4]),
                    ],
                    a,
                    vec![],
                    seed,
                );
            }
        }
        let keep: Vec<bool> = (0..12).map(|i| i % 3 != 1).collect();
        let mask = HostTensor::from_slice(&keep, [3, 4]).unwrap();
        check(
            "attention",
            &[(F, vec![2, 3, 4]), (F, vec![2, 4, 4]), (F, vec![2, 4, 4])],
            Attrs::new().with("mask_kind", "custom"),
            vec![mask],
            seed,
        );
        let bias = Rng(seed + 9).tensor(F, &[1, 3, 4]);
        check(
            "attention",
            &[(F, vec![2, 3, 4]), (F, vec![2, 4, 4]), (F, vec![2, 4, 4])],
            Attrs::new().with("mask_kind", "bias"),
            vec![bias],
            seed,
        );
        for il in [false, true] {
            let a = Attrs::new().with("interleaved", il);
            check(
                "rope",
                &[(F, vec![2, 3, 8]), (F, vec![3, 4]), (F, vec![3, 4])],
                a.clone(),
                vec![],
                seed,
            );
            check(
                "qk_rope",
                &[
                    (F, vec![2, 3, 8]),
                    (F, vec![1, 3, 8]),
                    (F, vec![3, 4]),
                    (F, vec![3, 4]),
                ],
                a,
                vec![],
                seed,
            );
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
            let a = Attrs::new().with("activation", act);
            check(
                "matmul_bias_act",
                &[(F, vec![3, 5]), (F, vec![5, 4]), (F, vec![4])],
                a,
                vec![],
                seed,
            );
        }
        // A fused region: tanh(a·b) − a, b broadcast, a scalar constant inside.
        let mut body = GraphBuilder::new("region");
        let (a, b) = (
            body.input("a", TensorType::new(F, [3, 4])),
            body.input("b", TensorType::new(F, [4])),
        );
        let t = body.binary("mul", a, b).unwrap();
        let t = body.unary("tanh", t).unwrap();
        let h = body.scalar(0.5, F).unwrap();
        let t = body.binary("max", t, h).unwrap();
        let y = body.binary("sub", t, a).unwrap();
        let body = body.finish(&[y]).unwrap();
        check(
            "fused_elementwise",
            &[(F, vec![3, 4]), (F, vec![4])],
            Attrs::new().with("body", body),
            vec![],
            seed,
        );
        check(
            "scaled_matmul",
            &[
                (F, vec![2, 64]),
                (F, vec![3, 64]),
                (F, vec![2, 2]),
                (F, vec![3, 2]),
            ],
            Attrs::new(),
            vec![],
            seed,
        );
    }
}

#[test]
#[cfg(feature = "quant")]
fn dequant_matmul_agrees_with_its_decomposition() {
    // A Q8_0 weight of 2 rows × 32: an f16 scale then 32 i8 values per block.
    let mut bytes = Vec::new();
    for r in 0..2u8 {
        bytes.extend(half::f16::from_f32(0.125 * (r + 1) as f32).to_le_bytes());
        bytes.extend((0..32).map(|i| (i as i8 - 16 + r as i8) as u8));
    }
    let w = HostTensor::new(DType::Q8_0, [2, 32], rlx_ir::TensorData::Packed(bytes)).unwrap();
    let mut b = GraphBuilder::new("dq");
    let x = b.input("x", TensorType::new(F, [3, 32]));
    let wv = b.input("w", TensorType::new(DType::Q8_0, [2, 32]));
    let y = b.op1("dequant_matmul", &[x, wv], Attrs::new()).unwrap();
    let g = b.finish(&[y]).unwrap();
    let xs = Rng(1).tensor(F, &[3, 32]);
    let native = rlx_cpu::run_graph(&g, &[xs.clone(), w.clone()]).unwrap();
    let dec = rlx_cpu::run_graph(&expand_all(&g).unwrap(), &[xs.clone(), w]).unwrap();
    // And against the closed form: w[r][i] = scale_r * (i - 16 + r).
    let xv = xs.to_f64_vec().unwrap();
    let want: Vec<f64> = (0..3)
        .flat_map(|m| {
            let xv = &xv;
            (0..2).map(move |r| {
                (0..32)
                    .map(|i| xv[m * 32 + i] * 0.125 * (r + 1) as f64 * (i as f64 - 16.0 + r as f64))
                    .sum::<f64>()
            })
        })
        .collect();
    for t in [native, dec] {
        for (g, w) in t[0].to_f64_vec().unwrap().iter().zip(&want) {
            assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "{g} vs {w}");
        }
    }
}

/// A fused region legalizes natively and through the common-IR path (its
/// body inlined), and both compute the same.
#[test]
fn fused_regions_legalize_natively_and_through_their_body() {
    use rlx_runtime::{legalize, DispatchOptions, Policy};
    let mut body = GraphBuilder::new("region");
    let x = body.input("x", TensorType::new(F, [2, 3]));
    let e = body.unary("exp", x).unwrap();
    let y = body.unary("neg", e).unwrap();
    let body = body.finish(&[y]).unwrap();
    let mut b = GraphBuilder::new("g");
    let x = b.input("x", TensorType::new(F, [2, 3]));
    let y = b
        .op1("fused_elementwise", &[x], Attrs::new().with("body", body))
        .unwrap();
    let g = b.finish(&[y]).unwrap();
    let data = [Rng(5).tensor(F, &[2, 3])];
    let mut results = Vec::new();
    for (policy, want) in [
        (Policy::PreferNative, vec!["fused_elementwise"]),
        (Policy::CommonIrOnly, vec!["exp", "neg"]),
    ] {
        let l = legalize(
            &g,
            &rlx_cpu::CpuBackend::default(),
            &DispatchOptions::new(policy),
        )
        .unwrap();
        let ops: Vec<&str> = l.graph.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, want);
        results.push(rlx_cpu::run_graph(&l.graph, &data).unwrap());
    }
    assert_eq!(results[0], results[1]);
}
