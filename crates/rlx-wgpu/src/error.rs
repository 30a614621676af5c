//! Typed errors of the wgpu backend.

use thiserror::Error;

/// Everything that can go wrong between picking an adapter and reading a
/// result back. Each variant names what the user can act on.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum WgpuError {
    /// No adapter for the requested device kind (no driver, no browser
    /// WebGPU, or the backend was not compiled into this build).
    #[error("no {device} adapter: {why}")]
    NoAdapter { device: String, why: String },
    /// The adapter refused to create a device.
    #[error("requesting a {device} device failed: {why}")]
    RequestDevice { device: String, why: String },
    /// A tensor (or the arena) does not fit in one storage binding.
    #[error("{what} needs {bytes} bytes, over the adapter's maxStorageBufferBindingSize of {limit} bytes")]
    BindingTooLarge {
        what: String,
        bytes: u64,
        limit: u64,
    },
    /// A kernel needs more storage buffers than the adapter binds per stage.
    #[error("kernel `{kernel}` binds {needed} storage buffers, over the adapter's maxStorageBuffersPerShaderStage of {limit}")]
    TooManyBindings {
        kernel: String,
        needed: u32,
        limit: u32,
    },
    /// The op (with these attributes/dtypes) has no WGSL kernel here.
    #[error("wgpu has no kernel for `{op}`: {why}")]
    Unsupported { op: String, why: String },
    /// Generated WGSL failed naga's validation (a bug in the generator).
    #[error("kernel `{kernel}` failed shader validation: {why}")]
    Shader { kernel: String, why: String },
    /// Translation to another shading language failed.
    #[error("translating kernel `{kernel}` to {lang}: {why}")]
    Translate {
        kernel: String,
        lang: String,
        why: String,
    },
    /// The device was lost; compile again to get a fresh device.
    #[error("the GPU device was lost ({why}); recreate the session")]
    DeviceLost { why: String },
    /// The device ran out of memory.
    #[error("the GPU ran out of memory: {why}")]
    OutOfMemory { why: String },
    /// Any other validation or runtime error reported by wgpu.
    #[error("wgpu: {0}")]
    Gpu(String),
    /// A kernel flagged bad data (an index out of range) while running.
    #[error("`{op}`: {why}")]
    Runtime { op: String, why: String },
    /// Inputs do not match the compiled program.
    #[error("{0}")]
    Input(String),
}
