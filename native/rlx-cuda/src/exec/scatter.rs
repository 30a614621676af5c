//! Changes to resident inputs (`Executable::update_resident`), applied on
//! the stream before a run: a decoder step's new keys and values, one run
//! of positions per head and layer. Each change as its own copy was slow
//! (a 2-D copy per key/value tensor: 60 per SmolLM2 step, 0.3 ms on an
//! H200, more than the kernels it saved), so all of a run's changes go in
//! one upload — a table of (destination, source offset, rows, row bytes,
//! row stride) then the bytes — and one kernel writes them out.

use super::super::device::{DevBuf, Gpu};
use crate::error::CudaError;
use cudarc::driver::{result, CudaFunction, LaunchConfig, PushKernelArg};
use rlx_ir::TensorType;
use rlx_runtime::Runs;

/// Elements of resident input `input` changed by the caller: `bytes` go to
/// `at`'s runs.
pub(super) struct Pending {
    pub input: usize,
    pub at: Runs,
    /// Bytes per element.
    pub eb: usize,
    pub bytes: Vec<u8>,
}

const KERNEL: &str = "rlx_scatter_rows";

/// One block per change: its rows, byte by byte (a step's changes are a
/// few hundred bytes each).
const SOURCE: &str = r#"
extern "C" __global__ void rlx_scatter_rows(const unsigned char* __restrict__ buf) {
  const unsigned long long* d = (const unsigned long long*)buf + blockIdx.x * 5;
  unsigned char* dst = (unsigned char*)d[0];
  const unsigned char* src = buf + d[1];
  unsigned long long len = d[3], stride = d[4], n = d[2] * len;
  for (unsigned long long e = threadIdx.x; e < n; e += blockDim.x)
    dst[(e / len) * stride + e % len] = src[e];
}
"#;

const WORDS: usize = 5;

/// Bytes of the upload for `pending`: the table, then each change's bytes.
pub(super) fn upload_len(pending: &[Pending]) -> usize {
    pending.len() * WORDS * 8 + pending.iter().map(|p| p.bytes.len()).sum::<usize>()
}

/// The upload for `pending` (inputs' device addresses from `inputs`).
pub(super) fn upload(pending: &[Pending], inputs: &[(TensorType, u64)]) -> Vec<u8> {
    let mut table = Vec::with_capacity(upload_len(pending));
    let mut data = pending.len() * WORDS * 8;
    for p in pending {
        let row = p.at.len * p.eb;
        for w in [
            inputs[p.input].1 + (p.at.start * p.eb) as u64,
            data as u64,
            p.at.count as u64,
            row as u64,
            (p.at.stride * p.eb) as u64,
        ] {
            table.extend_from_slice(&w.to_ne_bytes());
        }
        data += p.bytes.len();
    }
    for p in pending {
        table.extend_from_slice(&p.bytes);
    }
    table
}

/// Copy `host` (pinned, laid out by [`upload`] for `items` changes) to the
/// device and launch the scatter, both on the stream.
pub(super) fn launch(
    slot: &mut Option<(CudaFunction, DevBuf)>,
    gpu: &Gpu,
    host: &[u8],
    items: usize,
) -> Result<(), CudaError> {
    if slot.as_ref().is_none_or(|(_, b)| b.bytes < host.len()) {
        let func = match slot.take() {
            Some((f, _)) => f,
            None => gpu.module(SOURCE)?.load_function(KERNEL)?,
        };
        let buf = DevBuf::new(&gpu.ctx, host.len().next_power_of_two())?;
        *slot = Some((func, buf));
    }
    let Some((func, buf)) = slot.as_ref() else {
        unreachable!("set above")
    };
    let stream = &gpu.stream;
    // SAFETY: the buffer holds at least host.len() bytes; `host` is pinned
    // staging that stays untouched until the run's `in_done` event.
    unsafe { result::memcpy_htod_async(buf.ptr, host, stream.cu_stream()) }?;
    let cfg = LaunchConfig {
        grid_dim: (items as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut b = stream.launch_builder(func);
    b.arg(&buf.ptr);
    // SAFETY: the table's destinations lie inside resident input buffers
    // (runs checked by `rlx::Compiled::update_resident`), its sources
    // inside the uploaded bytes.
    unsafe { b.launch(cfg) }?;
    Ok(())
}
