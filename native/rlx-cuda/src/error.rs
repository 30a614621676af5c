//! Typed errors of the CUDA backend.

use rlx_runtime::{Device, RuntimeError};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum CudaError {
    /// A CUDA library could not be opened (no driver, or not on the loader path).
    #[error("CUDA library `{lib}` not found (is an NVIDIA driver installed, and are libnvrtc/libcublas on LD_LIBRARY_PATH?)")]
    LibraryMissing { lib: &'static str },
    /// The driver has no usable device.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// A driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(String),
    /// NVRTC rejected generated source (a bug in the code generator).
    #[error("NVRTC failed to compile the generated kernels: {log}")]
    Nvrtc { log: String },
    /// A cuBLAS call failed.
    #[error("cuBLAS: {0}")]
    Cublas(String),
    /// The program holds an op instance this backend cannot generate code for.
    #[error("node {node} (`{op}`): {msg}")]
    Unsupported {
        node: usize,
        op: String,
        msg: String,
    },
    /// Inputs of the wrong count or type.
    #[error("{0}")]
    Input(String),
    /// A kernel found bad data (an index out of range) while running.
    #[error("kernel for node {node} (`{op}`): {msg}")]
    Runtime {
        node: usize,
        op: String,
        msg: String,
    },
}

impl From<CudaError> for RuntimeError {
    fn from(e: CudaError) -> Self {
        RuntimeError::Backend {
            device: Device::Cuda,
            msg: e.to_string(),
        }
    }
}

impl From<cudarc::driver::DriverError> for CudaError {
    fn from(e: cudarc::driver::DriverError) -> Self {
        CudaError::Driver(e.to_string())
    }
}

impl From<cudarc::cublas::result::CublasError> for CudaError {
    fn from(e: cudarc::cublas::result::CublasError) -> Self {
        CudaError::Cublas(format!("{e:?}"))
    }
}
