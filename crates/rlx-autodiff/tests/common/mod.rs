//! Shared test helpers: a seeded generator, graph evaluation, central
//! finite differences in f64.
#![allow(dead_code)]

use rlx_ir::{Graph, HostTensor};

/// SplitMix64: small, seeded, reproducible.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Run on the CPU reference interpreter.
pub fn eval(g: &Graph, inputs: &[HostTensor]) -> Vec<HostTensor> {
    rlx_cpu::run_graph(g, inputs).unwrap_or_else(|e| panic!("running `{}`: {e}", g.name))
}

/// Compile through the whole pipeline (optimizer, fusion, dispatch) and run.
pub fn run_compiled(g: &Graph, inputs: &[HostTensor]) -> Vec<HostTensor> {
    let c =
        rlx::compile(g, rlx::Device::Cpu).unwrap_or_else(|e| panic!("compiling `{}`: {e}", g.name));
    c.run(inputs)
        .unwrap_or_else(|e| panic!("running `{}`: {e}", g.name))
}

pub fn scalar(t: &HostTensor) -> f64 {
    t.to_f64_vec().unwrap()[0]
}

/// Central differences of the scalar output 0 w.r.t. input `k`.
pub fn fd_grad(g: &Graph, inputs: &[HostTensor], k: usize, eps: f64) -> Vec<f64> {
    let x = inputs[k].to_f64_vec().unwrap();
    let mut out = vec![0.0; x.len()];
    for i in 0..x.len() {
        let at = |d: f64| {
            let mut xs = x.clone();
            xs[i] += d;
            let mut ins = inputs.to_vec();
            ins[k] =
                HostTensor::from_f64(inputs[k].dtype(), inputs[k].shape().clone(), xs).unwrap();
            scalar(&eval(g, &ins)[0])
        };
        out[i] = (at(eps) - at(-eps)) / (2.0 * eps);
    }
    out
}

/// max |a-b| / (atol + rtol*|b|) <= 1, with the worst index in the message.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let tol = atol + rtol * b.abs();
        assert!(
            (a - b).abs() <= tol || (a.is_nan() && b.is_nan()),
            "{what}: element {i}: got {a}, want {b} (|diff| {} > tol {tol})",
            (a - b).abs()
        );
    }
}
