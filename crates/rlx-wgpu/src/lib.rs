//! # rlx-wgpu
//!
//! The GPU backend through wgpu: WebGPU in the browser; Vulkan (and GL,
//! Metal, DirectX where compiled in) natively. Every LIR step becomes one
//! generated WGSL kernel (`wgsl::*`, specialized to its shapes and strides)
//! over one arena buffer laid out by the memory planner; graph inputs
//! (weights) stay resident in their own buffers; pipelines and bind groups
//! are made at compile time; a run is one compute pass and one readback.
//! `translate` turns each kernel into MSL, HLSL, GLSL and SPIR-V with naga.

pub mod backend;
pub mod claims;
pub mod context;
pub mod error;
pub mod exec;
pub mod lower;
pub mod offline;
mod oneshot;
pub mod select;
pub mod translate;
pub mod tref;
pub mod wgsl;

pub use backend::{PipelineCache, WgpuBackend, WgpuExecutable};
pub use context::{AdapterInfo, GpuContext};
pub use error::WgpuError;
pub use lower::{lower, lower_for, lower_with, lower_with_options, Caps, Lowered};
pub use offline::{kernels_of, kernels_of_for, kernels_of_options, kernels_of_with, program_of};
/// The backend's options (what the environment's `RLX_WGPU_*` set, parsed
/// by `rlx::env`).
pub use rlx_runtime::options::{CoopTile, WgpuAttention, WgpuF16, WgpuOptions};
pub use translate::{translate, validate, Lang, Translated};

use rlx_runtime::Device;

/// The rlx device kinds this build registers.
#[cfg(all(not(target_arch = "wasm32"), target_os = "macos"))]
pub const DEVICES: &[Device] = &[Device::Vulkan, Device::OpenGl, Device::Metal, Device::Gpu];
#[cfg(all(not(target_arch = "wasm32"), target_os = "windows"))]
pub const DEVICES: &[Device] = &[Device::Vulkan, Device::OpenGl, Device::DirectX, Device::Gpu];
#[cfg(all(
    not(target_arch = "wasm32"),
    not(target_os = "macos"),
    not(target_os = "windows")
))]
pub const DEVICES: &[Device] = &[Device::Vulkan, Device::OpenGl, Device::Gpu];
#[cfg(target_arch = "wasm32")]
pub const DEVICES: &[Device] = &[Device::WebGpu, Device::Gpu];

/// Register the wgpu backends with rlx-runtime (idempotent).
pub fn register() {
    WgpuBackend::register();
}

/// Register the wgpu backends with `opts`, replacing any registered.
pub fn register_with(opts: WgpuOptions) {
    WgpuBackend::register_with(opts);
}
