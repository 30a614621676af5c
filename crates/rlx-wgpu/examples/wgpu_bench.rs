//! Speed of rlx-wgpu on the machine's GPU (for the H200 run: Vulkan):
//! MiniLM (all-MiniLM-L6-v2 architecture, seq 128) forward latency per
//! batch size, and matmul GFLOP/s. Prints one JSON object per line.
//!
//! Weights are seeded random tensors of the checkpoint's shapes (speed does
//! not depend on their values; the real 90 MB checkpoint is too big to take
//! to the GPU machine). Weights are pinned (uploaded once); each timed run
//! uploads the ids/mask/type inputs and reads both outputs back.
//!
//! `--dtype f16` runs MiniLM and the matmuls with f16 types and weights
//! (stored as f16 on adapters with `shader-f16`, f32 compute; matmuls on
//! cooperative matrices where the adapter has them). `--check` also prints
//! the worst token and sentence cosine against the CPU backend in f32.
//!
//! cargo run --release -p rlx-wgpu --example wgpu_bench -- [--batches 1,2,4,8,16,32] [--seq 128] [--runs 20] [--matmul 1024,2048,4096] [--dtype f32|f16] [--check]

use rlx::{Device, HostTensor};
use rlx_wgpu::{program_of, WgpuBackend};
use std::time::Instant;

fn arg(args: &[String], k: &str, d: &str) -> String {
    args.iter()
        .position(|a| a == k)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| d.to_string())
}

fn list(s: &str) -> Vec<usize> {
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().expect("a number"))
        .collect()
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let batches = list(&arg(&args, "--batches", "1,2,4,8,16,32"));
    let seq: usize = arg(&args, "--seq", "128").parse().unwrap();
    let runs: usize = arg(&args, "--runs", "20").parse().unwrap();
    let sizes = list(&arg(&args, "--matmul", "1024,2048,4096"));
    let dtype = arg(&args, "--dtype", "f32");
    assert!(dtype == "f32" || dtype == "f16", "--dtype f32 or f16");
    // RLX_* settings (RLX_WGPU_COOP=0 for A/B runs, ...) through the one edge.
    let env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    rlx_wgpu::register_with(env.wgpu);
    let device = Device::Vulkan;
    let backend = WgpuBackend::with_options(device, env.wgpu);
    let ctx = backend.context().expect("a Vulkan adapter");
    let i = &ctx.info;
    println!(
        "{{\"adapter\": \"{}\", \"backend\": \"{}\", \"driver\": \"{}\", \"shader_f16\": {}, \"subgroups\": {}, \"coop_f16\": {}, \"max_storage_binding\": {}}}",
        i.name, i.backend, i.driver.trim(), i.shader_f16, i.subgroups, ctx.caps().coop_f16, i.max_storage_binding
    );
    let check = args.iter().any(|a| a == "--check");
    let cfg = rlx_models::bert::BertConfig::from_json(
        r#"{"vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
            "intermediate_size": 1536, "max_position_embeddings": 512, "layer_norm_eps": 1e-12}"#,
    )
    .unwrap();
    let bert = rlx_models::bert::Bert::new(cfg, true);
    let mut rng = Lcg(42);
    let weights32: Vec<HostTensor> = bert
        .parameters()
        .iter()
        .map(|p| {
            let n = p.ty.shape.numel();
            let v: Vec<f32> = if p.name.ends_with("LayerNorm.weight") {
                vec![1.0; n]
            } else {
                (0..n).map(|_| 0.02 * rng.next()).collect()
            };
            HostTensor::from_slice(&v, p.ty.shape.clone()).unwrap()
        })
        .collect();
    let weights: Vec<HostTensor> = weights32
        .iter()
        .map(|t| {
            if dtype == "f16" {
                HostTensor::from_f64(rlx::DType::F16, t.shape().clone(), t.to_f64_vec().unwrap())
                    .unwrap()
            } else {
                t.clone()
            }
        })
        .collect();
    for &b in &batches {
        let g32 = bert.graph(b, seq).unwrap();
        let mut g = g32.clone();
        if dtype == "f16" {
            let text = rlx::ir::text::print(&g).replace("f32", "f16");
            g = rlx::ir::text::parse(&text).unwrap();
        }
        let t0 = Instant::now();
        let program = program_of(&g, device).unwrap();
        let exe = backend.compile_program(&program).unwrap();
        let compile_s = t0.elapsed().as_secs_f64();
        exe.program
            .pin_inputs(&(3..3 + weights.len()).collect::<Vec<_>>());
        let ids: Vec<i64> = (0..b * seq)
            .map(|k| 1000 + ((k * 7919) % 20000) as i64)
            .collect();
        let ids = HostTensor::from_slice(&ids, [b, seq]).unwrap();
        let mask = HostTensor::from_slice(&vec![1i64; b * seq], [b, seq]).unwrap();
        let types = HostTensor::from_slice(&vec![0i64; b * seq], [b, seq]).unwrap();
        let mut inputs: Vec<&HostTensor> = vec![&ids, &mask, &types];
        inputs.extend(weights.iter());
        for _ in 0..3 {
            pollster::block_on(exe.run_async(&inputs)).unwrap();
        }
        if check {
            // Accuracy on this machine: the worst token / sentence cosine
            // against the CPU backend in f32 on the same (f32) weights.
            let got = pollster::block_on(exe.run_async(&inputs)).unwrap();
            let mut in32: Vec<&HostTensor> = vec![&ids, &mask, &types];
            in32.extend(weights32.iter());
            let want = rlx::compile(&g32, Device::Cpu)
                .unwrap()
                .run_refs(&in32)
                .unwrap();
            let worst = |k: usize, w: usize| {
                let (a, b) = (want[k].to_f64_vec().unwrap(), got[k].to_f64_vec().unwrap());
                a.chunks(w)
                    .zip(b.chunks(w))
                    .map(|(x, y)| {
                        let d: f64 = x.iter().zip(y).map(|(p, q)| p * q).sum();
                        let n = |v: &[f64]| v.iter().map(|p| p * p).sum::<f64>().sqrt();
                        d / (n(x) * n(y))
                    })
                    .fold(1.0f64, f64::min)
            };
            println!(
                "{{\"check\": \"minilm\", \"dtype\": \"{dtype}\", \"batch\": {b}, \"coop_f16\": {}, \"token_cosine_min\": {:.8}, \"pooled_cosine_min\": {:.8}}}",
                ctx.caps().coop_f16,
                worst(0, 384),
                worst(1, 384)
            );
        }
        let mut e2e = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            pollster::block_on(exe.run_async(&inputs)).unwrap();
            e2e.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let gpu_ms = exe.program.time_compute(runs).unwrap() * 1e3;
        // One pass per submit, waited for, nothing read back: e2e minus
        // this is the uploads + readback; this minus gpu_ms is the
        // encode + submit + wait round trip.
        let pass_ms = median(
            (0..runs)
                .map(|_| exe.program.time_compute(1).unwrap() * 1e3)
                .collect(),
        );
        if std::env::var("RLX_WGPU_PROFILE").is_ok() {
            let mut p = exe.program.profile_kernels(5).unwrap();
            let total: f64 = p.iter().map(|x| x.1).sum();
            // Per op kind (the name after `sNNN_`), summed: where the pass goes.
            let mut kinds: std::collections::BTreeMap<String, (usize, f64)> = Default::default();
            for (k, ms) in &p {
                let kind = k.split_once('_').map_or(k.as_str(), |x| x.1).to_string();
                let e = kinds.entry(kind).or_default();
                e.0 += 1;
                e.1 += ms;
            }
            for (kind, (n, ms)) in &kinds {
                println!("{{\"profile_kind\": \"{kind}\", \"dtype\": \"{dtype}\", \"batch\": {b}, \"count\": {n}, \"ms\": {ms:.4}}}");
            }
            println!(
                "{{\"profile_total\": {total:.4}, \"dtype\": \"{dtype}\", \"batch\": {b}, \"stamped\": {}}}",
                ctx.info.timestamps
            );
            p.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
            for (k, ms) in p.iter().take(12) {
                println!("{{\"profile\": \"{k}\", \"dtype\": \"{dtype}\", \"batch\": {b}, \"ms\": {ms:.3}}}");
            }
        }
        println!(
            "{{\"bench\": \"minilm\", \"dtype\": \"{dtype}\", \"batch\": {b}, \"seq\": {seq}, \"kernels\": {}, \"compile_s\": {compile_s:.3}, \"e2e_ms_median\": {:.3}, \"pass_ms\": {pass_ms:.3}, \"gpu_ms\": {gpu_ms:.3}}}",
            exe.program.kernel_count(),
            median(e2e)
        );
    }
    for &n in &sizes {
        let t = rlx::Trace::new("mm");
        let mdt = if dtype == "f16" {
            rlx::DType::F16
        } else {
            rlx::DType::F32
        };
        let a = t.input("a", mdt, vec![n, n]);
        let bb = t.input("b", mdt, vec![n, n]);
        let y = a.matmul(&bb).unwrap();
        let g = t.finish(&[&y]).unwrap();
        let exe = backend
            .compile_program(&program_of(&g, device).unwrap())
            .unwrap();
        exe.program.pin_inputs(&[0, 1]);
        let x: Vec<f32> = (0..n * n).map(|_| rng.next()).collect();
        let mut ta = HostTensor::from_slice(&x, vec![n, n]).unwrap();
        if dtype == "f16" {
            ta = HostTensor::from_f64(mdt, ta.shape().clone(), ta.to_f64_vec().unwrap()).unwrap();
        }
        pollster::block_on(exe.run_async(&[&ta, &ta])).unwrap();
        let reps = if n <= 1024 {
            50
        } else if n <= 2048 {
            20
        } else {
            5
        };
        exe.program.time_compute(2).unwrap();
        let s = exe.program.time_compute(reps).unwrap();
        let gflops = 2.0 * (n as f64).powi(3) / s / 1e9;
        println!(
            "{{\"bench\": \"matmul\", \"dtype\": \"{dtype}\", \"n\": {n}, \"ms\": {:.3}, \"gflops\": {gflops:.1}}}",
            s * 1e3
        );
    }
}
