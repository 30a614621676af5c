//! Hopper programmatic dependent launch (PDL): a kernel launched with the
//! programmatic-stream-serialization attribute may be scheduled while the
//! kernel before it in the stream is still running, once every block of
//! that one has executed `griddepcontrol.launch_dependents`. Its blocks
//! then sit resident until `griddepcontrol.wait` returns (the previous
//! grid complete, its memory visible), so the launch latency between two
//! of our kernels overlaps the first one's execution instead of following
//! it. CUDA graphs captured from the stream keep these programmatic edges
//! (driver 12.3 or newer).
//!
//! **Off unless [`PDL_ENV`]=1**: on the H200 it did not pay. Kernel after
//! kernel only (8c445c9) MiniLM fp16 moved by ≤ 2 µs either way; with the
//! kernels after cuBLASLt GEMMs too (07638e6; GEMMs and our kernels
//! alternate in MiniLM) B=8 was 0.235 ms with it vs 0.224 without, the
//! other batches within 2 µs (benches/results/minilm-cuda-pdl-ab.log).
//! In a CUDA graph the launch gaps it would hide are already small: the
//! sum of the launches timed alone is within 5% of the graph replay.
//!
//! Every generated kernel starts with `grid_dep_wait(); grid_dep_launch();`
//! (see `codegen::Module::add`): the wait comes before any read, so a
//! kernel sees everything the previous grid wrote — and, since that grid
//! could not finish before its own wait returned, everything before it.
//! The two helpers are empty unless the module is compiled with
//! `RLX_PDL` defined (sm_90 or newer, [`PDL_ENV`] `1`). cuBLAS(Lt)
//! GEMMs are launched as usual (they start once everything before them is
//! complete); the kernel after one is launched with the attribute too and
//! waits for the GEMM's last kernel in full (`griddepcontrol.wait`
//! returns once the previous grid is complete and its memory visible; a
//! grid that never executes `launch_dependents` signals when it ends).
//! In MiniLM GEMMs and our kernels alternate (GEMM, attention, GEMM,
//! norm, GEMM, bias + GELU, ...), so most of our kernels follow a GEMM.

use crate::error::CudaError;
use cudarc::driver::{sys, CudaFunction, CudaStream, DriverError, LaunchConfig};

/// The environment variable that turns PDL on (`1`) for A/B runs.
pub const PDL_ENV: &str = "RLX_CUDA_PDL";

/// Whether PDL is wanted, from the value of [`PDL_ENV`] (unset or `0`:
/// no; `1`: yes, on GPUs of compute capability 9.0 or newer).
pub fn parse_pdl(v: Option<&str>) -> Result<bool, CudaError> {
    crate::env::switch(PDL_ENV, v, false)
}

/// Whether to launch with PDL when it is `wanted` (`CudaOptions::pdl`)
/// on a GPU of compute capability `cc` (major, minor): 9.0 or newer only.
pub fn pdl_for(wanted: bool, cc: (i32, i32)) -> bool {
    wanted && cc.0 >= 9
}

/// The NVRTC option that makes the kernel helpers emit the
/// `griddepcontrol` instructions.
pub const PDL_DEFINE: &str = "-DRLX_PDL=1";

/// Launch `func` on `stream` with `args` (device addresses, in the
/// kernel's parameter order) through `cuLaunchKernelEx`, allowed to
/// start before the previous kernel in the stream has finished.
///
/// # Safety
/// `args` must match the kernel's parameters, and every address must be
/// live for as long as the launch (or a graph captured from it) may run.
pub unsafe fn launch_programmatic(
    stream: &CudaStream,
    func: &CudaFunction,
    cfg: &LaunchConfig,
    args: &[u64],
) -> Result<(), DriverError> {
    // SAFETY: an all-zero attribute is a valid value of the C struct; the
    // id and the union member set below are the ones the driver reads.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let config = sys::CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    // cuLaunchKernelEx takes a pointer to each argument value.
    let mut params: Vec<*mut std::ffi::c_void> = args
        .iter()
        .map(|a| a as *const u64 as *mut std::ffi::c_void)
        .collect();
    // SAFETY: the config, attribute and parameter array outlive the call;
    // the caller vouches for the arguments.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            func.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
}
