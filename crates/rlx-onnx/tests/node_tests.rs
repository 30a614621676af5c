//! A committed sample of the ONNX backend node tests (tests/data/README.md):
//! one per mapped op, each imported, compiled for the CPU, run and compared
//! with ONNX's expected outputs. All must pass.

mod node;

use node::{run_test, Outcome};

#[test]
fn the_committed_node_tests_pass_on_the_cpu() {
    rlx::init();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/node");
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    let mut bad = Vec::new();
    for d in &dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        match run_test(d) {
            (_, Outcome::Pass) => {}
            (op, Outcome::Fail(why)) => bad.push(format!("{name} ({op}): {why}")),
            (op, Outcome::Unsupported(why)) => {
                bad.push(format!("{name} ({op}): unsupported: {why}"))
            }
        }
    }
    eprintln!(
        "{} of {} ONNX node tests passed",
        dirs.len() - bad.len(),
        dirs.len()
    );
    assert!(dirs.len() >= 100, "only {} node tests found", dirs.len());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The committed sample converted to .rten by rten-convert
/// (tests/data/rten/make.py --sample): each read back by `import_rten` and
/// run against the ONNX test's inputs and expected outputs. All must pass.
#[test]
fn the_committed_node_tests_pass_from_rten() {
    rlx::init();
    let base = env!("CARGO_MANIFEST_DIR");
    let mut files: Vec<_> = std::fs::read_dir(format!("{base}/tests/data/rten"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rten"))
        .collect();
    files.sort();
    let mut bad = Vec::new();
    for f in &files {
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        let dir = std::path::Path::new(base)
            .join("tests/data/node")
            .join(&name);
        match node::run_test_from(&dir, rlx::Device::Cpu, Some(f)) {
            (_, Outcome::Pass) => {}
            (op, Outcome::Fail(why)) => bad.push(format!("{name} ({op}): {why}")),
            (op, Outcome::Unsupported(why)) => {
                bad.push(format!("{name} ({op}): unsupported: {why}"))
            }
        }
    }
    eprintln!(
        "{} of {} .rten node tests passed",
        files.len() - bad.len(),
        files.len()
    );
    assert!(files.len() >= 100, "only {} .rten tests found", files.len());
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
