//! `gpu train` and `gpu train-ref`: an MLP training step resident on the
//! GPU against the CPU, and the CPU's own f32-vs-f64 drift.

use super::*;

/// The MLP 784-512-512-10 training step (mean cross-entropy, SGD momentum
/// 0.9, lr 0.01) resident on the GPU: parameters and momentum fed back on
/// the device, the whole step one CUDA graph. Checked against the CPU
/// running the same step graph; then img/s.
pub(super) fn train(args: &[String]) -> usize {
    use rlx_autodiff::{nets, optim, train_step, Optimizer};
    let batches = list(arg(args, "--batches").unwrap_or("128,1024"));
    let steps: usize = arg(args, "--steps").unwrap_or("200").parse().unwrap();
    let be = Arc::new(CudaBackend::with_options(0, env_opts()).unwrap());
    rlx_runtime::register_backend(be.clone());
    let opt = Optimizer::Sgd {
        lr: 0.01,
        momentum: 0.9,
        weight_decay: 0.0,
    };
    let mut fails = 0;
    let mut json = Vec::new();
    for &b in &batches {
        let net = nets::mlp(&[784, 512, 512, 10], b, 1).unwrap();
        let layout = train_step(&net.loss, &net.param_indices(), &opt).unwrap();
        let mut carried = net.init.clone();
        carried.extend(optim::init_state(&opt, &carried).unwrap());
        let mut rng = Rng(7 + b as u64);
        let x = HostTensor::from_f64(
            DType::F32,
            [b, 784],
            (0..b * 784).map(|_| rng.unit()).collect(),
        )
        .unwrap();
        let y = HostTensor::from_f64(
            DType::F32,
            [b, 10],
            (0..b * 10)
                .map(|k| {
                    if k % 10 == (k / 10 * 7) % 10 {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect(),
        )
        .unwrap();
        let compiled = match rlx::compile_with(
            &layout.graph,
            Target::Device(Device::Cuda),
            &CompileOptions::default(),
        ) {
            Ok(c) => c,
            Err(e) => {
                println!("FAIL train B={b}: does not compile for CUDA: {e}");
                fails += 1;
                continue;
            }
        };
        let exe = be.compile_program(compiled.program()).unwrap();
        // 5 steps on the GPU, on the CPU in f32, and on the CPU in f64 (the
        // reference). Some tensors (momentum of nearly cancelling bias
        // gradients) are ill-conditioned in f32: the GPU must be as close
        // to the f64 reference as the CPU's own f32 arithmetic is.
        let cpu = rlx::compile(&layout.graph, Device::Cpu).unwrap();
        let g64 = text::parse(&text::print(&layout.graph).replace("f32", "f64")).unwrap();
        let c64 = rlx::compile(&g64, Device::Cpu).unwrap();
        let to64 = |t: &HostTensor| {
            HostTensor::from_f64(DType::F64, t.shape().clone(), t.to_f64_vec().unwrap()).unwrap()
        };
        let (x64, y64) = (to64(&x), to64(&y));
        let (mut gc, mut cc) = (carried.clone(), carried.clone());
        let mut rc: Vec<HostTensor> = carried.iter().map(to64).collect();
        let mut last = (vec![], vec![], vec![]);
        for _ in 0..5 {
            let mut gi: Vec<&HostTensor> = gc.iter().collect();
            gi.extend([&x, &y]);
            let mut go = exe.run_cuda(&gi).unwrap();
            let mut ci: Vec<&HostTensor> = cc.iter().collect();
            ci.extend([&x, &y]);
            let mut co = cpu.run_refs(&ci).unwrap();
            let mut ri: Vec<&HostTensor> = rc.iter().collect();
            ri.extend([&x64, &y64]);
            let mut ro = c64.run_refs(&ri).unwrap();
            last = (go.clone(), co.clone(), ro.clone());
            gc = go.drain(1..).collect();
            cc = co.drain(1..).collect();
            rc = ro.drain(1..).collect();
        }
        let (dg, dc) = (rel_diffs(&last.0, &last.2), rel_diffs(&last.1, &last.2));
        let worst = dg.iter().cloned().fold(0f64, f64::max);
        let ok = dg.iter().zip(&dc).all(|(g, c)| *g <= (4.0 * c).max(1e-4));
        if !ok {
            fails += 1;
        }
        println!(
            "{} train B={b}: 5 steps, max relative difference to the CPU f64 reference per output: GPU {:?}, CPU f32 {:?}",
            if ok { "PASS" } else { "FAIL" },
            dg.iter().map(|d| format!("{d:.1e}")).collect::<Vec<_>>(),
            dc.iter().map(|d| format!("{d:.1e}")).collect::<Vec<_>>()
        );
        // Resident: outputs 1.. feed inputs 0..; data uploaded once.
        let n = layout.carried();
        exe.set_feedback(&(0..n).map(|k| (k + 1, k)).collect::<Vec<_>>())
            .unwrap();
        exe.keep_resident(&[n, n + 1]);
        let mut ins: Vec<&HostTensor> = gc.iter().collect();
        ins.extend([&x, &y]);
        for _ in 0..20 {
            exe.launch_async(&ins).unwrap();
        }
        exe.sync().unwrap();
        let t = Instant::now();
        for _ in 0..steps {
            exe.launch_async(&ins).unwrap();
        }
        exe.sync().unwrap();
        let secs = t.elapsed().as_secs_f64();
        let ips = (b * steps) as f64 / secs;
        let loss = exe.read_outputs().unwrap()[0].to_f64_vec().unwrap()[0];
        println!("train B={b}: {:.0} img/s ({:.1} us/step, {} launches/step, loss after {} steps {loss:.4})", ips, secs / steps as f64 * 1e6, exe.launch_count(), steps + 25);
        json.push(serde_json::json!({"impl": "rlx-cuda", "batch": b, "img_per_s": ips, "us_per_step": secs / steps as f64 * 1e6, "launches": exe.launch_count(), "max_rel_diff_vs_cpu": worst, "max_rel_diff_vs_f64_gpu": dg, "max_rel_diff_vs_f64_cpu_f32": dc}));
    }
    if let Some(p) = arg(args, "--json") {
        std::fs::write(p, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    }
    fails
}

/// Relative difference of each output (max |a-b| / max |b| per tensor).
fn rel_diffs(a: &[HostTensor], b: &[HostTensor]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let (x, y) = (x.to_f64_vec().unwrap(), y.to_f64_vec().unwrap());
            let scale = y.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
            x.iter()
                .zip(&y)
                .fold(0f64, |m, (p, q)| m.max((p - q).abs()))
                / scale
        })
        .collect()
}

/// The MLP step on the CPU in f32 and in f64 (no GPU): how far f32
/// arithmetic itself moves the results after 5 steps.
pub(super) fn train_ref(args: &[String]) -> usize {
    use rlx_autodiff::{nets, optim, train_step, Optimizer};
    let b: usize = arg(args, "--batch").unwrap_or("1024").parse().unwrap();
    let opt = Optimizer::Sgd {
        lr: 0.01,
        momentum: 0.9,
        weight_decay: 0.0,
    };
    let net = nets::mlp(&[784, 512, 512, 10], b, 1).unwrap();
    let layout = train_step(&net.loss, &net.param_indices(), &opt).unwrap();
    let g64 = text::parse(&text::print(&layout.graph).replace("f32", "f64")).unwrap();
    let mut carried = net.init.clone();
    carried.extend(optim::init_state(&opt, &carried).unwrap());
    let (x, y) = train_data(b);
    let to64 = |t: &HostTensor| {
        HostTensor::from_f64(DType::F64, t.shape().clone(), t.to_f64_vec().unwrap()).unwrap()
    };
    let c32 = rlx::compile(&layout.graph, Device::Cpu).unwrap();
    let c64 = rlx::compile(&g64, Device::Cpu).unwrap();
    let (mut a, mut r): (Vec<HostTensor>, Vec<HostTensor>) =
        (carried.clone(), carried.iter().map(to64).collect());
    let (x64, y64) = (to64(&x), to64(&y));
    let mut last = (vec![], vec![]);
    for _ in 0..5 {
        let mut ia: Vec<&HostTensor> = a.iter().collect();
        ia.extend([&x, &y]);
        let mut ir: Vec<&HostTensor> = r.iter().collect();
        ir.extend([&x64, &y64]);
        let mut oa = c32.run_refs(&ia).unwrap();
        let mut or = c64.run_refs(&ir).unwrap();
        last = (oa.clone(), or.clone());
        a = oa.drain(1..).collect();
        r = or.drain(1..).collect();
    }
    println!(
        "cpu f32 vs cpu f64 after 5 steps, per output: {:?}",
        rel_diffs(&last.0, &last.1)
            .iter()
            .map(|d| format!("{d:.1e}"))
            .collect::<Vec<_>>()
    );
    0
}

fn train_data(b: usize) -> (HostTensor, HostTensor) {
    let mut rng = Rng(7 + b as u64);
    let x = HostTensor::from_f64(
        DType::F32,
        [b, 784],
        (0..b * 784).map(|_| rng.unit()).collect(),
    )
    .unwrap();
    let y = HostTensor::from_f64(
        DType::F32,
        [b, 10],
        (0..b * 10)
            .map(|k| {
                if k % 10 == (k / 10 * 7) % 10 {
                    1.0
                } else {
                    0.0
                }
            })
            .collect(),
    )
    .unwrap();
    (x, y)
}
