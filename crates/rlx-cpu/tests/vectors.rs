//! Runs every committed reference vector (tests/vectors/ops/*.json, made by
//! tests/vectors/generate.py from NumPy/SciPy/ONNX/gguf) on the CPU
//! backend — natively, and again with every fused op replaced by its
//! decomposition — and checks the text IR of each case round-trips.
//! `RLX_VECTOR_OPS=add,conv` limits the run to some ops.

use rlx_cpu::conformance::run_file;
use serde_json::Value;
use std::path::PathBuf;

fn vector_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/ops")
}

fn load() -> Vec<(String, Value)> {
    let filter: Option<Vec<String>> = std::env::var("RLX_VECTOR_OPS")
        .ok()
        .map(|s| s.split(',').map(String::from).collect());
    let mut files: Vec<_> = std::fs::read_dir(vector_dir())
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).ok()?).ok()?;
            let op = v["op"].as_str()?.to_string();
            // Ops this build compiled out are checked by tests/compiled_out.rs.
            let built = !rlx_cpu::compiled_out().iter().any(|(o, _)| *o == op);
            (built && filter.as_ref().is_none_or(|f| f.contains(&op))).then_some((op, v))
        })
        .collect()
}

#[test]
fn reference_vectors_pass_natively_and_decomposed() {
    let files = load();
    let (mut runs, mut failures) = (0, Vec::new());
    for (_, file) in &files {
        let r = run_file(file);
        runs += r.runs;
        failures.extend(r.failures);
    }
    eprintln!(
        "{runs} vector runs over {} ops, {} failures",
        files.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} failing vector runs:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        runs > 0 || std::env::var("RLX_VECTOR_OPS").is_ok(),
        "no vectors found in {}",
        vector_dir().display()
    );
}

#[test]
fn every_op_has_a_kernel_and_a_vector() {
    let have: std::collections::BTreeSet<String> = load().into_iter().map(|(op, _)| op).collect();
    let mut missing = Vec::new();
    for def in rlx_ir::all_ops() {
        let off = rlx_cpu::compiled_out().iter().any(|(o, _)| *o == def.name);
        if def.category == rlx_ir::Category::Custom || off {
            continue;
        }
        if !rlx_cpu::has_kernel(def.name) {
            missing.push(format!("{}: no CPU kernel", def.name));
        }
        if std::env::var("RLX_VECTOR_OPS").is_err() && !have.contains(def.name) {
            missing.push(format!("{}: no reference vector", def.name));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
