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
