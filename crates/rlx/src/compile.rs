//! `compile`: legalize for a device, schedule to LIR, hand to the backend.

use crate::error::Error;
use rlx_cpu::CpuBackend;
use rlx_ir::lir::Program;
use rlx_ir::{Graph, HostTensor};
use rlx_runtime::{legalize, Backend, Device, DispatchReport, Executable};

/// Options of one compilation.
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Print the dispatch report to stderr (also enabled by `RLX_DISPATCH_REPORT=1`).
    pub print_report: bool,
}

/// A graph compiled for one device.
pub struct Compiled {
    device: Device,
    report: DispatchReport,
    program: Program,
    exe: Box<dyn Executable>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Compiled({} on {})",
            self.program.graph.name, self.device
        )
    }
}

impl Compiled {
    /// Run on host tensors, one per graph input, in order.
    pub fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Error> {
        Ok(self.exe.run(inputs)?)
    }
    /// How each node of the source graph runs.
    pub fn dispatch_report(&self) -> &DispatchReport {
        &self.report
    }
    /// The scheduled program (after legalization).
    pub fn program(&self) -> &Program {
        &self.program
    }
    pub fn device(&self) -> Device {
        self.device
    }
}

fn backend(device: Device) -> Box<dyn Backend> {
    match device {
        Device::Cpu => Box::new(CpuBackend),
    }
}

/// Compile with default options.
pub fn compile(graph: &Graph, device: Device) -> Result<Compiled, Error> {
    compile_with(graph, device, &CompileOptions::default())
}

/// Verify, legalize (native or common-IR per node, else a `DispatchError`
/// listing every unsupported node), schedule, and compile for `device`.
pub fn compile_with(
    graph: &Graph,
    device: Device,
    opts: &CompileOptions,
) -> Result<Compiled, Error> {
    graph.verify()?;
    let be = backend(device);
    let (lowered, report) =
        legalize(graph, device, &be.claims()).map_err(rlx_runtime::RuntimeError::from)?;
    if opts.print_report || std::env::var("RLX_DISPATCH_REPORT").is_ok_and(|v| v == "1") {
        eprintln!("dispatch report for `{}`:\n{report}", graph.name);
    }
    let program = Program::from_graph(lowered);
    let exe = be.compile(program.clone())?;
    Ok(Compiled {
        device,
        report,
        program,
        exe,
    })
}
