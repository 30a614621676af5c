//! The shared reference vectors (`tests/vectors/ops/*.json`) through the
//! whole compile pipeline on any registered device: the runner of
//! `rlx_ref::conformance` with an engine that compiles each case as users
//! do. The backend suites (CPU, wgpu, CUDA) use it for the ops defined by a
//! scalar formula, whose kernels exist only after the optimizer has
//! inlined them into fused regions.

use crate::{compile_with, CompileOptions, Error, Target};
pub use rlx_cpu::conformance::{exact, run_file_on, Extra, FileReport, RunError};
use rlx_ir::{Graph, HostTensor};
use rlx_runtime::{Device, RuntimeError};
use serde_json::Value;
use std::path::Path;

/// `device` as a conformance engine: each case's graph compiled with
/// `opts` and run. A dispatch refusal is [`RunError::Unsupported`] (the
/// case is counted as skipped); every other error is a failure.
pub fn engine(
    device: Device,
    opts: CompileOptions,
) -> impl Fn(Graph, &[HostTensor]) -> Result<Vec<HostTensor>, RunError> {
    move |g, inputs| {
        let c = compile_with(&g, Target::Device(device), &opts).map_err(|e| match e {
            Error::Runtime(RuntimeError::Dispatch(_)) => RunError::Unsupported(e.to_string()),
            e => RunError::Failed(e.to_string()),
        })?;
        c.run(inputs).map_err(|e| RunError::Failed(e.to_string()))
    }
}

/// The vector files in `dir` whose op `keep` accepts, parsed, in name order.
pub fn vector_files(dir: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<Value>, String> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        if v["op"].as_str().is_some_and(&keep) {
            out.push(v);
        }
    }
    Ok(out)
}

/// Whether `op` is defined by a scalar formula (`rlx_ir::Lowering::Formula`).
pub fn is_formula(op: &str) -> bool {
    rlx_ir::lookup(op).is_some_and(|d| d.is_formula())
}
