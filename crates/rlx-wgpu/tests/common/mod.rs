//! Shared by the wgpu tests: seeded random inputs, the parity cases
//! (`cases`), the comparison against the CPU reference, the coverage of
//! the backend's claims, and the native (blocking, Vulkan) runner. The
//! browser runner (async, WebGPU) is in `browser.rs`.
#![allow(dead_code)]

pub mod cases;
pub use cases::{Case, ErrorCase, Stage};

use rlx::{Attrs, DType, Device, Graph, HostTensor, Trace};
use rlx_ir::Attr;
use std::collections::BTreeSet;

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
    init_with(rlx_wgpu::WgpuOptions::default());
}

/// [`init`] with the wgpu backends following `opts` (a test binary of
/// its own: the registry is process-wide).
pub fn init_with(opts: rlx_wgpu::WgpuOptions) {
    rlx::init();
    rlx_wgpu::register_with(opts);
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
pub fn compare(
    what: &str,
    got: &HostTensor,
    want: &HostTensor,
    atol: f64,
    rtol: f64,
) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "{what}: gpu gave {} {:?}, cpu {} {:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    if matches!(want.dtype(), DType::F32 | DType::F16) {
        let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
            if !ok {
                return Err(format!("{what}: element {i}: gpu {a} vs cpu {b}"));
            }
        }
    } else if got != want {
        let (g, w) = (got.to_f64_vec().unwrap(), want.to_f64_vec().unwrap());
        let i = g.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!(
            "{what}: element {i}: gpu {:?} vs cpu {:?}",
            g.get(i),
            w.get(i)
        ));
    }
    Ok(())
}

/// Every output of a case against the reference's.
pub fn compare_all(case: &Case, got: &[HostTensor], want: &[HostTensor]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{}: {} outputs from the gpu, {} from the cpu",
            case.name,
            got.len(),
            want.len()
        ));
    }
    for (k, (a, b)) in got.iter().zip(want).enumerate() {
        compare(
            &format!("{} output {k}", case.name),
            a,
            b,
            case.atol,
            case.rtol,
        )?;
    }
    Ok(())
}

pub fn assert_close(what: &str, got: &HostTensor, want: &HostTensor, atol: f64, rtol: f64) {
    if let Err(e) = compare(what, got, want, atol, rtol) {
        panic!("{e}")
    }
}

/// Build a one-op graph: inputs of the given types, `op` with `attrs`.
/// x (k × m, used transposed) · w (n × k, used transposed): the lhs
/// m-contiguous and the weight k-contiguous, as MiniLM's weights arrive.
pub fn transposed_matmul(dtype: DType, xs: [usize; 2], ws: [usize; 2]) -> Graph {
    let t = rlx::Trace::new("mm_t");
    let x = t.input("x", dtype, xs.to_vec());
    let w = t.input("w", dtype, ws.to_vec());
    let y = x
        .permute(&[1, 0])
        .unwrap()
        .matmul(&w.permute(&[1, 0]).unwrap())
        .unwrap();
    t.finish(&[&y]).unwrap()
}

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

/// The CPU reference's outputs for a case.
pub fn reference(case: &Case) -> Result<Vec<HostTensor>, String> {
    run_on(&case.graph, Device::Cpu, &case.inputs).map_err(|e| format!("{}: cpu: {e}", case.name))
}

/// The (op, dtype) pairs the compiled program of each case hands the
/// backend for `device` — after optimization and legalization, inside
/// fused regions too — keyed like the dispatch contract keys claims (the
/// first input's dtype, else the first output's).
pub fn exercised(cases: &[Case], device: Device) -> Result<BTreeSet<(String, DType)>, String> {
    fn walk(g: &Graph, out: &mut BTreeSet<(String, DType)>) {
        for n in &g.nodes {
            let v = n.inputs.first().or(n.outputs.first());
            if let Some(&v) = v {
                out.insert((n.op.name().to_string(), g.ty(v).dtype));
            }
            for a in n.attrs.0.values() {
                if let Attr::Graph(body) = a {
                    walk(body, out);
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    for c in cases {
        let p = rlx_wgpu::program_of(&c.graph, device).map_err(|e| format!("{}: {e}", c.name))?;
        walk(&p.graph, &mut out);
    }
    Ok(out)
}

/// Ops every graph or model exercises without a case of their own, or that
/// the optimizer removes before a backend sees them.
pub const IMPLICIT: &[&str] = &[
    "transfer",
    "constant",
    "arange",
    "identity",
    "stop_gradient",
    // rlx-opt's layout pass canonicalizes `split` into one `narrow` per
    // part, so with the optimizer on the backend never sees it.
    "split",
];

/// The claimed (op, dtype) pairs no case exercises: the claims of this
/// build minus `exercised`, minus `IMPLICIT`. An op claimed for every
/// dtype (an empty list) needs a case in any one.
pub fn uncovered(exercised: &BTreeSet<(String, DType)>) -> Vec<String> {
    let mut missing = Vec::new();
    for (op, dtypes) in rlx_wgpu::claims::claims().ops {
        if IMPLICIT.contains(&op.as_str()) {
            continue;
        }
        if dtypes.is_empty() {
            if !exercised.iter().any(|(o, _)| *o == op) {
                missing.push(format!("{op} (any dtype)"));
            }
            continue;
        }
        for d in dtypes {
            if !exercised.contains(&(op.clone(), d)) {
                missing.push(format!("{op} {d}"));
            }
        }
    }
    missing
}

/// The ops of a compiled program's graph, transfers left out (what the
/// fused-chain check compares).
pub fn kernel_ops(g: &Graph) -> Vec<String> {
    g.nodes
        .iter()
        .map(|n| n.op.name().to_string())
        .filter(|o| o != "transfer")
        .collect()
}

/// Every case of every group.
pub fn all_cases() -> Vec<Case> {
    cases::groups().into_iter().flat_map(|(_, f)| f()).collect()
}

/// Run `g` on the CPU and on Vulkan with the same inputs and compare.
#[cfg(not(target_arch = "wasm32"))]
pub fn parity(what: &str, g: &Graph, inputs: &[HostTensor], atol: f64, rtol: f64) {
    let case = Case {
        name: what.to_string(),
        graph: g.clone(),
        inputs: inputs.to_vec(),
        atol,
        rtol,
    };
    if let Err(e) = check_native(&case) {
        panic!("{e}")
    }
}

/// Run every case of a group on Vulkan; report every mismatch, not just
/// the first.
#[cfg(not(target_arch = "wasm32"))]
pub fn run_group(cases: Vec<Case>) {
    init();
    check_group(cases);
}

/// [`run_group`] on the backends registered now (see [`init_with`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn check_group(cases: Vec<Case>) {
    let n = cases.len();
    let failed: Vec<String> = cases.iter().filter_map(|c| check_native(c).err()).collect();
    assert!(
        failed.is_empty(),
        "{} of {n} cases differ:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// One case on Vulkan (blocking) against the CPU reference.
#[cfg(not(target_arch = "wasm32"))]
pub fn check_native(case: &Case) -> Result<(), String> {
    let want = reference(case)?;
    let c = rlx::compile(&case.graph, Device::Vulkan)
        .map_err(|e| format!("{}: compile for vulkan: {e}", case.name))?;
    let got = c
        .run(&case.inputs)
        .map_err(|e| format!("{}: vulkan: {e}", case.name))?;
    compare_all(case, &got, &want)
}

/// One typed-error case on Vulkan: the error comes at the promised stage
/// and names the problem.
#[cfg(not(target_arch = "wasm32"))]
pub fn check_error_native(case: &ErrorCase) -> Result<(), String> {
    let err = match (rlx::compile(&case.graph, Device::Vulkan), case.stage) {
        (Err(e), Stage::Compile) => e.to_string(),
        (Ok(c), Stage::Run) => match c.run(&case.inputs) {
            Err(e) => e.to_string(),
            Ok(_) => return Err(format!("{}: ran without an error", case.name)),
        },
        (Ok(_), Stage::Compile) => return Err(format!("{}: compiled", case.name)),
        (Err(e), Stage::Run) => return Err(format!("{}: compile failed: {e}", case.name)),
    };
    expect_message(case, &err)
}

/// The error message names what the case expects.
pub fn expect_message(case: &ErrorCase, err: &str) -> Result<(), String> {
    match case.expect.iter().find(|s| !err.contains(*s)) {
        Some(s) => Err(format!("{}: error lacks `{s}`: {err}", case.name)),
        None => Ok(()),
    }
}
