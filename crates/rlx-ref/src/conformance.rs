//! The reference-vector runner (format: tests/vectors/README.md): one
//! runner for every engine, so the reference interpreter, the CPU fast
//! engine, wgpu and CUDA (natively and in wasm32) check exactly the same
//! thing. An engine is a function from a graph and its inputs to outputs
//! ([`Engine`]); the runner parses the case, checks that its text IR
//! round-trips, runs it, and compares with the case's tolerances.

use crate::run_graph;
use rlx_ir::decompose::expand_all;
use rlx_ir::{text, DType, Graph, HostTensor, TensorData};
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

/// Why an engine did not produce outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The engine does not run this graph (a backend's dispatch refused
    /// it): the case is skipped and counted as such, not failed.
    Unsupported(String),
    /// It ran and failed (cases that expect an error match a substring of
    /// the message).
    Failed(String),
}

/// An engine under test: runs `graph` on `inputs`.
pub type Engine<'a> = &'a dyn Fn(Graph, &[HostTensor]) -> Result<Vec<HostTensor>, RunError>;

/// A tolerance policy: the case's `(rtol, atol)` for an output of this
/// dtype, as the engine under test needs them (an engine computing in
/// lower precision than f64 widens them; the reference keeps them).
pub type Tolerance<'a> = &'a dyn Fn(DType, f64, f64) -> (f64, f64);

/// The case's own tolerances.
pub fn exact(_: DType, rtol: f64, atol: f64) -> (f64, f64) {
    (rtol, atol)
}

/// The reference interpreter as an [`Engine`].
pub fn reference(g: Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RunError> {
    run_graph(&g, inputs).map_err(|e| RunError::Failed(e.to_string()))
}

/// How a case is run: the graph as written, or with fused ops replaced by
/// their decompositions (which round at every primitive step, so the
/// tolerances are widened 4×).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    AsWritten,
    Decomposed,
}

/// What became of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// The engine does not run the graph ([`RunError::Unsupported`]).
    Skipped,
}

/// Run one case on the reference interpreter; `decomposed` replaces fused
/// ops by their decompositions.
pub fn run_case(case: &Value, decomposed: bool) -> Result<(), String> {
    let form = if decomposed {
        Form::Decomposed
    } else {
        Form::AsWritten
    };
    run_case_on(case, form, &reference, &exact).map(|_| ())
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

/// Run one case in `form` on `engine`, comparing each output with the
/// tolerances `tol` gives for its dtype.
pub fn run_case_on(
    case: &Value,
    form: Form,
    engine: Engine,
    tol: Tolerance,
) -> Result<Outcome, String> {
    let decomposed = form == Form::Decomposed;
    let mut g = case_graph(case)?;
    if decomposed {
        g = expand_all(&g).map_err(|e| format!("decompose: {e}"))?;
    }
    let inputs = tensors(&case["inputs"])?;
    let result = match engine(g, &inputs) {
        Err(RunError::Unsupported(_)) => return Ok(Outcome::Skipped),
        Err(RunError::Failed(e)) => Err(e),
        Ok(o) => Ok(o),
    };
    if let Some(want) = case.get("error").and_then(|e| e.as_str()) {
        return match result {
            Err(e) if e.contains(want) => Ok(Outcome::Passed),
            Err(e) => Err(format!("expected an error containing {want:?}, got: {e}")),
            Ok(_) => Err(format!("expected an error containing {want:?}, but it ran")),
        };
    }
    let outs = result.map_err(|e| format!("run: {e}"))?;
    if let Some(m) = case.get("moments") {
        return check_moments(&outs[0], m).map(|()| Outcome::Passed);
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
        let (rtol, atol) = tol(w.dtype(), rtol, atol);
        close(g, w, rtol, atol).map_err(|e| format!("output {k}: {e}"))?;
    }
    Ok(Outcome::Passed)
}

/// Outcome of running one vector file.
#[derive(Debug, Default)]
pub struct FileReport {
    pub op: String,
    /// Runs that passed or failed (skipped ones not included).
    pub runs: usize,
    /// Cases an engine did not run ([`RunError::Unsupported`]).
    pub skipped: usize,
    pub failures: Vec<String>,
}

/// An engine under test for [`run_file_with`] and [`run_file_on`].
pub struct Extra<'a> {
    /// Its label in failure messages (" (fast engine)").
    pub label: &'a str,
    /// Which graphs it runs; others are skipped without a word.
    pub runs: &'a dyn Fn(&Graph) -> bool,
    pub engine: Engine<'a>,
    pub tol: Tolerance<'a>,
}

/// Run every case of one `ops/<op>.json` file on the reference
/// interpreter — as written, and decomposed when the op is fused.
pub fn run_file(file: &Value) -> FileReport {
    run_file_with(file, &[])
}

/// [`run_file`], and each case also on every engine of `extra`.
pub fn run_file_with(file: &Value, extra: &[Extra]) -> FileReport {
    let op = file["op"].as_str().unwrap_or("?").to_string();
    let fused = rlx_ir::lookup(&op).is_some_and(|d| d.is_fused());
    let reference = Extra {
        label: "",
        runs: &|_| true,
        engine: &reference,
        tol: &exact,
    };
    let mut r = FileReport {
        op: op.clone(),
        ..Default::default()
    };
    for case in file["cases"].as_array().into_iter().flatten() {
        run_one(&mut r, case, Form::AsWritten, &reference);
        if fused {
            let decomposed = Extra {
                label: " (decomposed)",
                ..reference
            };
            run_one(&mut r, case, Form::Decomposed, &decomposed);
        }
        for x in extra {
            run_one(&mut r, case, Form::AsWritten, x);
        }
    }
    r
}

/// Every case of one vector file on `engine` alone (a backend's suite).
pub fn run_file_on(file: &Value, engine: &Extra) -> FileReport {
    let mut r = FileReport {
        op: file["op"].as_str().unwrap_or("?").to_string(),
        ..Default::default()
    };
    for case in file["cases"].as_array().into_iter().flatten() {
        run_one(&mut r, case, Form::AsWritten, engine);
    }
    r
}

fn run_one(r: &mut FileReport, case: &Value, form: Form, x: &Extra) {
    let g = case["graph"].as_str().and_then(|s| text::parse(s).ok());
    // A graph that does not parse is the reference's failure to report.
    if !x.label.is_empty() && !g.as_ref().is_some_and(|g| (x.runs)(g)) {
        return;
    }
    match run_case_on(case, form, x.engine, x.tol) {
        Ok(Outcome::Passed) => r.runs += 1,
        Ok(Outcome::Skipped) => r.skipped += 1,
        Err(e) => {
            r.runs += 1;
            let name = case["name"].as_str().unwrap_or("?");
            r.failures.push(format!("{}/{name}{}: {e}", r.op, x.label));
        }
    }
}
