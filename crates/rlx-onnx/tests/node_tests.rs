//! A committed sample of the ONNX backend node tests (tests/data/README.md):
//! one per mapped op, each imported, compiled for the CPU, run and compared
//! with ONNX's expected outputs — from its model.onnx, and from the model
//! converted to .rten. All must pass.

mod node;

use node::{run_test_from, Outcome};
use std::path::{Path, PathBuf};

/// The entries of `dir` that `keep` accepts, sorted.
fn entries(dir: &Path, keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| keep(p))
        .collect();
    v.sort();
    v
}

/// Run each (test directory, .rten model or None) on the CPU; every one
/// must pass, and there must be at least 100.
fn all_pass(what: &str, cases: &[(PathBuf, Option<PathBuf>)]) {
    rlx::init();
    let mut bad = Vec::new();
    for (dir, rten) in cases {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        match run_test_from(dir, rlx::Device::Cpu, rten.as_deref()) {
            (_, Outcome::Pass) => {}
            (op, Outcome::Fail(why)) => bad.push(format!("{name} ({op}): {why}")),
            (op, Outcome::Unsupported(why)) => {
                bad.push(format!("{name} ({op}): unsupported: {why}"))
            }
        }
    }
    eprintln!(
        "{} of {} {what} node tests passed",
        cases.len() - bad.len(),
        cases.len()
    );
    assert!(
        cases.len() >= 100,
        "only {} {what} node tests found",
        cases.len()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

#[test]
fn the_committed_node_tests_pass_on_the_cpu() {
    let dirs = entries(&data().join("node"), |p| p.join("model.onnx").exists());
    let cases: Vec<_> = dirs.into_iter().map(|d| (d, None)).collect();
    all_pass("ONNX", &cases);
}

/// The committed sample converted to .rten by rten-convert
/// (tests/data/rten/make.py --sample): each read back by `import_rten` and
/// run against the ONNX test's inputs and expected outputs.
#[test]
fn the_committed_node_tests_pass_from_rten() {
    let files = entries(&data().join("rten"), |p| {
        p.extension().is_some_and(|x| x == "rten")
    });
    let cases: Vec<_> = files
        .into_iter()
        .map(|f| {
            let name = f.file_stem().unwrap().to_owned();
            (data().join("node").join(name), Some(f))
        })
        .collect();
    all_pass(".rten", &cases);
}
