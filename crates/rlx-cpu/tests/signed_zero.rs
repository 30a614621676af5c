//! relu(-0.0) is +0.0 in both engines (the reference's max(x, 0)). The
//! fast engine kept -0.0, and an op that tells the zeros apart turned it
//! into a different number: rsqrt(rsqrt(relu(-0.0))) was NaN compiled and 0
//! in the reference (found by the `compile` fuzz target).
//!
//! rms_norm of a zero element with a negative gain is -0.0 in both engines
//! (PyTorch's `x * rsqrt(mean(x²) + eps) * weight`, IEEE: +0 × −g = −0).
//! The reference added a bias of +0.0 it does not have, giving +0.0, so
//! `atan2(y, round(rms_norm(x, g)))` was ±π apart between the engines
//! (found by the `compile` fuzz target on the H200 machine).

use rlx_cpu::fast::FastProgram;
use rlx_cpu::run_graph;
use rlx_ir::{lir::Program, text, HostTensor};

#[test]
fn relu_of_negative_zero_is_positive_zero_in_both_engines() {
    let g = text::parse(
        "graph @g(%x: f32[4]) {\n  %r = relu(%x)\n  %a = rsqrt(%r)\n  %b = rsqrt(%a)\n  return %r, %b\n}",
    )
    .unwrap();
    let x = HostTensor::from_slice(&[-0.0f32, 0.0, -2.0, 4.0], [4]).unwrap();
    let reference = run_graph(&g, std::slice::from_ref(&x)).unwrap();
    let fast = FastProgram::compile(Program::from_graph(g.clone()))
        .and_then(|p| p.run(&[&x]))
        .unwrap();
    for outs in [&reference, &fast] {
        let r = outs[0].to_vec::<f32>().unwrap();
        assert!(r[..3].iter().all(|v| v.to_bits() == 0), "relu: {r:?}");
        let b = outs[1].to_vec::<f32>().unwrap();
        // rsqrt(+0) = +inf, rsqrt(+inf) = 0; 4 -> 0.5 -> sqrt(2).
        assert_eq!(&b[..3], &[0.0, 0.0, 0.0], "{b:?}");
        assert!((b[3] - std::f32::consts::SQRT_2).abs() < 1e-6, "{b:?}");
    }
}

#[test]
fn rms_norm_keeps_the_sign_of_a_zero_times_a_negative_gain() {
    let g = text::parse(
        "graph @g(%x: f32[1,4], %w: f32[4], %y: f32[1,4]) {\n  %n = rms_norm(%x, %w) {eps=0.001}\n  %a = atan2(%y, %n)\n  return %n, %a\n}",
    )
    .unwrap();
    let x = HostTensor::from_slice(&[0.0f32, -0.0, 1.5, -0.5], [1, 4]).unwrap();
    let w = HostTensor::from_slice(&[-1.8f32, 0.7, 1.0, 2.0], [4]).unwrap();
    let y = HostTensor::from_slice(&[-0.0f32, -0.0, 1.0, 1.0], [1, 4]).unwrap();
    let ins = [x, w, y];
    let reference = run_graph(&g, &ins).unwrap();
    let fast = FastProgram::compile(Program::from_graph(g.clone()))
        .and_then(|p| p.run(&ins.iter().collect::<Vec<_>>()))
        .unwrap();
    for (name, outs) in [("reference", &reference), ("fast", &fast)] {
        let n = outs[0].to_vec::<f32>().unwrap();
        // 0 × −1.8 = −0; −0 × 0.7 = −0.
        assert_eq!(n[0].to_bits(), (-0.0f32).to_bits(), "{name}: {n:?}");
        assert_eq!(n[1].to_bits(), (-0.0f32).to_bits(), "{name}: {n:?}");
        let a = outs[1].to_vec::<f32>().unwrap();
        // atan2(−0, −0) = −π (C99 / IEEE 754 atan2).
        assert_eq!(a[0], -std::f32::consts::PI, "{name}: {a:?}");
        assert_eq!(a[1], -std::f32::consts::PI, "{name}: {a:?}");
    }
}
