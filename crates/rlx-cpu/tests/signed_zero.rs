//! relu(-0.0) is +0.0 in both engines (the reference's max(x, 0)). The
//! fast engine kept -0.0, and an op that tells the zeros apart turned it
//! into a different number: rsqrt(rsqrt(relu(-0.0))) was NaN compiled and 0
//! in the reference (found by the `compile` fuzz target).

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
