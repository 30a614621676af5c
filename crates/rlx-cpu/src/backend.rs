//! The CPU as an rlx-runtime backend.

use crate::fast::FastProgram;
use crate::options::{scoped, CpuEngine, CpuOptions};
use crate::CpuError;
use rlx_ir::lir::Program;
use rlx_ir::HostTensor;
use rlx_ref::{compiled_out, kernel_names};
use rlx_runtime::{
    Backend, Claims, Device, Executable, KernelTime, NodeQuery, Profile, RuntimeError,
};
use std::sync::Arc;

/// The CPU backend, with the options its compiles use.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend {
    opts: CpuOptions,
}

impl CpuBackend {
    /// A backend whose compiles use `opts`.
    pub fn new(opts: CpuOptions) -> CpuBackend {
        CpuBackend { opts }
    }

    /// The options its compiles use.
    pub fn options(&self) -> CpuOptions {
        self.opts
    }

    /// Register the CPU backend, with default options, with rlx-runtime
    /// (a later registration replaces it: [`CpuBackend::register_with`]).
    pub fn register() {
        Self::register_with(CpuOptions::default());
    }

    /// Register a CPU backend whose compiles use `opts`, replacing any.
    pub fn register_with(opts: CpuOptions) {
        rlx_runtime::register_backend(Arc::new(CpuBackend::new(opts)));
    }
}

enum CpuExecutable {
    Fast(Box<FastProgram>),
    /// `CpuEngine::Reference`: every node on the reference kernels
    /// (for A/B comparisons and for bisecting a suspected fast-kernel bug).
    Reference(Program),
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
    fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        match self {
            CpuExecutable::Fast(p) => p.run(inputs),
            CpuExecutable::Reference(p) => rlx_ref::run_graph_refs(&p.graph, inputs),
        }
        .map_err(to_runtime)
    }

    /// Each op timed on the host clock around its kernel (natively only:
    /// wasm32 has no clock).
    fn profile(&self, inputs: &[&HostTensor]) -> Result<Profile, RuntimeError> {
        if cfg!(target_arch = "wasm32") {
            return Err(RuntimeError::Config(
                "the CPU profile needs a clock, which wasm32 lacks".into(),
            ));
        }
        let (r, rows) = rlx_ref::profile::measure(|| self.run(inputs));
        r?;
        let mut p = Profile::from_calls(
            std::iter::empty(),
            "CPU: host clock around each op's kernel",
        );
        p.kernels = rows
            .into_iter()
            .map(|(kernel, calls, s)| KernelTime {
                kernel,
                calls,
                ms: s * 1e3,
            })
            .collect();
        Ok(p)
    }

    /// Transposed weights are then made on the next run only.
    fn keep_resident(&self, inputs: &[usize]) -> bool {
        match self {
            CpuExecutable::Fast(p) => {
                p.keep_resident(inputs);
                true
            }
            CpuExecutable::Reference(_) => false,
        }
    }

    /// The engine reads inputs from the caller's tensors on every run;
    /// only what it prepared from a resident one (a transposed or packed
    /// copy) is made again.
    fn update_resident(
        &self,
        input: usize,
        _at: rlx_runtime::Runs,
        _values: &HostTensor,
    ) -> Result<(), RuntimeError> {
        if let CpuExecutable::Fast(p) = self {
            p.resident_changed(input);
        }
        Ok(())
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> Device {
        Device::Cpu
    }

    /// Every op with a kernel in this build, for every dtype the op admits;
    /// ops whose kernels a cargo feature removed are listed as compiled out.
    fn claims(&self) -> Claims {
        Claims {
            ops: kernel_names().into_iter().map(|n| (n, vec![])).collect(),
            compiled_out: compiled_out()
                .iter()
                .map(|(op, f)| (op.to_string(), f.to_string()))
                .collect(),
        }
    }

    fn kernel_name(&self, op: &str, dtype: rlx_ir::DType) -> String {
        format!("cpu::{op}<{dtype}>")
    }

    /// `cpu::fast::…` where the fast f32 engine has a kernel for the node,
    /// `cpu::ref::…` where the reference kernel runs it. The reference
    /// runs every node the claims admit, so nothing is refused here —
    /// except a fold rlx-opt made (`matmul_residual`, `attention_merged`,
    /// `conv_act`) or `attention_cached` that the fast engine cannot make
    /// for these operands:
    /// its decomposition (the product, attention or conv, then the add,
    /// the head merge or the activation) runs instead, whose parts may be
    /// fast, and the dispatch report says why.
    fn select(&self, node: &NodeQuery) -> Result<String, String> {
        let (op, dtype) = (node.op, node.dtype);
        if self.opts.engine == CpuEngine::Reference {
            return Ok(format!("cpu::ref::{op}<{dtype}>"));
        }
        let fold = matches!(
            op,
            "matmul_residual" | "attention_merged" | "conv_act" | "attention_cached"
        );
        if fold && crate::fast::select(op, node.inputs, node.attrs).is_none() {
            return Err(format!(
                "no fast {op} kernel for these {dtype} operands (matmul_residual: f32 only, no activation)"
            ));
        }
        Ok(scoped(self.opts, || {
            crate::fast::kernel_name(op, node.inputs, node.attrs, dtype)
        }))
    }

    fn compile(&self, program: Program) -> Result<Box<dyn Executable>, RuntimeError> {
        if self.opts.engine == CpuEngine::Reference {
            return Ok(Box::new(CpuExecutable::Reference(program)));
        }
        let fast = scoped(self.opts, || FastProgram::compile(program)).map_err(to_runtime)?;
        Ok(Box::new(CpuExecutable::Fast(Box::new(fast))))
    }
}
