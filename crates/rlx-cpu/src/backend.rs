//! The CPU as an rlx-runtime backend.

use crate::error::CpuError;
use crate::interp::run_graph;
use crate::kernels::kernel_names;
use rlx_ir::lir::Program;
use rlx_ir::HostTensor;
use rlx_runtime::{Backend, Claims, Device, Executable, RuntimeError};

/// The reference CPU backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

struct CpuExecutable {
    program: Program,
}

fn to_runtime(e: CpuError) -> RuntimeError {
    match e {
        CpuError::Ir(e) => RuntimeError::Ir(e),
        e => RuntimeError::Backend {
            device: Device::Cpu,
            msg: e.to_string(),
        },
    }
}

impl Executable for CpuExecutable {
    fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        run_graph(&self.program.graph, inputs).map_err(to_runtime)
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> Device {
        Device::Cpu
    }

    /// Every op with a kernel, for every dtype the op admits.
    fn claims(&self) -> Claims {
        Claims {
            ops: kernel_names().into_iter().map(|n| (n, vec![])).collect(),
        }
    }

    fn compile(&self, program: Program) -> Result<Box<dyn Executable>, RuntimeError> {
        Ok(Box::new(CpuExecutable { program }))
    }
}
