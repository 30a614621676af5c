//! The reference-vector runner (format: tests/vectors/README.md), shared
//! by the native test suite and the wasm32 conformance run, so both check
//! exactly the same thing.

use crate::run_graph;
use rlx_ir::decompose::expand_all;
use rlx_ir::{text, HostTensor, TensorData};
use serde_json::Value;

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

/// How a case is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The reference interpreter on the graph as written.
    Reference,
    /// The reference interpreter with fused ops replaced by their
    /// decompositions.
    Decomposed,
    /// The fast engine (`crate::fast`), on a plain one-slot-per-value plan.
    Fast,
}

/// Whether the fast engine runs any node of `g` natively.
pub fn has_fast_node(g: &rlx_ir::Graph) -> bool {
    g.nodes.iter().any(|n| {
        let tys: Vec<_> = n.inputs.iter().map(|&v| g.ty(v)).collect();
        crate::fast::select(n.op.name(), &tys, &n.attrs).is_some()
    })
}

/// Run one case; `decomposed` replaces fused ops by their decompositions.
pub fn run_case(case: &Value, decomposed: bool) -> Result<(), String> {
    run_case_in(
        case,
        if decomposed {
            Mode::Decomposed
        } else {
            Mode::Reference
        },
    )
}

/// Run one case in `mode`.
pub fn run_case_in(case: &Value, mode: Mode) -> Result<(), String> {
    let decomposed = mode == Mode::Decomposed;
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
    let result = if mode == Mode::Fast {
        crate::fast::FastProgram::compile(rlx_ir::lir::Program::from_graph(g))
            .and_then(|p| p.run(&inputs.iter().collect::<Vec<_>>()))
    } else {
        run_graph(&g, &inputs)
    };
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

/// Outcome of running one vector file.
#[derive(Debug, Default)]
pub struct FileReport {
    pub op: String,
    pub runs: usize,
    pub failures: Vec<String>,
}

/// Run every case of one `ops/<op>.json` file — natively, and decomposed
/// when the op is fused.
pub fn run_file(file: &Value) -> FileReport {
    let op = file["op"].as_str().unwrap_or("?").to_string();
    let fused = rlx_ir::lookup(&op).is_some_and(|d| d.is_fused());
    let mut r = FileReport {
        op: op.clone(),
        ..Default::default()
    };
    for case in file["cases"].as_array().into_iter().flatten() {
        let name = case["name"].as_str().unwrap_or("?");
        let fast = case["graph"]
            .as_str()
            .and_then(|s| text::parse(s).ok())
            .is_some_and(|g| has_fast_node(&g));
        for mode in [Mode::Reference, Mode::Decomposed, Mode::Fast] {
            if (mode == Mode::Decomposed && !fused) || (mode == Mode::Fast && !fast) {
                continue;
            }
            r.runs += 1;
            if let Err(e) = run_case_in(case, mode) {
                let how = match mode {
                    Mode::Reference => "",
                    Mode::Decomposed => " (decomposed)",
                    Mode::Fast => " (fast engine)",
                };
                r.failures.push(format!("{op}/{name}{how}: {e}"));
            }
        }
    }
    r
}
