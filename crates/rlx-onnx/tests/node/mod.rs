//! The ONNX backend node-test runner shared by `tests/node_tests.rs` (a
//! committed sample) and `examples/node_tests.rs` (the whole suite): each
//! test's model imported, compiled for the CPU, run on its inputs and
//! compared with its expected outputs. Inputs an op must know at import
//! are bound as constants when the importer asks for them.
#![allow(dead_code)]

use prost::Message;
use rlx_ir::HostTensor;
use rlx_onnx::proto::{ModelProto, TensorProto};
use rlx_onnx::{import_model, ImportOptions, OnnxError};
use std::collections::HashMap;
use std::path::Path;

pub enum Outcome {
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

pub fn run_test(dir: &Path) -> (String, Outcome) {
    run_test_on(dir, rlx::Device::Cpu)
}

/// [`run_test`] compiled for `device`; a node the device cannot run (a
/// dispatch error) makes the test unsupported there, not failed.
pub fn run_test_on(dir: &Path, device: rlx::Device) -> (String, Outcome) {
    let model_bytes = match std::fs::read(dir.join("model.onnx")) {
        Ok(b) => b,
        Err(e) => return ("?".into(), Outcome::Fail(e.to_string())),
    };
    let model = match ModelProto::decode(&model_bytes[..]) {
        Ok(m) => m,
        Err(e) => return ("?".into(), Outcome::Fail(format!("decode: {e}"))),
    };
    let g = model.graph.clone().unwrap_or_default();
    let op = g
        .node
        .first()
        .map(|n| n.op_type().to_string())
        .unwrap_or_default();
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
    // Bind the inputs the importer asks to know, until it asks for none new.
    let mut opts = ImportOptions::default();
    let imported = loop {
        match import_model(&model, &opts) {
            Ok(m) => break m,
            Err(OnnxError::Unsupported(m)) => {
                let asked: Vec<&String> = names
                    .iter()
                    .filter(|n| !opts.constants.contains_key(*n))
                    .filter(|n| m.iter().any(|x| x.what.contains(&format!("(`{n}`)"))))
                    .collect();
                if asked.is_empty() {
                    return (
                        op,
                        Outcome::Unsupported(OnnxError::Unsupported(m).to_string()),
                    );
                }
                for n in asked {
                    opts.constants.insert(n.clone(), given[n].clone());
                }
            }
            Err(e) if e.to_string().contains("has no rlx dtype") => {
                return (op, Outcome::Unsupported(e.to_string()))
            }
            Err(e) => return (op, Outcome::Fail(format!("import: {e}"))),
        }
    };
    let compiled = match rlx::compile(&imported.graph, device) {
        Ok(c) => c,
        Err(rlx::Error::Runtime(e @ rlx::RuntimeError::Dispatch(_))) => {
            let first = e
                .to_string()
                .lines()
                .nth(1)
                .unwrap_or("")
                .trim()
                .to_string();
            return (op, Outcome::Unsupported(format!("on {device}:\n{first}")));
        }
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
