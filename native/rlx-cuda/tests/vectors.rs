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

use rlx::conformance::{engine, is_formula, run_file_on, vector_files, Extra};
use rlx::CompileOptions;
use rlx_runtime::{Device, DispatchOptions, Policy};
use std::path::Path;
use std::sync::Arc;

/// CUDA as a conformance engine (native-only dispatch: a refusal skips the
/// case), with the optimizer on or off.
fn cuda_opts(optimize: bool) -> CompileOptions {
    CompileOptions {
        optimize,
        dispatch: DispatchOptions::new(Policy::NativeOnly),
        ..Default::default()
    }
}

/// One test at a time on the GPU: the two tests on parallel threads,
/// compiling and running through one registered backend at once, killed
/// the process on the H100 without a message (2026-12-06; each alone, or
/// with `--test-threads=1`, passes).
fn gpu() -> std::sync::MutexGuard<'static, ()> {
    static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());
    GPU.lock().unwrap_or_else(|p| p.into_inner())
}

/// The CUDA backend registered (once per process: two backends created
/// at once crashed the process on the H100), or why there is none (no
/// driver, no GPU).
fn register() -> Result<(), String> {
    static ONCE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let backend = rlx_cuda::CudaBackend::new().map_err(|e| e.to_string())?;
        rlx::init();
        rlx_runtime::register_backend(Arc::new(backend));
        Ok(())
    })
    .clone()
}

/// The vectors of the checkout this was built in, or (a test binary carried
/// to the GPU machine) of the repository root it runs in.
fn vector_dir() -> &'static Path {
    let built = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/ops"
    ));
    if built.is_dir() {
        built
    } else {
        Path::new("tests/vectors/ops")
    }
}

#[test]
fn reference_vectors_on_cuda() {
    let _gpu = gpu();
    if let Err(e) = register() {
        eprintln!("skipped: {e}");
        return;
    }
    let files = vector_files(vector_dir(), |_| true).expect("tests/vectors/ops");
    let cuda = engine(Device::Cuda, cuda_opts(false));
    let x = Extra {
        label: " (cuda)",
        runs: &|_| true,
        engine: &cuda,
        tol: &rlx_cuda::tolerance,
    };
    let (mut runs, mut skipped, mut failures) = (0, 0, Vec::new());
    for file in &files {
        let r = run_file_on(file, &x);
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

/// The ops defined by a scalar formula, compiled as users compile them: the
/// optimizer inlines each formula into one region, which becomes one NVRTC
/// kernel from the same expression table as every region.
#[test]
fn formula_ops_on_cuda() {
    let _gpu = gpu();
    if let Err(e) = register() {
        eprintln!("skipped: {e}");
        return;
    }
    let files = vector_files(vector_dir(), is_formula).expect("tests/vectors/ops");
    let cuda = engine(Device::Cuda, cuda_opts(true));
    let x = Extra {
        label: " (cuda, compiled)",
        runs: &|_| true,
        engine: &cuda,
        tol: &rlx_cuda::tolerance,
    };
    for f in &files {
        let r = run_file_on(f, &x);
        eprintln!(
            "{}: {} passed, {} failed, {} refused",
            r.op,
            r.runs - r.failures.len(),
            r.failures.len(),
            r.skipped
        );
        assert!(r.failures.is_empty(), "{}", r.failures.join("\n"));
        assert_eq!(r.skipped, 0, "{}: cases refused on CUDA", r.op);
        // The profile through the backend trait: the one region kernel.
        let g = rlx::ir::text::parse(f["cases"][0]["graph"].as_str().unwrap()).unwrap();
        let c = rlx::compile(&g, Device::Cuda).unwrap();
        let ty = g.ty(g.inputs[0]);
        let x = rlx::HostTensor::zeros(ty.dtype, ty.shape.clone()).unwrap();
        let p = c.profile(&[&x]).unwrap();
        eprintln!("{p}");
        assert!(p.how.starts_with("CUDA"), "{p}");
        assert_eq!(p.kernels.len(), 1, "{p}");
    }
}
