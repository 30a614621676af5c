//! # rlx
//!
//! The public API: a lazy tensor DSL that traces to MIR, and [`compile`],
//! which legalizes a graph for a device (every node gets a dispatch path,
//! or compilation fails listing the nodes that cannot run) and returns a
//! [`Compiled`] program to [`Compiled::run`] on host tensors.
//!
//! ```
//! use rlx::{DType, HostTensor, Trace};
//! let t = Trace::new("mlp");
//! let x = t.input("x", DType::F32, [2, 3]);
//! let w = t.tensor(&[1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], [3, 2]).unwrap();
//! let b = t.tensor(&[0.5f32, -5.0], [2]).unwrap();
//! let y = (x.matmul(&w).unwrap() + &b).relu();
//! let graph = t.finish(&[&y]).unwrap();
//! let model = rlx::compile(&graph, rlx::Device::Cpu).unwrap();
//! let out = model.run(&[HostTensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]).unwrap()]).unwrap();
//! assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![4.5, 0.0, 10.5, 6.0]);
//! ```
#![forbid(unsafe_code)]

// Native only: wasm32 has no `Instant`; in the browser the npm package
// times the same graphs in JS (`rlx.calibrate()`, npm/src/calibrate.js).
#[cfg(not(target_arch = "wasm32"))]
mod calibrate;
mod compile;
pub mod conformance;
mod dsl;
pub mod env;
mod error;
mod input_casts;
pub mod quant;
pub use input_casts::narrow_input;
mod session;

#[cfg(not(target_arch = "wasm32"))]
pub use calibrate::calibrate;
pub use compile::{
    compile, compile_with, compile_with_async, init, plan_with, set_default_route,
    set_print_reports, Amp, CompileOptions, Compiled, Planned, Ptq, Target,
};
pub use dsl::{Tensor, Trace};
pub use error::Error;
pub use rlx_cpu::{CpuEngine, CpuOptions};
pub use rlx_ir as ir;
pub use rlx_ir::{Attrs, DType, Graph, HostTensor, Shape, TensorType};
pub use rlx_opt as opt;
pub use rlx_runtime::options::WgpuOptions;
pub use rlx_runtime::{
    calibration, clear_calibrations, set_calibration, Calibration, CostSource, Device,
    DeviceRouter, DispatchError, DispatchOptions, DispatchPath, DispatchReport, KernelTime, Policy,
    Profile, Runs, RuntimeError,
};
pub use session::{CacheStats, Session};

/// Adding ops from outside the core crates.
pub mod custom {
    pub use rlx_cpu::{register_kernel, CpuError, Kernel, KernelCx};
    pub use rlx_runtime::{register_backend, Backend, Claims, Executable};

    /// Registered backends, CPU first then by device name.
    pub fn backends_sorted() -> Vec<std::sync::Arc<dyn Backend>> {
        crate::init();
        let mut v = rlx_runtime::backends();
        v.sort_by_key(|b| b.device());
        v
    }

    /// Does a structural rewrite exist for `op`?
    pub fn has_rewrite(op: &str) -> bool {
        rlx_runtime::rewrite::rewrites_for(op).next().is_some()
    }
    pub use rlx_ir::op::{DecomposeFn, InferFn};
    pub use rlx_ir::{Arity, Category, Grad, InPlace, InferCx, Lowering, Op, OpDef};

    /// Register a custom op and, optionally, its CPU kernel. Without a
    /// kernel the op runs through its decomposition (which it then needs);
    /// with neither, compiling a graph that uses it fails with a
    /// `DispatchError` naming the node.
    pub fn register(def: OpDef, cpu: Option<Kernel>) -> Result<Op, crate::Error> {
        let op = rlx_ir::register_op(def)?;
        if let Some(k) = cpu {
            register_kernel(def.name, k);
        }
        Ok(op)
    }
}
