//! Decoder LLMs on the CPU against Hugging Face `transformers` running the
//! same GGUF (dequantized to f32, eager attention): greedy generation
//! token-identical for 64 new tokens per prompt, and the logits of the
//! prefill and the first decode step within a small error. The reference
//! is tests/vectors/llm/<model>.json (made by generate.py there); the
//! weights come from `./scripts/fetch-models`.
//!
//! CI runs a fixed sample (`RLX_LLM_PROMPTS`, default 2 prompts of
//! SmolLM2); `./scripts/check-llm` runs every prompt of every model.

mod llm_ref;

use llm_ref::{ids, model_path, root, stored_logits};
use rlx_models::llm::{GenerateOptions, LlmModel};

/// Check `prompts` prompts of `name`; returns a line of results.
fn check(name: &str, prompts: usize, required: bool) -> Option<String> {
    let dir = root().join("tests/vectors/llm");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).ok()?)
            .unwrap();
    let path = model_path(reference["file"].as_str().unwrap());
    if !path.exists() {
        assert!(
            !required,
            "{} not found — run ./scripts/fetch-models (./scripts/setup does)",
            path.display()
        );
        eprintln!(
            "{name}: {} not found (./scripts/fetch-models --all); skipped",
            path.display()
        );
        return None;
    }
    let model = LlmModel::open(&path, |_| {}).unwrap();
    // The tokenizer: the prompts and the hard strings give transformers' ids.
    let tok = &model.tokenizer;
    let mut cases = 0;
    for p in reference["prompts"].as_array().unwrap() {
        let add = p["add_special_tokens"].as_bool().unwrap_or(true);
        let text = p["text"].as_str().unwrap();
        assert_eq!(
            tok.encode(text, add, true),
            ids(&p["prompt_ids"]),
            "{name}: prompt {text:?}"
        );
        cases += 1;
    }
    for c in reference["tokenizer_cases"].as_array().unwrap() {
        let text = c["text"].as_str().unwrap();
        assert_eq!(
            tok.encode(text, false, true),
            ids(&c["ids"]),
            "{name}: {text:?}"
        );
        assert_eq!(
            tok.encode(text, true, true),
            ids(&c["ids_with_special_tokens"]),
            "{name}: {text:?} with special tokens"
        );
        cases += 1;
    }
    let mut gen = model.generator(rlx::Device::Cpu);
    let mut opts = GenerateOptions::greedy(64);
    opts.stop_at_eos = false;
    let (mut identical, mut worst_logit) = (0, 0f32);
    let items = reference["prompts"].as_array().unwrap();
    for p in items.iter().take(prompts) {
        let prompt = ids(&p["prompt_ids"]);
        let want = ids(&p["generated_ids"]);
        let got: Vec<u32> = gen
            .generate_ids(&prompt, &opts)
            .unwrap()
            .map(|t| t.unwrap().id)
            .collect();
        let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
        assert_eq!(
            (got.len(), first_diff),
            (want.len(), None),
            "{name}: prompt {:?}: greedy tokens differ from transformers at {first_diff:?}\n got  {got:?}\n want {want:?}",
            p["text"].as_str().unwrap_or("")
        );
        identical += 1;
        // Logits of the prefill and of the first decode step.
        let steps = gen.logits(&prompt, &want[..1]).unwrap();
        for (which, ours) in ["prefill", "decode1"].iter().zip(&steps) {
            let r = &p["logits"][which];
            if r.is_null() {
                continue;
            }
            assert_eq!(
                rlx_models::llm::sample::argmax(ours) as u64,
                r["argmax"].as_u64().unwrap(),
                "{name} {which}: argmax"
            );
            let err = match stored_logits(&dir, &reference, r) {
                Some(full) => ours
                    .iter()
                    .zip(&full)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max),
                None => r["top64"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        let (id, v) = (
                            e[0].as_u64().unwrap() as usize,
                            e[1].as_f64().unwrap() as f32,
                        );
                        (ours[id] - v).abs()
                    })
                    .fold(0f32, f32::max),
            };
            worst_logit = worst_logit.max(err);
        }
    }
    // f32 with another summation order: a few 1e-3 on logits of ~±20.
    assert!(
        worst_logit < 2e-2,
        "{name}: logits max abs error {worst_logit}"
    );
    Some(format!(
        "{name}: {cases} strings tokenized as transformers does; {identical}/{} prompts token-identical (64 tokens each), logits max abs error {worst_logit:.2e}",
        prompts.min(items.len())
    ))
}

fn prompts() -> usize {
    std::env::var("RLX_LLM_PROMPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
}

#[test]
fn smollm2_matches_transformers() {
    let line = check("smollm2", prompts(), true).unwrap();
    eprintln!("{line}");
}

#[test]
fn qwen2_and_gemma3_match_transformers_when_fetched() {
    for name in ["qwen2", "gemma3"] {
        if root()
            .join(format!("tests/vectors/llm/{name}.json"))
            .exists()
        {
            if let Some(line) = check(name, prompts(), false) {
                eprintln!("{line}");
            }
        }
    }
}

/// Poll a future to the end on this thread (the CPU's async steps are
/// ready at once; no executor needed).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// The asynchronous steps (what the page drives on WebGPU) give the same
/// greedy tokens as transformers, through `Generation::start_async` and
/// `next_token_async`.
#[test]
fn smollm2_async_steps_match_transformers() {
    use rlx_models::llm::{Generation, Steps};
    let (reference, path) = llm_ref::smollm2();
    let model = LlmModel::open(&path, |_| {}).unwrap();
    let mut steps = Steps::for_model(&model, rlx::Device::Cpu);
    let mut opts = GenerateOptions::greedy(64);
    opts.stop_at_eos = false;
    let p = &reference["prompts"][0];
    let mut g = block_on(Generation::start_async(
        &model,
        &mut steps,
        &ids(&p["prompt_ids"]),
        &opts,
    ))
    .unwrap();
    let mut got = vec![];
    while let Some(t) = block_on(g.next_token_async(&model, &mut steps)).unwrap() {
        got.push(t.id);
    }
    assert_eq!(got, ids(&p["generated_ids"]));
}

/// Autocast f16 (`Generator::set_amp`; the npm package's choice on WebGPU
/// with `shader-f16`) on the CPU: the block-quantized matmuls and attention
/// take f16 activations, norms and softmax stay f32. Against transformers'
/// f32: the prefill and first decode step's logits within f16 rounding
/// (and off at all: the f16 graph ran), and the greedy tokens identical as
/// far as the reference's top-2 margins exceed twice that error.
#[test]
fn smollm2_autocast_f16_follows_transformers() {
    let dir = root().join("tests/vectors/llm");
    let (reference, path) = llm_ref::smollm2();
    let model = LlmModel::open(&path, |_| {}).unwrap();
    let mut gen = model.generator(rlx::Device::Cpu);
    gen.set_amp(rlx::Amp::f16());
    let tokens = 16;
    let mut opts = GenerateOptions::greedy(tokens);
    opts.stop_at_eos = false;
    for p in reference["prompts"].as_array().unwrap().iter().take(2) {
        let (prompt, want) = (ids(&p["prompt_ids"]), ids(&p["generated_ids"]));
        let steps = gen.logits(&prompt, &want[..1]).unwrap();
        let mut err = 0f32;
        for (got, step) in steps.iter().zip(["prefill", "decode1"]) {
            let full = stored_logits(&dir, &reference, &p["logits"][step]).unwrap();
            err = got
                .iter()
                .zip(&full)
                .map(|(a, b)| (a - b).abs())
                .fold(err, f32::max);
        }
        assert!(err > 1e-3 && err < 0.5, "logits max abs error {err}");
        let sure = p["top2_margin"]
            .as_array()
            .unwrap()
            .iter()
            .take(tokens)
            .take_while(|m| m.as_f64().unwrap() > 2.0 * err as f64)
            .count();
        let got: Vec<u32> = gen
            .generate_ids(&prompt, &opts)
            .unwrap()
            .map(|t| t.unwrap().id)
            .collect();
        let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        eprintln!(
            "autocast f16: logits max abs error {err:.4}; {same}/{tokens} tokens as transformers ({sure} sure by the margins)"
        );
        assert!(
            same >= sure.max(1),
            "got {got:?}, want {:?}",
            &want[..tokens]
        );
    }
    let c = gen.compiled(1, 64).unwrap();
    let passes = c.pass_report().unwrap().to_string();
    assert!(passes.contains("dequant_matmul×"), "{passes}");
}
