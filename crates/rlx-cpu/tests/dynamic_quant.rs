//! `dynamic_quantize_linear` on the fast engine (two passes of its own)
//! against the reference interpreter (the op's decomposition): the same
//! bytes, scale and zero point — on values that land exactly on rounding
//! ties, all-negative and all-zero inputs — and one error for a
//! non-finite value (IEEE min/max would skip a NaN and quantize it to
//! some level), not a panic or a silent number.

use rlx_cpu::fast::FastProgram;
use rlx_cpu::run_graph;
use rlx_ir::{lir::Program, text, HostTensor};

fn both(x: &[f32]) -> [Result<Vec<HostTensor>, rlx_cpu::CpuError>; 2] {
    let g = text::parse(&format!(
        "graph @g(%x: f32[{}]) {{\n  %y, %s, %z = dynamic_quantize_linear(%x)\n  return %y, %s, %z\n}}",
        x.len()
    ))
    .unwrap();
    let t = HostTensor::from_slice(x, [x.len()]).unwrap();
    let reference = run_graph(&g, std::slice::from_ref(&t));
    let fast = FastProgram::compile(Program::from_graph(g.clone())).and_then(|p| p.run(&[&t]));
    [reference, fast]
}

#[test]
fn the_fast_kernel_is_the_decomposition() {
    // min −1, max 1.55: scale 0.01, so k · 0.005 are ties x / scale = k / 2.
    let mut ties: Vec<f32> = (-200..=310).map(|k| k as f32 * 0.005).collect();
    ties.push(1.55);
    let odd: Vec<f32> = (0..1000)
        .map(|i| ((i * 7919) % 1013) as f32 * -0.37)
        .collect();
    for x in [ties, odd, vec![0.0; 9], vec![3.5; 4]] {
        let [r, f] = both(&x);
        let (r, f) = (r.unwrap(), f.unwrap());
        assert_eq!(r.len(), 3);
        for (a, b) in r.iter().zip(&f) {
            assert_eq!(a, b, "x[0..4] = {:?}", &x[..4]);
        }
    }
}

#[test]
fn a_non_finite_value_is_the_references_error() {
    for bad in [f32::NAN, f32::INFINITY] {
        let [r, f] = both(&[1.0, bad, -2.0]);
        let (r, f) = (r.unwrap_err().to_string(), f.unwrap_err().to_string());
        assert_eq!(r, f);
        assert!(r.contains("needs finite values"), "{r}");
    }
}
