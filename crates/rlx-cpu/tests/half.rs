//! f16 / bf16 on the fast engine: values stored as 16 bits, computed in
//! f32. Every fast kernel against the reference interpreter (f64 widening,
//! one rounding to the output type) on the same 16-bit inputs, and every
//! committed 16-bit reference vector that now reaches a fast kernel.
//!
//! Tolerance: both sides round their result to the 16-bit type once, so
//! they differ by at most one unit in the last place of the result,
//! 2u·|want| with u the format's unit roundoff (f16 2^-11, bf16 2^-8); the
//! fast kernels' f32 arithmetic adds at most len·2^-24·Σ|terms| for a
//! reduction of `len` terms, which the tests bound by `len · 2^-24 · mag`
//! (mag: a bound on the terms' sum of magnitudes for the test's inputs).

use half::{bf16, f16};
use rlx_cpu::conformance::{has_fast_node, run_case_in, Mode};
use rlx_cpu::fast::FastProgram;
use rlx_ir::lir::Program;
use rlx_ir::{text, DType, HostTensor};

/// Unit roundoff of a 16-bit float type.
fn unit(d: DType) -> f64 {
    match d {
        DType::F16 => 2f64.powi(-11),
        DType::BF16 => 2f64.powi(-8),
        _ => 2f64.powi(-24),
    }
}

/// Seeded inputs: floats in [-1, 1) rounded to the input's type, ints in
/// [0, 5), bools (first of each row true).
fn inputs(g: &rlx_ir::Graph, seed: u64) -> Vec<HostTensor> {
    let mut state = seed;
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
            let sh = ty.shape.clone();
            match ty.dtype {
                DType::F16 => {
                    let d: Vec<f16> = (0..n).map(|_| f16::from_f64(next() * 2.0 - 1.0)).collect();
                    HostTensor::new(ty.dtype, sh, d.into()).unwrap()
                }
                DType::BF16 => {
                    let d: Vec<bf16> = (0..n).map(|_| bf16::from_f64(next() * 2.0 - 1.0)).collect();
                    HostTensor::new(ty.dtype, sh, d.into()).unwrap()
                }
                DType::F32 => {
                    let d: Vec<f32> = (0..n).map(|_| (next() * 2.0 - 1.0) as f32).collect();
                    HostTensor::new(ty.dtype, sh, d.into()).unwrap()
                }
                DType::I64 => {
                    let d: Vec<i64> = (0..n).map(|_| (next() * 5.0) as i64).collect();
                    HostTensor::new(ty.dtype, sh, d.into()).unwrap()
                }
                DType::Bool => {
                    let last = *ty.dims().last().unwrap();
                    let d: Vec<bool> = (0..n).map(|i| i % last == 0 || next() < 0.7).collect();
                    HostTensor::new(ty.dtype, sh, d.into()).unwrap()
                }
                d => panic!("no generator for {d}"),
            }
        })
        .collect()
}

/// How close the fast result must be: `ulps`·u·(|want| + `floor`) plus
/// `len`·2^-24·`mag` for f32 accumulation over `len` terms. One op from the
/// same inputs: both sides round once, `ulps` = 2, `floor` = 0. A chain of
/// 16-bit ops: a one-ulp difference in an intermediate of magnitude ≤ 1
/// moves the result by about u in absolute terms, hence the floor.
#[derive(Clone, Copy)]
struct Tol {
    ulps: f64,
    floor: f64,
    len: usize,
    mag: f64,
}

const ONE_OP: Tol = Tol {
    ulps: 2.0,
    floor: 0.0,
    len: 1,
    mag: 0.0,
};

/// Run `src` (written with `T` for the 16-bit type) as f16 and as bf16 on
/// the fast engine and on the reference interpreter; every node must be a
/// fast kernel.
fn check(src: &str, t: Tol) {
    for (name, d) in [("f16", DType::F16), ("bf16", DType::BF16)] {
        let s = src
            .replace("T[", &format!("{name}["))
            .replace("dtype=T}", &format!("dtype={name}}}"));
        let g = text::parse(&s).unwrap_or_else(|e| panic!("{e}\n{s}"));
        for n in &g.nodes {
            let tys: Vec<_> = n.inputs.iter().map(|&v| g.ty(v)).collect();
            assert!(
                rlx_cpu::fast::select(n.op.name(), &tys, &n.attrs).is_some(),
                "{} on {name} is not a fast kernel",
                n.op.name()
            );
        }
        let ins = inputs(&g, 5);
        let want = rlx_cpu::run_graph(&g, &ins).unwrap();
        let p = FastProgram::compile(Program::from_graph(g.clone())).unwrap();
        let (fast, reference, _) = p.counts();
        assert!(
            fast > 0 && reference == 0,
            "{}: {fast} fast, {reference} reference",
            g.name
        );
        let refs: Vec<&HostTensor> = ins.iter().collect();
        for run in 0..2 {
            let got = p.run(&refs).unwrap();
            for (a, b) in got.iter().zip(&want) {
                assert_eq!(a.dtype(), b.dtype());
                assert_eq!(a.shape(), b.shape());
                let (a, b) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
                for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                    let tol = t.ulps * unit(d) * (y.abs() + t.floor)
                        + t.len as f64 * 2f64.powi(-24) * t.mag;
                    assert!(
                        (x - y).abs() <= tol,
                        "{} {name} run {run} element {i}: fast {x}, reference {y} (tol {tol})",
                        g.name
                    );
                }
            }
        }
    }
}

#[test]
fn gemm_with_epilogues() {
    // K = 24 products of magnitude ≤ 1, plus a bias ≤ 1; the add rounds
    // once more (a third ulp, relative to the larger operand ≤ 50).
    check(
        "graph @mm(%a: T[2,5,24], %w: T[24,7], %b: T[7]) {
  %y = matmul_bias_act(%a, %w, %b) {activation=\"gelu\"}
  %z = matmul(%a, %w)
  %r = add(%y, %z)
  return %r
}",
        Tol {
            ulps: 3.0,
            floor: 50.0,
            len: 25,
            mag: 25.0,
        },
    );
    // Over 1024 rows: the GEMM splits rows across threads, each block
    // rounded to 16 bits by its own epilogue.
    check(
        "graph @tall(%a: T[1100,8], %w: T[8,5], %b: T[5]) {
  %y = matmul_bias_act(%a, %w, %b) {activation=\"silu\"}
  return %y
}",
        Tol {
            ulps: 3.0,
            floor: 8.0,
            len: 9,
            mag: 9.0,
        },
    );
    check(
        "graph @bmm(%a: T[3,4,16], %b: T[3,16,5]) {
  %y = matmul(%a, %b)
  return %y
}",
        Tol {
            len: 16,
            mag: 16.0,
            ..ONE_OP
        },
    );
}

#[test]
fn transposed_half_weight() {
    let src = "graph @lin(%x: T[3,16], %w: T[6,16], %b: T[6]) {
  %wt = permute(%w) {perm=[1, 0]}
  %y = matmul_bias_act(%x, %wt, %b) {activation=\"relu\"}
  return %y
}";
    // The reference rounds the product before the bias add: one more
    // rounding, of a value up to 16 in magnitude.
    check(
        src,
        Tol {
            ulps: 3.0,
            floor: 16.0,
            len: 17,
            mag: 17.0,
        },
    );
}

#[test]
fn elementwise_chains_and_casts() {
    check(
        "graph @ew(%x: T[4,33], %y: T[33], %c: bool[4,1]) {
  %a = add(%x, %y)
  %b = tanh(%a)
  %s = where(%c, %b, %x)
  %f = cast(%s) {dtype=f32}
  %e = exp(%f)
  %h = cast(%e) {dtype=T}
  %m = mul(%h, %x)
  return %m
}",
        Tol {
            ulps: 8.0,
            floor: 1.0,
            ..ONE_OP
        },
    );
}

#[test]
fn norms_softmax_reductions() {
    // Norms and softmax: rows of 40; sums of ≤ 40 terms of magnitude ≤ 1
    // (the normalized outputs themselves are O(1)).
    check(
        "graph @n(%x: T[3,40], %g: T[40], %b: T[40]) {
  %l = layer_norm(%x, %g, %b) {axis=-1, eps=1e-05}
  %r = rms_norm(%x, %g) {axis=-1, eps=1e-06}
  return %l, %r
}",
        Tol {
            ulps: 2.0,
            floor: 0.0,
            len: 40,
            mag: 40.0,
        },
    );
    check(
        "graph @s(%x: T[2,5,8]) {
  %s = softmax(%x) {axis=1}
  %l = log_softmax(%x) {axis=-1}
  %m = reduce_mean(%x) {axes=[1], keepdim=false}
  %x2 = reduce_max(%x) {axes=[2], keepdim=true}
  %su = reduce_sum(%x) {axes=[2], keepdim=false}
  return %s, %l, %m, %x2, %su
}",
        Tol {
            ulps: 2.0,
            floor: 0.0,
            len: 8,
            mag: 8.0,
        },
    );
}

#[test]
fn attention_and_embedding() {
    check(
        "graph @att(%q: T[2,3,6,8], %k: T[2,3,6,8], %v: T[2,3,6,8], %bias: T[2,1,6,6]) {
  %a = attention(%q, %k, %v, %bias) {mask_kind=\"bias\"}
  %c = attention(%q, %k, %v) {mask_kind=\"causal\"}
  return %a, %c
}",
        Tol {
            ulps: 2.0,
            floor: 0.0,
            len: 8,
            mag: 8.0,
        },
    );
    check(
        "graph @emb(%t: T[5,4], %ids: i64[2,3]) {
  %e = embedding(%t, %ids)
  return %e
}",
        ONE_OP,
    );
}

/// Every committed reference vector with an f16/bf16 graph that has a node
/// the fast engine now runs passes on the fast engine (the vector suite
/// runs them too; this pins that they are reached at all).
#[test]
fn half_reference_vectors_pass_on_the_fast_engine() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/ops");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    let (mut runs, mut failures) = (0, Vec::new());
    for f in files {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        for case in v["cases"].as_array().into_iter().flatten() {
            let Some(g) = case["graph"].as_str().and_then(|s| text::parse(s).ok()) else {
                continue;
            };
            let half = g
                .values
                .iter()
                .any(|x| matches!(x.ty.dtype, DType::F16 | DType::BF16));
            if !half || !has_fast_node(&g) {
                continue;
            }
            runs += 1;
            if let Err(e) = run_case_in(case, Mode::Fast) {
                failures.push(format!("{}/{}: {e}", v["op"], case["name"]));
            }
        }
    }
    eprintln!("{runs} f16/bf16 vector cases on the fast engine");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs >= 80, "only {runs} f16/bf16 cases reach a fast kernel");
}

/// A 16-bit input that is not kept resident is widened again on every run:
/// new values give new results, each matching the reference.
#[test]
fn non_resident_half_inputs_are_read_every_run() {
    let src = "graph @lin(%x: f16[3,16], %w: f16[6,16]) {
  %wt = permute(%w) {perm=[1, 0]}
  %y = matmul(%x, %wt)
  return %y
}";
    let g = text::parse(src).unwrap();
    let p = FastProgram::compile(Program::from_graph(g.clone())).unwrap();
    for seed in [1, 2, 3] {
        let ins = inputs(&g, seed);
        let want = rlx_cpu::run_graph(&g, &ins).unwrap()[0]
            .to_f64_vec()
            .unwrap();
        let got = p.run(&ins.iter().collect::<Vec<_>>()).unwrap()[0]
            .to_f64_vec()
            .unwrap();
        for (x, y) in got.iter().zip(&want) {
            let tol = 2.0 * unit(DType::F16) * y.abs() + 16.0 * 2f64.powi(-24) * 16.0;
            assert!((x - y).abs() <= tol, "seed {seed}: {x} vs {y}");
        }
    }
}

/// A bf16 matmul whose left operand is computed (it lives in the 16-bit
/// arena) and whose weight is a graph input runs on AVX512-BF16 dot
/// products where the CPU has them: same tolerance as the f32 GEMM of the
/// same bf16 values (products exact, f32 sums). (Without the planner's
/// views the permuted weight here is a copy, so the second matmul takes the
/// f32 GEMM; transposed weights on dot products are checked end to end in
/// rlx-models' `encoder_block_in_f16_and_bf16_matches_f32_reference`.)
#[test]
fn bf16_dot_product_matmuls() {
    let before = rlx_cpu::fast::bf16dot::calls();
    check(
        "graph @dot(%x: T[2,40,24], %w: T[24,33], %v: T[17,24], %b: T[33]) {
  %a = mul(%x, %x)
  %y = matmul_bias_act(%a, %w, %b) {activation=\"gelu\"}
  %vt = permute(%v) {perm=[1, 0]}
  %z = matmul(%a, %vt)
  return %y, %z
}",
        Tol {
            ulps: 3.0,
            floor: 25.0,
            len: 25,
            mag: 25.0,
        },
    );
    if rlx_cpu::fast::bf16dot::available() {
        // One dot-product matmul, two runs.
        assert!(rlx_cpu::fast::bf16dot::calls() >= before + 2);
    } else {
        eprintln!("no AVX512-BF16 here: the bf16 matmuls ran on the f32 GEMM");
    }
}
