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
    /// `cast` met a float with no value in the integer target dtype (NaN
    /// or an infinity); finite out-of-range values saturate instead (see
    /// the op's doc). `node` is the node's index in the graph that ran it,
    /// filled in by the interpreter and the fast engine.
    #[error("{}`cast` to {to}: element {index} is {value}, which no {to} value represents (NaN and infinities cannot be cast to an integer dtype; replace them first, e.g. with `where`)", .node.map(|n| format!("node {n}: ")).unwrap_or_default())]
    Cast {
        node: Option<usize>,
        index: usize,
        value: f64,
        to: rlx_ir::DType,
    },
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

impl CpuError {
    /// This error, raised by the kernel of node `node`: the node is recorded
    /// where the variant has room for it (a nested graph keeps the
    /// innermost node).
    pub fn at_node(self, node: usize) -> CpuError {
        match self {
            CpuError::Cast {
                node: None,
                index,
                value,
                to,
            } => CpuError::Cast {
                node: Some(node),
                index,
                value,
                to,
            },
            e => e,
        }
    }
}
