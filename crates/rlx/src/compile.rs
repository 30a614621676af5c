//! `compile`: pick the device (one, or a routed fallback chain), legalize
//! under the dispatch policy, schedule to LIR, hand to the backend.

use crate::error::Error;
use rlx_cpu::CpuBackend;
use rlx_ir::lir::Program;
use rlx_ir::{Graph, HostTensor};
use rlx_runtime::{
    backend_for, legalize, Backend, Device, DeviceRouter, DispatchOptions, DispatchReport,
    Executable, Legalized, RuntimeError,
};
use std::sync::{Arc, Once};

/// Where to compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Exactly this device (compilation fails if the graph cannot run there).
    Device(Device),
    /// The router picks from a fallback chain; the report says which and why.
    Route(DeviceRouter),
    /// The chain in `RLX_DEVICE`, else the CPU.
    Auto,
}

impl From<Device> for Target {
    fn from(d: Device) -> Self {
        Target::Device(d)
    }
}
impl From<DeviceRouter> for Target {
    fn from(r: DeviceRouter) -> Self {
        Target::Route(r)
    }
}

/// Options of one compilation.
#[derive(Clone, Debug, Default)]
pub struct CompileOptions {
    /// Dispatch policy and per-op overrides (`RLX_DISPATCH` overrides these).
    pub dispatch: DispatchOptions,
    /// Print the dispatch report to stderr (also `RLX_DISPATCH_REPORT=1`).
    pub print_report: bool,
}

/// A graph compiled for one device.
pub struct Compiled {
    report: DispatchReport,
    program: Program,
    exe: Box<dyn Executable>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Compiled({} on {})",
            self.program.graph.name, self.report.device
        )
    }
}

impl Compiled {
    /// Run on host tensors, one per graph input, in order.
    pub fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Error> {
        Ok(self.exe.run(inputs)?)
    }
    /// How each node of the source graph runs, and any transfers/routing.
    pub fn dispatch_report(&self) -> &DispatchReport {
        &self.report
    }
    /// The scheduled program (after legalization).
    pub fn program(&self) -> &Program {
        &self.program
    }
    pub fn device(&self) -> Device {
        self.report.device
    }
}

/// Register the backends built into this crate (idempotent).
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(CpuBackend::register);
}

/// Compile for one device with default options.
pub fn compile(graph: &Graph, device: Device) -> Result<Compiled, Error> {
    compile_with(graph, device, &CompileOptions::default())
}

/// Verify, choose the backend, legalize (every node native, common-IR or
/// rewritten — else a `DispatchError` listing every unsupported node),
/// schedule and compile.
pub fn compile_with(
    graph: &Graph,
    target: impl Into<Target>,
    opts: &CompileOptions,
) -> Result<Compiled, Error> {
    init();
    graph.verify()?;
    let dispatch = opts.dispatch.effective().map_err(RuntimeError::Config)?;
    let route = |r: DeviceRouter| {
        r.route(graph, &dispatch)
            .map_err(|e| RuntimeError::Config(e.to_string()))
    };
    let (backend, legal) = match target.into() {
        Target::Device(d) => single(graph, d, &dispatch)?,
        Target::Route(r) => route(r)?,
        Target::Auto => match DeviceRouter::from_env() {
            Some(r) => route(r.map_err(RuntimeError::Config)?)?,
            None => single(graph, Device::Cpu, &dispatch)?,
        },
    };
    if opts.print_report || std::env::var("RLX_DISPATCH_REPORT").is_ok_and(|v| v == "1") {
        eprintln!("{}", legal.report);
    }
    let program = Program::from_graph(legal.graph);
    let exe = backend.compile(program.clone())?;
    Ok(Compiled {
        report: legal.report,
        program,
        exe,
    })
}

/// Legalize for exactly one device.
fn single(
    graph: &Graph,
    d: Device,
    dispatch: &DispatchOptions,
) -> Result<(Arc<dyn Backend>, Legalized), RuntimeError> {
    let be = backend_for(d)
        .ok_or_else(|| RuntimeError::Config(format!("no `{d}` backend in this build")))?;
    let l = legalize(graph, be.as_ref(), dispatch)?;
    Ok((be, l))
}
