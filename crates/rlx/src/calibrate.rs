//! [`calibrate`]: measure what a device costs on this machine — f32 GEMM
//! throughput, the cost of one more kernel in a run and of a run itself,
//! host↔device copy bandwidth — by compiling and running three small graphs on it the way
//! any model runs. The router's cost model (`cheapest:` chains) uses the
//! figures once they are set ([`rlx_runtime::set_calibration`]); the CLI
//! keeps them on disk (`rlx calibrate`).

use crate::{compile_with, CompileOptions, Device, Error, HostTensor, Target};
use rlx_ir::text::parse;
use rlx_ir::DType;
use rlx_runtime::{backend_for, Calibration};
use std::time::{Duration, Instant};

/// Size of the GEMM measured (n × n × n, 2n³ FLOP: 268 MFLOP at 512).
const GEMM_N: usize = 512;
/// Kernels in the chain whose extra cost over one kernel is measured.
const CHAIN: usize = 32;
/// Elements copied in and out by the bandwidth graph (16 MiB of f32).
const COPY_ELEMS: usize = 1 << 22;

/// Median run time of `g` on `device` over `inputs` (2 warm-up runs,
/// then at least 5 runs and at least `budget` of running).
fn median_time(
    text: &str,
    device: Device,
    inputs: &[HostTensor],
    budget: Duration,
) -> Result<f64, Error> {
    let g = parse(text)?;
    // Unoptimized: the chain must stay a chain of kernels.
    let opts = CompileOptions {
        optimize: false,
        ..Default::default()
    };
    let c = compile_with(&g, Target::Device(device), &opts)?;
    for _ in 0..2 {
        c.run(inputs)?;
    }
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 200) {
        let t = Instant::now();
        c.run(inputs)?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn filled(shape: &[usize]) -> Result<HostTensor, Error> {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| ((i * 7919) % 23) as f64 / 23.0 - 0.5)
        .collect();
    Ok(HostTensor::from_f64(DType::F32, shape.to_vec(), v)?)
}

/// A chain of `n` adds on one value.
fn chain(n: usize) -> String {
    let mut s = String::from("graph @chain(%x: f32[1]) {\n");
    let mut prev = "x".to_string();
    for i in 0..n {
        s += &format!("  %a{i} = add(%{prev}, %x)\n");
        prev = format!("a{i}");
    }
    s + &format!("  return %{prev}\n}}")
}

/// Measure `device` (its backend must be registered). Takes about a
/// second on a CPU, a few on a software GPU.
pub fn calibrate(device: Device) -> Result<Calibration, Error> {
    crate::init();
    let be = backend_for(device).ok_or_else(|| {
        Error::Runtime(rlx_runtime::RuntimeError::Config(format!(
            "no `{device}` backend in this build or on this machine"
        )))
    })?;
    let budget = Duration::from_millis(300);
    let n = GEMM_N;
    let gemm = median_time(
        &format!("graph @gemm(%a: f32[{n},{n}], %b: f32[{n},{n}]) {{\n  %c = matmul(%a, %b)\n  return %c\n}}"),
        device,
        &[filled(&[n, n])?, filled(&[n, n])?],
        budget,
    )?;
    let one = filled(&[1])?;
    let t1 = median_time(&chain(1), device, std::slice::from_ref(&one), budget)?;
    let tn = median_time(
        &chain(CHAIN + 1),
        device,
        std::slice::from_ref(&one),
        budget,
    )?;
    let launch_us = ((tn - t1) / CHAIN as f64 * 1e6).max(0.0);
    let transfer_gbps = if device == Device::Cpu {
        None
    } else {
        let big = median_time(
            &format!("graph @copy(%x: f32[{COPY_ELEMS}]) {{\n  %y = neg(%x)\n  return %y\n}}"),
            device,
            &[filled(&[COPY_ELEMS])?],
            budget,
        )?;
        let small = median_time(
            "graph @copy(%x: f32[1]) {\n  %y = neg(%x)\n  return %y\n}",
            device,
            std::slice::from_ref(&one),
            budget,
        )?;
        // In and out; the kernel's own time is counted as copying (an
        // upper bound on the copies' cost).
        Some(2.0 * 4.0 * COPY_ELEMS as f64 / (big - small).max(1e-9) / 1e9)
    };
    Ok(Calibration {
        device: device.to_string(),
        backend: be.kernel_name("matmul", DType::F32),
        gemm_gflops: 2.0 * (n * n * n) as f64 / gemm.max(1e-9) / 1e9,
        launch_us,
        run_us: t1 * 1e6,
        transfer_gbps,
    })
}
