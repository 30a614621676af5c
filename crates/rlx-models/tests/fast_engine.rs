//! The fast CPU engine against the reference interpreter on the DSL
//! encoder block (primitive ops in; after the optimizer: fused attention
//! with a bias mask read through head-split permutes, layer norms, gelu
//! GEMM epilogues, in-place residual adds). Both start from the same
//! graph and seeded inputs; the reference widens to f64.

use rlx::{Device, HostTensor};
use rlx_models::dsl_block::{encoder_block, BlockShape};

/// Deterministic inputs in [-0.5, 0.5) (an LCG), with a padding mask.
/// The kernels of the compiled block, asserting every one is the fast
/// engine's (none on the reference kernels). `what` names the case.
fn fast_kernels_only(c: &rlx::Compiled, what: &str) -> Vec<String> {
    let kernels: Vec<String> = c
        .dispatch_report()
        .nodes
        .iter()
        .flat_map(|n| n.kernels.clone())
        .collect();
    let slow: Vec<_> = kernels
        .iter()
        .filter(|k| k.starts_with("cpu::ref::"))
        .collect();
    assert!(slow.is_empty(), "{what}: reference kernels: {slow:?}");
    kernels
}

fn inputs(g: &rlx::Graph, seed: u64) -> Vec<HostTensor> {
    let mut state = seed;
    g.inputs
        .iter()
        .map(|&v| {
            let ty = g.ty(v);
            let n = ty.shape.numel();
            let name = g.values[v.index()].name.clone().unwrap_or_default();
            let data: Vec<f32> = (0..n)
                .map(|i| {
                    if name == "mask" {
                        // Last quarter of the keys padded out.
                        let s = *ty.dims().last().unwrap();
                        if i % s >= s * 3 / 4 {
                            -1e4
                        } else {
                            0.0
                        }
                    } else {
                        state = state
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
                    }
                })
                .collect();
            HostTensor::new(ty.dtype, ty.shape.clone(), data.into()).unwrap()
        })
        .collect()
}

#[test]
fn encoder_block_fast_engine_matches_reference() {
    let shape = BlockShape {
        batch: 2,
        seq: 24,
        hidden: 48,
        heads: 4,
        ffn: 96,
    };
    let g = encoder_block(shape).unwrap();
    let ins = inputs(&g, 7);
    let want = rlx_cpu::run_graph(&g, &ins).unwrap();
    let compiled = rlx::compile(&g, Device::Cpu).unwrap();
    let kernels = fast_kernels_only(&compiled, "f32");
    assert!(kernels
        .iter()
        .any(|k| k.starts_with("cpu::fast::attention")));
    let got = compiled.run(&ins).unwrap();
    let (g0, w0) = (
        got[0].to_vec::<f32>().unwrap(),
        want[0].to_vec::<f32>().unwrap(),
    );
    assert_eq!(g0.len(), w0.len());
    let mut worst = 0f32;
    for (a, b) in g0.iter().zip(&w0) {
        worst = worst.max((a - b).abs() / (1.0 + b.abs()));
    }
    assert!(worst < 2e-5, "worst relative difference {worst}");
    // A second run reuses the arena and gives the same numbers.
    let again = compiled.run(&ins).unwrap();
    assert_eq!(again[0].to_vec::<f32>().unwrap(), g0);
}

/// Seeded inputs for any graph: floats in [-1, 1), ints in [-2, 3), bools
/// alternating in runs.
fn any_inputs(g: &rlx::Graph) -> Vec<HostTensor> {
    let mut state = 11u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 40) as f64 / (1u64 << 24) as f64
    };
    g.inputs
        .iter()
        .map(|&v| {
            let ty = g.ty(v);
            let n = ty.shape.numel();
            match ty.dtype {
                rlx::DType::F32 => {
                    let d: Vec<f32> = (0..n).map(|_| (next() * 2.0 - 1.0) as f32).collect();
                    HostTensor::new(ty.dtype, ty.shape.clone(), d.into()).unwrap()
                }
                rlx::DType::I64 => {
                    let d: Vec<i64> = (0..n).map(|_| (next() * 5.0) as i64 - 2).collect();
                    HostTensor::new(ty.dtype, ty.shape.clone(), d.into()).unwrap()
                }
                rlx::DType::Bool => {
                    // Keep the first key of every row so no row is fully masked.
                    let last = *ty.dims().last().unwrap();
                    let d: Vec<bool> = (0..n).map(|i| i % last == 0 || next() < 0.7).collect();
                    HostTensor::new(ty.dtype, ty.shape.clone(), d.into()).unwrap()
                }
                d => panic!("no generator for {d}"),
            }
        })
        .collect()
}

/// Graphs that put the fast kernels' layout handling to work once the
/// planner has turned permutes and reshapes into strided views: transposed
/// and batch-broadcast GEMM operands, attention on head-split views with
/// every mask kind, softmax off the last axis, reductions over middle
/// axes, broadcasting elementwise chains, negative embedding ids.
#[test]
fn fast_kernels_on_strided_views_match_reference() {
    let graphs = [
        "graph @mm(%a: f32[2,3,4,5], %b: f32[2,1,6,5], %c: f32[6]) {
  %bt = permute(%b) {perm=[0, 1, 3, 2]}
  %m = matmul(%a, %bt)
  %w = permute(%b) {perm=[0, 1, 3, 2]}
  %y = matmul_bias_act(%a, %w, %c) {activation=\"gelu\"}
  %z = add(%m, %y)
  return %z
}",
        "graph @att(%x: f32[2,6,3,4], %m: bool[2,1,6,6], %bias: f32[1,3,6,6]) {
  %q = permute(%x) {perm=[0, 2, 1, 3]}
  %a = attention(%q, %q, %q) {mask_kind=\"causal\"}
  %b = attention(%q, %q, %q) {mask_kind=\"sliding_window\", window=2}
  %c = attention(%q, %q, %q, %m) {mask_kind=\"custom\"}
  %d = attention(%q, %q, %q, %bias) {mask_kind=\"bias\", scale=0.3}
  %ab = add(%a, %b)
  %cd = mul(%c, %d)
  %y = sub(%ab, %cd)
  %t = permute(%y) {perm=[0, 2, 1, 3]}
  %r = reshape(%t) {shape=[2, 6, 12]}
  return %r
}",
        "graph @red(%x: f32[2,5,3,4]) {
  %s = softmax(%x) {axis=1}
  %l = log_softmax(%x) {axis=-1}
  %m = reduce_mean(%s, %l) 
  return %m
}",
        "graph @red2(%x: f32[2,5,3,4]) {
  %a = reduce_mean(%x) {axes=[1, 2], keepdim=true}
  %b = reduce_max(%x) {axes=[0], keepdim=true}
  %c = reduce_sum(%x) {axes=[3], keepdim=true}
  %ab = add(%a, %b)
  %y = add(%ab, %c)
  return %y
}",
        "graph @ew(%x: f32[2,3,4], %y: f32[4], %z: f32[3,1], %w: f32[4,3]) {
  %a = add(%x, %y)
  %b = mul(%a, %z)
  %c = tanh(%b)
  %d = exp(%c)
  %e = gelu(%d)
  %wt = permute(%w) {perm=[1, 0]}
  %f = sub(%e, %wt)
  %g = sigmoid(%f)
  %p = permute(%g) {perm=[2, 0, 1]}
  %r = reshape(%p) {shape=[4, 6]}
  return %r
}",
        "graph @sel(%c: bool[3,1], %x: f32[2,3,4], %y: f32[4]) {
  %s = where(%c, %x, %y)
  %g = sign(%s)
  %m = mul(%g, %x)
  return %m
}",
        "graph @emb(%t: f32[7,3], %ids: i64[2,4], %g: f32[3], %b: f32[3]) {
  %e = embedding(%t, %ids)
  %n = layer_norm(%e, %g, %b) {eps=1e-05}
  %r = rms_norm(%e, %g) {eps=1e-06}
  %y = add(%n, %r)
  return %y
}",
    ];
    // Also as f16 and bf16 (the same layouts, 16-bit storage): a few ops
    // in a chain each round once more than the f32 run, on O(1) values —
    // 16u·(1 + |y|) (f16 0.8%, bf16 6%) still catches a wrong stride or
    // operand, which moves results by O(1).
    for (name, dtype, u) in [
        ("f32", rlx::DType::F32, 0.0),
        ("f16", rlx::DType::F16, 2f32.powi(-11)),
        ("bf16", rlx::DType::BF16, 2f32.powi(-8)),
    ] {
        for src in graphs {
            let src = src.replace(
                "  %m = reduce_mean(%s, %l) \n",
                "  %sl = add(%s, %l)\n  %m = reduce_mean(%sl) {axes=[1], keepdim=false}\n",
            );
            let g32 = rlx::ir::text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
            let g = rlx::ir::text::parse(&src.replace("f32", name)).unwrap();
            let ins: Vec<HostTensor> = any_inputs(&g32)
                .iter()
                .map(|t| to_dtype(t, dtype))
                .collect();
            let want = rlx_cpu::run_graph(&g, &ins).unwrap();
            let c = rlx::compile(&g, Device::Cpu).unwrap();
            let kernels: Vec<&String> = c
                .dispatch_report()
                .nodes
                .iter()
                .flat_map(|n| &n.kernels)
                .collect();
            let fast = kernels
                .iter()
                .filter(|k| k.starts_with("cpu::fast::"))
                .count();
            assert!(fast > 0, "no fast kernel in {} ({name})", g.name);
            let got = c.run(&ins).unwrap();
            for (a, b) in got.iter().zip(&want) {
                assert_eq!(a.shape(), b.shape(), "{}", g.name);
                assert_eq!(a.dtype(), b.dtype(), "{}", g.name);
                let (a, b) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
                for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
                    let tol = (1e-5 + 16.0 * u as f64) * (1.0 + y.abs());
                    assert!(
                        (x - y).abs() <= tol,
                        "{} {name} element {i}: fast {x}, reference {y} ({kernels:?})",
                        g.name
                    );
                }
            }
        }
    }
}

/// A weight read as wᵀ is transposed into a prepared buffer: at every run,
/// or once when the caller keeps the weight resident. Both match the
/// reference, on the first run and after — for f32 weights, and for f16 /
/// bf16 ones (widened while transposed; the output rounds to the 16-bit
/// type, within one unit in the last place of the reference's, 2u·|y|,
/// plus one more rounding of the product before the bias add, ≤ u·8).
#[test]
fn prepared_transposed_weights_match_reference_resident_or_not() {
    for (name, u) in [
        ("f32", 0.0),
        ("f16", 2f32.powi(-11)),
        ("bf16", 2f32.powi(-8)),
    ] {
        let src = "graph @lin(%x: f32[2,5,8], %w: f32[6,8], %b: f32[6]) {
  %wt = permute(%w) {perm=[1, 0]}
  %y = matmul_bias_act(%x, %wt, %b) {activation=\"silu\"}
  return %y
}"
        .replace("f32", name);
        let g = rlx::ir::text::parse(&src).unwrap();
        let dtype = g.ty(g.inputs[0]).dtype;
        let ins: Vec<HostTensor> =
            any_inputs(&rlx::ir::text::parse(&src.replace(name, "f32")).unwrap())
                .iter()
                .map(|t| to_dtype(t, dtype))
                .collect();
        let want = rlx_cpu::run_graph(&g, &ins).unwrap()[0]
            .to_f64_vec()
            .unwrap();
        for resident in [false, true] {
            let c = rlx::compile(&g, Device::Cpu).unwrap();
            assert!(c
                .dispatch_report()
                .nodes
                .iter()
                .flat_map(|n| &n.kernels)
                .any(|k| k.starts_with(&format!("cpu::fast::matmul_bias_act<{name}"))));
            if resident {
                assert!(c.keep_resident(&[1, 2]));
            }
            for _ in 0..3 {
                let got = c.run(&ins).unwrap()[0].to_f64_vec().unwrap();
                for (x, y) in got.iter().zip(&want) {
                    let tol = 1e-5 * (1.0 + y.abs()) + (2.0 * y.abs() + 8.0) * u as f64;
                    assert!(
                        (x - y).abs() <= tol,
                        "{name} resident={resident}: {x} vs {y}"
                    );
                }
            }
        }
    }
}

/// A batch gradient that nearly cancels (large terms of both signs, a
/// small true sum) keeps its digits: fast reductions accumulate in f64
/// like the reference.
#[test]
fn cancelling_sums_keep_their_digits() {
    let src = "graph @s(%x: f32[1024,3]) {
  %r = reduce_sum(%x) {axes=[0], keepdim=false}
  %m = reduce_mean(%x) {axes=[0, 1], keepdim=false}
  return %r, %m
}";
    let g = rlx::ir::text::parse(src).unwrap();
    let data: Vec<f32> = (0..1024 * 3)
        .map(|i| {
            let big = if (i / 3) % 2 == 0 { 3000.7 } else { -3000.7 };
            big + ((i * 7919) % 13) as f32 * 1e-3
        })
        .collect();
    let x = HostTensor::new(rlx::DType::F32, vec![1024, 3], data.into()).unwrap();
    let want = rlx_cpu::run_graph(&g, std::slice::from_ref(&x)).unwrap();
    let got = rlx::compile(&g, Device::Cpu).unwrap().run(&[x]).unwrap();
    for (a, b) in got.iter().zip(&want) {
        let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        for (x, y) in a.iter().zip(&b) {
            assert!(
                (x - y).abs() <= 1e-6 * y.abs().max(1e-3),
                "fast {x}, reference {y}"
            );
        }
    }
}

/// `t` (f32) rounded to `dtype` (f16 / bf16; other dtypes unchanged).
fn to_dtype(t: &HostTensor, dtype: rlx::DType) -> HostTensor {
    if t.dtype() != rlx::DType::F32 {
        return t.clone();
    }
    let v = t.to_vec::<f32>().unwrap();
    let data: rlx::ir::TensorData = match dtype {
        rlx::DType::F16 => v
            .iter()
            .map(|&x| half::f16::from_f32(x))
            .collect::<Vec<_>>()
            .into(),
        rlx::DType::BF16 => v
            .iter()
            .map(|&x| half::bf16::from_f32(x))
            .collect::<Vec<_>>()
            .into(),
        _ => v.into(),
    };
    HostTensor::new(dtype, t.shape().clone(), data).unwrap()
}

/// The encoder block cast to f16 and to bf16 end to end (weights, inputs,
/// constants, every activation stored as 16 bits; kernels compute in f32)
/// against the f32 block on the reference interpreter (f64 widening), from
/// the same f32 inputs. Every kernel is a fast one; weights are kept
/// resident (widened / transposed to f32 once).
///
/// Bounds: each stored activation carries a relative rounding error of u
/// (f16 2^-11, bf16 2^-8) and the block stores ~10 of them in a chain, so
/// the output's relative error is at most ~10u: f16 ~0.5%, bf16 ~4% (the
/// layer norms keep errors from growing). Measured here: cosine 0.9999999
/// and worst |Δ|/(1+|y|) 0.00072 (f16), 0.9999935 and 0.0054 (bf16). The
/// bounds (cosine ≥ 0.9999 / 0.999, worst ≤ 0.005 / 0.04) leave room for
/// other shapes and seeds without admitting a wrong kernel.
#[test]
fn encoder_block_in_f16_and_bf16_matches_f32_reference() {
    let shape = BlockShape {
        batch: 2,
        seq: 24,
        hidden: 48,
        heads: 4,
        ffn: 96,
    };
    let g32 = encoder_block(shape).unwrap();
    let ins = inputs(&g32, 7);
    let want = rlx_cpu::run_graph(&g32, &ins).unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    for (dtype, name, min_cos, max_rel) in [
        (rlx::DType::F16, "f16", 0.9999, 0.005),
        (rlx::DType::BF16, "bf16", 0.999, 0.04),
    ] {
        let src = rlx::ir::text::print(&g32).replace("f32", name);
        let g = rlx::ir::text::parse(&src).unwrap();
        let c = rlx::compile(&g, Device::Cpu).unwrap();
        let kernels = fast_kernels_only(&c, name);
        assert!(kernels
            .iter()
            .any(|k| k.starts_with(&format!("cpu::fast::attention_merged<{name}>"))));
        assert!(c.keep_resident(&(2..g.inputs.len()).collect::<Vec<_>>()));
        let hins: Vec<HostTensor> = ins.iter().map(|t| to_dtype(t, dtype)).collect();
        let dots = rlx_cpu::fast::bf16dot::calls();
        let first = c.run(&hins).unwrap();
        // All six bf16 projections on dot products, where the CPU has them.
        if dtype == rlx::DType::BF16 && rlx_cpu::fast::bf16dot::available() {
            assert!(rlx_cpu::fast::bf16dot::calls() >= dots + 6, "{kernels:?}");
        }
        assert_eq!(first[0].dtype(), dtype);
        let got: Vec<f32> = first[0]
            .to_f64_vec()
            .unwrap()
            .iter()
            .map(|&x| x as f32)
            .collect();
        let (mut dot, mut na, mut nb, mut worst) = (0f64, 0f64, 0f64, 0f32);
        for (&a, &b) in got.iter().zip(&want) {
            dot += a as f64 * b as f64;
            na += (a as f64).powi(2);
            nb += (b as f64).powi(2);
            worst = worst.max((a - b).abs() / (1.0 + b.abs()));
        }
        let cos = dot / (na.sqrt() * nb.sqrt());
        eprintln!("{name}: cosine {cos:.7}, worst relative difference {worst:.5}");
        assert!(cos >= min_cos, "{name}: cosine {cos} < {min_cos}");
        assert!(
            worst <= max_rel,
            "{name}: worst relative difference {worst}"
        );
        // Later runs use the prepared weights and give the same numbers.
        let again = c.run(&hins).unwrap();
        assert_eq!(again[0], first[0]);
    }
}
