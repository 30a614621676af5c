//! The shared reference vectors (`tests/vectors/ops/*.json`) on CUDA,
//! through the one conformance runner every engine uses
//! (`rlx_ref::conformance`): each case whose nodes all run natively on
//! CUDA (native-only dispatch; a refusal skips the case and is counted),
//! against the committed expected outputs, with the tolerances of
//! `rlx_cuda::tolerance` (widened for the GPU's f32 and 16-bit outputs).
//!
//! Without a CUDA device (no driver, no GPU: the CI machines) the test
//! says why on stderr and passes; on the H200 machine `tests/gpu/run.sh`
//! runs it (`cargo test --release -p rlx-cuda --test vectors`, or the
//! carried binary).

use rlx::{CompileOptions, Target};
use rlx_ir::{Graph, HostTensor};
use rlx_ref::conformance::{run_file_on, Extra, RunError};
use rlx_runtime::{Device, DispatchOptions, Policy, RuntimeError};
use std::sync::Arc;

/// CUDA as a conformance engine: a dispatch refusal is `Unsupported`;
/// every other error (planning, code generation, the run) is `Failed`.
fn cuda(g: Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RunError> {
    let opts = CompileOptions {
        optimize: false,
        dispatch: DispatchOptions::new(Policy::NativeOnly),
        ..Default::default()
    };
    let c = rlx::compile_with(&g, Target::Device(Device::Cuda), &opts).map_err(|e| match e {
        rlx::Error::Runtime(RuntimeError::Dispatch(_)) => RunError::Unsupported(e.to_string()),
        e => RunError::Failed(e.to_string()),
    })?;
    c.run(inputs).map_err(|e| RunError::Failed(e.to_string()))
}

#[test]
fn reference_vectors_on_cuda() {
    let backend = match rlx_cuda::CudaBackend::new() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    rlx::init();
    rlx_runtime::register_backend(Arc::new(backend));
    // The checkout this was built in, or (a test binary carried to the GPU
    // machine) the repository root it runs in.
    let built = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/ops");
    let dir = if std::path::Path::new(built).is_dir() {
        built
    } else {
        "tests/vectors/ops"
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/vectors/ops")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let engine = Extra {
        label: " (cuda)",
        runs: &|_| true,
        engine: &cuda,
        tol: &rlx_cuda::tolerance,
    };
    let (mut runs, mut skipped, mut failures) = (0, 0, Vec::new());
    for f in &files {
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let r = run_file_on(&file, &engine);
        runs += r.runs;
        skipped += r.skipped;
        failures.extend(r.failures);
    }
    eprintln!(
        "{} passed, {} failed (cuda vectors; {skipped} cases not native on CUDA skipped; {} op files)",
        runs - failures.len(),
        failures.len(),
        files.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(runs > 500, "only {runs} cases ran natively on CUDA");
}
