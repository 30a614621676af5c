//! The key/value cache and one forward step over it.
//!
//! Each layer's keys and values live in a (1, kv_heads, capacity, head_dim)
//! tensor. A step runs the decoder graph compiled for (T new tokens,
//! P = capacity cached positions): the graph reads the whole cache, a
//! keep-mask says which positions are filled (and, for sliding layers,
//! within the window), and the graph returns the new tokens' keys and
//! values, which are written into the cache in place. Capacities are
//! powers of two from 64 up to the context limit, so a generation compiles
//! a handful of graphs, each once, and the cache grows by copying at most
//! log₂(context) times.
//!
//! The host tensors are the cache of record, but a compiled graph keeps
//! its cache inputs resident (`Compiled::keep_resident`): a GPU holds them
//! in device buffers, and each step sends only the positions written since
//! that graph last ran (`Compiled::update_resident`) instead of the whole
//! cache. [`Steps`] remembers, per graph, which cache (by id: a new cache
//! or a grown one gets a new id) and how many positions its copy holds; a
//! graph that last ran on another cache gets the whole tensor again.

use super::load::LlmModel;
use super::LlmError;
use rlx::{Compiled, Device, HostTensor, Session};
use rlx_ir::tensor::TensorData;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Prompt tokens per prefill graph: prompts are padded to a multiple of
/// `PAD` and longer ones are run in chunks of `CHUNK`.
const PAD: usize = 16;
pub(crate) const CHUNK: usize = 256;
const MIN_CAPACITY: usize = 64;

/// The cache of one generation.
pub(crate) struct KvCache {
    /// Unique per cache and capacity: which copy a graph's resident inputs hold.
    id: u64,
    capacity: usize,
    /// Filled positions.
    pub len: usize,
    k: Vec<HostTensor>,
    v: Vec<HostTensor>,
}

fn fresh_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl KvCache {
    pub fn new() -> KvCache {
        KvCache {
            id: fresh_id(),
            capacity: 0,
            len: 0,
            k: vec![],
            v: vec![],
        }
    }
}

/// Compiled graphs by (T, P), on one device, for one model (every method
/// takes that model: the graphs hold its shapes).
pub struct Steps {
    pub device: Device,
    pub limit: usize,
    compiled: HashMap<(usize, usize), Arc<Compiled>>,
    /// Per graph: the cache (id) its resident cache inputs copy, and how
    /// many of its positions.
    synced: HashMap<(usize, usize), (u64, usize)>,
    /// Whether graphs keep their cache inputs resident (the default).
    resident_cache: bool,
    /// Compiles every graph, with its options (mixed precision:
    /// [`Steps::set_amp`]).
    session: Session,
}

fn bucket(n: usize, limit: usize) -> usize {
    n.max(MIN_CAPACITY).next_power_of_two().min(limit)
}

fn f32_data(t: HostTensor) -> Vec<f32> {
    match t.into_data() {
        TensorData::F32(v) => v,
        _ => unreachable!("the cache is f32"),
    }
}

impl Steps {
    /// Graphs of `model` on `device`, with the default context limit.
    pub fn for_model(model: &LlmModel, device: Device) -> Steps {
        Steps::new(device, super::generate::default_context(model))
    }

    /// Set the context limit; an error above the model's trained context.
    pub fn set_context(&mut self, model: &LlmModel, n: usize) -> Result<(), LlmError> {
        super::generate::set_context(model, self, n)
    }

    pub(crate) fn new(device: Device, limit: usize) -> Steps {
        Steps {
            device,
            limit,
            compiled: HashMap::new(),
            synced: HashMap::new(),
            resident_cache: true,
            session: Session::new(rlx::CompileOptions::default()),
        }
    }

    /// Drop every compiled graph and the session that compiled them (its
    /// cache would hand the same executables back); compile from now on
    /// with `opts`.
    fn reset(&mut self, opts: rlx::CompileOptions) {
        self.compiled.clear();
        self.synced.clear();
        self.session = Session::new(opts);
    }

    /// Mixed precision for the graphs compiled from now on: `Amp::f16()`
    /// runs the matmuls (the block-quantized ones too) and attention in
    /// f16 with f32 accumulation where the device has 16-bit kernels
    /// (WebGPU with `shader-f16`, CUDA; the CPU widens them around its
    /// f32 kernels); norms, softmax and the cache's host copy stay f32.
    /// Greedy tokens then follow the reference only as far as f16
    /// rounding lets them (docs/llm.md).
    pub fn set_amp(&mut self, amp: rlx::Amp) {
        if amp != *self.amp() {
            let opts = rlx::CompileOptions {
                amp,
                ..self.session.options().clone()
            };
            self.reset(opts);
        }
    }

    /// The mixed precision graphs compile with.
    pub fn amp(&self) -> &rlx::Amp {
        &self.session.options().amp
    }

    /// Whether compiled graphs keep the key/value cache resident (on by
    /// default): off, every step passes the whole cache in, as the host
    /// holds it — for measuring what residency saves. Graphs compiled
    /// before are dropped, with the session that compiled them (its
    /// cache would hand back the same executables, their cache inputs
    /// still resident).
    pub fn set_resident_cache(&mut self, on: bool) {
        if on != self.resident_cache {
            self.resident_cache = on;
            self.reset(self.session.options().clone());
        }
    }

    /// The graph for (t, p), compiled on first use.
    pub fn compiled(
        &mut self,
        model: &LlmModel,
        t: usize,
        p: usize,
    ) -> Result<Arc<Compiled>, LlmError> {
        if let Some(c) = self.compiled.get(&(t, p)) {
            return Ok(c.clone());
        }
        let g = model.decoder.model(t, p).to_mir()?;
        let c = self.session.compile(&g, self.device)?;
        Ok(self.keep(model, t, p, c))
    }

    /// [`Steps::compiled`], building without blocking (WebGPU in the page).
    pub async fn compiled_async(
        &mut self,
        model: &LlmModel,
        t: usize,
        p: usize,
    ) -> Result<Arc<Compiled>, LlmError> {
        if let Some(c) = self.compiled.get(&(t, p)) {
            return Ok(c.clone());
        }
        let g = model.decoder.model(t, p).to_mir()?;
        let c = Arc::new(rlx::compile_with_async(&g, self.device, self.session.options()).await?);
        Ok(self.keep(model, t, p, c))
    }

    /// The dispatch report of the graph for (t, p): the compiled one's, or
    /// a plan's (no executable is built, so it needs no GPU and no await).
    pub fn report(
        &mut self,
        model: &LlmModel,
        t: usize,
        p: usize,
    ) -> Result<rlx::DispatchReport, LlmError> {
        if let Some(c) = self.compiled.get(&(t, p)) {
            return Ok(c.dispatch_report().clone());
        }
        let g = model.decoder.model(t, p).to_mir()?;
        Ok(rlx::plan_with(&g, self.device, self.session.options())?.report)
    }

    /// Hold `c` as the graph for (t, p), its weights resident.
    fn keep(&mut self, model: &LlmModel, t: usize, p: usize, c: Arc<Compiled>) -> Arc<Compiled> {
        let first = model.decoder.data_inputs(p);
        let cache = if p > 0 && self.resident_cache {
            first - 2 * model.config.layers
        } else {
            first
        };
        c.keep_resident(&(cache..first + model.weights().len()).collect::<Vec<_>>());
        self.compiled.insert((t, p), c.clone());
        c
    }

    /// Grow the cache to hold `need` positions (copying what it has).
    fn reserve(&self, model: &LlmModel, cache: &mut KvCache, need: usize) -> Result<(), LlmError> {
        if need <= cache.capacity {
            return Ok(());
        }
        let c = &model.config;
        let cap = bucket(need, self.limit);
        cache.id = fresh_id();
        let (kvh, d, filled) = (c.kv_heads, c.head_dim, cache.len);
        let grow = |old: Option<HostTensor>| -> Result<HostTensor, LlmError> {
            let mut data = vec![0f32; kvh * cap * d];
            if let Some(o) = old {
                let src = f32_data(o);
                let old_cap = src.len() / (kvh * d);
                for h in 0..kvh {
                    let n = filled * d;
                    data[h * cap * d..h * cap * d + n]
                        .copy_from_slice(&src[h * old_cap * d..h * old_cap * d + n]);
                }
            }
            Ok(HostTensor::new(
                rlx_ir::DType::F32,
                [1, kvh, cap, d],
                TensorData::F32(data),
            )?)
        };
        let mut k = std::mem::take(&mut cache.k).into_iter();
        let mut v = std::mem::take(&mut cache.v).into_iter();
        for _ in 0..c.layers {
            cache.k.push(grow(k.next())?);
            cache.v.push(grow(v.next())?);
        }
        cache.capacity = cap;
        Ok(())
    }

    /// Run `tokens` (at most [`CHUNK`]) after the cached ones; returns the
    /// logits of the last token and writes the tokens' keys and values.
    pub(crate) fn step(
        &mut self,
        model: &LlmModel,
        cache: &mut KvCache,
        tokens: &[u32],
    ) -> Result<Vec<f32>, LlmError> {
        let (step, compiled) = self.ready(model, cache, tokens)?;
        let outs = compiled.run_refs(&step.refs(model, cache))?;
        step.absorb(model, cache, outs)
    }

    /// The step of `tokens`, its graph, and that graph's resident cache
    /// brought up to date.
    fn ready(
        &mut self,
        model: &LlmModel,
        cache: &mut KvCache,
        tokens: &[u32],
    ) -> Result<(Step, Arc<Compiled>), LlmError> {
        let step = self.prepare(model, cache, tokens)?;
        let compiled = self.compiled(model, step.t, step.p)?;
        self.sync(model, &compiled, &step, cache)?;
        Ok((step, compiled))
    }

    /// Profile the step of `tokens`, then run it (its keys and values go
    /// into the cache, so a later step profiles over them).
    pub(crate) fn profile_step(
        &mut self,
        model: &LlmModel,
        cache: &mut KvCache,
        tokens: &[u32],
    ) -> Result<rlx::Profile, LlmError> {
        let (step, compiled) = self.ready(model, cache, tokens)?;
        let refs = step.refs(model, cache);
        let profile = compiled.profile(&refs)?;
        let outs = compiled.run_refs(&refs)?;
        drop(refs);
        step.absorb(model, cache, outs)?;
        Ok(profile)
    }

    /// Bring the resident cache inputs of the graph for `step` up to the
    /// host cache: the positions filled since it last ran on this cache,
    /// or all of them if it last ran on another one.
    fn sync(
        &mut self,
        model: &LlmModel,
        compiled: &Compiled,
        step: &Step,
        cache: &KvCache,
    ) -> Result<(), LlmError> {
        if step.p == 0 || !self.resident_cache {
            return Ok(());
        }
        let key = (step.t, step.p);
        let c = &model.config;
        let first = model.decoder.data_inputs(step.p) - 2 * c.layers;
        let (kvh, d, cap) = (c.kv_heads, c.head_dim, cache.capacity);
        let held = match self.synced.get(&key) {
            Some(&(id, held)) if id == cache.id && held <= cache.len => Some(held),
            _ => None,
        };
        for (layer, (k, v)) in cache.k.iter().zip(&cache.v).enumerate() {
            for (j, t) in [k, v].into_iter().enumerate() {
                let input = first + 2 * layer + j;
                match held {
                    Some(h) if h == cache.len => {}
                    Some(h) => {
                        let at = rlx::Runs {
                            start: h * d,
                            count: kvh,
                            len: (cache.len - h) * d,
                            stride: cap * d,
                        };
                        let TensorData::F32(data) = t.data() else {
                            unreachable!("the cache is f32")
                        };
                        let rows: Vec<f32> = at
                            .starts()
                            .flat_map(|s| data[s..s + at.len].iter().copied())
                            .collect();
                        let rows = HostTensor::from_slice(&rows, [at.numel()])?;
                        compiled.update_resident(input, at, &rows)?;
                    }
                    None => {
                        compiled.update_resident(input, rlx::Runs::whole(t.shape().numel()), t)?
                    }
                }
            }
        }
        self.synced.insert(key, (cache.id, cache.len));
        Ok(())
    }

    /// [`Steps::step`] without blocking (the browser's WebGPU compiles and
    /// runs only asynchronously).
    pub(crate) async fn step_async(
        &mut self,
        model: &LlmModel,
        cache: &mut KvCache,
        tokens: &[u32],
    ) -> Result<Vec<f32>, LlmError> {
        let step = self.prepare(model, cache, tokens)?;
        let compiled = self.compiled_async(model, step.t, step.p).await?;
        self.sync(model, &compiled, &step, cache)?;
        let outs = compiled.run_refs_async(&step.refs(model, cache)).await?;
        step.absorb(model, cache, outs)
    }

    /// The cache grown for `tokens` and the step's inputs (an error past
    /// the context limit, before any work).
    fn prepare(
        &self,
        model: &LlmModel,
        cache: &mut KvCache,
        tokens: &[u32],
    ) -> Result<Step, LlmError> {
        let n = tokens.len();
        debug_assert!(n > 0 && n <= CHUNK);
        let len = cache.len;
        if len + n > self.limit {
            return Err(LlmError::Context {
                limit: self.limit,
                wanted: len + n,
                prompt: len,
            });
        }
        let t = if n == 1 { 1 } else { n.next_multiple_of(PAD) };
        // A first prefill attends to nothing cached.
        self.reserve(model, cache, len + n)?;
        let p = if len == 0 { 0 } else { cache.capacity };
        let inputs = step_inputs(model, len, n, t, p, tokens)?;
        Ok(Step {
            n,
            len,
            t,
            p,
            inputs,
        })
    }
}

/// One step's shape and inputs, between [`Steps::prepare`] and
/// [`Step::absorb`].
struct Step {
    /// Real tokens, cached before them, padded tokens, cache slots read.
    n: usize,
    len: usize,
    t: usize,
    p: usize,
    inputs: Vec<HostTensor>,
}

impl Step {
    /// The graph's inputs: the step's, the cache (when it reads one), the
    /// weights.
    fn refs<'a>(&'a self, model: &'a LlmModel, cache: &'a KvCache) -> Vec<&'a HostTensor> {
        let mut refs: Vec<&HostTensor> = self.inputs.iter().collect();
        if self.p > 0 {
            for (k, v) in cache.k.iter().zip(&cache.v) {
                refs.extend([k, v]);
            }
        }
        refs.extend(model.weights());
        refs
    }

    /// Write the new keys and values into the cache; the last token's
    /// logits.
    fn absorb(
        self,
        model: &LlmModel,
        cache: &mut KvCache,
        outs: Vec<HostTensor>,
    ) -> Result<Vec<f32>, LlmError> {
        let (n, len, t) = (self.n, self.len, self.t);
        let mut outs = outs.into_iter();
        let missing = || {
            LlmError::Model(rlx::Error::Runtime(rlx::RuntimeError::Config(
            "the decoder graph returned fewer outputs than logits + a key and a value per layer"
                .into(),
        )))
        };
        let logits = outs.next().ok_or_else(missing)?.to_vec::<f32>()?;
        let c = &model.config;
        let (kvh, d, cap) = (c.kv_heads, c.head_dim, cache.capacity);
        for layer in 0..c.layers {
            for store in [&mut cache.k, &mut cache.v] {
                let new = outs.next().ok_or_else(missing)?.to_vec::<f32>()?;
                let slot = std::mem::replace(&mut store[layer], HostTensor::scalar(0f32));
                let mut data = f32_data(slot);
                for h in 0..kvh {
                    let dst = (h * cap + len) * d;
                    let src = h * t * d;
                    data[dst..dst + n * d].copy_from_slice(&new[src..src + n * d]);
                }
                store[layer] =
                    HostTensor::new(rlx_ir::DType::F32, [1, kvh, cap, d], TensorData::F32(data))?;
            }
        }
        cache.len += n;
        Ok(logits)
    }
}

/// Embedding rows, last, RoPE tables, masks for `n` real tokens padded to `t` at
/// positions `len..`, over `p` cache slots.
fn step_inputs(
    model: &LlmModel,
    len: usize,
    n: usize,
    t: usize,
    p: usize,
    tokens: &[u32],
) -> Result<Vec<HostTensor>, LlmError> {
    let c = &model.config;
    let pos: Vec<usize> = (len..len + t).collect();
    let half = c.head_dim / 2;
    let (cos, sin) = c.rope_tables(&pos, false);
    let (cos_l, sin_l) = c.rope_tables(&pos, true);
    let window = c.sliding_window;
    let mask = |local: bool| {
        let s = p + t;
        let mut m = vec![false; t * s];
        for i in 0..t {
            let qpos = len + i;
            let near = |kpos: usize| !local || window == 0 || qpos - kpos < window;
            for j in 0..len.min(p) {
                m[i * s + j] = near(j);
            }
            for j in 0..=i {
                m[i * s + p + j] = near(len + j);
            }
        }
        HostTensor::from_slice(&m, [1, 1, 1, t, s])
    };
    Ok(vec![
        model.embed(tokens, t)?,
        HostTensor::from_slice(&[(n - 1) as i64], [1])?,
        HostTensor::from_slice(&cos, [t, half])?,
        HostTensor::from_slice(&sin, [t, half])?,
        HostTensor::from_slice(&cos_l, [t, half])?,
        HostTensor::from_slice(&sin_l, [t, half])?,
        mask(false)?,
        mask(true)?,
    ])
}
