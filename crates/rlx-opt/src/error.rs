//! Optimizer errors.

use rlx_ir::IrError;
use thiserror::Error;

/// Why a pass or the memory planner failed. A pass never fails on a valid
/// graph unless it has a bug (or an evaluator/rule breaks its contract);
/// these errors say which pass, rule or value was involved.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum OptError {
    /// The IR refused something (a rebuilt node failed inference or the
    /// result failed verification).
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A pass produced something inconsistent.
    #[error("pass `{pass}`: {msg}")]
    Pass {
        /// The pass's name.
        pass: String,
        /// What went wrong.
        msg: String,
    },
    /// A rewrite rule returned values that do not match the node it replaced.
    #[error("rule `{rule}` on `{op}`: {msg}")]
    Rule {
        /// The rule's name.
        rule: String,
        /// The op of the node it rewrote.
        op: String,
        /// What went wrong.
        msg: String,
    },
    /// Memory planning failed.
    #[error("memory planning: {0}")]
    Plan(String),
}

impl OptError {
    /// A [`OptError::Pass`] error.
    pub fn pass(pass: impl Into<String>, msg: impl Into<String>) -> Self {
        OptError::Pass {
            pass: pass.into(),
            msg: msg.into(),
        }
    }
}
