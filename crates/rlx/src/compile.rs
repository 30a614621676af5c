//! `compile`: pick the device (one, or a routed fallback chain), legalize
//! under the dispatch policy, schedule to LIR, hand to the backend.

use crate::error::Error;
use crate::input_casts::InputCasts;
use rlx_cpu::{CpuBackend, CpuOptions};
use rlx_ir::lir::Program;
use rlx_ir::{Graph, HostTensor};
use rlx_opt::{MemoryReport, PipelineReport};
use rlx_runtime::{
    backend_for, legalize, Backend, Device, DeviceRouter, DispatchOptions, DispatchReport,
    Executable, Legalized, Profile, RuntimeError,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once, RwLock};

/// Where to compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Exactly this device (compilation fails if the graph cannot run there).
    Device(Device),
    /// The router picks from a fallback chain; the report says which and why.
    Route(DeviceRouter),
    /// The process's default route ([`set_default_route`]; the edge sets
    /// it from `RLX_DEVICE`), else the CPU.
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
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Dispatch policy and per-op overrides (the process-wide override,
    /// `rlx_runtime::policy::set_override` / `RLX_DISPATCH`, wins over these).
    pub dispatch: DispatchOptions,
    /// Run the MIR passes (simplify, CSE, constant folding, DCE, fusion).
    pub optimize: bool,
    /// Mixed precision: [`Amp::Autocast`] runs contractions in f16/bf16
    /// (the optimizer's autocast pass; the pass report says what moved).
    pub amp: Amp,
    /// Post-training quantization: `Ptq::Int(plan)` rewrites the dense
    /// layers to integer weights (and static int8 activations) first.
    pub ptq: Ptq,
    /// Print the dispatch report to stderr (also for every compile after
    /// [`set_print_reports`]`(true)`, which `RLX_DISPATCH_REPORT=1` sets).
    pub print_report: bool,
    /// Options of a CPU compile; `None`: the registered CPU backend's
    /// (the defaults, or those `rlx::env::apply` registered).
    pub cpu: Option<CpuOptions>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            dispatch: DispatchOptions::default(),
            optimize: true,
            amp: Amp::None,
            ptq: Ptq::None,
            print_report: false,
            cpu: None,
        }
    }
}

/// Automatic mixed precision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Amp {
    /// Keep every dtype as written.
    #[default]
    None,
    /// Autocast f32 graphs: matmuls, convolutions and attention in the
    /// policy's 16-bit dtype, softmax/norms/reductions/exp-log in f32,
    /// the rest following its inputs (see [`rlx_opt::autocast`]).
    Autocast(rlx_opt::Autocast),
}

impl Amp {
    /// Autocast with the default lists, computing in f16.
    pub fn f16() -> Self {
        Amp::Autocast(rlx_opt::Autocast::f16())
    }
    /// Autocast with the default lists, computing in bf16.
    pub fn bf16() -> Self {
        Amp::Autocast(rlx_opt::Autocast::bf16())
    }
    /// `none`, `f16` or `bf16` (the CLI's and the npm package's spelling).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "none" | "off" | "f32" => Ok(Amp::None),
            "f16" | "fp16" => Ok(Amp::f16()),
            "bf16" => Ok(Amp::bf16()),
            _ => Err(format!("mixed precision `{s}`: expected none, f16 or bf16")),
        }
    }
    /// The spelling [`Amp::parse`] takes back: `none`, `f16` or `bf16`.
    pub fn name(&self) -> String {
        match self {
            Amp::None => "none".into(),
            Amp::Autocast(a) => a.dtype().to_string(),
        }
    }
    /// The autocast policy, if any.
    pub fn policy(&self) -> Option<&rlx_opt::Autocast> {
        match self {
            Amp::None => None,
            Amp::Autocast(a) => Some(a),
        }
    }
}

/// Post-training quantization (the first step of the pipeline).
#[derive(Clone, Default)]
pub enum Ptq {
    /// No quantization.
    #[default]
    None,
    /// Integer dense layers ([`crate::quant`]): the plan rewrites the
    /// graph before anything else, so its weights are i8 inputs (pass
    /// [`quant::Plan::weight`](crate::quant::Plan::weight)'s values).
    Int(std::sync::Arc<crate::quant::Plan>),
}

impl PartialEq for Ptq {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Ptq::None, Ptq::None) => true,
            (Ptq::Int(a), Ptq::Int(b)) => std::sync::Arc::ptr_eq(a, b) || a == b,
            _ => false,
        }
    }
}

/// Short: the session cache keys on it (a plan's scheme, layers and a
/// hash of its grids, not its weights).
impl std::fmt::Debug for Ptq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ptq::None => write!(f, "None"),
            Ptq::Int(p) => write!(
                f,
                "Int({}, {:?}, {:016x})",
                p.scheme,
                p.sites.keys().collect::<Vec<_>>(),
                p.fingerprint()
            ),
        }
    }
}

/// A graph compiled for one device.
pub struct Compiled {
    report: DispatchReport,
    program: Program,
    passes: Option<PipelineReport>,
    memory: MemoryReport,
    exe: Box<dyn Executable>,
    casts: InputCasts,
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
        let refs: Vec<&HostTensor> = inputs.iter().collect();
        self.run_refs(&refs)
    }

    /// [`Compiled::run`] on borrowed inputs (no copies of large tensors).
    pub fn run_refs(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, Error> {
        let conv = self.casts.convert(inputs)?;
        Ok(self.exe.run(&InputCasts::apply(inputs, &conv))?)
    }

    /// [`Compiled::run_refs`] without blocking the thread (the browser's
    /// WebGPU runs only this way; other backends run `run_refs`).
    pub async fn run_refs_async(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, Error> {
        let conv = self.casts.convert(inputs)?;
        Ok(self
            .exe
            .run_async(&InputCasts::apply(inputs, &conv))
            .await?)
    }

    /// Run on `inputs` and time each kernel, on whatever device this was
    /// compiled for (the profile says how that backend measured).
    pub fn profile(&self, inputs: &[&HostTensor]) -> Result<Profile, Error> {
        let conv = self.casts.convert(inputs)?;
        Ok(self.exe.profile(&InputCasts::apply(inputs, &conv))?)
    }

    /// Promise that graph inputs `inputs` (by index; typically the
    /// weights) keep the same values on every later run, so the backend
    /// may prepare them once — the CPU engine transposes weights read as
    /// `wᵀ` on the next run only. Idempotent; to run with other values for
    /// those inputs, compile again. Returns whether the backend uses the
    /// promise.
    pub fn keep_resident(&self, inputs: &[usize]) -> bool {
        self.casts.keep_resident(inputs);
        self.exe.keep_resident(inputs)
    }
    /// Resident input `input` (see [`Compiled::keep_resident`]) changed
    /// at `at` to `values`: the caller's tensor, passed on later runs,
    /// changed the same way, and the backend's copy follows (a GPU writes
    /// only those elements; a decoder's key/value cache stays on the
    /// device). An error if the runs do not fit the input or the dtype
    /// differs.
    pub fn update_resident(
        &self,
        input: usize,
        at: crate::Runs,
        values: &HostTensor,
    ) -> Result<(), Error> {
        let g = &self.program.graph;
        let ty = g.inputs.get(input).map(|&v| g.ty(v)).ok_or_else(|| {
            RuntimeError::Config(format!(
                "update_resident: no input {input} (the program takes {})",
                g.inputs.len()
            ))
        })?;
        at.check(ty.shape.numel(), values.shape().numel())
            .map_err(|e| RuntimeError::Config(format!("update_resident: input {input}: {e}")))?;
        let converted = self.casts.updated(input, values)?;
        let values = converted.as_ref().unwrap_or(values);
        if values.dtype() != ty.dtype {
            return Err(RuntimeError::Config(format!(
                "update_resident: input {input} is {}, the values are {}",
                ty.dtype,
                values.dtype()
            ))
            .into());
        }
        Ok(self.exe.update_resident(input, at, values)?)
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
    /// What the MIR passes and fusion did (`None` when `optimize` was off).
    pub fn pass_report(&self) -> Option<&PipelineReport> {
        self.passes.as_ref()
    }
    /// The memory plan: arena size, peak, buffers, views.
    pub fn memory_report(&self) -> &MemoryReport {
        &self.memory
    }
    /// Kernels in the schedule.
    pub fn kernel_count(&self) -> usize {
        self.program.steps.len()
    }
}

static DEFAULT_ROUTE: RwLock<Option<DeviceRouter>> = RwLock::new(None);
static PRINT_REPORTS: AtomicBool = AtomicBool::new(false);

/// Sets (or with `None` clears) the route [`Target::Auto`] takes; returns
/// the previous one. Process-wide.
pub fn set_default_route(r: Option<DeviceRouter>) -> Option<DeviceRouter> {
    // A poisoned lock still holds a valid route.
    let mut g = DEFAULT_ROUTE.write().unwrap_or_else(|e| e.into_inner());
    std::mem::replace(&mut *g, r)
}

fn default_route() -> Option<DeviceRouter> {
    DEFAULT_ROUTE
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Print the dispatch report of every compile to stderr (process-wide);
/// returns the previous setting.
pub fn set_print_reports(on: bool) -> bool {
    PRINT_REPORTS.swap(on, Ordering::Relaxed)
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

/// Output elements from which constant folding evaluates an elementwise or
/// layout node on the fast CPU engine.
const FAST_FOLD_ELEMENTS: usize = 1 << 16;

/// Evaluate a graph for constant folding (the optimizer hands it one node
/// whose inputs are constants): on the CPU reference, except a large
/// elementwise or layout node — a weight table's cast, dequantization or
/// transpose, millions of values — which runs on the fast CPU engine. The
/// reference computes through f64 and index maps, which took 2.5 s and
/// 0.7 GB to fold an int8 MiniLM's tables; the fast engine gives what the
/// node would give at run time on the CPU anyway. (Which evaluator folded
/// a constant changes no kernel choice, so nothing here is a fallback the
/// dispatch report must show: a node the fast engine does not take is
/// folded by the reference, as before.)
fn cpu_eval(g: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    use rlx_ir::Category as C;
    let big = g
        .outputs
        .iter()
        .map(|&o| g.ty(o).shape.numel())
        .sum::<usize>()
        >= FAST_FOLD_ELEMENTS;
    let simple = g.nodes.len() == 1
        && matches!(
            g.nodes[0].op.def().category,
            C::Unary | C::Binary | C::Ternary | C::Shape
        );
    if big && simple {
        let opts = CompileOptions {
            optimize: false,
            ..CompileOptions::default()
        };
        if let Ok(c) = compile_with(g, Device::Cpu, &opts) {
            if let Ok(out) = c.run(inputs) {
                return Ok(out);
            }
        }
    }
    rlx_cpu::run_graph(g, inputs).map_err(|e| e.to_string())
}

/// The compile pipeline: verify → optimize (simplify, CSE, constant
/// folding, DCE, fusion) → AMP hook → PTQ hook → legalize for the device
/// (every node native, common-IR or rewritten — else a `DispatchError`
/// listing every unsupported node) → memory plan → LIR → backend.
pub fn compile_with(
    graph: &Graph,
    target: impl Into<Target>,
    opts: &CompileOptions,
) -> Result<Compiled, Error> {
    let planned = plan_with(graph, target, opts)?;
    let exe = planned.backend.compile(planned.program.clone())?;
    Ok(planned.finish(exe))
}

/// [`compile_with`] where building the executable must not block (the
/// browser's WebGPU: `Backend::compile_async`). Elsewhere the same as
/// `compile_with`.
pub async fn compile_with_async(
    graph: &Graph,
    target: impl Into<Target>,
    opts: &CompileOptions,
) -> Result<Compiled, Error> {
    let planned = plan_with(graph, target, opts)?;
    let exe = planned
        .backend
        .compile_async(planned.program.clone())
        .await?;
    Ok(planned.finish(exe))
}

/// A graph taken through the whole pipeline up to the backend: legalized,
/// planned, scheduled. [`compile_with`] is `plan_with` + the backend's
/// `compile`; callers that must build the executable themselves (the
/// browser, where a GPU compile is async) stop here and call
/// [`Planned::finish`].
pub struct Planned {
    pub report: DispatchReport,
    pub program: Program,
    pub passes: Option<PipelineReport>,
    pub memory: MemoryReport,
    /// The backend the graph was legalized for.
    pub backend: Arc<dyn Backend>,
}

impl Planned {
    /// Attach the executable built from `self.program`.
    pub fn finish(self, exe: Box<dyn Executable>) -> Compiled {
        let casts = InputCasts::new(
            self.passes
                .as_ref()
                .and_then(|p| p.autocast.as_ref())
                .map(|a| a.narrowed.iter().map(|(i, _, d)| (*i, *d)).collect())
                .unwrap_or_default(),
        );
        Compiled {
            report: self.report,
            program: self.program,
            passes: self.passes,
            memory: self.memory,
            exe,
            casts,
        }
    }
}

/// The compile pipeline without the last step (see [`Planned`]).
pub fn plan_with(
    graph: &Graph,
    target: impl Into<Target>,
    opts: &CompileOptions,
) -> Result<Planned, Error> {
    init();
    graph.verify()?;
    let quantized;
    let graph = match &opts.ptq {
        Ptq::None => graph,
        Ptq::Int(plan) => {
            quantized = plan.apply(graph)?;
            &quantized
        }
    };
    let amp = opts.amp.policy();
    let (optimized, passes) = if opts.optimize {
        let (g, r) = rlx_opt::compile_pipeline_with(graph, cpu_eval, amp)
            .map_err(|e| opt_error("optimizer", e))?;
        (g, Some(r))
    } else if let Some(ac) = amp {
        let (g, _) = ac.apply(graph).map_err(|e| opt_error("autocast", e))?;
        (g, None)
    } else {
        (graph.clone(), None)
    };
    let graph = &optimized;
    let dispatch = opts.dispatch.effective().map_err(RuntimeError::Config)?;
    let route = |r: DeviceRouter| {
        r.route(graph, &dispatch)
            .map_err(|e| RuntimeError::Config(e.to_string()))
    };
    let (backend, legal) = match target.into() {
        Target::Device(d) => single(graph, d, &dispatch, opts.cpu)?,
        Target::Route(r) => route(r)?,
        Target::Auto => match default_route() {
            Some(r) => route(r)?,
            None => single(graph, Device::Cpu, &dispatch, opts.cpu)?,
        },
    };
    // A routed compile legalized on the registered CPU backend; the
    // program is built with the options asked for (only kernel names in
    // the report can differ).
    let backend = match opts.cpu {
        Some(c) if backend.device() == Device::Cpu => Arc::new(CpuBackend::new(c)),
        _ => backend,
    };
    if opts.print_report || PRINT_REPORTS.load(Ordering::Relaxed) {
        eprintln!("{}", legal.report);
    }
    let (program, memory) =
        rlx_opt::plan_with_report(legal.graph).map_err(|e| opt_error("memory planner", e))?;
    Ok(Planned {
        report: legal.report,
        program,
        passes,
        memory,
        backend,
    })
}

/// An optimizer or planner error. A limit (a tensor or the arena over its
/// bound) stays typed, so callers can tell "too big for the limits in
/// force" from a bug.
fn opt_error(stage: &str, e: rlx_opt::OptError) -> Error {
    match e {
        rlx_opt::OptError::Ir(e @ rlx_ir::IrError::Limit(_)) => Error::Ir(e),
        e => RuntimeError::Config(format!("{stage}: {e}")).into(),
    }
}

/// Legalize for exactly one device (the CPU with `cpu`, when given).
fn single(
    graph: &Graph,
    d: Device,
    dispatch: &DispatchOptions,
    cpu: Option<CpuOptions>,
) -> Result<(Arc<dyn Backend>, Legalized), RuntimeError> {
    let be: Arc<dyn Backend> = match cpu {
        Some(c) if d == Device::Cpu => Arc::new(CpuBackend::new(c)),
        _ => backend_for(d)
            .ok_or_else(|| RuntimeError::Config(format!("no `{d}` backend in this build")))?,
    };
    let l = legalize(graph, be.as_ref(), dispatch)?;
    Ok((be, l))
}
