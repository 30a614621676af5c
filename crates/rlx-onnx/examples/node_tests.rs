//! The ONNX backend node tests through rlx: each test's model imported,
//! compiled for the CPU, run on its inputs and compared with its expected
//! outputs; prints a pass / fail / unsupported table per op (markdown, the
//! source of docs/onnx-coverage.md).
//!
//!   python3 -m pip download --no-deps onnx==1.22.0 -d .cache/onnx   # the wheel ships the tests
//!   (unzip onnx/backend/test/data/ from it into .cache/onnx)
//!   cargo run --release -p rlx-onnx --example node_tests -- .cache/onnx/onnx/backend/test/data/node > docs/onnx-coverage.md
//!
//! Inputs an op must know at import (a Reshape's shape, axes given as
//! inputs) are bound as constants when the importer asks for them; every
//! other input is fed at run time.

use prost::Message;
use rlx_ir::HostTensor;
use rlx_onnx::proto::{ModelProto, TensorProto};
use rlx_onnx::{import_model, ImportOptions, OnnxError};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

enum Outcome {
    Pass,
    Fail(String),
    Unsupported(String),
}

fn read_pb(p: &Path) -> Result<HostTensor, String> {
    let bytes = std::fs::read(p).map_err(|e| e.to_string())?;
    let t = TensorProto::decode(&bytes[..]).map_err(|e| e.to_string())?;
    rlx_onnx::tensor::to_host(&t).map_err(|e| e.to_string())
}

fn close(got: &HostTensor, want: &HostTensor) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("shape {} vs {}", got.shape(), want.shape()));
    }
    let (g, w) = (
        got.to_f64_vec().map_err(|e| e.to_string())?,
        want.to_f64_vec().map_err(|e| e.to_string())?,
    );
    // The ONNX backend tests' default tolerances are rtol 1e-3, atol 1e-7;
    // atol 1e-5 here (rlx computes f32 with f32 accumulation throughout).
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-5 + 1e-3 * b.abs();
        if !ok {
            return Err(format!("element {i}: got {a}, want {b}"));
        }
    }
    Ok(())
}

fn run_test(dir: &Path) -> (String, Outcome) {
    let model_bytes = match std::fs::read(dir.join("model.onnx")) {
        Ok(b) => b,
        Err(e) => return ("?".into(), Outcome::Fail(e.to_string())),
    };
    let model = match ModelProto::decode(&model_bytes[..]) {
        Ok(m) => m,
        Err(e) => return ("?".into(), Outcome::Fail(format!("decode: {e}"))),
    };
    let g = model.graph.clone().unwrap_or_default();
    let op = g.node.first().map(|n| n.op_type().to_string()).unwrap_or_default();
    let data = dir.join("test_data_set_0");
    let inits: std::collections::HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let names: Vec<String> = g
        .input
        .iter()
        .map(|v| v.name().to_string())
        .filter(|n| !inits.contains(n.as_str()))
        .collect();
    let mut given: HashMap<String, HostTensor> = HashMap::new();
    for (k, name) in names.iter().enumerate() {
        match read_pb(&data.join(format!("input_{k}.pb"))) {
            Ok(t) => {
                given.insert(name.clone(), t);
            }
            Err(e) => return (op, Outcome::Unsupported(format!("input {k}: {e}"))),
        }
    }
    let mut opts = ImportOptions::default();
    let imported = match import_model(&model, &opts) {
        Ok(m) => m,
        Err(OnnxError::Unsupported(m)) if m.iter().any(|x| x.what.contains("must be known at import")) => {
            for name in &names {
                if m.iter().any(|x| x.what.contains(&format!("(`{name}`)"))) {
                    opts.constants.insert(name.clone(), given[name].clone());
                }
            }
            match import_model(&model, &opts) {
                Ok(m) => m,
                Err(e @ OnnxError::Unsupported(_)) => return (op, Outcome::Unsupported(e.to_string())),
                Err(e) => return (op, Outcome::Fail(format!("import: {e}"))),
            }
        }
        Err(e @ OnnxError::Unsupported(_)) => return (op, Outcome::Unsupported(e.to_string())),
        Err(e) if e.to_string().contains("has no rlx dtype") => return (op, Outcome::Unsupported(e.to_string())),
        Err(e) => return (op, Outcome::Fail(format!("import: {e}"))),
    };
    let compiled = match rlx::compile(&imported.graph, rlx::Device::Cpu) {
        Ok(c) => c,
        Err(e) => return (op, Outcome::Fail(format!("compile: {e}"))),
    };
    let ins: Vec<HostTensor> = imported.inputs.iter().map(|n| given[n].clone()).collect();
    let outs = match compiled.run(&ins) {
        Ok(o) => o,
        Err(e) => return (op, Outcome::Fail(format!("run: {e}"))),
    };
    for (k, got) in outs.iter().enumerate() {
        let want = match read_pb(&data.join(format!("output_{k}.pb"))) {
            Ok(t) => t,
            Err(e) => return (op, Outcome::Unsupported(format!("output {k}: {e}"))),
        };
        if let Err(e) = close(got, &want) {
            return (op, Outcome::Fail(format!("output {k}: {e}")));
        }
    }
    (op, Outcome::Pass)
}

fn main() {
    rlx::init();
    let root = std::env::args().nth(1).expect("usage: node_tests DIR (onnx/backend/test/data/node)");
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
        let r = std::panic::catch_unwind(|| run_test(d))
            .unwrap_or_else(|_| ("?".into(), Outcome::Fail("panicked".into())));
        let (op, outcome) = r;
        let k = match &outcome {
            Outcome::Pass => 0,
            Outcome::Fail(why) => {
                fails.push(format!("{name} ({op}): {}", why.lines().next().unwrap_or("")));
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
    let total = |c: [usize; 3]| c.iter().sum::<usize>();
    let pct = |c: [usize; 3]| 100.0 * c[0] as f64 / total(c).max(1) as f64;
    println!("# ONNX coverage\n");
    println!("The ONNX backend node tests (`onnx==1.22.0` wheel) through `rlx-onnx` on the CPU: each model imported, compiled, run on its inputs and compared with its expected outputs (rtol 1e-3, atol 1e-5). Generated by `cargo run --release -p rlx-onnx --example node_tests -- DIR`.\n");
    println!("| tests | pass | fail | unsupported | pass rate |\n|---|---|---|---|---|");
    println!("| plain ({}) | {} | {} | {} | {:.1}% |", total(plain), plain[0], plain[1], plain[2], pct(plain));
    println!("| expanded ({}) | {} | {} | {} | {:.1}% |\n", total(expanded), expanded[0], expanded[1], expanded[2], pct(expanded));
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
