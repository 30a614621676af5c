//! Changes to resident inputs (`Executable::update_resident`), applied on
//! the stream before a run: a decoder step's new keys and values, one run
//! of positions per head and layer. Each change as its own copy was slow
//! (a 2-D copy per key/value tensor: 60 per SmolLM2 step, 0.3 ms on an
//! H200, more than the kernels it saved), so all of a run's changes go in
//! one upload — a table of (destination, source offset, rows, row bytes,
//! row stride) then the bytes — and one kernel writes them out. A change
//! that is one range (a whole tensor after the cache grew) is a plain
//! copy instead.

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

impl Pending {
    /// One range of the input (a whole tensor, or runs back to back): a
    /// plain copy, no scatter.
    pub fn contiguous(&self) -> bool {
        self.at.count == 1 || self.at.stride == self.at.len
    }

    /// The device address of the first changed element.
    pub fn dst(&self, inputs: &[(TensorType, u64)]) -> u64 {
        inputs[self.input].1 + (self.at.start * self.eb) as u64
    }
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
pub(super) fn upload_len(pending: &[&Pending]) -> usize {
    pending.len() * WORDS * 8 + pending.iter().map(|p| p.bytes.len()).sum::<usize>()
}

/// Lay the upload for `pending` out in `out` ([`upload_len`] bytes; the
/// inputs' device addresses from `inputs`).
pub(super) fn write_upload(out: &mut [u8], pending: &[&Pending], inputs: &[(TensorType, u64)]) {
    let mut data = pending.len() * WORDS * 8;
    for (k, p) in pending.iter().enumerate() {
        let words = [
            p.dst(inputs),
            data as u64,
            p.at.count as u64,
            (p.at.len * p.eb) as u64,
            (p.at.stride * p.eb) as u64,
        ];
        for (w, x) in words.iter().enumerate() {
            let at = (k * WORDS + w) * 8;
            out[at..at + 8].copy_from_slice(&x.to_ne_bytes());
        }
        out[data..data + p.bytes.len()].copy_from_slice(&p.bytes);
        data += p.bytes.len();
    }
}

/// Copy `host` (pinned, laid out by [`write_upload`] for `items` changes) to the
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

#[cfg(test)]
mod tests {
    //! The scatter kernel compiled by the host C++ compiler (its blocks
    //! and threads as loops: it has no barriers) over the table
    //! [`upload`] lays out, its destinations rebased into a host arena.
    use super::*;
    use rlx_ir::DType;
    use std::process::Command;

    #[test]
    fn one_upload_scatters_every_change_to_its_runs() {
        let dir = std::env::temp_dir().join(format!("rlx-scatter-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Two f32 inputs at arena offsets 0 and 4096: a key cache of 3
        // heads × 8 positions × 4 dims gains positions 5..7 of each head;
        // a second tensor gains one run of 6 bytes (f16, 3 values).
        let ty = TensorType::new(DType::F32, [1]);
        let inputs = vec![(ty.clone(), 0u64), (ty, 4096u64)];
        let k: Vec<u8> = (0..3 * 2 * 4 * 4).map(|i| i as u8 + 1).collect();
        let pending = [
            Pending {
                input: 0,
                at: Runs {
                    start: 5 * 4,
                    count: 3,
                    len: 2 * 4,
                    stride: 8 * 4,
                },
                eb: 4,
                bytes: k.clone(),
            },
            Pending {
                input: 1,
                at: Runs::whole(3),
                eb: 2,
                bytes: vec![200, 201, 202, 203, 204, 205],
            },
        ];
        let pending: Vec<&Pending> = pending.iter().collect();
        let mut table = vec![0u8; upload_len(&pending)];
        write_upload(&mut table, &pending, &inputs);
        std::fs::write(dir.join("table.bin"), &table).unwrap();
        let driver = format!(
            "#include <cstdio>\n#include <vector>\n#define __global__\n#define __restrict__\n\
             struct D {{ unsigned x; }}; D blockIdx, threadIdx, blockDim{{256}};\n{SOURCE}\n\
             int main() {{ std::vector<unsigned char> t(1 << 16), arena(8192, 0);\n\
             FILE* f = fopen(\"{dir}/table.bin\", \"rb\"); size_t n = fread(t.data(), 1, t.size(), f); fclose(f);\n\
             unsigned long long* d = (unsigned long long*)t.data();\n\
             for (int i = 0; i < {items}; ++i) d[i * 5] += (unsigned long long)arena.data();\n\
             for (blockIdx.x = 0; blockIdx.x < {items}; ++blockIdx.x)\n\
               for (threadIdx.x = 0; threadIdx.x < 256; ++threadIdx.x) {KERNEL}(t.data());\n\
             f = fopen(\"{dir}/arena.bin\", \"wb\"); fwrite(arena.data(), 1, arena.size(), f); fclose(f); return n == 0; }}\n",
            dir = dir.display(),
            items = pending.len(),
        );
        std::fs::write(dir.join("d.cpp"), driver).unwrap();
        let built = Command::new("g++")
            .args(["-std=c++17", "-O1", "-o"])
            .arg(dir.join("d"))
            .arg(dir.join("d.cpp"))
            .output();
        let Ok(out) = built else {
            eprintln!("no g++: the scatter kernel is not emulated");
            return;
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(Command::new(dir.join("d")).status().unwrap().success());
        let arena = std::fs::read(dir.join("arena.bin")).unwrap();
        let mut want = vec![0u8; 8192];
        for h in 0..3 {
            let dst = (h * 8 + 5) * 4 * 4;
            want[dst..dst + 32].copy_from_slice(&k[h * 32..(h + 1) * 32]);
        }
        want[4096..4102].copy_from_slice(&[200, 201, 202, 203, 204, 205]);
        assert_eq!(arena, want);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
