//! A compiled program on the GPU: device memory for the arena, inputs,
//! constants and scratch; the resolved launch list; optional CUDA graph
//! capture of the whole schedule.
//!
//! `build` makes one from a plan, `launch` enqueues one launch, `lt_gemm`
//! holds the cuBLASLt GEMMs and `tuning` times their candidates; this
//! module runs the schedule (uploads, launches or graph replay, fetches).

use crate::device::{DevBuf, Gpu};
use crate::error::CudaError;
use crate::host::{bytes_of, from_bytes};
use crate::staging::{pack, Pinned};
use cudarc::driver::{result, sys, CudaEvent, CudaFunction, CudaGraph};
use rlx_ir::{HostTensor, TensorType};
use rlx_runtime::{Executable, RuntimeError};
use std::sync::{Arc, Mutex};

mod build;
mod launch;
mod lt_gemm;
mod scatter;
mod tuning;

use launch::Resolved;
use scatter::Pending;

pub use crate::options::CudaOptions;

struct Graph(CudaGraph);
// SAFETY: the graph is only touched under the executable's mutex.
unsafe impl Send for Graph {}

struct State {
    graph: Option<Graph>,
    /// Inputs uploaded once and kept (weights).
    resident: Vec<bool>,
    uploaded: Vec<bool>,
    /// (output, input) pairs copied on the device at the end of each run.
    feedback: Vec<(usize, usize)>,
    /// Pinned staging of the inputs copied each run (grown on demand).
    in_stage: Option<Pinned>,
    /// Recorded after the last async uploads out of `in_stage`: the host
    /// waits on it before refilling the staging buffer.
    in_done: Option<CudaEvent>,
    /// Pinned staging of the outputs and the error flag, laid out by
    /// `CudaExecutable::out_offsets`.
    out_stage: Pinned,
    /// Changes to resident inputs, copied in before the next run.
    pending: Vec<Pending>,
    /// The scatter kernel and its device buffer (made on the first update).
    scatter: Option<(CudaFunction, DevBuf)>,
}

/// A program compiled for the GPU.
pub struct CudaExecutable {
    gpu: Arc<Gpu>,
    opts: CudaOptions,
    launches: Vec<(usize, Resolved)>,
    /// Each input's type and device address (in `_input_bufs`).
    inputs: Vec<(TensorType, u64)>,
    outputs: Vec<(TensorType, u64)>,
    /// Offsets of the outputs in the output staging buffer, then of the error flag.
    out_offsets: Vec<usize>,
    err: DevBuf,
    node_ops: Vec<String>,
    kernels: Vec<(usize, String)>,
    /// (launch index, description) of every cuBLASLt GEMM: its shape and
    /// which algorithm runs (tuned or the heuristic's pick).
    gemm_algos: Vec<(usize, String)>,
    source: String,
    state: Mutex<State>,
    _arena: DevBuf,
    _input_bufs: Vec<DevBuf>,
    _consts: Vec<DevBuf>,
    _scratch: Vec<DevBuf>,
}

/// A synchronous copy from pageable memory: only for data copied once
/// (constants at compile time, resident inputs on their first run).
fn upload_once(dst: u64, t: &HostTensor) -> Result<(), CudaError> {
    let b = bytes_of(t)?;
    if b.is_empty() {
        return Ok(());
    }
    // SAFETY: dst has room for the tensor (sized from the same type); the
    // copy is synchronous with respect to the host slice.
    unsafe { result::memcpy_htod_sync(dst, b) }?;
    Ok(())
}

impl CudaExecutable {
    /// The generated CUDA C of this program.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// (node, kernel) for every launch: the dispatch report's kernel names.
    pub fn kernels(&self) -> &[(usize, String)] {
        &self.kernels
    }

    /// (node, description) of every cuBLASLt GEMM launch: its shape and
    /// which algorithm runs, tuned (index among the heuristic's
    /// candidates, timed microseconds) or the heuristic's first pick.
    pub fn gemm_algos(&self) -> Vec<(usize, String)> {
        self.gemm_algos
            .iter()
            .map(|(l, d)| (self.launches[*l].0, d.clone()))
            .collect()
    }

    /// Launches per run (kernels and GEMMs).
    pub fn launch_count(&self) -> usize {
        self.launches.len()
    }

    /// Keep input `i` on the device after its first upload (weights): later
    /// runs skip its copy. The caller promises to pass the same values.
    pub fn keep_resident(&self, inputs: &[usize]) {
        if let Ok(mut s) = self.state.lock() {
            for &i in inputs {
                if i < s.resident.len() {
                    s.resident[i] = true;
                }
            }
        }
    }

    /// Resident input `i` changed at `at` to `values`: the change is
    /// copied into its device buffer before the next run (queued on the
    /// stream, so a run in flight still reads the old values). An input
    /// not on the device yet is uploaded whole by its first run.
    pub fn update_resident(
        &self,
        i: usize,
        at: rlx_runtime::Runs,
        values: &HostTensor,
    ) -> Result<(), CudaError> {
        let Some((ty, _)) = self.inputs.get(i) else {
            return Err(CudaError::Input(format!("no input {i}")));
        };
        if values.dtype() != ty.dtype {
            return Err(CudaError::Input(format!(
                "input {i} is {}, the update is {}",
                ty.dtype,
                values.dtype()
            )));
        }
        let mut s = self.lock()?;
        if !s.resident[i] || !s.uploaded[i] {
            return Ok(());
        }
        let bytes = bytes_of(values)?;
        let eb = bytes.len() / at.numel().max(1);
        if eb == 0 || eb * at.numel() != bytes.len() {
            // Not whole bytes per element (a block type): upload it whole.
            s.uploaded[i] = false;
            return Ok(());
        }
        s.pending.push(Pending {
            input: i,
            at,
            eb,
            bytes: bytes.to_vec(),
        });
        Ok(())
    }

    fn check_inputs(&self, inputs: &[&HostTensor]) -> Result<(), CudaError> {
        if inputs.len() != self.inputs.len() {
            return Err(CudaError::Input(format!(
                "expected {} inputs, got {}",
                self.inputs.len(),
                inputs.len()
            )));
        }
        for (i, (t, (ty, _))) in inputs.iter().zip(&self.inputs).enumerate() {
            if t.dtype() != ty.dtype || t.shape() != &ty.shape {
                return Err(CudaError::Input(format!(
                    "input {i}: expected {ty}, got {}{}",
                    t.dtype(),
                    t.shape()
                )));
            }
        }
        Ok(())
    }

    /// Feed outputs back into inputs on the device after every run (a
    /// training step's new parameters and optimizer state), and keep those
    /// inputs resident: the step then runs with no host transfer at all.
    /// Each pair is (output index, input index) of the same type.
    pub fn set_feedback(&self, pairs: &[(usize, usize)]) -> Result<(), CudaError> {
        let mut s = self
            .state
            .lock()
            .map_err(|_| CudaError::Input("executable lock poisoned".into()))?;
        for &(o, i) in pairs {
            let (Some((ot, _)), Some((it, _))) = (self.outputs.get(o), self.inputs.get(i)) else {
                return Err(CudaError::Input(format!(
                    "feedback pair ({o}, {i}) out of range"
                )));
            };
            if ot != it {
                return Err(CudaError::Input(format!(
                    "feedback output {o} is {ot}, input {i} is {it}"
                )));
            }
            s.resident[i] = true;
        }
        s.feedback = pairs.to_vec();
        s.graph = None;
        Ok(())
    }

    fn enqueue(&self, feedback: &[(usize, usize)]) -> Result<(), CudaError> {
        let stream = &self.gpu.stream;
        // SAFETY: err is a live 4-byte device buffer.
        unsafe { result::memset_d8_async(self.err.ptr, 0, 4, stream.cu_stream()) }?;
        for (_, l) in &self.launches {
            self.launch(l)?;
        }
        for &(o, i) in feedback {
            let (ty, src) = &self.outputs[o];
            let dst = self.inputs[i].1;
            let n = ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0);
            if n > 0 && *src != dst {
                // SAFETY: both buffers hold n bytes (types checked in set_feedback).
                unsafe { result::memcpy_dtod_async(dst, *src, n, stream.cu_stream()) }?;
            }
        }
        Ok(())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>, CudaError> {
        self.state
            .lock()
            .map_err(|_| CudaError::Input("executable lock poisoned".into()))
    }

    /// Upload inputs (skipping resident ones already there) and run the
    /// schedule (through the captured CUDA graph when enabled). Does not wait.
    pub fn launch_async(&self, inputs: &[&HostTensor]) -> Result<(), CudaError> {
        self.check_inputs(inputs)?;
        self.gpu.ctx.bind_to_thread()?;
        let mut s = self.lock()?;
        self.launch_locked(&mut s, inputs)
    }

    /// Copy the inputs a run needs: resident inputs once (synchronously),
    /// every other input through the pinned staging buffer as async copies
    /// on the stream, ordered before the run's kernels.
    fn upload_inputs(&self, s: &mut State, inputs: &[&HostTensor]) -> Result<(), CudaError> {
        let stream = &self.gpu.stream;
        let once: Vec<usize> = (0..inputs.len())
            .filter(|&i| s.resident[i] && !s.uploaded[i])
            .collect();
        if !once.is_empty() {
            // A synchronous copy is not ordered with the stream: it must not
            // overwrite an input a previous run still reads.
            stream.synchronize()?;
            for i in once {
                upload_once(self.inputs[i].1, inputs[i])?;
                s.uploaded[i] = true;
            }
        }
        let per_run: Vec<usize> = (0..inputs.len()).filter(|&i| !s.resident[i]).collect();
        let pending = std::mem::take(&mut s.pending);
        if per_run.is_empty() && pending.is_empty() {
            return Ok(());
        }
        // Changes of one range are copied as they are; the rest go through
        // the scatter kernel's one upload.
        let (direct, strided): (Vec<&Pending>, Vec<&Pending>) =
            pending.iter().partition(|p| p.contiguous());
        // (device address, bytes) of every plain copy.
        let mut copies: Vec<(u64, &[u8])> = per_run
            .iter()
            .map(|&i| Ok((self.inputs[i].1, bytes_of(inputs[i])?)))
            .collect::<Result<_, CudaError>>()?;
        copies.extend(
            direct
                .iter()
                .map(|p| (p.dst(&self.inputs), p.bytes.as_slice())),
        );
        let sizes: Vec<usize> = copies
            .iter()
            .map(|(_, b)| b.len())
            .chain((!strided.is_empty()).then(|| scatter::upload_len(&strided)))
            .collect();
        let (offsets, total) = pack(&sizes);
        // The previous run's uploads may still be reading the staging buffer.
        if let Some(e) = &s.in_done {
            e.synchronize()?;
        }
        if s.in_stage.as_ref().is_none_or(|p| p.len() < total) {
            s.in_stage = Some(Pinned::new(&self.gpu.ctx, total)?);
        }
        let stage = s
            .in_stage
            .as_mut()
            .ok_or_else(|| CudaError::Driver("no input staging buffer".into()))?;
        for (&(dst, b), &at) in copies.iter().zip(&offsets) {
            if b.is_empty() {
                continue;
            }
            stage.slice_mut(at, b.len()).copy_from_slice(b);
            // SAFETY: the device buffer holds the bytes (a whole input, or a
            // changed range checked by `rlx::Compiled::update_resident`); the
            // staging range stays untouched until `in_done` (recorded below)
            // completes.
            unsafe {
                result::memcpy_htod_async(dst, stage.slice(at, b.len()), stream.cu_stream())
            }?;
        }
        if !strided.is_empty() {
            let (at, n) = (offsets[copies.len()], sizes[copies.len()]);
            scatter::write_upload(stage.slice_mut(at, n), &strided, &self.inputs);
            scatter::launch(&mut s.scatter, &self.gpu, stage.slice(at, n), strided.len())?;
        }
        if s.in_done.is_none() {
            s.in_done = Some(
                self.gpu
                    .ctx
                    .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?,
            );
        }
        if let Some(e) = &s.in_done {
            e.record(stream)?;
        }
        for i in per_run {
            s.uploaded[i] = true;
        }
        Ok(())
    }

    fn launch_locked(&self, s: &mut State, inputs: &[&HostTensor]) -> Result<(), CudaError> {
        self.upload_inputs(s, inputs)?;
        if !self.opts.cuda_graph {
            return self.enqueue(&s.feedback);
        }
        if s.graph.is_none() {
            let stream = &self.gpu.stream;
            stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
            let r = self.enqueue(&s.feedback);
            let g = stream.end_capture(sys::CUgraphInstantiate_flags(0))?;
            r?;
            let g = g.ok_or_else(|| CudaError::Driver("graph capture produced no graph".into()))?;
            g.upload()?;
            s.graph = Some(Graph(g));
        }
        if let Some(g) = &s.graph {
            g.0.launch()?;
        }
        Ok(())
    }

    /// Queue async copies of the error flag (and the outputs, if asked)
    /// into the pinned output staging, wait for the stream once, check the
    /// flag, and return the outputs read from the staging buffer.
    fn fetch(&self, s: &mut State, outputs: bool) -> Result<Vec<HostTensor>, CudaError> {
        let stream = &self.gpu.stream;
        let err_at = self.out_offsets[self.outputs.len()];
        let sizes: Vec<usize> = self
            .outputs
            .iter()
            .map(|(ty, _)| ty.dtype.storage_bytes(ty.shape.numel()).unwrap_or(0))
            .collect();
        if outputs {
            for ((&(_, ptr), &at), &n) in self.outputs.iter().zip(&self.out_offsets).zip(&sizes) {
                if n > 0 {
                    // SAFETY: the output buffer holds n bytes; the host reads
                    // the staging range only after the stream is synchronized.
                    unsafe {
                        result::memcpy_dtoh_async(
                            s.out_stage.slice_mut(at, n),
                            ptr,
                            stream.cu_stream(),
                        )
                    }?;
                }
            }
        }
        // SAFETY: err is a live 4-byte device buffer; read after the sync below.
        unsafe {
            result::memcpy_dtoh_async(
                s.out_stage.slice_mut(err_at, 4),
                self.err.ptr,
                stream.cu_stream(),
            )
        }?;
        stream.synchronize()?;
        let flag = s.out_stage.slice(err_at, 4);
        let code = i32::from_ne_bytes([flag[0], flag[1], flag[2], flag[3]]);
        if code != 0 {
            let node = (code - 1) as usize;
            return Err(CudaError::Runtime {
                node,
                op: self.node_ops.get(node).cloned().unwrap_or_default(),
                msg: "index out of range".into(),
            });
        }
        if !outputs {
            return Ok(vec![]);
        }
        self.outputs
            .iter()
            .zip(&self.out_offsets)
            .zip(&sizes)
            .map(|(((ty, _), &at), &n)| {
                from_bytes(ty.dtype, ty.shape.clone(), s.out_stage.slice(at, n))
            })
            .collect()
    }

    /// Wait for the stream, then check the kernels' error flag.
    pub fn sync(&self) -> Result<(), CudaError> {
        self.gpu.ctx.bind_to_thread()?;
        let mut s = self.lock()?;
        self.fetch(&mut s, false).map(|_| ())
    }

    /// Copy the outputs back (after [`CudaExecutable::launch_async`]; waits
    /// for the stream and checks the error flag).
    pub fn read_outputs(&self) -> Result<Vec<HostTensor>, CudaError> {
        self.gpu.ctx.bind_to_thread()?;
        let mut s = self.lock()?;
        self.fetch(&mut s, true)
    }

    /// Run once and return the outputs: async uploads, the schedule, async
    /// downloads, one wait — all under one lock, so concurrent callers
    /// cannot interleave their runs.
    pub fn run_cuda(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, CudaError> {
        self.check_inputs(inputs)?;
        self.gpu.ctx.bind_to_thread()?;
        let mut s = self.lock()?;
        self.launch_locked(&mut s, inputs)?;
        self.fetch(&mut s, true)
    }

    /// GPU time of every launch: (node, op, kernel, milliseconds). Each
    /// launch is timed alone — a CUDA graph of `REPEATS` copies of it,
    /// replayed between two events — so host launch gaps (which dominate
    /// an eagerly launched run at small batch) are not counted. Inputs must
    /// have been uploaded; intermediate buffers hold garbage afterwards
    /// (in-place epilogues accumulate), so run again before reading outputs.
    pub fn profile(&self) -> Result<Vec<(usize, String, String, f32)>, CudaError> {
        const REPEATS: usize = 5;
        self.gpu.ctx.bind_to_thread()?;
        let _s = self.lock()?;
        let stream = &self.gpu.stream;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let (e0, e1) = (
            self.gpu.ctx.new_event(flags)?,
            self.gpu.ctx.new_event(flags)?,
        );
        let mut names = std::collections::HashMap::new();
        for (n, k) in &self.kernels {
            names.entry(*n).or_insert_with(|| k.clone());
        }
        let algos: std::collections::HashMap<usize, &String> =
            self.gemm_algos.iter().map(|(l, d)| (*l, d)).collect();
        let mut out = Vec::new();
        for (at, (node, l)) in self.launches.iter().enumerate() {
            stream.synchronize()?;
            stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
            let r = (0..REPEATS).try_for_each(|_| self.launch(l));
            let g = stream.end_capture(sys::CUgraphInstantiate_flags(0))?;
            r?;
            let g = g.ok_or_else(|| CudaError::Driver("graph capture produced no graph".into()))?;
            g.launch()?;
            e0.record(stream)?;
            g.launch()?;
            e1.record(stream)?;
            stream.synchronize()?;
            let ms = e0.elapsed_ms(&e1)? / REPEATS as f32;
            // A GEMM is named with its algorithm choice, a kernel by its
            // own name (a node's bias + GELU kernel apart from its GEMM).
            let name = match (algos.get(&at), l) {
                (Some(d), _) => (*d).clone(),
                (None, Resolved::Kernel { name, .. }) => name.clone(),
                (None, _) => names.get(node).cloned().unwrap_or_default(),
            };
            out.push((*node, self.node_ops[*node].clone(), name, ms));
        }
        Ok(out)
    }
}

impl Executable for CudaExecutable {
    fn run(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        Ok(self.run_cuda(inputs)?)
    }

    /// Weights stay on the device after their first upload (through
    /// `rlx::Compiled::keep_resident`: an LLM's decode steps would
    /// otherwise copy every weight in on every token).
    fn keep_resident(&self, inputs: &[usize]) -> bool {
        CudaExecutable::keep_resident(self, inputs);
        true
    }

    /// The changed elements are copied into the input's device buffer
    /// before the next run (a decoder's key/value cache stays on the GPU;
    /// a step copies only its new positions).
    fn update_resident(
        &self,
        input: usize,
        at: rlx_runtime::Runs,
        values: &HostTensor,
    ) -> Result<(), RuntimeError> {
        Ok(CudaExecutable::update_resident(self, input, at, values)?)
    }

    /// Each launch timed alone (a CUDA graph of copies of it between two
    /// events, so host launch gaps are not counted), after a run that
    /// uploads the inputs; kernels named as in the dispatch report.
    fn profile(&self, inputs: &[&HostTensor]) -> Result<rlx_runtime::Profile, RuntimeError> {
        self.run_cuda(inputs)?;
        let per = CudaExecutable::profile(self)?;
        Ok(rlx_runtime::Profile::from_calls(
            // The op, then the kernel (a generated one's name is only `kN`).
            per.into_iter()
                .map(|(_, op, k, ms)| (format!("{op} [{k}]"), ms as f64)),
            "CUDA: each launch alone in a CUDA graph, between events",
        ))
    }
}
