//! The ONNX backend node tests through rlx: each test's model imported,
//! compiled for the CPU, run on its inputs and compared with its expected
//! outputs; prints a pass / fail / unsupported table per op (markdown, the
//! source of docs/onnx-coverage.md).
//!
//!   ./scripts/check-onnx-coverage --write     # fetches the wheel's tests, rewrites docs/onnx-coverage.md
//!   cargo run --release -p rlx-onnx --example node_tests -- .cache/onnx/onnx/backend/test/data/node
//!
//! Inputs an op must know at import (a Reshape's shape, axes given as
//! inputs) are bound as constants when the importer asks for them; every
//! other input is fed at run time.

#[path = "../tests/node/mod.rs"]
mod node;

use node::{run_test_from, Outcome};
use std::collections::BTreeMap;

/// The op type of a test model's first node.
fn first_op(d: &std::path::Path) -> String {
    use prost::Message;
    std::fs::read(d.join("model.onnx"))
        .ok()
        .and_then(|b| rlx_onnx::proto::ModelProto::decode(&b[..]).ok())
        .and_then(|m| m.graph?.node.first().map(|n| n.op_type().to_string()))
        .unwrap_or_else(|| "?".into())
}

fn main() {
    rlx::init();
    let root = std::env::args()
        .nth(1)
        .expect("usage: node_tests DIR [--passing] (DIR: onnx/backend/test/data/node)");
    // --passing: print the passing tests' names (op<TAB>test), not the table.
    let args: Vec<String> = std::env::args().collect();
    let passing = args.iter().any(|a| a == "--passing");
    // --device D: compile for another device (a node it cannot run makes
    // the test unsupported there); the table then says which.
    let device = match args.iter().position(|a| a == "--device") {
        Some(i) => rlx::Device::parse(args.get(i + 1).expect("--device NAME")).expect("a device"),
        None => rlx::Device::Cpu,
    };
    if device != rlx::Device::Cpu {
        rlx_wgpu::WgpuBackend::register();
    }
    // --rten DIR: each test's model from DIR/NAME.rten (made by
    // tests/data/rten/make.py); a test with none there was not convertible.
    let rten = args
        .iter()
        .position(|a| a == "--rten")
        .map(|i| std::path::PathBuf::from(args.get(i + 1).expect("--rten DIR")));
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("the node test directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    // op → (pass, fail, unsupported); failures listed with their reason.
    let mut table: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    let mut fails = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let (mut plain, mut expanded) = ([0usize; 3], [0usize; 3]);
    for d in &dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        let is_expanded = name.contains("_expanded");
        // A panic is a failure of the test, recorded, not the end of the run.
        let r = match &rten {
            None => std::panic::catch_unwind(|| run_test_from(d, device, None)),
            Some(dir) => {
                let f = dir.join(format!("{name}.rten"));
                if !f.exists() {
                    if is_expanded {
                        continue;
                    }
                    *reasons
                        .entry("rten-convert cannot convert the model".into())
                        .or_default() += 1;
                    plain[2] += 1;
                    table.entry(first_op(d)).or_default()[2] += 1;
                    continue;
                }
                std::panic::catch_unwind(|| run_test_from(d, device, Some(&f)))
            }
        }
        .unwrap_or_else(|_| ("?".into(), Outcome::Fail("panicked".into())));
        let (op, outcome) = r;
        let k = match &outcome {
            Outcome::Pass => {
                if passing {
                    println!("{op}\t{name}");
                }
                0
            }
            Outcome::Fail(why) => {
                fails.push(format!(
                    "{name} ({op}): {}",
                    why.lines().next().unwrap_or("")
                ));
                1
            }
            Outcome::Unsupported(why) => {
                // The reason without the node's name: "`Op` (opset N): what".
                let line = why.lines().nth(1).unwrap_or(why).trim();
                let what = line.split_once(": ").map_or(line, |(_, w)| w);
                *reasons.entry(format!("`{op}`: {what}")).or_default() += 1;
                2
            }
        };
        if is_expanded {
            expanded[k] += 1;
        } else {
            plain[k] += 1;
            table.entry(op).or_default()[k] += 1;
        }
    }
    if passing {
        return;
    }
    let total = |c: [usize; 3]| c.iter().sum::<usize>();
    let pct = |c: [usize; 3]| 100.0 * c[0] as f64 / total(c).max(1) as f64;
    if rten.is_some() {
        println!("# .rten coverage\n");
        println!("The ONNX backend node tests (`onnx==1.22.0` wheel) converted to `.rten` by `rten-convert==0.22.0` (`crates/rlx-onnx/tests/data/rten/make.py`) and read back by `rlx_onnx::import_rten` — RTen's format through the ONNX op mapping — on {device}, against each test's own inputs and expected outputs. A model rten-convert refuses counts as unsupported. Generated by `cargo run --release -p rlx-onnx --example node_tests -- DIR --rten RTEN_DIR`.\n");
    } else if device != rlx::Device::Cpu {
        println!("# ONNX coverage on {device}\n");
        println!("The ONNX backend node tests (`onnx==1.22.0` wheel) through `rlx-onnx`, compiled for {device}: a test whose graph has a node {device} cannot run is unsupported here (the dispatch error's first node is the reason). Generated by `cargo run --release -p rlx-onnx --example node_tests -- DIR --device {device}`; the CPU table (checked in CI) is docs/onnx-coverage.md.\n");
    } else {
        println!("# ONNX coverage\n");
    }
    if device == rlx::Device::Cpu && rten.is_none() {
        println!("The ONNX backend node tests (`onnx==1.22.0` wheel) through `rlx-onnx` on the CPU: each model imported, compiled, run on its inputs and compared with its expected outputs (rtol 1e-3, atol 1e-5). Generated by `./scripts/check-onnx-coverage --write` (the example `node_tests` over `onnx/backend/test/data/node` from the wheel), and checked against the importer in CI by `./scripts/check-onnx-coverage`. Inputs an op must know at import (a Reshape shape, axes given as inputs) are bound as constants when the importer asks for them — so the ops whose output size depends on values (NonZero, Unique, NonMaxSuppression) are computed at import here, which is how rlx runs them; tensor inputs' shapes bind their symbolic dimensions, and sequence inputs become one input per element. A committed sample (one passing test per op, `crates/rlx-onnx/tests/data`) runs in `cargo test`.\n");
    }
    println!("| tests | pass | fail | unsupported | pass rate |\n|---|---|---|---|---|");
    println!(
        "| plain ({}) | {} | {} | {} | {:.1}% |",
        total(plain),
        plain[0],
        plain[1],
        plain[2],
        pct(plain)
    );
    println!(
        "| expanded ({}) | {} | {} | {} | {:.1}% |\n",
        total(expanded),
        expanded[0],
        expanded[1],
        expanded[2],
        pct(expanded)
    );
    println!("Per op (plain tests):\n\n| op | pass | fail | unsupported |\n|---|---|---|---|");
    for (op, c) in &table {
        println!("| `{op}` | {} | {} | {} |", c[0], c[1], c[2]);
    }
    println!("\nUnsupported, by reason:\n");
    let mut rs: Vec<_> = reasons.into_iter().collect();
    rs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (r, c) in &rs {
        println!("* {c} × {r}");
    }
    println!("\nFailures (first line of each reason):\n");
    for f in &fails {
        println!("* {f}");
    }
}
