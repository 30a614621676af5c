//! Training throughput of the MLP 784-512-512-10 (fp32, SGD with momentum
//! 0.9, mean cross-entropy) on the CPU: img/s of whole compiled training
//! steps on fixed synthetic batches. Used by benches/training/run.py.
//!
//! cargo run --release -p rlx-autodiff --example train_bench -- --batch 128 --steps 20 --repeats 3

use rlx_autodiff::{nets, Optimizer, TrainStep};
use rlx_ir::HostTensor;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // RLX_* settings (threads, AMX, ...) through the one edge.
    let _env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str, def: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse().expect(name))
            .unwrap_or(def)
    };
    let (batch, steps, repeats) = (
        flag("--batch", 128),
        flag("--steps", 20),
        flag("--repeats", 3),
    );
    let net = nets::mlp(&[784, 512, 512, 10], batch, 1)?;
    let mut step = TrainStep::new(
        &net.loss,
        &net.param_indices(),
        net.init.clone(),
        Optimizer::Sgd {
            lr: 0.01,
            momentum: 0.9,
            weight_decay: 0.0,
        },
    )?;
    // Fixed synthetic batch: pixels in [0, 1), labels cycling 0..9.
    let mut s = 42u64;
    let x: Vec<f32> = (0..batch * 784)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    let mut y = vec![0f32; batch * 10];
    for r in 0..batch {
        y[r * 10 + r % 10] = 1.0;
    }
    let data = vec![
        HostTensor::from_slice(&x, vec![batch, 784])?,
        HostTensor::from_slice(&y, vec![batch, 10])?,
    ];
    for _ in 0..3 {
        step.step(&data)?;
    }
    let mut rates = vec![];
    for _ in 0..repeats {
        let t = Instant::now();
        for _ in 0..steps {
            step.step(&data)?;
        }
        rates.push((batch * steps) as f64 / t.elapsed().as_secs_f64());
    }
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = rates[rates.len() / 2];
    println!("{{\"system\": \"rlx\", \"batch\": {batch}, \"img_per_s\": {med:.1}, \"runs\": {rates:?}, \"kernels\": {}}}", step.compiled().kernel_count());
    if rlx_cpu::profile::enabled() {
        eprintln!("{}", rlx_cpu::profile::report());
    }
    if rlx_cpu_profile() {
        eprintln!("{}", rlx::ir::text::print(&step.compiled().program().graph));
    }
    Ok(())
}

fn rlx_cpu_profile() -> bool {
    std::env::var("RLX_PRINT_STEP").is_ok_and(|v| v == "1")
}
