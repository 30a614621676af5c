//! Shared by the wgpu tests: seeded random inputs, one-graph compile on the
//! CPU reference and on Vulkan, and an elementwise comparison.
#![allow(dead_code)]

use rlx::{Attrs, DType, Device, Graph, HostTensor, Trace};

/// A small deterministic generator (no external RNG: stable across
/// platforms and crate versions).
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }
}

pub fn init() {
    rlx::init();
    rlx_wgpu::register();
}

/// A random tensor of `dtype` with floats in `[lo, hi)`.
pub fn rand(rng: &mut Rng, dtype: DType, shape: &[usize], lo: f64, hi: f64) -> HostTensor {
    let n: usize = shape.iter().product();
    match dtype {
        DType::F32 => HostTensor::from_f64(
            dtype,
            shape.to_vec(),
            (0..n).map(|_| rng.uniform(lo, hi)).collect(),
        )
        .unwrap(),
        DType::Bool => HostTensor::from_slice(
            &(0..n).map(|_| rng.next_f64() < 0.5).collect::<Vec<_>>(),
            shape.to_vec(),
        )
        .unwrap(),
        _ => HostTensor::from_i64(
            dtype,
            shape.to_vec(),
            (0..n).map(|_| rng.uniform(lo, hi).floor() as i64).collect(),
        )
        .unwrap(),
    }
}

/// Compile `g` for `device` (default options) and run it.
pub fn run_on(
    g: &Graph,
    device: Device,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, rlx::Error> {
    let c = rlx::compile(g, device)?;
    c.run(inputs)
}

/// Elementwise agreement: floats within `atol + rtol·|ref|` (NaN matches
/// NaN, infinities match exactly), everything else exactly.
pub fn assert_close(what: &str, got: &HostTensor, want: &HostTensor, atol: f64, rtol: f64) {
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    if want.dtype() == DType::F32 {
        let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
            assert!(ok, "{what}: element {i}: wgpu {a} vs cpu {b}");
        }
    } else {
        assert_eq!(got, want, "{what}");
    }
}

/// Build a one-op graph: inputs of the given types, `op` with `attrs`.
pub fn one_op(op: &str, inputs: &[(DType, Vec<usize>)], attrs: Attrs) -> Graph {
    let t = Trace::new(op);
    let xs: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, (d, s))| t.input(&format!("x{i}"), *d, s.clone()))
        .collect();
    let rest: Vec<&rlx::Tensor> = xs[1..].iter().collect();
    let ys = xs[0].apply(op, &rest, attrs).unwrap();
    let refs: Vec<&rlx::Tensor> = ys.iter().collect();
    t.finish(&refs).unwrap()
}

/// Run `g` on the CPU and on Vulkan with the same inputs and compare.
pub fn parity(what: &str, g: &Graph, inputs: &[HostTensor], atol: f64, rtol: f64) {
    let want = run_on(g, Device::Cpu, inputs).unwrap_or_else(|e| panic!("{what}: cpu: {e}"));
    let c = rlx::compile(g, Device::Vulkan)
        .unwrap_or_else(|e| panic!("{what}: compile for vulkan: {e}"));
    // Every node must have gone native (no silent common-IR path here).
    let got = c
        .run(inputs)
        .unwrap_or_else(|e| panic!("{what}: vulkan: {e}"));
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_close(&format!("{what} output {k}"), a, b, atol, rtol);
    }
}
