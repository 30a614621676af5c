//! `gpu minilm`: MiniLM on the GPU against the CPU reference, and its
//! latency with and without CUDA graph replay.

use super::*;

fn minilm_inputs(b: usize, s: usize, vocab: usize) -> Vec<HostTensor> {
    let mut rng = Rng(42 + b as u64);
    let mut ids = vec![0i64; b * s];
    let mut mask = vec![0i64; b * s];
    for r in 0..b {
        // Rows of different lengths, so padding is exercised.
        let len = s - (r * 7) % (s / 2);
        for t in 0..s {
            if t < len {
                ids[r * s + t] = if t == 0 {
                    101
                } else if t + 1 == len {
                    102
                } else {
                    1000 + (rng.next() % (vocab as u64 - 1000)) as i64
                };
                mask[r * s + t] = 1;
            }
        }
    }
    vec![
        HostTensor::from_slice(&ids, [b, s]).unwrap(),
        HostTensor::from_slice(&mask, [b, s]).unwrap(),
        HostTensor::from_slice(&vec![0i64; b * s], [b, s]).unwrap(),
    ]
}

fn cosine_min(a: &HostTensor, b: &HostTensor, h: usize) -> f64 {
    let (a, b) = (a.to_f64_vec().unwrap(), b.to_f64_vec().unwrap());
    a.chunks(h)
        .zip(b.chunks(h))
        .map(|(x, y)| {
            let d: f64 = x.iter().zip(y).map(|(p, q)| p * q).sum();
            let nx: f64 = x.iter().map(|p| p * p).sum::<f64>().sqrt();
            let ny: f64 = y.iter().map(|p| p * p).sum::<f64>().sqrt();
            d / (nx * ny)
        })
        .fold(f64::INFINITY, f64::min)
}

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_exe(exe: &CudaExecutable, inputs: &[&HostTensor], runs: usize) -> f64 {
    let n = inputs.len();
    exe.keep_resident(&(0..n).collect::<Vec<_>>());
    for _ in 0..10 {
        exe.launch_async(inputs).unwrap();
        exe.sync().unwrap();
    }
    let times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            exe.launch_async(inputs).unwrap();
            exe.sync().unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    p50(times)
}

/// p50 of whole runs with the per-request tensors (ids, mask) copied in
/// through the pinned staging and the outputs copied back: `run_cuda`, with
/// only inputs `first..` (the weights) resident.
fn time_e2e(exe: &CudaExecutable, inputs: &[&HostTensor], first: usize, runs: usize) -> f64 {
    exe.keep_resident(&(first..inputs.len()).collect::<Vec<_>>());
    for _ in 0..10 {
        exe.run_cuda(inputs).unwrap();
    }
    let times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            exe.run_cuda(inputs).unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    p50(times)
}

pub(super) fn minilm(args: &[String]) -> usize {
    let weights = arg(args, "--weights").expect("--weights FILE");
    let config = arg(args, "--config").expect("--config FILE");
    let batches = list(arg(args, "--batches").unwrap_or("1,2,4,8,16,32"));
    let check = list(arg(args, "--check").unwrap_or("1,8"));
    let seq: usize = arg(args, "--seq").unwrap_or("128").parse().unwrap();
    let runs: usize = arg(args, "--runs").unwrap_or("50").parse().unwrap();
    let modes: Vec<String> = arg(args, "--modes")
        .unwrap_or("fp32,tf32,fp16")
        .split(',')
        .map(String::from)
        .collect();
    let cfg =
        rlx_models::bert::BertConfig::from_json(&std::fs::read_to_string(config).unwrap()).unwrap();
    let bert = rlx_models::bert::Bert::new(cfg.clone(), true);
    let file = rlx_formats::SafetensorsFile::open(weights).unwrap();
    let params = bert.parameters();
    let load = |d: DType| -> Vec<HostTensor> {
        params
            .iter()
            .map(|p| {
                let t = file.tensor(&p.name).unwrap();
                assert_eq!(t.shape(), &p.ty.shape, "{}", p.name);
                HostTensor::from_f64(d, t.shape().clone(), t.to_f64_vec().unwrap()).unwrap()
            })
            .collect()
    };
    let w32 = load(DType::F32);
    let w16 = load(DType::F16);
    let base = CudaBackend::with_options(0, env_opts()).expect("CUDA backend");
    println!("device: {}", base.name());
    let mut failures = 0;
    let mut json = Vec::new();
    for mode in &modes {
        let (dtype, opts) = match mode.as_str() {
            "fp32" => (DType::F32, env_opts()),
            "tf32" => (
                DType::F32,
                CudaOptions {
                    tf32: true,
                    ..env_opts()
                },
            ),
            "fp16" => (DType::F16, env_opts()),
            // The f32 graph compiled with autocast (rlx::Amp::f16()):
            // matmuls and attention in f16, norms/softmax/pooling in f32.
            "amp-f16" => (DType::F32, env_opts()),
            m => panic!("unknown mode {m}"),
        };
        let amp = if mode == "amp-f16" {
            rlx::Amp::f16()
        } else {
            rlx::Amp::None
        };
        let be = Arc::new(base.options(opts));
        rlx_runtime::register_backend(be.clone());
        for &b in &batches {
            let g32 = bert.graph(b, seq).unwrap();
            let g = if dtype == DType::F16 {
                text::parse(&text::print(&g32).replace("f32", "f16")).unwrap()
            } else {
                g32.clone()
            };
            let t0 = Instant::now();
            let copts = CompileOptions {
                amp: amp.clone(),
                ..CompileOptions::default()
            };
            let compiled = rlx::compile_with(&g, Target::Device(Device::Cuda), &copts).unwrap();
            let exe = be.compile_program(compiled.program()).unwrap();
            let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
            if b == batches[0] && mode == &modes[0] {
                println!("{}", compiled.dispatch_report());
            }
            let data = minilm_inputs(b, seq, cfg.vocab_size);
            let w = if dtype == DType::F16 { &w16 } else { &w32 };
            let mut inputs: Vec<&HostTensor> = data.iter().collect();
            // Under autocast the program takes the weights it reads only
            // in f16 as f16 inputs (what `rlx::Compiled` converts; the file
            // is fp16, so w16 is that conversion exactly).
            let pg = &compiled.program().graph;
            for (k, t) in w.iter().enumerate() {
                let want = pg.ty(pg.inputs[data.len() + k]).dtype;
                inputs.push(if want == DType::F16 { &w16[k] } else { t });
            }
            let outs = exe.run_cuda(&inputs).unwrap();
            let mut cos = None;
            if check.contains(&b) {
                let cpu = rlx::compile(&g32, Device::Cpu).unwrap();
                let mut ci: Vec<&HostTensor> = data.iter().collect();
                ci.extend(w32.iter());
                let want = cpu.run_refs(&ci).unwrap();
                let c = cosine_min(&outs[1], &want[1], cfg.hidden_size);
                // Strict fp32 must match to 1e-4; fp16 and TF32 (10-bit
                // mantissa products) to 1e-3.
                let need = if mode == "fp32" { 0.9999 } else { 0.999 };
                let ok = c >= need;
                if !ok {
                    failures += 1;
                }
                println!(
                    "{} minilm {mode} B={b}: min cosine vs CPU {c:.7} (need >= {need})",
                    if ok { "PASS" } else { "FAIL" }
                );
                cos = Some(c);
            }
            let e2e = be.compile_program(compiled.program()).unwrap();
            let e2e_ms = time_e2e(&e2e, &inputs, data.len(), runs);
            drop(e2e);
            let graph_ms = time_exe(&exe, &inputs, runs);
            let eager = be
                .options(CudaOptions {
                    cuda_graph: false,
                    ..opts
                })
                .compile_program(compiled.program())
                .unwrap();
            let eager_ms = time_exe(&eager, &inputs, runs);
            println!(
                "minilm {mode} B={b} seq={seq}: p50 {graph_ms:.3} ms (CUDA graph), {eager_ms:.3} ms (eager launches), {e2e_ms:.3} ms (CUDA graph + pinned async copies of ids/mask in, outputs out); {} launches, compile {compile_ms:.0} ms",
                exe.launch_count(),
            );
            // Which cuBLASLt algorithm each GEMM shape runs (tuned at
            // compile), once per shape.
            let mut algos = std::collections::BTreeSet::new();
            for (_, d) in exe.gemm_algos() {
                algos.insert(d.replace(", cached", ""));
            }
            for d in &algos {
                println!("  {mode} B={b} {d}");
            }
            let mut profile = serde_json::Map::new();
            if args.iter().any(|a| a == "--profile") {
                let prof = eager.profile().unwrap();
                let mut by: std::collections::BTreeMap<String, (f32, usize)> = Default::default();
                for (_, op, name, ms) in &prof {
                    // GEMMs apart from the kernels of the same node (the
                    // bias + GELU after the FFN up-projection).
                    let key = if name.starts_with("cublasLt") {
                        format!("{op}[cublasLt]")
                    } else if name.starts_with("sgemm") {
                        format!("{op}[rlx sgemm]")
                    } else if name.starts_with("hgemm") {
                        format!("{op}[rlx hgemm]")
                    } else {
                        op.clone()
                    };
                    let e = by.entry(key).or_default();
                    e.0 += ms;
                    e.1 += 1;
                }
                let total: f32 = prof.iter().map(|p| p.3).sum();
                println!("  profile {mode} B={b} (GPU time of each launch alone, CUDA graph of 5 repeats): sum {total:.3} ms vs {graph_ms:.3} ms per graph replay");
                for (op, (ms, n)) in by {
                    println!("    {op:<20} {n:>4} launches {ms:>8.3} ms");
                    profile.insert(op, serde_json::json!({"launches": n, "ms": ms}));
                }
            }
            json.push(serde_json::json!({"impl": "rlx-cuda", "mode": mode, "batch": b, "seq": seq,
                "p50_ms_graph": graph_ms, "p50_ms_eager": eager_ms, "p50_ms_e2e_copies": e2e_ms, "launches": exe.launch_count(), "min_cosine_vs_cpu": cos,
                "profile_ms_by_op": profile, "gemm_algos": algos}));
        }
    }
    if let Some(p) = arg(args, "--json") {
        std::fs::write(p, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    }
    failures
}
