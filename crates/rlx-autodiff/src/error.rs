//! Typed errors of the transforms.

use rlx_ir::IrError;

#[derive(Debug, thiserror::Error)]
pub enum AdError {
    /// A gradient was asked to flow through an op that has none (wrap the
    /// value in `stop_gradient` to cut the path on purpose).
    #[error("op `{op}` (node {node}) is not differentiable, but a gradient must flow through it; wrap its input in `stop_gradient` if that is intended")]
    NotDifferentiable { op: String, node: usize },
    /// The registry marks the op differentiable but no rule is written yet.
    #[error("op `{op}` (node {node}) has no differentiation rule yet")]
    NoRule { op: String, node: usize },
    /// A rule exists but not for these attributes (e.g. pad mode `reflect`).
    #[error("op `{op}`: {msg}")]
    Unsupported { op: String, msg: String },
    #[error("{0}")]
    Arg(String),
    #[error(transparent)]
    Ir(#[from] IrError),
    #[error(transparent)]
    Rlx(#[from] rlx::Error),
}

pub type Result<T, E = AdError> = std::result::Result<T, E>;
