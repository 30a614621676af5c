//! What an ONNX file declares, read without importing it: inputs and
//! outputs with their declared (possibly symbolic) shapes, the op
//! histogram, opset, producer and metadata — for `rlx inspect` and for
//! choosing the `dims` / `shapes` an import needs.

use crate::proto::{self, ModelProto};
use crate::OnnxError;
use prost::Message;
use std::collections::BTreeMap;

/// A model's declarations.
#[derive(Clone, Debug)]
pub struct Description {
    pub opset: i64,
    pub producer: String,
    /// Graph inputs that are not initializers: name, declared type
    /// (`f32[batch,3,640,640]`; `?` for a dimension with neither size nor name).
    pub inputs: Vec<(String, String)>,
    pub outputs: Vec<(String, String)>,
    pub initializers: usize,
    pub nodes: usize,
    /// `op_type` (with its domain when not the default) → count, sub-graphs
    /// included.
    pub op_types: BTreeMap<String, usize>,
    pub metadata: Vec<(String, String)>,
}

fn declared(vi: &proto::ValueInfoProto) -> String {
    use proto::tensor_shape_proto::dimension::Value;
    use proto::type_proto::Value as T;
    let Some(T::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return "(not a tensor)".into();
    };
    let dtype = crate::tensor::dtype_of(t.elem_type())
        .map(|d| d.to_string())
        .unwrap_or_else(|_| format!("elem_type {}", t.elem_type()));
    let Some(shape) = &t.shape else {
        return format!("{dtype}[no shape]");
    };
    let dims: Vec<String> = shape
        .dim
        .iter()
        .map(|d| match &d.value {
            Some(Value::DimValue(v)) if *v >= 0 => v.to_string(),
            Some(Value::DimParam(p)) => p.clone(),
            _ => "?".into(),
        })
        .collect();
    format!("{dtype}[{}]", dims.join(","))
}

fn count_ops(g: &proto::GraphProto, out: &mut BTreeMap<String, usize>, depth: usize) {
    // Sub-graphs nest; a hostile file cannot make this recurse forever.
    if depth > rlx_ir::limits::limits().max_nesting_depth {
        return;
    }
    for n in &g.node {
        let key = match n.domain() {
            "" | "ai.onnx" => n.op_type().to_string(),
            d => format!("{d}.{}", n.op_type()),
        };
        *out.entry(key).or_default() += 1;
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                count_ops(sub, out, depth + 1);
            }
        }
    }
}

/// Describe an ONNX model from its bytes.
pub fn describe(bytes: &[u8]) -> Result<Description, OnnxError> {
    // A .rten model is described as the ONNX model it reads back as.
    let model = if crate::rten::is_rten(bytes) {
        crate::rten::to_onnx(bytes)?
    } else {
        ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?
    };
    let g = model
        .graph
        .as_ref()
        .ok_or_else(|| OnnxError::Invalid("the model has no graph".into()))?;
    let inits: std::collections::HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let mut op_types = BTreeMap::new();
    count_ops(g, &mut op_types, 0);
    Ok(Description {
        opset: model
            .opset_import
            .iter()
            .find(|o| matches!(o.domain(), "" | "ai.onnx"))
            .map_or(0, |o| o.version()),
        producer: format!("{} {}", model.producer_name(), model.producer_version())
            .trim()
            .to_string(),
        inputs: g
            .input
            .iter()
            .filter(|v| !inits.contains(v.name()))
            .map(|v| (v.name().to_string(), declared(v)))
            .collect(),
        outputs: g
            .output
            .iter()
            .map(|v| (v.name().to_string(), declared(v)))
            .collect(),
        initializers: g.initializer.len(),
        nodes: g.node.len(),
        op_types,
        metadata: model
            .metadata_props
            .iter()
            .map(|p| (p.key().to_string(), p.value().to_string()))
            .collect(),
    })
}
