use rlx_ir::IrError;
use thiserror::Error;

/// One thing the importer cannot map: the node, its op type and opset,
/// and what is missing (the op, an attribute value, an input that must be
/// a constant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub op_type: String,
    /// The node's name, or `#index` when it has none.
    pub node: String,
    pub opset: i64,
    pub what: String,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node {} `{}` (opset {}): {}",
            self.node, self.op_type, self.opset, self.what
        )
    }
}

/// Errors of ONNX import.
#[derive(Debug, Error)]
pub enum OnnxError {
    /// The bytes are not an ONNX model (protobuf decoding failed).
    #[error("not an ONNX model: {0}")]
    Decode(String),
    /// The model is malformed (a value used before it is defined, a
    /// tensor whose data does not match its shape, ...).
    #[error("invalid ONNX model: {0}")]
    Invalid(String),
    /// Nodes the importer cannot map, every one of them.
    #[error("{} node(s) cannot be imported:\n  {}", .0.len(), .0.iter().map(|m| m.to_string()).collect::<Vec<_>>().join("\n  "))]
    Unsupported(Vec<Missing>),
    #[error(transparent)]
    Ir(#[from] IrError),
}
