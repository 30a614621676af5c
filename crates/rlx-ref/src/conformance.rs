//! The reference-vector runner (format: tests/vectors/README.md): one
//! runner for every engine, so the reference interpreter, the CPU fast
//! engine, wgpu and CUDA (natively and in wasm32) check exactly the same
//! thing. An engine is a function from a graph and its inputs to outputs
//! ([`Engine`]); the runner parses the case, checks that its text IR
//! round-trips, runs it, and compares with the case's tolerances.

use crate::run_graph;
use rlx_ir::decompose::expand_all;
use rlx_ir::{text, Graph, HostTensor, TensorData};
use serde_json::Value;

/// Whether `got` matches `want` within `rtol`/`atol` (NaN matches NaN,
/// infinities must be equal, integers and packed bytes exactly).
pub fn close(got: &HostTensor, want: &HostTensor, rtol: f64, atol: f64) -> Result<(), String> {
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

/// The tensors of a case's `inputs` or `outputs` list.
pub fn tensors(v: &Value) -> Result<Vec<HostTensor>, String> {
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

/// An engine under test: runs `graph` on `inputs`. Errors are strings
/// (cases that expect an error match on a substring of it).
pub type Engine<'a> = &'a dyn Fn(Graph, &[HostTensor]) -> Result<Vec<HostTensor>, String>;

/// The reference interpreter as an [`Engine`].
pub fn reference(g: Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    run_graph(&g, inputs).map_err(|e| e.to_string())
}

/// How a case is run: the graph as written, or with fused ops replaced by
/// their decompositions (which round at every primitive step, so the
/// tolerances are widened 4×).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    AsWritten,
    Decomposed,
}

/// Run one case on the reference interpreter; `decomposed` replaces fused
/// ops by their decompositions.
pub fn run_case(case: &Value, decomposed: bool) -> Result<(), String> {
    let form = if decomposed {
        Form::Decomposed
    } else {
        Form::AsWritten
    };
    run_case_on(case, form, &reference)
}

/// The case's graph, after checking that its text IR round-trips.
pub fn case_graph(case: &Value) -> Result<Graph, String> {
    let src = case["graph"].as_str().ok_or("case has no graph")?;
    let g = text::parse(src).map_err(|e| format!("parse: {e}"))?;
    let printed = text::print(&g);
    let again =
        text::parse(&printed).map_err(|e| format!("re-parse of printed text: {e}\n{printed}"))?;
    if text::print(&again) != printed {
        return Err("text IR does not round-trip".into());
    }
    Ok(g)
}

/// Run one case in `form` on `engine`, with the case's tolerances.
pub fn run_case_on(case: &Value, form: Form, engine: Engine) -> Result<(), String> {
    run_case_scaled(case, form, engine, 1.0)
}

/// [`run_case_on`] with the case's tolerances multiplied by `scale` (an
/// engine that computes in lower precision than f64 states its factor).
pub fn run_case_scaled(case: &Value, form: Form, engine: Engine, scale: f64) -> Result<(), String> {
    let decomposed = form == Form::Decomposed;
    let mut g = case_graph(case)?;
    if decomposed {
        g = expand_all(&g).map_err(|e| format!("decompose: {e}"))?;
    }
    let inputs = tensors(&case["inputs"])?;
    let result = engine(g, &inputs);
    if let Some(want) = case.get("error").and_then(|e| e.as_str()) {
        return match result {
            Err(e) if e.contains(want) => Ok(()),
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
        case["rtol"].as_f64().unwrap_or(1e-6) * scale,
        case["atol"].as_f64().unwrap_or(1e-6) * scale,
    );
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

/// An extra engine for [`run_file_with`]: its label in failure messages
/// (" (fast engine)"), which graphs it runs (others are skipped), and the
/// engine.
pub struct Extra<'a> {
    pub label: &'a str,
    pub runs: &'a dyn Fn(&Graph) -> bool,
    pub engine: Engine<'a>,
}

/// Run every case of one `ops/<op>.json` file on the reference
/// interpreter — as written, and decomposed when the op is fused.
pub fn run_file(file: &Value) -> FileReport {
    run_file_with(file, &[])
}

/// [`run_file`], and each case also on every engine of `extra` that runs
/// its graph.
pub fn run_file_with(file: &Value, extra: &[Extra]) -> FileReport {
    let op = file["op"].as_str().unwrap_or("?").to_string();
    let fused = rlx_ir::lookup(&op).is_some_and(|d| d.is_fused());
    let mut r = FileReport {
        op: op.clone(),
        ..Default::default()
    };
    for case in file["cases"].as_array().into_iter().flatten() {
        let name = case["name"].as_str().unwrap_or("?");
        let mut run = |label: &str, form: Form, engine: Engine| {
            r.runs += 1;
            if let Err(e) = run_case_on(case, form, engine) {
                r.failures.push(format!("{op}/{name}{label}: {e}"));
            }
        };
        run("", Form::AsWritten, &reference);
        if fused {
            run(" (decomposed)", Form::Decomposed, &reference);
        }
        let g = case["graph"].as_str().and_then(|s| text::parse(s).ok());
        for x in extra {
            if g.as_ref().is_some_and(|g| (x.runs)(g)) {
                run(x.label, Form::AsWritten, x.engine);
            }
        }
    }
    r
}
