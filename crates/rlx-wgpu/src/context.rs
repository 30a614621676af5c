//! Adapter and device setup: one [`GpuContext`] per rlx device kind.
//!
//! The device is requested with the adapter's own limits (wgpu's defaults
//! are far lower: 128 MiB bindings, 8 storage buffers per stage). Device
//! loss and out-of-memory are recorded by callbacks and surface as typed
//! errors on the next run; [`GpuContext::is_lost`] tells the backend to
//! build a fresh context.

use crate::error::WgpuError;
use rlx_runtime::options::{WgpuF16, WgpuOptions};
use rlx_runtime::Device;
use std::sync::{Arc, Mutex};

/// What the adapter offers that the code generator cares about.
#[derive(Clone, Debug)]
pub struct AdapterInfo {
    pub name: String,
    pub backend: String,
    pub driver: String,
    /// `shader-f16` is available (and was requested).
    pub shader_f16: bool,
    /// Subgroup operations were granted (natively, subgroups ≤ 32 wide).
    pub subgroups: bool,
    /// GPU timestamps between dispatches (native profiling) were granted.
    pub timestamps: bool,
    /// 16×16×16 cooperative matrices with f16 operands and f32 accumulators
    /// (tensor cores; Vulkan's `VK_KHR_cooperative_matrix`) were granted, on
    /// 32-wide subgroups. Native only; `WgpuOptions::coop` off declines them.
    pub coop_f16: bool,
    pub max_storage_binding: u64,
    pub max_storage_buffers_per_stage: u32,
    pub max_workgroup_storage: u32,
    pub max_invocations: u32,
}

/// How the last context created holds f16: 0 no context yet, 1 as f16,
/// 2 as f32 words. The browser, which has one context, names the report's
/// f16 path from it; natively each backend asks its own context.
static F16_PATH: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// `Some(true)`: f16 stored as f16; `Some(false)`: held as f32 words (no
/// `shader-f16`); `None`: no GPU context created yet.
pub fn f16_path() -> Option<bool> {
    match F16_PATH.load(std::sync::atomic::Ordering::Relaxed) {
        1 => Some(true),
        2 => Some(false),
        _ => None,
    }
}

/// A device and queue for one rlx device kind.
pub struct GpuContext {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: AdapterInfo,
    lost: Arc<Mutex<Option<String>>>,
    // Classified on arrival: wgpu's own error is not `Send` in the
    // threaded browser build, and the handler must be.
    errors: Arc<Mutex<Vec<WgpuError>>>,
    opts: WgpuOptions,
}

/// The wgpu backends that serve one rlx device kind.
pub fn backends_for(device: Device) -> Result<wgpu::Backends, WgpuError> {
    let b = match device {
        Device::Vulkan => wgpu::Backends::VULKAN,
        Device::OpenGl => wgpu::Backends::GL,
        Device::Metal => wgpu::Backends::METAL,
        Device::DirectX => wgpu::Backends::DX12,
        Device::WebGpu => wgpu::Backends::BROWSER_WEBGPU,
        Device::Gpu => wgpu::Backends::all(),
        d => {
            return Err(WgpuError::NoAdapter {
                device: d.name().into(),
                why: "not a wgpu device kind".into(),
            })
        }
    };
    Ok(b)
}

impl GpuContext {
    /// Create a context for `device` (async: the browser needs it) with
    /// default options.
    pub async fn create(device: Device) -> Result<GpuContext, WgpuError> {
        Self::create_with(device, WgpuOptions::default()).await
    }

    /// Create a context for `device` whose kernels and tensors follow
    /// `opts` (the f16 storage is the context's: uploads, downloads and
    /// kernels must agree on it).
    pub async fn create_with(device: Device, opts: WgpuOptions) -> Result<GpuContext, WgpuError> {
        let backends = backends_for(device)?;
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = backends;
        let instance = wgpu::Instance::new(desc);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| WgpuError::NoAdapter {
                device: device.name().into(),
                why: e.to_string(),
            })?;
        let features = adapter.features();
        // Timestamps inside passes exist natively only (kernel profiles).
        let stamps = if cfg!(target_arch = "wasm32") {
            wgpu::Features::empty()
        } else {
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
        };
        let ai = adapter.get_info();
        let coop = if coop_f16_offered(&adapter, &ai) {
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
        } else {
            wgpu::Features::empty()
        };
        // Subgroup sums (natively; subgroups of at most 32 so a workgroup's
        // partials fit the trees' shared memory).
        let sg = if !cfg!(target_arch = "wasm32") && ai.subgroup_max_size <= 32 {
            wgpu::Features::SUBGROUP
        } else {
            wgpu::Features::empty()
        };
        let mut want = (wgpu::Features::SHADER_F16 | stamps | coop | sg) & features;
        let limits = adapter.limits();
        let desc = |want: wgpu::Features| wgpu::DeviceDescriptor {
            label: Some("rlx"),
            required_features: want,
            required_limits: limits.clone(),
            // Cooperative matrices are an experimental wgpu feature: asked
            // for only when the adapter offers the exact shape and types the
            // kernels use (see `coop_f16_offered`).
            experimental_features: if want.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            {
                // SAFETY: wgpu's experimental features are unsafe because
                // their validation is incomplete; the one used here is
                // cooperative matrix load/store/multiply-add from WGSL,
                // whose operands our kernels keep in bounds themselves.
                unsafe { wgpu::ExperimentalFeatures::enabled() }
            } else {
                wgpu::ExperimentalFeatures::disabled()
            },
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let refused = |e: wgpu::RequestDeviceError| WgpuError::RequestDevice {
            device: device.name().into(),
            why: e.to_string(),
        };
        let (device_, queue) = match adapter.request_device(&desc(want)).await {
            Ok(d) => d,
            // The optional speed features must not cost the device: ask
            // again without them (the adapter info then says they are off,
            // and so does the dispatch report).
            Err(_) if want.intersects(coop | sg) => {
                want.remove(coop | sg);
                adapter.request_device(&desc(want)).await.map_err(refused)?
            }
            Err(e) => return Err(refused(e)),
        };
        let lost = Arc::new(Mutex::new(None));
        let l2 = lost.clone();
        device_.set_device_lost_callback(move |reason, msg| {
            if let Ok(mut g) = l2.lock() {
                *g = Some(format!("{reason:?}: {msg}"));
            }
        });
        let errors = Arc::new(Mutex::new(Vec::new()));
        let e2 = errors.clone();
        device_.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut g) = e2.lock() {
                g.push(classify(e));
            }
        }));
        let info = AdapterInfo {
            name: ai.name.clone(),
            backend: format!("{:?}", ai.backend),
            driver: format!("{} {}", ai.driver, ai.driver_info),
            shader_f16: want.contains(wgpu::Features::SHADER_F16),
            timestamps: !stamps.is_empty() && want.contains(stamps),
            coop_f16: !coop.is_empty() && want.contains(coop | wgpu::Features::SHADER_F16),
            subgroups: !sg.is_empty() && want.contains(sg),
            max_storage_binding: limits.max_storage_buffer_binding_size as u64,
            max_storage_buffers_per_stage: limits.max_storage_buffers_per_shader_stage,
            max_workgroup_storage: limits.max_compute_workgroup_storage_size,
            max_invocations: limits.max_compute_invocations_per_workgroup,
        };
        let ctx = GpuContext {
            device: device_,
            queue,
            info,
            lost,
            errors,
            opts,
        };
        F16_PATH.store(
            if ctx.f16_native() { 1 } else { 2 },
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(ctx)
    }

    /// Whether f16 tensors are stored as f16 here: the adapter has
    /// `shader-f16`, and `WgpuF16::HeldAsF32` does not force the other path
    /// (for testing it on adapters that have the feature). Otherwise they
    /// are held as f32 words, rounded to f16 on every store.
    pub fn f16_native(&self) -> bool {
        self.info.shader_f16 && self.opts.f16 != WgpuF16::HeldAsF32
    }

    /// What code generation may use on this device: what the adapter
    /// offers and the options do not decline.
    pub fn caps(&self) -> crate::lower::Caps {
        crate::lower::Caps {
            f16_native: self.f16_native(),
            coop_f16: self.f16_native() && self.info.coop_f16 && self.opts.coop,
            subgroups: self.info.subgroups && self.opts.subgroups,
        }
    }

    /// The options this context was created with.
    pub fn options(&self) -> &WgpuOptions {
        &self.opts
    }

    /// Whether the device was lost (the backend then makes a new one).
    pub fn is_lost(&self) -> bool {
        self.lost.lock().map(|g| g.is_some()).unwrap_or(true)
    }

    /// `e`, or the device loss that caused it: a readback from a lost
    /// device fails as a mapping error, which is not the remedy to report.
    pub fn lost_or(&self, e: WgpuError) -> WgpuError {
        match self.lost.lock().ok().and_then(|g| g.clone()) {
            Some(why) => WgpuError::DeviceLost { why },
            None => e,
        }
    }

    /// Turn recorded device loss and uncaptured errors into a typed error.
    pub fn check(&self) -> Result<(), WgpuError> {
        if let Ok(g) = self.lost.lock() {
            if let Some(why) = g.as_ref() {
                return Err(WgpuError::DeviceLost { why: why.clone() });
            }
        }
        let mut errs = self
            .errors
            .lock()
            .map_err(|_| WgpuError::Gpu("error log poisoned".into()))?;
        if let Some(e) = errs.drain(..).next() {
            return Err(e);
        }
        Ok(())
    }
}

/// Whether the adapter offers what the cooperative-matrix matmul uses:
/// 16×16×16 f16 × f16 + f32 on 32-wide subgroups (the kernel treats each
/// 32 consecutive invocations as one subgroup). Never in the browser:
/// WebGPU has no cooperative matrices.
fn coop_f16_offered(adapter: &wgpu::Adapter, ai: &wgpu::AdapterInfo) -> bool {
    if cfg!(target_arch = "wasm32")
        || !adapter
            .features()
            .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
        || ai.subgroup_min_size != 32
        || ai.subgroup_max_size != 32
    {
        return false;
    }
    use wgpu::CooperativeScalarType as T;
    adapter.cooperative_matrix_properties().iter().any(|p| {
        (p.m_size, p.n_size, p.k_size) == (16, 16, 16) && p.ab_type == T::F16 && p.cr_type == T::F32
    })
}

/// Map a wgpu error to ours (out-of-memory is its own variant).
pub fn classify(e: wgpu::Error) -> WgpuError {
    match e {
        wgpu::Error::OutOfMemory { source } => WgpuError::OutOfMemory {
            why: source.to_string(),
        },
        wgpu::Error::Validation { description, .. } | wgpu::Error::Internal { description, .. } => {
            WgpuError::Gpu(description)
        }
    }
}

/// Error scopes around a piece of GPU work (they are thread-local, so runs
/// on other threads don't see each other's errors).
/// Fields drop in order: the inner (validation) scope first, as wgpu needs.
pub struct Scopes(wgpu::ErrorScopeGuard, wgpu::ErrorScopeGuard);

impl Scopes {
    pub fn push(device: &wgpu::Device) -> Scopes {
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = device.push_error_scope(wgpu::ErrorFilter::Validation);
        Scopes(val, oom)
    }

    /// The first error the work raised, as a typed error.
    pub async fn pop(self) -> Result<(), WgpuError> {
        let Scopes(val, oom) = self;
        let v = val.pop().await;
        let o = oom.pop().await;
        match o.or(v) {
            Some(e) => Err(classify(e)),
            None => Ok(()),
        }
    }
}
