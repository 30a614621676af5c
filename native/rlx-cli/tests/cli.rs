//! The `rlx` binary as a user runs it.

use std::process::Command;

fn rlx(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(args)
        .output()
        .expect("run rlx");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn ops_json_lists_every_op_with_a_cpu_kernel() {
    let (ok, out, _) = rlx(&["ops", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ops = v["ops"].as_array().unwrap();
    assert!(ops.len() >= 130, "{} ops", ops.len());
    assert_eq!(v["count"].as_u64().unwrap() as usize, ops.len());
    for op in ops {
        assert_eq!(op["backends"], serde_json::json!(["cpu"]), "{}", op["kind"]);
    }
    let fused: Vec<_> = ops.iter().filter(|o| o["fused"] == true).collect();
    assert!(fused.iter().all(|o| o["decomposition"] == "registered"));
    assert!(fused.len() >= 16);
}

#[test]
fn ir_pretty_prints_a_file_and_reports_errors_with_position() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/examples/attention_block.mir"
    );
    let (ok, out, err) = rlx(&["ir", path]);
    assert!(ok, "{err}");
    assert!(
        out.contains("%a = attention(%q, %k, %v) {mask_kind=\"causal\", window=0} : f32[1,4,8]"),
        "{out}"
    );
    assert!(err.contains("5 inputs, 6 nodes, 1 outputs"), "{err}");

    let bad = std::env::temp_dir().join("rlx-cli-bad.mir");
    std::fs::write(
        &bad,
        "graph @g(%x: f32[2]) {\n  %y = matmul(%x, %z)\n  return %y\n}",
    )
    .unwrap();
    let (ok, _, err) = rlx(&["ir", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("line 2") && err.contains("%z"), "{err}");
}

#[test]
fn demo_prints_ir_dispatch_and_probabilities() {
    let (ok, out, err) = rlx(&["demo"]);
    assert!(ok, "{err}");
    assert!(out.contains("== MIR ==") && out.contains("softmax(%7) {axis=-1}"));
    assert!(out.contains("native  cpu::fast::softmax<f32>"), "{out}");
    let sums: Vec<f64> = out
        .lines()
        .filter_map(|l| l.split("(sum ").nth(1))
        .map(|s| s.trim_end_matches(')').parse().unwrap())
        .collect();
    assert_eq!(sums.len(), 2);
    assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-5));
}

#[test]
fn committed_op_coverage_table_is_current() {
    let (ok, out, err) = rlx(&["coverage"]);
    assert!(ok, "{err}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/op-coverage.md");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == out,
        "docs/op-coverage.md is stale: regenerate it with `cargo run -p rlx-cli -- coverage > docs/op-coverage.md`"
    );
}

#[test]
fn dispatch_prints_the_report_or_the_error() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/examples/attention_block.mir"
    );
    let (ok, out, err) = rlx(&["dispatch", path, "--policy", "common_ir_only"]);
    assert!(ok, "{err}");
    let ln = out
        .lines()
        .find(|l| l.contains("layer_norm"))
        .unwrap_or_default();
    assert!(ln.contains("common-ir"), "{out}");
    let (ok, out, _) = rlx(&["dispatch", path, "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["device"], "cpu");
    let nodes = v["nodes"].as_array().unwrap();
    assert!(
        nodes
            .iter()
            .any(|n| n["op"] == "attention" && n["path"] == "native"),
        "{out}"
    );
    // Metal is a wgpu backend this (Vulkan-only) build leaves out.
    let (ok, _, err) = rlx(&["dispatch", path, "--device", "metal"]);
    assert!(
        !ok && err.contains("device `metal` is not in this build"),
        "{err}"
    );
    // Vulkan (rlx-wgpu) legalizes without opening a device.
    let (ok, out, err) = rlx(&["dispatch", path, "--device", "vulkan"]);
    assert!(ok && out.contains("wgsl::attention<f32>"), "{out}{err}");
    let (ok, _, err) = rlx(&["dispatch", path, "--policy", "fastest"]);
    assert!(!ok && err.contains("unknown dispatch policy"), "{err}");
}

#[test]
fn calibrated_quantization_names_the_types_it_writes() {
    let cal = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/minilm/calibration.txt"
    );
    let (ok, _, err) = rlx(&["embed", "--quantize", "q5_0", "--calibrate", cal, "a text"]);
    assert!(!ok);
    assert!(
        err.contains("GPTQ writes q4_0, q4_1 or q8_0, not q5_0"),
        "{err}"
    );
    let (ok, _, err) = rlx(&["embed", "--calibrate", cal, "a text"]);
    assert!(!ok);
    assert!(err.contains("--quantize"), "{err}");
}

#[test]
fn integer_quantization_embeds_and_refuses_what_does_not_fit() {
    let cal = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/minilm/calibration.txt"
    );
    let (ok, out, err) = rlx(&[
        "embed",
        "--quantize",
        "int8",
        "--calibrate",
        cal,
        "--range",
        "percentile=99.99",
        "--json",
        "a cat",
        "a kitten",
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("quantized 36 dense layers (int8 weights per channel, int8 activations (percentile 99.99"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[1]["embedding"].as_array().unwrap().len(), 384);
    let (ok, _, err) = rlx(&["embed", "--quantize", "int4", "--calibrate", cal, "a"]);
    assert!(!ok && err.contains("int4 is weight-only"), "{err}");
    let (ok, _, err) = rlx(&[
        "embed",
        "--quantize",
        "int4",
        "--granularity",
        "group=100",
        "a",
    ]);
    assert!(
        !ok && err.contains(
            "query.weight`: 384 inputs per output are not a whole number of groups of 100"
        ),
        "{err}"
    );
    let (ok, _, err) = rlx(&[
        "embed",
        "--quantize",
        "int8",
        "--calibrate",
        cal,
        "--range",
        "p99",
        "a",
    ]);
    assert!(
        !ok && err.contains("unknown calibration range `p99`"),
        "{err}"
    );
    // Dynamic int8: no calibration, each run's own ranges.
    let (ok, out, err) = rlx(&[
        "embed",
        "--quantize",
        "int8",
        "--dynamic",
        "--json",
        "a cat",
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("int8 activations (dynamic"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["embedding"].as_array().unwrap().len(), 384);
    let (ok, _, err) = rlx(&[
        "embed",
        "--quantize",
        "int8",
        "--dynamic",
        "--calibrate",
        cal,
        "a",
    ]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}

#[test]
fn compile_with_amp_reports_what_moved_to_16_bits() {
    let (ok, out, err) = rlx(&["compile", "@minilm", "--amp", "bf16", "--print", "fusion"]);
    assert!(ok, "{err}");
    assert!(out.contains("autocast to bf16"), "{out}");
    assert!(out.contains("bf16: attention_merged×6"), "{out}");
    assert!(out.contains("f32 (kept): layer_norm×12"), "{out}");
    assert!(
        out.contains("encoder.layer.0.attention.self.query.weight:bf16"),
        "{out}"
    );
    let (ok, _, err) = rlx(&["compile", "@minilm", "--amp", "fp8"]);
    assert!(!ok);
    assert!(err.contains("fp8") && err.contains("bf16"), "{err}");
}

#[test]
fn compile_shows_fusion_and_the_memory_plan_of_the_dsl_encoder_block() {
    let (ok, out, err) = rlx(&["compile", "@encoder-block", "--print", "fusion,plan"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("attention ×1") && out.contains("softmax ×1"),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("kernels:"))
        .expect("kernel counts");
    let nums: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    assert!(nums[1] * 2 < nums[0], "{line}");
    assert!(
        out.contains("== memory plan ==") && out.contains("views"),
        "{out}"
    );
    assert!(
        err.contains("encoder_block:") && err.contains("kernels"),
        "{err}"
    );
}

#[test]
fn kernels_shows_the_tensor_core_and_subgroup_variants() {
    let (ok, out, err) = rlx(&[
        "kernels",
        "@encoder-block",
        "--device",
        "vulkan",
        "--dtype",
        "f16",
        "--coop",
        "--subgroups",
    ]);
    assert!(ok, "{err}");
    // Every projection of the block is a cooperative-matrix kernel.
    assert!(out.matches("coopMultiplyAdd").count() >= 4, "{out}");
    assert!(
        out.contains("matmul_bias_act_f16") && out.contains("_coop"),
        "{out}"
    );
    let (ok, plain, _) = rlx(&[
        "kernels",
        "@encoder-block",
        "--device",
        "vulkan",
        "--dtype",
        "f16",
    ]);
    assert!(ok && !plain.contains("coopMultiplyAdd") && !plain.contains("subgroupAdd"));
    // Native Vulkan only: the other languages are refused, not mistranslated.
    let (ok, _, err) = rlx(&["kernels", "@encoder-block", "--coop", "--lang", "msl"]);
    assert!(!ok && err.contains("native Vulkan only"), "{err}");
}
