//! Speed of `dequant_matmul` (GGUF block weights decoded in the shader)
//! on the machine's Vulkan adapter, next to the f32 matmul of the same
//! shape: the compute pass alone (weights resident), median of `--runs`.
//! Prints one JSON object per line.
//!
//! `--llm FILE.gguf` instead profiles one decode step of that model
//! (one token after 64 cached): milliseconds per kernel kind.
//!
//! cargo run --release -p rlx-wgpu --example dequant_bench -- [--m 1,7,64,512] [--nk 576x576,1536x576,49152x576] [--types q4_0,q4_1,q8_0,q4_k,q6_k] [--runs 10] [--llm FILE.gguf]

use rlx::{Attrs, DType, Device, HostTensor};
use rlx_wgpu::{program_of, WgpuBackend};

fn arg(args: &[String], k: &str, d: &str) -> String {
    args.iter()
        .position(|a| a == k)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| d.to_string())
}

fn graph(xd: DType, wd: DType, m: usize, n: usize, k: usize) -> rlx::Graph {
    let t = rlx::Trace::new("dq");
    let x = t.input("x", xd, vec![m, k]);
    if wd == DType::F32 {
        let w = t.input("w", wd, vec![k, n]);
        let y = x.matmul(&w).unwrap();
        return t.finish(&[&y]).unwrap();
    }
    let w = t.input("w", wd, vec![n, k]);
    let y = x.apply1("dequant_matmul", &[&w], Attrs::new()).unwrap();
    t.finish(&[&y]).unwrap()
}

fn weight(d: DType, n: usize, k: usize) -> HostTensor {
    let mut s = 1u64;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    };
    let v: Vec<f32> = (0..n * k).map(|_| next() * 0.1).collect();
    if d == DType::F32 {
        return HostTensor::new(DType::F32, vec![k, n], v.into()).unwrap();
    }
    let b = rlx_ref::kernels::quant::quantize_values(d, &v).unwrap();
    HostTensor::new(d, vec![n, k], rlx::ir::TensorData::Packed(b)).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ms: Vec<usize> = arg(&args, "--m", "1,7,64,512")
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let nks: Vec<(usize, usize)> = arg(&args, "--nk", "576x576,1536x576,49152x576")
        .split(',')
        .map(|s| {
            let (n, k) = s.split_once('x').unwrap();
            (n.parse().unwrap(), k.parse().unwrap())
        })
        .collect();
    let types: Vec<DType> = arg(&args, "--types", "f32,q4_0,q4_1,q8_0,q4_k,q6_k")
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let runs: usize = arg(&args, "--runs", "10").parse().unwrap();
    rlx::init();
    rlx_wgpu::register();
    let backend = WgpuBackend::new(Device::Vulkan);
    let llm = arg(&args, "--llm", "");
    if !llm.is_empty() {
        return profile_llm(&backend, &llm, runs);
    }
    for &(n, k) in &nks {
        for &d in &types {
            let w = weight(d, n, k);
            for &m in &ms {
                let g = graph(DType::F32, d, m, n, k);
                let p = program_of(&g, Device::Vulkan).unwrap();
                let e = backend.compile_program(&p).unwrap();
                let x =
                    HostTensor::new(DType::F32, vec![m, k], vec![0.5f32; m * k].into()).unwrap();
                e.program.pin_inputs(&[1]);
                pollster::block_on(e.run_async(&[&x, &w])).unwrap();
                let mut t: Vec<f64> = (0..runs)
                    .map(|_| e.program.time_compute(1).unwrap())
                    .collect();
                t.sort_by(f64::total_cmp);
                let s = t[t.len() / 2];
                let bytes = d.storage_bytes(n * k).unwrap_or(0) as f64;
                println!(
                    "{{\"dtype\":\"{d}\",\"m\":{m},\"n\":{n},\"k\":{k},\"ms\":{:.3},\"weight_gbps\":{:.2},\"gflops\":{:.2},\"kernels\":{:?}}}",
                    s * 1e3,
                    bytes / s / 1e9,
                    2.0 * (m * n * k) as f64 / s / 1e9,
                    e.program.kernel_names
                );
            }
        }
    }
}

/// Milliseconds per kernel kind of one decode step of a GGUF decoder.
fn profile_llm(backend: &WgpuBackend, path: &str, runs: usize) {
    let model = rlx_models::llm::LlmModel::open(std::path::Path::new(path), |_| {}).unwrap();
    let mut gen = model.generator(Device::Vulkan);
    let c = gen.compiled(1, 64).unwrap();
    let e = backend.compile_program(c.program()).unwrap();
    let total = e.program.time_compute(runs.max(1)).unwrap();
    let per = e.program.profile_kernels(runs.max(1)).unwrap();
    let mut kinds: std::collections::BTreeMap<String, (usize, f64)> = Default::default();
    for (name, ms) in per {
        // s12_dequant_matmul_f32_q4_1_gemv -> dequant_matmul_f32_q4_1_gemv
        let kind = name
            .split_once('_')
            .map(|x| x.1)
            .unwrap_or(&name)
            .to_string();
        let e = kinds.entry(kind).or_default();
        e.0 += 1;
        e.1 += ms;
    }
    let mut v: Vec<_> = kinds.into_iter().collect();
    v.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    println!(
        "{{\"model\":\"{path}\",\"kernels\":{},\"pass_ms\":{:.1}}}",
        e.program.kernel_count(),
        total * 1e3
    );
    for (k, (n, ms)) in v.iter().take(20) {
        println!("{{\"kind\":\"{k}\",\"count\":{n},\"ms\":{ms:.2}}}");
    }
}
