use rlx_ir::IrError;
use thiserror::Error;

/// Errors raised while running on the CPU.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CpuError {
    #[error(transparent)]
    Ir(#[from] IrError),
    /// The op failed on these inputs (index out of range, integer division
    /// by zero, loop limit exceeded ...).
    #[error("op `{op}`: {msg}")]
    Runtime { op: String, msg: String },
    /// No kernel is registered for this op.
    #[error("the CPU backend has no kernel for `{0}`; register one with rlx_cpu::register_kernel or decompose the op")]
    NoKernel(String),
    /// The caller passed inputs that do not match the graph.
    #[error("input {index} (`{name}`): expected {expected}, got {got}")]
    Input {
        index: usize,
        name: String,
        expected: String,
        got: String,
    },
}
