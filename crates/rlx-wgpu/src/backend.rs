#![cfg_attr(target_arch = "wasm32", allow(unused_imports, dead_code))]
//! The wgpu backend as an rlx-runtime `Backend`: one per device kind
//! (`vulkan`, `opengl`, `webgpu`, `gpu` = best available). The GPU context
//! is created on first compile and recreated after a device loss.

use crate::context::GpuContext;
use crate::error::WgpuError;
use crate::exec::GpuProgram;
use crate::lower::lower_with_options;
use rlx_ir::lir::Program;
use rlx_ir::HostTensor;
use rlx_runtime::options::WgpuOptions;
use rlx_runtime::{Backend, Claims, Device, Executable, LocalFuture, RuntimeError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Compiled pipelines by WGSL source, shared by the executables of one context.
pub type PipelineCache = Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>;

/// The wgpu backend for one device kind, with the options its context
/// and kernels follow.
pub struct WgpuBackend {
    device: Device,
    opts: WgpuOptions,
    ctx: Mutex<Option<(Arc<GpuContext>, Arc<PipelineCache>)>>,
}

fn rt(device: Device, e: WgpuError) -> RuntimeError {
    match e {
        // Its own variant: the caller's remedy (compile again) differs.
        WgpuError::DeviceLost { why } => RuntimeError::DeviceLost { device, why },
        e => RuntimeError::Backend {
            device,
            msg: e.to_string(),
        },
    }
}

impl WgpuBackend {
    /// The backend for `device` with default options.
    pub fn new(device: Device) -> WgpuBackend {
        Self::with_options(device, WgpuOptions::default())
    }

    /// The backend for `device` whose context and kernels follow `opts`.
    pub fn with_options(device: Device, opts: WgpuOptions) -> WgpuBackend {
        WgpuBackend {
            device,
            opts,
            ctx: Mutex::new(None),
        }
    }

    /// The options it follows.
    pub fn options(&self) -> &WgpuOptions {
        &self.opts
    }

    /// Register the device kinds this build can reach, with default options.
    pub fn register() {
        Self::register_with(WgpuOptions::default());
    }

    /// Register the device kinds this build can reach, with `opts`
    /// (replacing any registered).
    pub fn register_with(opts: WgpuOptions) {
        for d in crate::DEVICES {
            rlx_runtime::register_backend(Arc::new(WgpuBackend::with_options(*d, opts)));
        }
    }

    /// The live context (created, or re-created after a device loss).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn context(&self) -> Result<Arc<GpuContext>, WgpuError> {
        self.context_and_cache().map(|(c, _)| c)
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn context_and_cache(&self) -> Result<(Arc<GpuContext>, Arc<PipelineCache>), WgpuError> {
        let mut g = self
            .ctx
            .lock()
            .map_err(|_| WgpuError::Gpu("context lock poisoned".into()))?;
        if let Some((c, p)) = g.as_ref() {
            if !c.is_lost() {
                return Ok((c.clone(), p.clone()));
            }
        }
        let c = Arc::new(pollster::block_on(GpuContext::create_with(
            self.device,
            self.opts,
        ))?);
        let p = Arc::new(Mutex::new(HashMap::new()));
        *g = Some((c.clone(), p.clone()));
        Ok((c, p))
    }

    /// The context compiles use now, if one was created and not lost
    /// (nothing is created here).
    pub fn live_context(&self) -> Option<Arc<GpuContext>> {
        let g = self.ctx.lock().ok()?;
        g.as_ref().map(|(c, _)| c.clone()).filter(|c| !c.is_lost())
    }

    /// The live context, created (or re-created after a device loss)
    /// without blocking: the browser's way, and the one the npm package's
    /// `devices()` and `compile()` share, so a page has one GPU device.
    pub async fn context_async(&self) -> Result<(Arc<GpuContext>, Arc<PipelineCache>), WgpuError> {
        let lock = || {
            self.ctx
                .lock()
                .map_err(|_| WgpuError::Gpu("context lock poisoned".into()))
        };
        // The lock is not held across the await (the guard is not Send,
        // and another compile may ask meanwhile: the later one keeps its).
        if let Some((c, p)) = lock()?.as_ref() {
            if !c.is_lost() {
                return Ok((c.clone(), p.clone()));
            }
        }
        let c = Arc::new(GpuContext::create_with(self.device, self.opts).await?);
        let p = Arc::new(Mutex::new(HashMap::new()));
        *lock()? = Some((c.clone(), p.clone()));
        Ok((c, p))
    }

    /// How this backend's context holds f16 (`Some(true)`: as f16). The
    /// dispatch report is made before compiling, so natively the context
    /// is created here if need be; in the browser the page creates it
    /// (asynchronously) before it compiles.
    fn f16_path(&self) -> Option<bool> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.context().ok().map(|c| c.f16_native())
        }
        #[cfg(target_arch = "wasm32")]
        {
            crate::context::f16_path()
        }
    }

    /// Whether f16 matmuls run on cooperative matrices here (native only).
    fn coop(&self) -> bool {
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.context().map(|c| c.caps().coop_f16).unwrap_or(false)
        }
        #[cfg(target_arch = "wasm32")]
        {
            false
        }
    }

    /// Compile into the wgpu executable type (with `run_async`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn compile_program(&self, program: &Program) -> Result<WgpuExecutable, WgpuError> {
        let (ctx, cache) = self.context_and_cache()?;
        WgpuExecutable::build(ctx, &cache, program)
    }
}

/// A compiled program (see `exec::GpuProgram`).
pub struct WgpuExecutable {
    pub program: GpuProgram,
    device: Device,
}

impl WgpuExecutable {
    pub fn build(
        ctx: Arc<GpuContext>,
        cache: &PipelineCache,
        program: &Program,
    ) -> Result<WgpuExecutable, WgpuError> {
        let low = lower_with_options(program, ctx.caps(), ctx.options())?;
        let g = &program.graph;
        let device = Device::Gpu;
        let p = GpuProgram::new(ctx, low, g.input_types(), g.output_types(), cache)?;
        Ok(WgpuExecutable { program: p, device })
    }

    /// [`WgpuExecutable::build`] that awaits shader/allocation errors (the
    /// browser cannot block on them).
    pub async fn build_async(
        ctx: Arc<GpuContext>,
        cache: &PipelineCache,
        program: &Program,
    ) -> Result<WgpuExecutable, WgpuError> {
        let low = lower_with_options(program, ctx.caps(), ctx.options())?;
        let g = &program.graph;
        let p = GpuProgram::new_async(ctx, low, g.input_types(), g.output_types(), cache).await?;
        Ok(WgpuExecutable {
            program: p,
            device: Device::WebGpu,
        })
    }

    /// Run (async: awaits the readback; works in the browser too). The
    /// same as `Executable::run_async`, with the backend's own error.
    pub async fn run_async(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, WgpuError> {
        self.program.run_async(inputs).await
    }
}

impl Executable for WgpuExecutable {
    /// Pinned inputs are uploaded once and never re-read (see
    /// `GpuProgram::pin_inputs`).
    fn keep_resident(&self, inputs: &[usize]) -> bool {
        self.program.pin_inputs(inputs);
        true
    }

    /// The changed elements are written into the input's buffer.
    fn update_resident(
        &self,
        input: usize,
        at: rlx_runtime::Runs,
        values: &HostTensor,
    ) -> Result<(), RuntimeError> {
        self.program
            .update_pinned(input, at, values)
            .map_err(|e| rt(self.device, e))
    }

    fn run_async<'a>(
        &'a self,
        inputs: &'a [&'a HostTensor],
    ) -> LocalFuture<'a, Result<Vec<HostTensor>, RuntimeError>> {
        Box::pin(async move {
            WgpuExecutable::run_async(self, inputs)
                .await
                .map_err(|e| rt(self.device, e))
        })
    }

    fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            pollster::block_on(WgpuExecutable::run_async(self, inputs))
                .map_err(|e| rt(self.device, e))
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = inputs;
            Err(rt(
                self.device,
                WgpuError::Gpu("the browser cannot block: use WgpuExecutable::run_async".into()),
            ))
        }
    }

    /// GPU timestamps between dispatches where the adapter has them (median
    /// of 5 passes), else each kernel alone in its own submit on the host
    /// clock (for finding slow kernels, not for totals). Natively only.
    fn profile(&self, inputs: &[&HostTensor]) -> Result<rlx_runtime::Profile, RuntimeError> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            // A run first: it uploads the inputs the kernels then read.
            self.run(inputs)?;
            let per = self
                .program
                .profile_kernels(5)
                .map_err(|e| rt(self.device, e))?;
            let how = if self.program.timestamps() {
                "wgpu: GPU timestamps between dispatches, median of 5 passes"
            } else {
                "wgpu: each kernel alone in its own submit, host clock (no GPU timestamps)"
            };
            Ok(rlx_runtime::Profile::from_calls(per, how))
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = inputs;
            Err(rt(
                self.device,
                WgpuError::Gpu("the browser cannot block on a profile".into()),
            ))
        }
    }
}

impl Backend for WgpuBackend {
    fn device(&self) -> Device {
        self.device
    }

    fn claims(&self) -> Claims {
        crate::claims::claims()
    }

    fn kernel_name(&self, op: &str, dtype: rlx_ir::DType) -> String {
        // f16 without `shader-f16` is a different path: say so.
        let path = if dtype == rlx_ir::DType::F16 {
            self.f16_path()
        } else {
            None
        };
        match (dtype, path) {
            (rlx_ir::DType::F16, Some(false)) => {
                format!("wgsl::{op}<f16 held as f32: adapter lacks shader-f16>")
            }
            (rlx_ir::DType::F16, Some(true))
                if matches!(op, "matmul" | "matmul_bias_act" | "matmul_residual")
                    && self.coop() =>
            {
                format!("wgsl::{op}<f16 on cooperative matrices (tensor cores), f32 accumulation>")
            }
            (rlx_ir::DType::F16, Some(true))
                if matches!(op, "attention" | "attention_merged") && self.coop() =>
            {
                format!(
                "wgsl::{op}<f16 on cooperative matrices (tensor cores) where head dims are multiples of 16, the keys fit {} KiB of staging and the query tiles are few (small batches), else the tiled kernel; f32 accumulation>",
                crate::wgsl::attention_coop::SHARED_MAX / 1024
            )
            }
            _ => format!("wgsl::{op}<{dtype}>"),
        }
    }

    fn select(&self, node: &rlx_runtime::NodeQuery) -> Result<String, String> {
        crate::select::check(node, &self.opts)?;
        Ok(self.kernel_name(node.op, node.dtype))
    }

    fn throughput_gflops(&self) -> f64 {
        1000.0
    }

    fn launch_overhead_us(&self) -> f64 {
        10.0
    }

    fn compile(&self, program: Program) -> Result<Box<dyn Executable>, RuntimeError> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let mut e = self
                .compile_program(&program)
                .map_err(|e| rt(self.device, e))?;
            e.device = self.device;
            Ok(Box::new(e))
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = program;
            Err(rt(
                self.device,
                WgpuError::Gpu(
                    "the browser cannot block: compile with Backend::compile_async".into(),
                ),
            ))
        }
    }

    /// In the browser: the context awaited (created once, re-created after
    /// a device loss), the pipelines built and validated asynchronously.
    /// Natively `compile` (which blocks on the same steps).
    fn compile_async(
        &self,
        program: Program,
    ) -> LocalFuture<'_, Result<Box<dyn Executable>, RuntimeError>> {
        #[cfg(target_arch = "wasm32")]
        {
            Box::pin(async move {
                let (ctx, cache) = self.context_async().await.map_err(|e| rt(self.device, e))?;
                let mut e = WgpuExecutable::build_async(ctx, &cache, &program)
                    .await
                    .map_err(|e| rt(self.device, e))?;
                e.device = self.device;
                Ok(Box::new(e) as Box<dyn Executable>)
            })
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            Box::pin(std::future::ready(self.compile(program)))
        }
    }
}
