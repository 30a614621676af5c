//! `gpu gguf --model F.gguf --reference tests/vectors/llm/NAME.json
//! [--prompts 8] [--pp 512] [--tg 128] [--runs 3] [--json OUT]`: a real
//! GGUF decoder on CUDA against Hugging Face `transformers`' greedy tokens
//! and logits (the committed reference that the CPU parity test uses), and
//! its prefill / decode speed measured as `rlx bench llm` measures it (the
//! same prompt ids, `rlx_models::llm::bench_prompt`, that
//! benches/llm/cuda_transformers.py feeds transformers on the same GPU).

use super::arg;
use rlx_models::llm::{sample::argmax, GenerateOptions, Generator, LlmModel};
use rlx_runtime::Device;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64())
                .map(|x| x as u32)
                .collect()
        })
        .unwrap_or_default()
}

/// The reference's full logits of one step, if it kept them.
fn stored_logits(dir: &Path, reference: &Value, step: &Value) -> Option<Vec<f32>> {
    let off = step["offset_bytes"].as_u64()? as usize;
    let bytes = std::fs::read(dir.join(reference["logits_file"].as_str()?)).ok()?;
    let n = reference["config"]["vocab_size"].as_u64()? as usize;
    let row = bytes.get(off..off + 4 * n)?;
    Some(
        row.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// Greedy tokens and logits of every reference prompt; returns
/// (prompts checked, prompts failed, worst logit error).
fn parity(
    gen: &mut Generator,
    reference: &Value,
    dir: &Path,
    prompts: usize,
) -> (usize, usize, f32) {
    let mut opts = GenerateOptions::greedy(64);
    opts.stop_at_eos = false;
    let (mut checked, mut failed, mut worst) = (0, 0, 0f32);
    let empty = vec![];
    for p in reference["prompts"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .take(prompts)
    {
        let prompt = ids(&p["prompt_ids"]);
        let want = ids(&p["generated_ids"]);
        let got: Result<Vec<u32>, _> = gen
            .generate_ids(&prompt, &opts)
            .and_then(|s| s.map(|t| t.map(|t| t.id)).collect());
        let got = match got {
            Ok(g) => g,
            Err(e) => {
                println!("FAIL gguf prompt {checked}: {e}");
                checked += 1;
                failed += 1;
                continue;
            }
        };
        let same = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
        // Logits of the prefill and of the first decode step.
        let mut err = 0f32;
        let mut compared = 0;
        let mut argmax_ok = true;
        if let Ok(steps) = gen.logits(&prompt, &want[..1.min(want.len())]) {
            for (which, ours) in ["prefill", "decode1"].iter().zip(&steps) {
                let r = &p["logits"][which];
                if r.is_null() {
                    continue;
                }
                argmax_ok &= argmax(ours) as u64 == r["argmax"].as_u64().unwrap_or(u64::MAX);
                let e = match stored_logits(dir, reference, r) {
                    Some(full) => ours
                        .iter()
                        .zip(&full)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0f32, f32::max),
                    None => r["top64"]
                        .as_array()
                        .unwrap_or(&empty)
                        .iter()
                        .map(|e| {
                            (ours[e[0].as_u64().unwrap_or(0) as usize]
                                - e[1].as_f64().unwrap_or(0.0) as f32)
                                .abs()
                        })
                        .fold(0f32, f32::max),
                };
                err = err.max(e);
                compared += 1;
            }
        } else {
            argmax_ok = false;
        }
        worst = worst.max(err);
        // The CPU test's bar: identical tokens, logits within 2e-2.
        let ok = same == want.len() && got.len() == want.len() && argmax_ok && err < 2e-2;
        if !ok {
            failed += 1;
        }
        let logits = if compared > 0 {
            format!(", logits max abs error {err:.2e} ({compared} steps)")
        } else {
            String::new()
        };
        println!(
            "{} gguf prompt {checked} ({}): {same}/{} greedy tokens identical to transformers{logits}",
            if ok { "PASS" } else { "FAIL" },
            p["kind"].as_str().unwrap_or("?"),
            want.len()
        );
        checked += 1;
    }
    (checked, failed, worst)
}

/// Prefill of `pp` tokens and decode of `tg`, as `rlx bench llm`:
/// tokens/s of each timed run after one warm-up.
fn speed(
    gen: &mut Generator,
    vocab: usize,
    pp: usize,
    tg: usize,
    runs: usize,
) -> (Vec<f64>, Vec<f64>) {
    let ids = rlx_models::llm::bench_prompt(pp, vocab);
    if pp + tg > gen.context() {
        gen.set_context(pp + tg).expect("context");
    }
    let mut pp_opts = GenerateOptions::greedy(1);
    pp_opts.stop_at_eos = false;
    let mut tg_opts = GenerateOptions::greedy(tg + 1);
    tg_opts.stop_at_eos = false;
    let (mut pps, mut tgs) = (vec![], vec![]);
    for run in 0..=runs {
        let mut s = gen.generate_ids(&ids, &pp_opts).expect("prefill");
        for t in s.by_ref() {
            t.expect("prefill token");
        }
        let p = pp as f64 / s.timings().prefill.as_secs_f64();
        drop(s);
        let mut s = gen.generate_ids(&ids[..1], &tg_opts).expect("decode");
        for t in s.by_ref() {
            t.expect("decode token");
        }
        let d = tg as f64 / s.timings().decode.as_secs_f64();
        println!(
            "gguf {} run: pp{pp} {p:.1} tok/s, tg{tg} {d:.1} tok/s",
            if run == 0 { "warm-up" } else { "timed" }
        );
        if run > 0 {
            pps.push(p);
            tgs.push(d);
        }
    }
    (pps, tgs)
}

pub(super) fn gguf(args: &[String]) -> usize {
    let (Some(model), Some(refpath)) = (arg(args, "--model"), arg(args, "--reference")) else {
        eprintln!("usage: gpu gguf --model F.gguf --reference NAME.json [--prompts 8] [--pp 512] [--tg 128] [--runs 3] [--json OUT]");
        return 1;
    };
    let num = |name: &str, d: usize| arg(args, name).and_then(|s| s.parse().ok()).unwrap_or(d);
    let reference: Value = match std::fs::read_to_string(refpath).map(|s| serde_json::from_str(&s))
    {
        Ok(Ok(v)) => v,
        _ => {
            println!("FAIL gguf: cannot read the reference {refpath}");
            return 1;
        }
    };
    let dir = Path::new(refpath).parent().unwrap_or(Path::new("."));
    let t0 = Instant::now();
    let model = match LlmModel::open(Path::new(model), |_| {}) {
        Ok(m) => m,
        Err(e) => {
            println!("FAIL gguf: {e}");
            return 1;
        }
    };
    println!(
        "gguf: {} loaded in {:.1} s",
        model.name,
        t0.elapsed().as_secs_f64()
    );
    let mut gen = model.generator(Device::Cuda);
    let (checked, failed, worst) = parity(&mut gen, &reference, dir, num("--prompts", 8));
    println!(
        "gguf {}: {}/{checked} prompts token-identical to transformers (64 tokens each), logits max abs error {worst:.2e}",
        model.name,
        checked - failed
    );
    let not_native: Vec<String> = match gen.compiled(1, 64) {
        Ok(c) => c
            .dispatch_report()
            .nodes
            .iter()
            .filter(|n| n.path != rlx::DispatchPath::Native)
            .map(|n| format!("{} ({:?})", n.op, n.path))
            .collect(),
        Err(e) => vec![format!("the decode graph failed: {e}")],
    };
    println!(
        "gguf decode graph: not native on cuda: {} nodes {:?}",
        not_native.len(),
        {
            let mut v = not_native.clone();
            v.dedup();
            v
        }
    );
    let (pp, tg) = (num("--pp", 512), num("--tg", 128));
    // Where a prompt step and a decode step spend their GPU time.
    let ids = rlx_models::llm::bench_prompt(256.min(pp), model.config.vocab_size);
    match gen.profile(&ids) {
        Ok([prompt, decode]) => {
            let top = |p: &rlx::Profile| {
                let mut t = p.clone();
                t.kernels.truncate(12);
                format!(
                    "{t}\n(the {} hottest of {} kernels; all: {:.3} ms)",
                    t.kernels.len(),
                    p.kernels.len(),
                    p.total_ms()
                )
            };
            println!(
                "gguf profile of a {}-token prompt step:\n{}",
                ids.len(),
                top(&prompt)
            );
            println!(
                "gguf profile of the decode step after it:\n{}",
                top(&decode)
            );
        }
        Err(e) => println!("gguf profile failed: {e}"),
    }
    let (pps, tgs) = speed(&mut gen, model.config.vocab_size, pp, tg, num("--runs", 3));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "gguf {}: pp{pp} {:.1} tok/s, tg{tg} {:.1} tok/s (mean of {} runs)",
        model.name,
        mean(&pps),
        mean(&tgs),
        pps.len()
    );
    // The same with every step passing the whole key/value cache in (the
    // cache not resident on the GPU): what residency saves, same process.
    gen.set_resident_cache(false);
    let (pps_host, tgs_host) = speed(&mut gen, model.config.vocab_size, pp, tg, num("--runs", 3));
    gen.set_resident_cache(true);
    println!(
        "gguf {} without the resident cache: pp{pp} {:.1} tok/s, tg{tg} {:.1} tok/s (mean of {} runs)",
        model.name,
        mean(&pps_host),
        mean(&tgs_host),
        pps_host.len()
    );
    if let Some(out) = arg(args, "--json") {
        let j = json!({
            "model": model.name, "device": "cuda", "prompts": checked, "prompts_identical": checked - failed,
            "logits_max_abs_err": worst, "pp": pp, "tg": tg, "pp_tok_s": pps, "tg_tok_s": tgs,
            "not_native": not_native.len(),
            "host_cache_pp_tok_s": pps_host, "host_cache_tg_tok_s": tgs_host,
        });
        let _ = std::fs::write(out, serde_json::to_string_pretty(&j).unwrap_or_default());
    }
    println!("{} passed, {failed} failed (gguf)", checked - failed);
    failed
}
