//! ONNX `ModelProto` → rlx `Graph`: graph inputs with static shapes (a
//! symbolic `dim_param` bound from [`ImportOptions::dims`]), initializers
//! and `Constant` nodes as known constants, every node mapped by
//! [`crate::ops`]; every node that cannot be mapped is collected, and the
//! import fails once with all of them.

use crate::error::Missing;
use crate::proto::{self, ModelProto, NodeProto};
use crate::tensor::{dtype_of, to_host};
use crate::OnnxError;
use prost::Message;
use rlx_ir::{Graph, GraphBuilder, HostTensor, TensorType, ValueId};
use std::collections::{HashMap, HashSet};

/// How to import.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Sizes of symbolic dimensions (`dim_param`), by name.
    pub dims: HashMap<String, usize>,
    /// Graph inputs given a value at import: folded in as constants (a
    /// shape or an axes list that an op needs to know while importing).
    pub constants: HashMap<String, HostTensor>,
}

/// An imported model.
#[derive(Clone, Debug)]
pub struct Imported {
    pub graph: Graph,
    /// The ONNX names of the graph's inputs, in order (initializers and
    /// inputs bound by [`ImportOptions::constants`] are not among them).
    pub inputs: Vec<String>,
    /// The default-domain opset the model imports.
    pub opset: i64,
}

/// Import an ONNX model from its bytes.
pub fn import(bytes: &[u8], opts: &ImportOptions) -> Result<Imported, OnnxError> {
    let limits = rlx_ir::limits::limits();
    limits
        .check_file_bytes("the ONNX model", bytes.len() as u64)
        .map_err(|e| OnnxError::Ir(e.into()))?;
    let model = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
    import_model(&model, opts)
}

/// Import a decoded model.
pub fn import_model(model: &ModelProto, opts: &ImportOptions) -> Result<Imported, OnnxError> {
    // A model of other domains only (ai.onnx.ml, training) has none: its
    // nodes are then each reported as unsupported.
    let opset = model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map_or(0, |o| o.version());
    let g = model
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::Invalid("the model has no graph".into()))?;
    let mut cx = Cx {
        b: GraphBuilder::new(if g.name().is_empty() {
            "onnx"
        } else {
            g.name()
        }),
        vals: HashMap::new(),
        consts: HashMap::new(),
        poisoned: HashSet::new(),
        opset,
        missing: Vec::new(),
    };
    for t in &g.initializer {
        cx.consts.insert(t.name().to_string(), to_host(t)?);
    }
    let mut inputs = Vec::new();
    for vi in &g.input {
        let name = vi.name().to_string();
        if cx.consts.contains_key(&name) {
            continue; // an initializer (a default the caller does not override)
        }
        if let Some(t) = opts.constants.get(&name) {
            cx.consts.insert(name, t.clone());
            continue;
        }
        let ty = value_type(vi, &opts.dims)?;
        let v = cx.b.input(name.clone(), ty);
        cx.vals.insert(name.clone(), v);
        inputs.push(name);
    }
    for (i, node) in g.node.iter().enumerate() {
        cx.node(i, node);
    }
    if !cx.missing.is_empty() {
        return Err(OnnxError::Unsupported(cx.missing));
    }
    let mut outs = Vec::new();
    for o in &g.output {
        let v = cx.value(o.name()).map_err(OnnxError::Invalid)?;
        outs.push(v);
    }
    for (o, &v) in g.output.iter().zip(&outs) {
        cx.b.name_value(v, o.name());
    }
    let graph = cx.b.finish(&outs)?;
    Ok(Imported {
        graph,
        inputs,
        opset,
    })
}

fn value_type(
    vi: &proto::ValueInfoProto,
    dims: &HashMap<String, usize>,
) -> Result<TensorType, OnnxError> {
    use proto::tensor_shape_proto::dimension::Value;
    use proto::type_proto::Value as T;
    let bad = |m: String| OnnxError::Invalid(format!("input `{}`: {m}", vi.name()));
    let Some(T::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(bad(
            "not a tensor (sequences, maps and optionals are not supported yet)".into(),
        ));
    };
    let dtype = dtype_of(t.elem_type()).map_err(bad)?;
    let shape = t
        .shape
        .as_ref()
        .ok_or_else(|| bad("no shape (rlx needs static shapes)".into()))?;
    let mut out = Vec::new();
    for d in &shape.dim {
        out.push(match &d.value {
            Some(Value::DimValue(v)) => {
                usize::try_from(*v).map_err(|_| bad(format!("negative dimension {v}")))?
            }
            Some(Value::DimParam(p)) => *dims.get(p).ok_or_else(|| {
                bad(format!(
                    "symbolic dimension `{p}`: give its size (ImportOptions::dims)"
                ))
            })?,
            None => return Err(bad("a dimension with neither a size nor a name".into())),
        });
    }
    Ok(TensorType::new(dtype, out))
}

/// The import in progress.
pub(crate) struct Cx {
    pub b: GraphBuilder,
    vals: HashMap<String, ValueId>,
    /// Values known at import: initializers, bound inputs, `Constant`
    /// outputs, and what ops computed from them only at import.
    pub consts: HashMap<String, HostTensor>,
    /// Outputs of nodes that could not be mapped: their readers are
    /// skipped, so only the first cause is reported.
    poisoned: HashSet<String>,
    pub opset: i64,
    missing: Vec<Missing>,
}

impl Cx {
    /// The value of `name`, as a graph value (a known constant becomes a
    /// `constant` node the first time it is used as a tensor).
    pub fn value(&mut self, name: &str) -> Result<ValueId, String> {
        if let Some(&v) = self.vals.get(name) {
            return Ok(v);
        }
        if let Some(t) = self.consts.get(name).cloned() {
            let v = self.b.constant(t).map_err(|e| e.to_string())?;
            self.vals.insert(name.to_string(), v);
            return Ok(v);
        }
        Err(format!("value `{name}` is used before it is defined"))
    }

    fn node(&mut self, i: usize, node: &NodeProto) {
        if node.input.iter().any(|n| self.poisoned.contains(n)) {
            self.poisoned.extend(node.output.iter().cloned());
            return;
        }
        let opset = self.opset;
        let miss = |what: String| Missing {
            op_type: node.op_type().to_string(),
            node: if node.name().is_empty() {
                format!("#{i}")
            } else {
                format!("`{}`", node.name())
            },
            opset,
            what,
        };
        if !matches!(node.domain(), "" | "ai.onnx") {
            let m = miss(format!("domain `{}` is not supported", node.domain()));
            self.missing.push(m);
            self.poisoned.extend(node.output.iter().cloned());
            return;
        }
        match crate::ops::map(self, node) {
            Ok(outs) => {
                for (name, out) in node.output.iter().zip(outs) {
                    if name.is_empty() {
                        continue;
                    }
                    match out {
                        crate::ops::Out::Value(v) => {
                            self.vals.insert(name.clone(), v);
                        }
                        crate::ops::Out::Const(t) => {
                            self.consts.insert(name.clone(), t);
                        }
                    }
                }
            }
            Err(what) => {
                let m = miss(what);
                self.missing.push(m);
                self.poisoned.extend(node.output.iter().cloned());
            }
        }
    }
}
