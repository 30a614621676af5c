use crate::legalize::DispatchError;
use rlx_ir::lir::Program;
use rlx_ir::{DType, HostTensor, IrError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use thiserror::Error;

/// Where a graph runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Cpu,
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Device::Cpu => "cpu",
        })
    }
}

/// What a backend runs natively: op name → admitted dtypes (empty = all
/// the op admits).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Claims {
    pub ops: BTreeMap<String, Vec<DType>>,
}

impl Claims {
    pub fn claims(&self, op: &str, dtype: Option<DType>) -> bool {
        match self.ops.get(op) {
            None => false,
            Some(d) if d.is_empty() => true,
            Some(d) => dtype.is_none_or(|t| d.contains(&t)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Ir(#[from] IrError),
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
    /// The backend failed while running (the message names the op).
    #[error("{device}: {msg}")]
    Backend { device: Device, msg: String },
}

/// A compiled program, ready to run.
pub trait Executable {
    fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError>;
}

/// A device backend. Kept deliberately small.
pub trait Backend {
    fn device(&self) -> Device;
    /// The ops (and dtypes) this backend runs natively.
    fn claims(&self) -> Claims;
    /// Turn a legalized, scheduled program into something runnable.
    fn compile(&self, program: Program) -> Result<Box<dyn Executable>, RuntimeError>;
}
