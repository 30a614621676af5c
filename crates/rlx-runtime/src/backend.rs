//! The backend contract: claims, per-node selection, compile, run.

use crate::device::Device;
use crate::legalize::DispatchError;
use crate::profile::Profile;
use rlx_ir::lir::Program;
use rlx_ir::{Attrs, DType, HostTensor, IrError, TensorType};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
#[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
use std::sync::{OnceLock, RwLock};
use thiserror::Error;

/// What a backend runs natively, and what this build compiled out.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Claims {
    /// op name → dtypes it runs natively (empty: every dtype the op admits).
    pub ops: BTreeMap<String, Vec<DType>>,
    /// op name → the cargo feature that would have given it a kernel.
    pub compiled_out: BTreeMap<String, String>,
}

impl Claims {
    /// Claim every op in `ops` for every dtype.
    pub fn all_of<'a>(ops: impl IntoIterator<Item = &'a str>) -> Claims {
        Claims {
            ops: ops.into_iter().map(|o| (o.to_string(), vec![])).collect(),
            compiled_out: BTreeMap::new(),
        }
    }

    /// `Ok` if `op` runs natively for `dtype`, else why not.
    pub fn native(&self, op: &str, dtype: DType) -> Result<(), String> {
        match self.ops.get(op) {
            Some(d) if d.is_empty() || d.contains(&dtype) => Ok(()),
            Some(d) => {
                let names: Vec<_> = d.iter().map(|t| t.name()).collect();
                Err(format!(
                    "claimed only for {}, not {dtype}",
                    names.join(", ")
                ))
            }
            None => match self.compiled_out.get(op) {
                Some(f) => Err(format!(
                    "compiled out of this build (enable cargo feature `{f}`)"
                )),
                None => Err("no kernel on this backend".into()),
            },
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
    /// The device was lost (a driver reset, `GPUDevice.destroy()`, the
    /// browser reclaiming it): programs compiled for it cannot run any
    /// more; compiling again gets a new device.
    #[error("{device}: the device was lost ({why}); compile again to get a new device")]
    DeviceLost { device: Device, why: String },
    /// Bad configuration (an environment variable, a device chain).
    #[error("{0}")]
    Config(String),
}

/// Elements of a tensor in row-major order: `count` runs of `len`
/// elements, the first starting at element `start` and each `stride`
/// elements after the one before. A decoder's key cache
/// (heads, capacity, head_dim) gains, per step, one run per head:
/// `Runs { start: filled * head_dim, count: heads, len: new * head_dim,
/// stride: capacity * head_dim }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Runs {
    pub start: usize,
    pub count: usize,
    pub len: usize,
    pub stride: usize,
}

impl Runs {
    /// All `n` elements of a tensor, as one run.
    pub fn whole(n: usize) -> Runs {
        Runs {
            start: 0,
            count: 1,
            len: n,
            stride: n,
        }
    }

    /// Elements covered.
    pub fn numel(&self) -> usize {
        self.count * self.len
    }

    /// The first element of each run.
    pub fn starts(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.count).map(|r| self.start + r * self.stride)
    }

    /// `Ok` if the runs lie inside a tensor of `n` elements, do not
    /// overlap, and `values` elements fill them exactly.
    pub fn check(&self, n: usize, values: usize) -> Result<(), String> {
        let end = self
            .count
            .checked_sub(1)
            .and_then(|c| c.checked_mul(self.stride))
            .and_then(|x| x.checked_add(self.start))
            .and_then(|x| x.checked_add(self.len));
        if self.count > 1 && self.stride < self.len {
            return Err(format!(
                "runs of {} elements every {} overlap",
                self.len, self.stride
            ));
        }
        match end {
            Some(e) if e <= n && values == self.numel() => Ok(()),
            Some(e) if e <= n => Err(format!(
                "{} values for {} runs of {} elements",
                values, self.count, self.len
            )),
            _ => Err(format!("{self:?} reaches past the tensor's {n} elements")),
        }
    }
}

/// What the asynchronous entry points return: a boxed future, not `Send`
/// (the browser's WebGPU futures are not).
pub type LocalFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>;

/// `Send + Sync`, except in the threaded browser build (wasm32 with
/// `atomics`), where WebGPU's handles are JavaScript objects tied to the
/// thread that made them: there executables and backends stay on the
/// page's thread (the CPU engine's workers run only its kernels), and the
/// compiler holds them to it.
#[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
pub trait MaybeSendSync: Send + Sync {}
#[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
impl<T: Send + Sync + ?Sized> MaybeSendSync for T {}
/// See the other definition.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub trait MaybeSendSync {}
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
impl<T: ?Sized> MaybeSendSync for T {}

/// A compiled program, ready to run.
pub trait Executable: MaybeSendSync {
    /// Run on host tensors; transfers are nodes of the program, so the
    /// executable performs exactly the ones the dispatch report lists.
    /// Inputs are borrowed, so large ones (weights) are never copied.
    fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, RuntimeError>;
    /// The caller promises that graph inputs `inputs` (weights, by index)
    /// keep their values on every later run, so the backend may prepare
    /// them once (transpose, pack, upload) and reuse that. Returns whether
    /// this backend does anything with the promise.
    fn keep_resident(&self, inputs: &[usize]) -> bool {
        let _ = inputs;
        false
    }
    /// Resident input `input` changed at `at` to `values` (same dtype,
    /// `at.numel()` elements): the host tensor the caller passes on later
    /// runs changed the same way, and this brings the backend's prepared
    /// copy up to date — a GPU writes just those elements into its
    /// buffer, so a decoder's key/value cache stays on the device and each
    /// step copies only its new positions. A backend that keeps no copy of
    /// the input does nothing; one that cannot update a copy in place drops
    /// it and prepares it again on the next run. The default refuses, so a
    /// backend that keeps inputs resident must say how it updates them.
    fn update_resident(
        &self,
        input: usize,
        at: Runs,
        values: &HostTensor,
    ) -> Result<(), RuntimeError> {
        let _ = (at, values);
        Err(RuntimeError::Config(format!(
            "input {input}: this backend cannot update a resident input"
        )))
    }
    /// [`Executable::run`] without blocking the thread: the browser cannot
    /// block on a GPU readback, so WebGPU runs only this way there. The
    /// default runs `run`; every executable has both.
    fn run_async<'a>(
        &'a self,
        inputs: &'a [&'a HostTensor],
    ) -> LocalFuture<'a, Result<Vec<HostTensor>, RuntimeError>> {
        Box::pin(std::future::ready(self.run(inputs)))
    }
    /// Run on `inputs` and time each kernel (the profile says how: the
    /// backends measure differently). A backend that cannot time its
    /// kernels says so with an error; nothing is guessed.
    fn profile(&self, inputs: &[&HostTensor]) -> Result<Profile, RuntimeError> {
        let _ = inputs;
        Err(RuntimeError::Config(
            "this backend cannot time its kernels".into(),
        ))
    }
}

/// One node, as legalization asks a backend about it ([`Backend::select`]).
pub struct NodeQuery<'a> {
    pub op: &'a str,
    /// The input types.
    pub inputs: &'a [&'a TensorType],
    /// The attributes (sub-graphs already legalized for this backend).
    pub attrs: &'a Attrs,
    /// The dtype the claims are keyed by (the first input's, or the op's
    /// own dtype attribute for ops without inputs).
    pub dtype: DType,
}

/// A device backend. Kept deliberately small.
pub trait Backend: MaybeSendSync {
    fn device(&self) -> Device;
    /// The ops (and dtypes) this backend runs natively.
    fn claims(&self) -> Claims;
    /// The name of the kernel that runs `op` (shown in the dispatch report).
    fn kernel_name(&self, op: &str, dtype: DType) -> String {
        format!("{}::{op}<{dtype}>", self.device())
    }
    /// Selects the kernel for one node the claims admit: its name (shown
    /// in the dispatch report), or why this backend cannot run it. Claims
    /// say op × dtype; this says what they cannot — shape, attribute and
    /// dtype limits (a region op without a kernel form, an activation or
    /// mask kind the kernel lacks). Legalization asks it for every node,
    /// so a refusal reaches the dispatch report (and the op is decomposed)
    /// or the `DispatchError` listing every unsupported node, before
    /// anything is built. A backend whose choice depends on the node (a
    /// fast kernel for some shapes, a slower one for others) names the
    /// kernel it picks, so the report never hides a slower path.
    fn select(&self, node: &NodeQuery) -> Result<String, String> {
        Ok(self.kernel_name(node.op, node.dtype))
    }
    /// Sustained throughput used by the routing cost model.
    fn throughput_gflops(&self) -> f64 {
        1.0
    }
    /// Host↔device copy bandwidth in GB/s (cost model).
    fn transfer_gbps(&self) -> f64 {
        10.0
    }
    /// Fixed cost of one kernel launch, in microseconds (cost model).
    fn launch_overhead_us(&self) -> f64 {
        1.0
    }
    /// Turn a legalized, scheduled program into something runnable.
    fn compile(&self, program: Program) -> Result<Box<dyn Executable>, RuntimeError>;
    /// [`Backend::compile`] without blocking the thread: in the browser a
    /// GPU device, its pipelines and their validation are awaited. The
    /// default runs `compile`; the npm package compiles every device
    /// through this one entry point.
    fn compile_async(
        &self,
        program: Program,
    ) -> LocalFuture<'_, Result<Box<dyn Executable>, RuntimeError>> {
        Box::pin(std::future::ready(self.compile(program)))
    }
}

/// `f` on the registered backends: process-wide, except in the threaded
/// browser build, whose backends belong to the page's thread
/// ([`MaybeSendSync`]).
#[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
fn with_registry<R>(f: impl FnOnce(&mut Vec<Arc<dyn Backend>>) -> R) -> R {
    static REG: OnceLock<RwLock<Vec<Arc<dyn Backend>>>> = OnceLock::new();
    let reg = REG.get_or_init(|| RwLock::new(Vec::new()));
    let mut r = reg.write().unwrap_or_else(|e| e.into_inner());
    f(&mut r)
}
/// See the other definition.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
fn with_registry<R>(f: impl FnOnce(&mut Vec<Arc<dyn Backend>>) -> R) -> R {
    thread_local! {
        static REG: std::cell::RefCell<Vec<Arc<dyn Backend>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    REG.with(|r| f(&mut r.borrow_mut()))
}

/// Make a backend available to `compile` and the router. A later
/// registration for the same device replaces the earlier one.
pub fn register_backend(b: Arc<dyn Backend>) {
    with_registry(|r| {
        r.retain(|x| x.device() != b.device());
        r.push(b);
    })
}

/// The registered backend for `device`.
pub fn backend_for(device: Device) -> Option<Arc<dyn Backend>> {
    with_registry(|r| r.iter().find(|b| b.device() == device).cloned())
}

/// Every registered backend.
pub fn backends() -> Vec<Arc<dyn Backend>> {
    with_registry(|r| r.clone())
}
