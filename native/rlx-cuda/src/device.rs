//! The CUDA device: context, stream, cuBLAS handle, NVRTC module cache and
//! raw device buffers. Libraries are opened at run time (cudarc
//! `dynamic-loading`); their absence is a typed error, not a panic.

use crate::error::CudaError;
use cudarc::cublas::CudaBlas;
use cudarc::driver::{result, CudaContext, CudaModule, CudaStream};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The NVRTC options every generated module is compiled with, for `arch`
/// (e.g. `compute_90`). IEEE division and square root: parity with the reference.
pub fn nvrtc_options(arch: &'static str) -> cudarc::nvrtc::CompileOptions {
    cudarc::nvrtc::CompileOptions {
        arch: Some(arch),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        fmad: Some(true),
        ..Default::default()
    }
}

/// Check that the driver, NVRTC and cuBLAS libraries can be opened.
pub fn libraries_present() -> Result<(), CudaError> {
    // SAFETY: only tries to dlopen the libraries; nothing is called.
    unsafe {
        if !cudarc::driver::sys::is_culib_present() {
            return Err(CudaError::LibraryMissing { lib: "libcuda" });
        }
        if !cudarc::nvrtc::sys::is_culib_present() {
            return Err(CudaError::LibraryMissing { lib: "libnvrtc" });
        }
        if !cudarc::cublas::sys::is_culib_present() {
            return Err(CudaError::LibraryMissing { lib: "libcublas" });
        }
        if !cudarc::cublaslt::sys::is_culib_present() {
            return Err(CudaError::LibraryMissing { lib: "libcublasLt" });
        }
    }
    Ok(())
}

/// A plain device allocation (cuMemAlloc), freed on drop.
pub struct DevBuf {
    pub ptr: u64,
    pub bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DevBuf {
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<DevBuf, CudaError> {
        ctx.bind_to_thread()?;
        // SAFETY: a fresh allocation of at least one byte, owned by this value.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }?;
        Ok(DevBuf {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from malloc_sync and is freed exactly once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// A cuBLASLt handle, destroyed on drop.
pub struct LtHandle(pub cudarc::cublaslt::sys::cublasLtHandle_t);
// SAFETY: cuBLASLt handles may be used from any thread (calls are serialized
// by the executables' locks and the single stream).
unsafe impl Send for LtHandle {}
unsafe impl Sync for LtHandle {}
impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: created by create_handle, destroyed once.
        let _ = unsafe { cudarc::cublaslt::result::destroy_handle(self.0) };
    }
}

/// One GPU, shared by every executable compiled for it.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub blas: CudaBlas,
    /// cuBLASLt, for GEMMs with epilogues (bias, residual).
    pub lt: LtHandle,
    pub lt_workspace: DevBuf,
    /// Zeroed tile counters of our split-K GEMMs (`sgemm.rs`).
    pub sgemm_counters: DevBuf,
    /// cuBLAS workspace, set once so GEMMs never allocate (needed under graph capture).
    _workspace: DevBuf,
    pub name: String,
    pub arch: &'static str,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
    /// cuBLASLt algorithms chosen by timing, per GEMM configuration (see
    /// `tune.rs`), with the candidate count and times they were chosen by.
    pub(crate) tuned: Mutex<HashMap<crate::tune::TuneKey, TunedAlgo>>,
}

/// A tuned cuBLASLt algorithm and how it was chosen.
#[derive(Clone)]
pub(crate) struct TunedAlgo {
    pub algo: cudarc::cublaslt::sys::cublasLtMatmulAlgo_t,
    /// Our own kernel (`sgemm::TILES` index) instead of `algo`.
    pub own: Option<usize>,
    pub choice: crate::tune::Choice,
}

impl Gpu {
    pub fn new(ordinal: usize) -> Result<Arc<Gpu>, CudaError> {
        libraries_present()?;
        let n = CudaContext::device_count().map_err(|e| CudaError::NoDevice(e.to_string()))?;
        if n as usize <= ordinal {
            return Err(CudaError::NoDevice(format!(
                "{n} devices, asked for #{ordinal}"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| CudaError::NoDevice(e.to_string()))?;
        // The executables order all work on one stream themselves.
        // SAFETY: no CudaSlice of this context relies on event tracking.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        let blas = CudaBlas::new(stream.clone())?;
        let workspace = DevBuf::new(&ctx, 32 << 20)?;
        // SAFETY: the workspace outlives the handle (both live in `Gpu`).
        unsafe {
            cudarc::cublas::sys::cublasSetWorkspace_v2(
                *blas.handle(),
                workspace.ptr as *mut _,
                workspace.bytes,
            )
            .result()?;
        }
        let lt = LtHandle(
            cudarc::cublaslt::result::create_handle()
                .map_err(|e| CudaError::Cublas(e.to_string()))?,
        );
        let lt_workspace = DevBuf::new(&ctx, 32 << 20)?;
        let sgemm_counters = DevBuf::new(&ctx, crate::sgemm::COUNTERS * 4)?;
        // SAFETY: the whole fresh allocation is set to zero.
        unsafe { result::memset_d8_sync(sgemm_counters.ptr, 0, sgemm_counters.bytes) }?;
        let (major, minor) = ctx.compute_capability()?;
        let arch = match (major, minor) {
            (9, _) => "compute_90",
            (8, 9) => "compute_89",
            (8, 6) => "compute_86",
            (8, _) => "compute_80",
            (7, 5) => "compute_75",
            (10, _) => "compute_100",
            (12, _) => "compute_120",
            _ => "compute_70",
        };
        let name = ctx.name().unwrap_or_else(|_| "unknown".into());
        Ok(Arc::new(Gpu {
            ctx,
            stream,
            blas,
            lt,
            lt_workspace,
            sgemm_counters,
            _workspace: workspace,
            name,
            arch,
            cc: (major, minor),
            modules: Mutex::new(HashMap::new()),
            tuned: Mutex::new(HashMap::new()),
        }))
    }

    /// Compile `source` with NVRTC (once per distinct source) and load it.
    pub fn module(&self, source: &str) -> Result<Arc<CudaModule>, CudaError> {
        let key = source.to_string();
        if let Some(m) = self.modules.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(m);
        }
        let opts = nvrtc_options(self.arch);
        let ptx =
            cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|e| CudaError::Nvrtc {
                log: match e {
                    cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                        log.to_string_lossy().into_owned()
                    }
                    other => format!("{other:?}"),
                },
            })?;
        let m = self.ctx.load_module(ptx)?;
        if let Ok(mut c) = self.modules.lock() {
            c.insert(key, m.clone());
        }
        Ok(m)
    }
}
