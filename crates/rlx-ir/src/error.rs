//! Typed IR errors. Each says where (node, input, line) and what was expected.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum IrError {
    /// A node failed verification or shape/dtype inference.
    #[error("node {node} (`{op}`): {msg}")]
    Node {
        node: usize,
        op: String,
        msg: String,
    },
    /// An attribute is missing, unknown, or of the wrong kind.
    #[error("op `{op}`, attribute `{attr}`: {msg}")]
    Attr {
        op: String,
        attr: String,
        msg: String,
    },
    /// No op of this name is registered.
    #[error("unknown op `{0}` (run `rlx ops` for the list; custom ops must be registered first)")]
    UnknownOp(String),
    /// An op name is already taken.
    #[error("op `{0}` is already registered")]
    DuplicateOp(String),
    /// The text IR could not be parsed.
    #[error("line {line}, column {col}: {msg}")]
    Parse {
        line: usize,
        col: usize,
        msg: String,
    },
    /// An element of a tensor literal in the JSON form does not fit its
    /// dtype (`index` is its flat position; for c64, the pair's). The text
    /// form reports the same as a [`IrError::Parse`] at the element.
    #[error("tensor literal element {index}: {error}")]
    Literal {
        index: usize,
        #[source]
        error: crate::literal::LiteralError,
    },
    /// A bound of [`mod@crate::limits`] was exceeded.
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
    /// Any other structural error.
    #[error("{0}")]
    Msg(String),
}

impl IrError {
    pub fn msg(m: impl Into<String>) -> Self {
        IrError::Msg(m.into())
    }
}

pub type Result<T, E = IrError> = std::result::Result<T, E>;
