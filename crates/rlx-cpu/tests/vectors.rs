//! Runs every committed reference vector (tests/vectors/ops/*.json, made by
//! tests/vectors/generate.py from NumPy/SciPy/ONNX/gguf) on the CPU
//! backend — natively, and again with every fused op replaced by its
//! decomposition — and checks the text IR of each case round-trips.
//! `RLX_VECTOR_OPS=add,conv` limits the run to some ops.

use rlx_ir::decompose::expand_all;
use rlx_ir::{text, HostTensor, TensorData};
use serde_json::Value;
use std::path::PathBuf;

fn vector_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/ops")
}

fn close(got: &HostTensor, want: &HostTensor, rtol: f64, atol: f64) -> Result<(), String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Err(format!(
            "got {}{}, want {}{}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    match (got.data(), want.data()) {
        (TensorData::Packed(a), TensorData::Packed(b)) => {
            return if a == b {
                Ok(())
            } else {
                Err("packed bytes differ".into())
            };
        }
        (TensorData::C64(_), _) => {
            let (g, w) = (
                got.to_c64_vec().map_err(|e| e.to_string())?,
                want.to_c64_vec().map_err(|e| e.to_string())?,
            );
            for (i, (a, b)) in g.iter().zip(&w).enumerate() {
                for p in 0..2 {
                    if (a[p] - b[p]).abs() > atol + rtol * b[p].abs() {
                        return Err(format!("element {i}: got {a:?}, want {b:?}"));
                    }
                }
            }
            return Ok(());
        }
        _ => {}
    }
    if got.dtype().is_float() {
        let (g, w) = (
            got.to_f64_vec().map_err(|e| e.to_string())?,
            want.to_f64_vec().map_err(|e| e.to_string())?,
        );
        for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
            let ok = if b.is_nan() {
                a.is_nan()
            } else if b.is_infinite() {
                a == b
            } else {
                (a - b).abs() <= atol + rtol * b.abs()
            };
            if !ok {
                return Err(format!(
                    "element {i}: got {a}, want {b} (rtol {rtol}, atol {atol})"
                ));
            }
        }
    } else {
        let (g, w) = (
            got.to_i64_vec().map_err(|e| e.to_string())?,
            want.to_i64_vec().map_err(|e| e.to_string())?,
        );
        if let Some(i) = (0..g.len()).find(|&i| g[i] != w[i]) {
            return Err(format!("element {i}: got {}, want {}", g[i], w[i]));
        }
    }
    Ok(())
}

fn tensors(v: &Value) -> Result<Vec<HostTensor>, String> {
    v.as_array()
        .ok_or("expected a list of tensors")?
        .iter()
        .map(|t| HostTensor::from_json(t).map_err(|e| e.to_string()))
        .collect()
}

fn check_moments(out: &HostTensor, m: &Value) -> Result<(), String> {
    let v = out.to_f64_vec().map_err(|e| e.to_string())?;
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    let (wm, wv, tol) = (
        m["mean"].as_f64().unwrap_or(f64::NAN),
        m["var"].as_f64().unwrap_or(f64::NAN),
        m["tol"].as_f64().unwrap_or(0.0),
    );
    if (mean - wm).abs() > tol || (var - wv).abs() > tol * wv.abs().max(1.0) * 4.0 {
        return Err(format!(
            "sample mean {mean}, var {var}; want {wm}, {wv} (tol {tol})"
        ));
    }
    Ok(())
}

/// Run one case; `decomposed` replaces fused ops by their decompositions.
fn run_case(case: &Value, decomposed: bool) -> Result<(), String> {
    let src = case["graph"].as_str().ok_or("case has no graph")?;
    let mut g = text::parse(src).map_err(|e| format!("parse: {e}"))?;
    let printed = text::print(&g);
    let again =
        text::parse(&printed).map_err(|e| format!("re-parse of printed text: {e}\n{printed}"))?;
    if text::print(&again) != printed {
        return Err("text IR does not round-trip".into());
    }
    if decomposed {
        g = expand_all(&g).map_err(|e| format!("decompose: {e}"))?;
    }
    let inputs = tensors(&case["inputs"])?;
    let result = rlx_cpu::run_graph(&g, &inputs);
    if let Some(want) = case.get("error").and_then(|e| e.as_str()) {
        return match result {
            Err(e) if e.to_string().contains(want) => Ok(()),
            Err(e) => Err(format!("expected an error containing {want:?}, got: {e}")),
            Ok(_) => Err(format!("expected an error containing {want:?}, but it ran")),
        };
    }
    let outs = result.map_err(|e| format!("run: {e}"))?;
    if let Some(m) = case.get("moments") {
        return check_moments(&outs[0], m);
    }
    let want = tensors(&case["outputs"])?;
    if want.len() != outs.len() {
        return Err(format!("{} outputs, want {}", outs.len(), want.len()));
    }
    let (rtol, atol) = (
        case["rtol"].as_f64().unwrap_or(1e-6),
        case["atol"].as_f64().unwrap_or(1e-6),
    );
    // Decompositions round at every primitive step: allow a little more.
    let (rtol, atol) = if decomposed {
        (rtol * 4.0, atol * 4.0)
    } else {
        (rtol, atol)
    };
    for (k, (g, w)) in outs.iter().zip(&want).enumerate() {
        close(g, w, rtol, atol).map_err(|e| format!("output {k}: {e}"))?;
    }
    Ok(())
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
            filter
                .as_ref()
                .is_none_or(|f| f.contains(&op))
                .then_some((op, v))
        })
        .collect()
}

#[test]
fn reference_vectors_pass_natively_and_decomposed() {
    let files = load();
    let (mut cases, mut failures) = (0, Vec::new());
    for (op, file) in &files {
        for case in file["cases"].as_array().into_iter().flatten() {
            let name = case["name"].as_str().unwrap_or("?");
            let fused = rlx_ir::lookup(op).is_some_and(|d| d.is_fused());
            for decomposed in [false, true] {
                if decomposed && !fused {
                    continue;
                }
                cases += 1;
                if let Err(e) = run_case(case, decomposed) {
                    failures.push(format!(
                        "{op}/{name}{}: {e}",
                        if decomposed { " (decomposed)" } else { "" }
                    ));
                }
            }
        }
    }
    eprintln!(
        "{cases} vector runs over {} ops, {} failures",
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
        cases > 0 || std::env::var("RLX_VECTOR_OPS").is_ok(),
        "no vectors found in {}",
        vector_dir().display()
    );
}

#[test]
fn every_op_has_a_kernel_and_a_vector() {
    let have: std::collections::BTreeSet<String> = load().into_iter().map(|(op, _)| op).collect();
    let mut missing = Vec::new();
    for def in rlx_ir::all_ops() {
        if def.category == rlx_ir::Category::Custom {
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
