use rlx_ir::IrError;
use rlx_runtime::RuntimeError;
use thiserror::Error;

/// Every error the public API returns.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// A DSL operation was invalid; `at` is the caller's source location.
    #[error("{at}: `{op}`: {msg}")]
    Trace { op: String, msg: String, at: String },
    #[error(transparent)]
    Ir(#[from] IrError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Quantizing a graph ([`crate::quant`]) failed: what, and which layer.
    #[error("quantization: {0}")]
    Quant(String),
}
