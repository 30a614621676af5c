//! A compiled program on the GPU: one arena buffer from the memory plan,
//! one resident buffer per graph input (re-uploaded only when its contents
//! change), baked constants, and every pipeline and bind group created at
//! compile time. A run is one command buffer with one compute pass, then
//! copies into staging buffers and one `map_async` readback.

use crate::backend::PipelineCache;
use crate::context::GpuContext;
use crate::error::WgpuError;
use crate::lower::Lowered;
use crate::oneshot;
use crate::tref::{elem_bytes, BufId, TensorRef};
use rlx_ir::{DType, HostTensor, TensorData, TensorType};
use std::sync::{Arc, Mutex};

/// Host bytes of a tensor in the GPU layout (bool → one u32 per element;
/// f16 → 2 bytes, or an f32 word when held `wide`), padded to whole words.
pub fn to_words(t: &HostTensor, wide: bool) -> Result<Vec<u8>, WgpuError> {
    Ok(match t.data() {
        TensorData::F32(v) => bytemuck::cast_slice(v).to_vec(),
        TensorData::F16(v) if wide => v.iter().flat_map(|x| x.to_f32().to_le_bytes()).collect(),
        TensorData::F16(v) => {
            let mut b: Vec<u8> = v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect();
            b.resize(b.len().div_ceil(4) * 4, 0);
            b
        }
        TensorData::I32(v) => bytemuck::cast_slice(v).to_vec(),
        TensorData::I64(v) => bytemuck::cast_slice(v).to_vec(),
        TensorData::Bool(v) => v.iter().flat_map(|&b| (b as u32).to_le_bytes()).collect(),
        // Block-quantized weights: their bytes as they are.
        TensorData::Packed(v) if crate::wgsl::quant::decodes(t.dtype()) => {
            let mut b = v.clone();
            b.resize(b.len().div_ceil(4) * 4, 0);
            b
        }
        _ => {
            return Err(WgpuError::Input(format!(
                "dtype {} is not held on the GPU",
                t.dtype()
            )))
        }
    })
}

/// Bytes of the buffer holding graph input `t`: its elements in the GPU
/// layout, or a block-quantized weight's bytes padded to whole words plus
/// two (the decoders read 8 bytes from any byte address, so up to 3 words).
pub fn input_bytes(t: &TensorType, wide: bool) -> usize {
    if crate::wgsl::quant::decodes(t.dtype) {
        let b = t.dtype.storage_bytes(t.shape.numel()).unwrap_or(0);
        return b.div_ceil(4) * 4 + 8;
    }
    t.shape.numel() * elem_bytes(t.dtype, wide)
}

fn from_words(ty: &TensorType, bytes: &[u8], wide: bool) -> Result<HostTensor, WgpuError> {
    let data: TensorData = match ty.dtype {
        DType::F32 => bytemuck::pod_collect_to_vec::<u8, f32>(bytes).into(),
        DType::F16 if wide => bytemuck::pod_collect_to_vec::<u8, f32>(bytes)
            .into_iter()
            .map(half::f16::from_f32)
            .collect::<Vec<_>>()
            .into(),
        // One copy out of the mapped staging buffer (a 3 MB hidden state
        // at MiniLM B=32 is worth not copying twice).
        DType::F16 => bytemuck::pod_collect_to_vec::<u8, half::f16>(bytes).into(),
        DType::I32 => bytemuck::pod_collect_to_vec::<u8, i32>(bytes).into(),
        DType::I64 => bytemuck::pod_collect_to_vec::<u8, i64>(bytes).into(),
        DType::Bool => bytemuck::pod_collect_to_vec::<u8, u32>(bytes)
            .into_iter()
            .map(|w| w != 0)
            .collect::<Vec<_>>()
            .into(),
        d => return Err(WgpuError::Input(format!("cannot read back {d}"))),
    };
    HostTensor::new(ty.dtype, ty.shape.clone(), data).map_err(|e| WgpuError::Input(e.to_string()))
}

/// A 64-bit fingerprint of bytes (four lanes, so it runs near memory speed);
/// an input whose fingerprint, length and address are unchanged is not
/// uploaded again.
fn fingerprint(b: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = [K, K ^ 1, K ^ 2, K ^ 3];
    let chunks = b.chunks_exact(32);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..4 {
            let w = u64::from_le_bytes(c[l * 8..l * 8 + 8].try_into().unwrap_or([0; 8]));
            h[l] = (h[l] ^ w).wrapping_mul(0x100_0000_01B3).rotate_left(29);
        }
    }
    let mut t = h[0] ^ h[1].rotate_left(17) ^ h[2].rotate_left(31) ^ h[3].rotate_left(47);
    for &x in rest {
        t = (t ^ x as u64).wrapping_mul(0x100_0000_01B3);
    }
    t ^ b.len() as u64
}

struct Resident {
    ptr: usize,
    len: usize,
    print: u64,
}

pub struct GpuProgram {
    ctx: Arc<GpuContext>,
    arena: wgpu::Buffer,
    arena_words: usize,
    /// The f16 arena (`BufId::Half`).
    half: wgpu::Buffer,
    /// f16 held as f32 words (no `shader-f16`).
    wide: bool,
    inputs: Vec<wgpu::Buffer>,
    input_types: Vec<TensorType>,
    steps: Vec<(Arc<wgpu::ComputePipeline>, wgpu::BindGroup, [u32; 3])>,
    outputs: Vec<(TensorRef, TensorType)>,
    /// The baked constants (`BufId::Const`), kept to read back a constant
    /// graph output.
    consts: Vec<wgpu::Buffer>,
    staging: Vec<wgpu::Buffer>,
    flag_staging: wgpu::Buffer,
    flagging: Vec<String>,
    resident: Mutex<Vec<Option<Resident>>>,
    /// Inputs the caller promised not to change (uploaded once, never
    /// fingerprinted again): see [`GpuProgram::pin_inputs`].
    pinned: Mutex<Vec<bool>>,
    /// Serializes runs (they share the arena).
    run_lock: Mutex<()>,
    pub kernel_names: Vec<String>,
}

fn check_size(ctx: &GpuContext, what: &str, bytes: u64) -> Result<(), WgpuError> {
    let limit = ctx.info.max_storage_binding;
    if bytes > limit {
        return Err(WgpuError::BindingTooLarge {
            what: what.into(),
            bytes,
            limit,
        });
    }
    Ok(())
}

fn storage(ctx: &GpuContext, label: &str, bytes: u64, extra: wgpu::BufferUsages) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        // Whole 8-byte units: kernels may bind f16 buffers as vec4<f16>.
        size: bytes.max(8).div_ceil(8) * 8,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | extra,
        mapped_at_creation: false,
    })
}

impl GpuProgram {
    /// Create every GPU object of a lowered program; errors are checked
    /// natively (blocking).
    pub fn new(
        ctx: Arc<GpuContext>,
        low: Lowered,
        input_types: Vec<TensorType>,
        output_types: Vec<TensorType>,
        pipelines: &PipelineCache,
    ) -> Result<GpuProgram, WgpuError> {
        let (p, scopes) = Self::create(ctx, low, input_types, output_types, pipelines)?;
        pollster_free_pop(scopes)?;
        p.ctx.check()?;
        Ok(p)
    }

    /// [`GpuProgram::new`] for the browser: awaits the creation errors
    /// (shader compilation, allocation) so they surface here, typed.
    pub async fn new_async(
        ctx: Arc<GpuContext>,
        low: Lowered,
        input_types: Vec<TensorType>,
        output_types: Vec<TensorType>,
        pipelines: &PipelineCache,
    ) -> Result<GpuProgram, WgpuError> {
        let (p, scopes) = Self::create(ctx, low, input_types, output_types, pipelines)?;
        scopes.pop().await?;
        p.ctx.check()?;
        Ok(p)
    }

    fn create(
        ctx: Arc<GpuContext>,
        low: Lowered,
        input_types: Vec<TensorType>,
        output_types: Vec<TensorType>,
        pipelines: &PipelineCache,
    ) -> Result<(GpuProgram, crate::context::Scopes), WgpuError> {
        let dev = &ctx.device;
        let scopes = crate::context::Scopes::push(dev);
        let arena_bytes = low.arena_words as u64 * 4;
        check_size(&ctx, "the arena", arena_bytes)?;
        let arena = storage(&ctx, "rlx arena", arena_bytes, wgpu::BufferUsages::COPY_SRC);
        check_size(&ctx, "the f16 arena", low.half_bytes as u64)?;
        let half = storage(
            &ctx,
            "rlx f16 arena",
            low.half_bytes as u64,
            wgpu::BufferUsages::COPY_SRC,
        );
        let wide = low.f16_wide;
        let mut inputs = Vec::new();
        for (i, t) in input_types.iter().enumerate() {
            let bytes = input_bytes(t, wide) as u64;
            check_size(&ctx, &format!("input {i} ({t})"), bytes)?;
            inputs.push(storage(
                &ctx,
                "rlx input",
                bytes,
                wgpu::BufferUsages::COPY_SRC,
            ));
        }
        let mut consts = Vec::new();
        for (i, c) in low.consts.iter().enumerate() {
            let w = to_words(c, wide)?;
            check_size(&ctx, &format!("constant {i}"), w.len() as u64)?;
            // COPY_SRC: a constant can be a graph output (ONNX's Shape,
            // ConstantOfShape, …), read back like any other.
            let b = storage(
                &ctx,
                "rlx const",
                w.len() as u64,
                wgpu::BufferUsages::COPY_SRC,
            );
            ctx.queue.write_buffer(&b, 0, &w);
            consts.push(b);
        }
        let mut steps = Vec::new();
        let mut kernel_names = Vec::new();
        for k in &low.kernels {
            let n = k.bufs.len() as u32;
            if n > ctx.info.max_storage_buffers_per_stage {
                return Err(WgpuError::TooManyBindings {
                    kernel: k.name.clone(),
                    needed: n,
                    limit: ctx.info.max_storage_buffers_per_stage,
                });
            }
            crate::translate::validate(&k.name, &k.wgsl)?;
            let cached = pipelines.lock().ok().and_then(|c| c.get(&k.wgsl).cloned());
            let pipe = match cached {
                Some(p) => p,
                None => {
                    let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(&k.name),
                        source: wgpu::ShaderSource::Wgsl(k.wgsl.as_str().into()),
                    });
                    let p = Arc::new(dev.create_compute_pipeline(
                        &wgpu::ComputePipelineDescriptor {
                            label: Some(&k.name),
                            layout: None,
                            module: &module,
                            entry_point: Some("main"),
                            compilation_options: Default::default(),
                            cache: None,
                        },
                    ));
                    if let Ok(mut c) = pipelines.lock() {
                        c.insert(k.wgsl.clone(), p.clone());
                    }
                    p
                }
            };
            let layout = pipe.get_bind_group_layout(0);
            let entries: Vec<wgpu::BindGroupEntry> = k
                .bufs
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: match b {
                        BufId::Arena => arena.as_entire_binding(),
                        BufId::Half => half.as_entire_binding(),
                        BufId::Input(j) => inputs[*j].as_entire_binding(),
                        BufId::Const(j) => consts[*j].as_entire_binding(),
                    },
                })
                .collect();
            let bg = dev.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(&k.name),
                layout: &layout,
                entries: &entries,
            });
            steps.push((pipe, bg, k.groups));
            kernel_names.push(k.name.clone());
        }
        let mut staging = Vec::new();
        for r in &low.outputs {
            staging.push(dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rlx readback"),
                size: ((r.numel() * r.elem_bytes()).div_ceil(4) * 4).max(4) as u64,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }));
        }
        let flag_staging = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx flag"),
            size: 4,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let n_in = inputs.len();
        let p = GpuProgram {
            ctx,
            arena,
            arena_words: low.arena_words,
            half,
            wide,
            inputs,
            input_types,
            steps,
            outputs: low.outputs.into_iter().zip(output_types).collect(),
            consts,
            staging,
            flag_staging,
            flagging: low.flagging,
            resident: Mutex::new((0..n_in).map(|_| None).collect()),
            pinned: Mutex::new(vec![false; n_in]),
            run_lock: Mutex::new(()),
            kernel_names,
        };
        Ok((p, scopes))
    }

    /// Promise that inputs `idx` (weights, say) will not change: after their
    /// first upload they are neither uploaded nor fingerprinted again. The
    /// default (unpinned) path re-checks every input's bytes on each run.
    pub fn pin_inputs(&self, idx: &[usize]) {
        if let Ok(mut p) = self.pinned.lock() {
            for &i in idx {
                if let Some(x) = p.get_mut(i) {
                    *x = true;
                }
            }
        }
    }

    /// Pinned input `i` changed at `at` to `values`: those elements are
    /// written into its buffer (the next run's commands follow the write
    /// in the queue). Types whose GPU layout differs from the host's by
    /// more than a word size (bool, a 16-bit value not on a word boundary)
    /// are uploaded whole on the next run instead.
    pub fn update_pinned(
        &self,
        i: usize,
        at: rlx_runtime::Runs,
        values: &HostTensor,
    ) -> Result<(), WgpuError> {
        let want = self
            .input_types
            .get(i)
            .ok_or_else(|| WgpuError::Input(format!("no input {i}")))?;
        if values.dtype() != want.dtype {
            return Err(WgpuError::Input(format!(
                "input {i} is {}, the update is {}",
                want.dtype,
                values.dtype()
            )));
        }
        let mut res = self
            .resident
            .lock()
            .map_err(|_| WgpuError::Gpu("residency lock poisoned".into()))?;
        let pinned = self.pinned.lock().map(|p| p.get(i) == Some(&true));
        if !matches!(pinned, Ok(true)) || res[i].is_none() {
            // Not on the GPU yet (or fingerprinted each run): the next run
            // uploads the caller's tensor as it is.
            return Ok(());
        }
        let eb = match (values.dtype(), self.wide) {
            (DType::F32 | DType::I32, _) | (DType::F16, true) => 4,
            (DType::I64, _) => 8,
            (DType::F16, false)
                if [at.len, at.start, at.stride]
                    .iter()
                    .all(|x| x.is_multiple_of(2)) =>
            {
                2
            }
            _ => {
                res[i] = None;
                return Ok(());
            }
        };
        let bytes = to_words(values, self.wide)?;
        let run = at.len * eb;
        for (r, start) in at.starts().enumerate() {
            let src = &bytes[r * run..(r + 1) * run];
            if !src.is_empty() {
                self.ctx
                    .queue
                    .write_buffer(&self.inputs[i], (start * eb) as u64, src);
            }
        }
        Ok(())
    }

    /// Upload the inputs whose contents changed since the last run.
    fn upload(&self, inputs: &[&HostTensor]) -> Result<(), WgpuError> {
        if inputs.len() != self.inputs.len() {
            return Err(WgpuError::Input(format!(
                "expected {} inputs, got {}",
                self.inputs.len(),
                inputs.len()
            )));
        }
        let mut res = self
            .resident
            .lock()
            .map_err(|_| WgpuError::Gpu("residency lock poisoned".into()))?;
        let pinned = self.pinned.lock().map(|p| p.clone()).unwrap_or_default();
        for (i, t) in inputs.iter().enumerate() {
            let want = &self.input_types[i];
            if pinned.get(i) == Some(&true) && res[i].is_some() {
                continue;
            }
            if t.dtype() != want.dtype || t.shape() != &want.shape {
                return Err(WgpuError::Input(format!(
                    "input {i} is {}{}, the program takes {want}",
                    t.dtype(),
                    t.shape()
                )));
            }
            // Fingerprint the caller's bytes in place (no copy for f32/i32/i64).
            let owned;
            let bytes: &[u8] = match t.data() {
                TensorData::F32(v) => bytemuck::cast_slice(v),
                TensorData::I32(v) => bytemuck::cast_slice(v),
                TensorData::I64(v) => bytemuck::cast_slice(v),
                // Whole words already (GGUF rows usually are): no copy.
                TensorData::Packed(v) if v.len() % 4 == 0 => v,
                _ => {
                    owned = to_words(t, self.wide)?;
                    &owned
                }
            };
            let src_ptr = bytes.as_ptr() as usize;
            let print = fingerprint(bytes);
            let same = matches!(&res[i], Some(r) if r.ptr == src_ptr && r.len == bytes.len() && r.print == print);
            if !same {
                self.ctx.queue.write_buffer(&self.inputs[i], 0, bytes);
                res[i] = Some(Resident {
                    ptr: src_ptr,
                    len: bytes.len(),
                    print,
                });
            }
        }
        Ok(())
    }

    /// Run: uploads, one pass with every kernel, readback.
    // The lock spans the readback's await on purpose: runs share the arena
    // and staging buffers. Natively the await is resolved inside this call
    // (device.poll), so holding a std Mutex is fine; in the single-threaded
    // browser a second concurrent run gets an error instead of waiting.
    #[allow(clippy::await_holding_lock)]
    pub async fn run_async(&self, inputs: &[&HostTensor]) -> Result<Vec<HostTensor>, WgpuError> {
        #[cfg(not(target_arch = "wasm32"))]
        let _guard = self
            .run_lock
            .lock()
            .map_err(|_| WgpuError::Gpu("run lock poisoned".into()))?;
        #[cfg(target_arch = "wasm32")]
        let _guard = self.run_lock.try_lock().map_err(|_| {
            WgpuError::Input("this program is already running: await the previous run first".into())
        })?;
        self.ctx.check()?;
        let scopes = crate::context::Scopes::push(&self.ctx.device);
        self.upload(inputs)?;
        let flag_off = (self.arena_words as u64 - 1) * 4;
        self.ctx
            .queue
            .write_buffer(&self.arena, flag_off, &[0u8; 4]);
        let mut enc = self
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rlx run"),
            });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("rlx graph"),
                timestamp_writes: None,
            });
            for (pipe, bg, g) in &self.steps {
                pass.set_pipeline(pipe);
                pass.set_bind_group(0, bg, &[]);
                pass.dispatch_workgroups(g[0], g[1], g[2]);
            }
        }
        for ((r, _), st) in self.outputs.iter().zip(&self.staging) {
            let eb = r.elem_bytes() as u64;
            // Whole words (an odd f16 count reads the padding after it).
            let bytes = (r.numel() as u64 * eb).div_ceil(4) * 4;
            if bytes == 0 {
                continue;
            }
            let src = match r.buf {
                BufId::Arena => &self.arena,
                BufId::Half => &self.half,
                BufId::Input(j) => &self.inputs[j],
                BufId::Const(j) => &self.consts[j],
            };
            enc.copy_buffer_to_buffer(src, r.offset as u64 * eb, st, 0, bytes);
        }
        enc.copy_buffer_to_buffer(&self.arena, flag_off, &self.flag_staging, 0, 4);
        self.ctx.queue.submit([enc.finish()]);
        scopes.pop().await?;
        let mut pending = Vec::new();
        for st in self
            .staging
            .iter()
            .chain(std::iter::once(&self.flag_staging))
        {
            let (tx, rx) = oneshot::channel();
            st.slice(..)
                .map_async(wgpu::MapMode::Read, move |r| tx.send(r));
            pending.push(rx);
        }
        #[cfg(not(target_arch = "wasm32"))]
        self.ctx
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| WgpuError::Gpu(e.to_string()))?;
        for rx in pending {
            rx.await
                .ok_or_else(|| WgpuError::DeviceLost {
                    why: "readback callback dropped".into(),
                })?
                .map_err(|e| self.ctx.lost_or(WgpuError::Gpu(format!("readback: {e}"))))?;
        }
        self.ctx.check()?;
        let flag = {
            let v = self
                .flag_staging
                .slice(..)
                .get_mapped_range()
                .map_err(|e| WgpuError::Gpu(e.to_string()))?;
            let w = u32::from_le_bytes(v[..4].try_into().unwrap_or([0; 4]));
            drop(v);
            self.flag_staging.unmap();
            w
        };
        let mut out = Vec::new();
        for ((r, ty), st) in self.outputs.iter().zip(&self.staging) {
            let bytes = r.numel() * r.elem_bytes();
            let t = {
                let v = st
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| WgpuError::Gpu(e.to_string()))?;
                from_words(ty, &v[..bytes], self.wide)?
            };
            st.unmap();
            out.push(t);
        }
        if flag != 0 {
            return Err(WgpuError::Runtime {
                op: self.flagging.join(", "),
                why: "an index was out of range".into(),
            });
        }
        Ok(out)
    }
}

impl GpuProgram {
    /// Seconds per execution of the compute pass alone (no uploads, no
    /// readback): `repeats` passes in one command buffer, timed on the host
    /// from submit to completion. Run once normally first (inputs uploaded).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn time_compute(&self, repeats: usize) -> Result<f64, WgpuError> {
        let _guard = self
            .run_lock
            .lock()
            .map_err(|_| WgpuError::Gpu("run lock poisoned".into()))?;
        let mut enc = self
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rlx timing"),
            });
        for _ in 0..repeats {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: None,
            });
            for (pipe, bg, g) in &self.steps {
                pass.set_pipeline(pipe);
                pass.set_bind_group(0, bg, &[]);
                pass.dispatch_workgroups(g[0], g[1], g[2]);
            }
        }
        let cb = enc.finish();
        let t0 = std::time::Instant::now();
        self.ctx.queue.submit([cb]);
        self.ctx
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| WgpuError::Gpu(e.to_string()))?;
        self.ctx.check()?;
        Ok(t0.elapsed().as_secs_f64() / repeats.max(1) as f64)
    }

    /// Whether [`GpuProgram::profile_kernels`] reads GPU timestamps.
    pub fn timestamps(&self) -> bool {
        self.ctx.info.timestamps
    }

    /// Milliseconds per kernel. With GPU timestamps (`AdapterInfo::timestamps`):
    /// stamps between the dispatches of whole passes, each kernel's time
    /// being the median over `repeats` passes of the interval from its
    /// start stamp to the next (so it includes the barrier after it) — these
    /// add up to the pass. Without them: each kernel alone in its own
    /// submit, host-timed (for finding the slow ones, not for totals).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn profile_kernels(&self, repeats: usize) -> Result<Vec<(String, f64)>, WgpuError> {
        if self.ctx.info.timestamps {
            return self.profile_stamped(repeats.max(1));
        }
        self.profile_alone(repeats)
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn profile_stamped(&self, repeats: usize) -> Result<Vec<(String, f64)>, WgpuError> {
        let dev = &self.ctx.device;
        let n = self.steps.len() as u32 + 1;
        let qs = dev.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("rlx profile"),
            ty: wgpu::QueryType::Timestamp,
            count: n,
        });
        let bytes = n as u64 * 8;
        let resolve = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx stamps"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx stamps read"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let tick_ns = self.ctx.queue.get_timestamp_period() as f64;
        let mut per: Vec<Vec<f64>> = vec![Vec::new(); self.steps.len()];
        for _ in 0..repeats {
            let mut enc =
                dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: None,
                });
                for (i, (pipe, bg, g)) in self.steps.iter().enumerate() {
                    pass.write_timestamp(&qs, i as u32);
                    pass.set_pipeline(pipe);
                    pass.set_bind_group(0, bg, &[]);
                    pass.dispatch_workgroups(g[0], g[1], g[2]);
                }
                pass.write_timestamp(&qs, n - 1);
            }
            enc.resolve_query_set(&qs, 0..n, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &read, 0, bytes);
            self.ctx.queue.submit([enc.finish()]);
            let (tx, rx) = oneshot::channel();
            read.slice(..)
                .map_async(wgpu::MapMode::Read, move |r| tx.send(r));
            dev.poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| WgpuError::Gpu(e.to_string()))?;
            pollster::block_on(rx)
                .ok_or_else(|| WgpuError::DeviceLost {
                    why: "readback callback dropped".into(),
                })?
                .map_err(|e| WgpuError::Gpu(format!("timestamps: {e}")))?;
            let t: Vec<u64> = {
                let v = read
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| WgpuError::Gpu(e.to_string()))?;
                bytemuck::pod_collect_to_vec::<u8, u64>(&v)
            };
            read.unmap();
            for (i, w) in t.windows(2).enumerate() {
                per[i].push(w[1].saturating_sub(w[0]) as f64 * tick_ns * 1e-6);
            }
        }
        self.ctx.check()?;
        Ok(per
            .into_iter()
            .zip(&self.kernel_names)
            .map(|(mut v, name)| {
                v.sort_by(|a, b| a.total_cmp(b));
                (name.clone(), v[v.len() / 2])
            })
            .collect())
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn profile_alone(&self, repeats: usize) -> Result<Vec<(String, f64)>, WgpuError> {
        let mut out = Vec::new();
        for ((pipe, bg, g), name) in self.steps.iter().zip(&self.kernel_names) {
            let mut enc = self
                .ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            for _ in 0..repeats {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: None,
                });
                pass.set_pipeline(pipe);
                pass.set_bind_group(0, bg, &[]);
                pass.dispatch_workgroups(g[0], g[1], g[2]);
            }
            let cb = enc.finish();
            let t0 = std::time::Instant::now();
            self.ctx.queue.submit([cb]);
            self.ctx
                .device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| WgpuError::Gpu(e.to_string()))?;
            out.push((
                name.clone(),
                t0.elapsed().as_secs_f64() * 1e3 / repeats.max(1) as f64,
            ));
        }
        Ok(out)
    }

    /// Number of kernels a run launches.
    pub fn kernel_count(&self) -> usize {
        self.steps.len()
    }
}

/// Pop error scopes where blocking is allowed (compile time, natively).
fn pollster_free_pop(s: crate::context::Scopes) -> Result<(), WgpuError> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        pollster::block_on(s.pop())
    }
    #[cfg(target_arch = "wasm32")]
    {
        drop(s);
        Ok(())
    }
}

/// Read a whole device buffer holding `ty` (blocking; native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn read_buffer(
    ctx: &GpuContext,
    buf: &wgpu::Buffer,
    ty: &TensorType,
    wide: bool,
) -> Result<HostTensor, WgpuError> {
    let exact = ty.shape.numel() * elem_bytes(ty.dtype, wide);
    let bytes = exact.div_ceil(4) as u64 * 4;
    let st = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("rlx download"),
        size: bytes.max(4),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    if bytes > 0 {
        enc.copy_buffer_to_buffer(buf, 0, &st, 0, bytes);
    }
    ctx.queue.submit([enc.finish()]);
    let (tx, rx) = oneshot::channel();
    st.slice(..)
        .map_async(wgpu::MapMode::Read, move |r| tx.send(r));
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| WgpuError::Gpu(e.to_string()))?;
    pollster::block_on(rx)
        .ok_or_else(|| WgpuError::DeviceLost {
            why: "readback callback dropped".into(),
        })?
        .map_err(|e| ctx.lost_or(WgpuError::Gpu(format!("readback: {e}"))))?;
    ctx.check()?;
    let v = st
        .slice(..)
        .get_mapped_range()
        .map_err(|e| WgpuError::Gpu(e.to_string()))?;
    from_words(ty, &v[..exact], wide)
}
