//! The ONNX backend node-test runner shared by `tests/node_tests.rs` (a
//! committed sample) and `examples/node_tests.rs` (the whole suite): each
//! test's model imported, compiled for the CPU, run on its inputs and
//! compared with its expected outputs. Inputs an op must know at import
//! are bound as constants when the importer asks for them.
#![allow(dead_code)]

use prost::Message;
use rlx_ir::HostTensor;
use rlx_onnx::proto::{ModelProto, TensorProto, ValueInfoProto};
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

/// A test value as the graph declares it: a tensor, a sequence of
/// tensors, or an optional (`None`: empty).
enum Value {
    Tensor(HostTensor),
    Seq(Vec<HostTensor>),
    Absent,
}

fn kind(vi: &ValueInfoProto) -> (bool, bool) {
    use rlx_onnx::proto::type_proto::Value as T;
    let mut t = vi.r#type.as_ref().and_then(|t| t.value.as_ref());
    let optional = matches!(t, Some(T::OptionalType(_)));
    if let Some(T::OptionalType(o)) = t {
        t = o.elem_type.as_ref().and_then(|t| t.value.as_ref());
    }
    (optional, matches!(t, Some(T::SequenceType(_))))
}

fn read_value(p: &Path, vi: &ValueInfoProto) -> Result<Value, String> {
    use rlx_onnx::data::{OptionalProto, SequenceProto};
    let host = |t: &TensorProto| rlx_onnx::tensor::to_host(t).map_err(|e| e.to_string());
    let seq = |s: &SequenceProto| -> Result<Value, String> {
        Ok(Value::Seq(
            s.tensor_values.iter().map(host).collect::<Result<_, _>>()?,
        ))
    };
    let bytes = std::fs::read(p).map_err(|e| e.to_string())?;
    match kind(vi) {
        (true, _) => {
            let o = OptionalProto::decode(&bytes[..]).map_err(|e| e.to_string())?;
            match (&o.tensor_value, &o.sequence_value) {
                (Some(t), _) => Ok(Value::Tensor(host(t)?)),
                (None, Some(s)) => seq(s),
                (None, None) => Ok(Value::Absent),
            }
        }
        (false, true) => seq(&SequenceProto::decode(&bytes[..]).map_err(|e| e.to_string())?),
        (false, false) => Ok(Value::Tensor(read_pb(p)?)),
    }
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
    run_test_from(dir, device, None)
}

/// [`run_test`] with the model read from `rten` (the test's model
/// converted to .rten by rten-convert) instead of its model.onnx; the
/// inputs, outputs and their declared types still come from the test.
pub fn run_test_from(dir: &Path, device: rlx::Device, rten: Option<&Path>) -> (String, Outcome) {
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
    let vis: Vec<&ValueInfoProto> = g
        .input
        .iter()
        .filter(|v| !inits.contains(v.name()))
        .collect();
    let names: Vec<String> = vis.iter().map(|v| v.name().to_string()).collect();
    // Tensors by input name; a sequence's elements as NAME[i] (how the
    // importer names them), its element shapes in the options.
    let mut given: HashMap<String, HostTensor> = HashMap::new();
    let mut opts = ImportOptions::default();
    for (k, vi) in vis.iter().enumerate() {
        let name = vi.name().to_string();
        match read_value(&data.join(format!("input_{k}.pb")), vi) {
            Ok(Value::Tensor(t)) => {
                // Its shape binds any symbolic dimension it has.
                opts.shapes.insert(name.clone(), t.shape().dims().to_vec());
                given.insert(name, t);
            }
            Ok(Value::Seq(items)) => {
                let shapes = items.iter().map(|t| t.shape().dims().to_vec()).collect();
                opts.sequences.insert(name.clone(), shapes);
                for (i, t) in items.into_iter().enumerate() {
                    given.insert(format!("{name}[{i}]"), t);
                }
            }
            Ok(Value::Absent) => {
                opts.absent.insert(name);
            }
            Err(e) => return (op, Outcome::Unsupported(format!("input {k}: {e}"))),
        }
    }
    // Bind the inputs the importer asks to know, until it asks for none new.
    let rten_bytes = match rten.map(std::fs::read).transpose() {
        Ok(b) => b,
        Err(e) => return (op, Outcome::Fail(format!("read .rten: {e}"))),
    };
    let import_once = |opts: &ImportOptions| match &rten_bytes {
        Some(b) => rlx_onnx::import_rten(b, opts),
        None => import_model(&model, opts),
    };
    let imported = loop {
        match import_once(&opts) {
            Ok(m) => break m,
            Err(OnnxError::Unsupported(m)) => {
                let asked: Vec<&String> = names
                    .iter()
                    .filter(|n| !opts.constants.contains_key(*n) && given.contains_key(*n))
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
    let mut ins: Vec<HostTensor> = imported.inputs.iter().map(|n| given[n].clone()).collect();
    // A .rten model has four element types (f32, i32 read as i64, i8, u8):
    // the test's values in the type the model declares (exact: f16 → f32,
    // i32 / bool → i64).
    if rten.is_some() {
        for (t, want) in ins.iter_mut().zip(imported.graph.input_types()) {
            if t.dtype() != want.dtype {
                let shape = t.shape().clone();
                let widened = if want.dtype.is_float() {
                    t.to_f64_vec()
                        .and_then(|v| HostTensor::from_f64(want.dtype, shape, v))
                } else {
                    t.to_i64_vec()
                        .and_then(|v| HostTensor::from_i64(want.dtype, shape, v))
                };
                match widened {
                    Ok(w) => *t = w,
                    Err(e) => return (op, Outcome::Fail(format!("input as {}: {e}", want.dtype))),
                }
            }
        }
    }
    let outs = match compiled.run(&ins) {
        Ok(o) => o,
        Err(e) => return (op, Outcome::Fail(format!("run: {e}"))),
    };
    // Each declared output against ours (a sequence: one result per element).
    let mut got = outs.iter();
    for (k, vi) in g.output.iter().enumerate() {
        let want = match read_value(&data.join(format!("output_{k}.pb")), vi) {
            Ok(Value::Tensor(t)) => vec![t],
            Ok(Value::Seq(items)) => items,
            Ok(Value::Absent) => Vec::new(),
            Err(e) => return (op, Outcome::Unsupported(format!("output {k}: {e}"))),
        };
        for (i, w) in want.iter().enumerate() {
            let Some(g) = got.next() else {
                return (
                    op,
                    Outcome::Fail(format!("output {k}: element {i} is missing")),
                );
            };
            if let Err(e) = close(g, w) {
                return (op, Outcome::Fail(format!("output {k}[{i}]: {e}")));
            }
        }
    }
    if got.next().is_some() {
        return (
            op,
            Outcome::Fail("more results than the test expects".into()),
        );
    }
    (op, Outcome::Pass)
}
