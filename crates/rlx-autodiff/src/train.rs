//! Running training steps: a compiled step program that keeps the weights
//! and optimizer state between steps (each step's outputs become the next
//! step's inputs by move — the CPU backend's memory is host memory, so
//! nothing is copied), a progress line with loss and throughput, and
//! safetensors checkpoints.

use crate::amp::{MixedPrecision, ScalerState};

/// Checkpoint metadata keys of the loss scaler's state.
const SCALE: &str = "loss_scale";
const GOOD: &str = "loss_scale_good_steps";
const SKIPPED: &str = "loss_scale_skipped";
use crate::error::{AdError, Result};
use crate::optim::{build, init_state, Optimizer, StepGraph};
use rlx_ir::{Graph, HostTensor};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// One compiled training step plus the tensors it carries.
pub struct TrainStep {
    exe: rlx::Compiled,
    loss: Graph,
    param_idx: Vec<usize>,
    opt: Optimizer,
    options: rlx::CompileOptions,
    layout: StepGraph,
    /// Params, then optimizer state, in the step graph's input order.
    carried: Vec<HostTensor>,
    steps: u64,
    mixed: Option<MixedPrecision>,
    scaler: Option<ScalerState>,
    skipped_last: bool,
}

/// The step graph of `loss`, in mixed precision when `mixed` says so.
fn layout(
    loss: &Graph,
    params: &[usize],
    opt: &Optimizer,
    mixed: Option<&MixedPrecision>,
) -> Result<StepGraph> {
    match mixed {
        None => build(loss, loss, params, opt, false),
        Some(mp) => {
            let diff = crate::amp::prepare(loss, mp)?;
            build(loss, &diff, params, opt, mp.scaler.is_some())
        }
    }
}

impl TrainStep {
    /// Compile the step for `loss` with `params` (loss-graph input indices)
    /// starting from `init` (one tensor per param).
    pub fn new(
        loss: &Graph,
        params: &[usize],
        init: Vec<HostTensor>,
        opt: Optimizer,
    ) -> Result<Self> {
        Self::with_options(loss, params, init, opt, &rlx::CompileOptions::default())
    }

    pub fn with_options(
        loss: &Graph,
        params: &[usize],
        init: Vec<HostTensor>,
        opt: Optimizer,
        options: &rlx::CompileOptions,
    ) -> Result<Self> {
        Self::build(loss, params, init, opt, options, None)
    }

    /// A step in mixed precision: the forward pass (and so the backward
    /// contractions) autocast to f16/bf16, weights and optimizer state in
    /// f32, with dynamic loss scaling when `mixed.scaler` is set (see
    /// [`crate::amp`]).
    pub fn mixed_precision(
        loss: &Graph,
        params: &[usize],
        init: Vec<HostTensor>,
        opt: Optimizer,
        mixed: MixedPrecision,
    ) -> Result<Self> {
        Self::build(
            loss,
            params,
            init,
            opt,
            &rlx::CompileOptions::default(),
            Some(mixed),
        )
    }

    fn build(
        loss: &Graph,
        params: &[usize],
        init: Vec<HostTensor>,
        opt: Optimizer,
        options: &rlx::CompileOptions,
        mixed: Option<MixedPrecision>,
    ) -> Result<Self> {
        if init.len() != params.len() {
            return Err(AdError::Arg(format!(
                "{} initial tensors for {} params",
                init.len(),
                params.len()
            )));
        }
        for (k, (&i, t)) in params.iter().zip(&init).enumerate() {
            let want = loss.ty(loss.inputs[i]);
            if t.dtype() != want.dtype || t.shape() != &want.shape {
                return Err(AdError::Arg(format!(
                    "initial value {k} is {} {}, the graph expects {want}",
                    t.dtype(),
                    t.shape()
                )));
            }
        }
        let layout = layout(loss, params, &opt, mixed.as_ref())?;
        let exe = rlx::compile_with(&layout.graph, rlx::Device::Cpu, options)?;
        let mut carried = init;
        carried.extend(init_state(&opt, &carried)?);
        let scaler = mixed
            .as_ref()
            .and_then(|m| m.scaler.as_ref())
            .map(ScalerState::new);
        Ok(TrainStep {
            exe,
            loss: loss.clone(),
            param_idx: params.to_vec(),
            opt,
            options: options.clone(),
            layout,
            carried,
            steps: 0,
            mixed,
            scaler,
            skipped_last: false,
        })
    }

    /// Run one step on a batch (the loss graph's non-parameter inputs, in
    /// order); returns the loss before the update. With loss scaling, a
    /// step whose gradients overflowed changes nothing but the scale
    /// ([`TrainStep::skipped_last`]).
    pub fn step(&mut self, data: &[HostTensor]) -> Result<f64> {
        let want = self.layout.data.len() - usize::from(self.layout.scaled);
        if data.len() != want {
            return Err(AdError::Arg(format!(
                "the step takes {want} data inputs ({:?}), got {}",
                &self.layout.data[..want],
                data.len()
            )));
        }
        let scale = match &self.scaler {
            Some(st) => {
                let g = &self.layout.graph;
                let dt = g.ty(*g.inputs.last().expect("the scale input")).dtype;
                Some(HostTensor::from_f64(
                    dt,
                    rlx_ir::Shape::scalar(),
                    vec![st.scale],
                )?)
            }
            None => None,
        };
        let mut ins: Vec<&HostTensor> = self.carried.iter().collect();
        ins.extend(data);
        ins.extend(scale.as_ref());
        let mut outs = self.exe.run_refs(&ins)?;
        let loss = outs[0].to_f64_vec()?[0];
        if let (Some(st), Some(mp)) = (&mut self.scaler, &self.mixed) {
            let ok = outs.pop().expect("the finite flag").to_f64_vec()?[0] != 0.0;
            st.update(mp.scaler.as_ref().expect("a scaler"), ok);
            self.skipped_last = !ok;
        }
        // Output 1 + i replaces carried input i.
        self.carried = outs.drain(1..).collect();
        self.steps += 1;
        Ok(loss)
    }

    /// The loss scaler's state (with dynamic loss scaling).
    pub fn scaler(&self) -> Option<&ScalerState> {
        self.scaler.as_ref()
    }

    /// Whether the last step was skipped (a gradient overflowed).
    pub fn skipped_last(&self) -> bool {
        self.skipped_last
    }

    /// Change the learning rate (a schedule): the step is recompiled with
    /// the new constant; weights and optimizer state carry over.
    pub fn set_learning_rate(&mut self, lr: f64) -> Result<()> {
        let mut opt = self.opt;
        match &mut opt {
            Optimizer::Sgd { lr: l, .. }
            | Optimizer::Adam { lr: l, .. }
            | Optimizer::AdamW { lr: l, .. } => *l = lr,
        }
        let layout = layout(&self.loss, &self.param_idx, &opt, self.mixed.as_ref())?;
        self.exe = rlx::compile_with(&layout.graph, rlx::Device::Cpu, &self.options)?;
        self.layout = layout;
        self.opt = opt;
        Ok(())
    }

    pub fn optimizer(&self) -> Optimizer {
        self.opt
    }

    pub fn params(&self) -> &[HostTensor] {
        &self.carried[..self.layout.params.len()]
    }
    pub fn layout(&self) -> &StepGraph {
        &self.layout
    }
    pub fn steps(&self) -> u64 {
        self.steps
    }
    pub fn compiled(&self) -> &rlx::Compiled {
        &self.exe
    }

    fn named(&self) -> Vec<(String, &HostTensor)> {
        self.layout
            .params
            .iter()
            .chain(&self.layout.state)
            .cloned()
            .zip(&self.carried)
            .collect()
    }

    /// Save params and optimizer state as safetensors (metadata: `step`,
    /// and with dynamic loss scaling the scaler's `loss_scale`,
    /// `loss_scale_good_steps` and `loss_scale_skipped`).
    pub fn save_checkpoint(&self, path: impl AsRef<Path>) -> Result<()> {
        let named = self.named();
        let refs: Vec<(&str, &HostTensor)> = named.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let mut meta = BTreeMap::new();
        meta.insert("step".to_string(), self.steps.to_string());
        if let Some(st) = &self.scaler {
            // f64's Display is the shortest string that reads back exactly.
            meta.insert(SCALE.to_string(), st.scale.to_string());
            meta.insert(GOOD.to_string(), st.good_steps.to_string());
            meta.insert(SKIPPED.to_string(), st.skipped.to_string());
        }
        rlx_formats::safetensors::write_file(path, &refs, &meta)
            .map_err(|e| AdError::Arg(e.to_string()))
    }

    /// Restore params and state saved by [`TrainStep::save_checkpoint`]
    /// (names, dtypes and shapes must match).
    pub fn load_checkpoint(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let f =
            rlx_formats::SafetensorsFile::read(path).map_err(|e| AdError::Arg(e.to_string()))?;
        let names: Vec<String> = self
            .layout
            .params
            .iter()
            .chain(&self.layout.state)
            .cloned()
            .collect();
        let mut next = vec![];
        for (n, cur) in names.iter().zip(&self.carried) {
            let t = f.tensor(n).map_err(|e| AdError::Arg(e.to_string()))?;
            if t.dtype() != cur.dtype() || t.shape() != cur.shape() {
                return Err(AdError::Arg(format!(
                    "checkpoint tensor `{n}` is {} {}, expected {} {}",
                    t.dtype(),
                    t.shape(),
                    cur.dtype(),
                    cur.shape()
                )));
            }
            next.push(t);
        }
        // The loss scaler resumes where it was; a checkpoint without one
        // (saved by an f32 or bf16 run) starts it afresh.
        let meta = f.metadata();
        let scaler = match (&self.scaler, meta.get(SCALE)) {
            (Some(_), Some(scale)) => {
                let bad = |k: &str, v: &str| {
                    AdError::Arg(format!("checkpoint metadata `{k}` = `{v}` is not valid"))
                };
                let get = |k: &str| meta.get(k).map(String::as_str).unwrap_or("");
                let st = ScalerState {
                    scale: scale
                        .parse::<f64>()
                        .ok()
                        .filter(|s| s.is_finite() && *s > 0.0)
                        .ok_or_else(|| bad(SCALE, scale))?,
                    good_steps: get(GOOD).parse().map_err(|_| bad(GOOD, get(GOOD)))?,
                    skipped: get(SKIPPED)
                        .parse()
                        .map_err(|_| bad(SKIPPED, get(SKIPPED)))?,
                };
                Some(st)
            }
            (Some(_), None) => self
                .mixed
                .as_ref()
                .and_then(|m| m.scaler.as_ref())
                .map(ScalerState::new),
            (None, _) => None,
        };
        self.carried = next;
        self.scaler = scaler;
        self.steps = meta.get("step").and_then(|s| s.parse().ok()).unwrap_or(0);
        Ok(())
    }
}

/// What one pass over the batches did.
#[derive(Clone, Debug, Default)]
pub struct EpochStats {
    pub losses: Vec<f64>,
    pub examples: usize,
    pub seconds: f64,
}
impl EpochStats {
    pub fn mean_loss(&self) -> f64 {
        self.losses.iter().sum::<f64>() / self.losses.len().max(1) as f64
    }
    pub fn examples_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.examples as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Run `step` over `batches` (each: data tensors and the number of
/// examples in it), printing a progress line to stderr every few steps:
/// `label [#####.....] 120/469  loss 0.3124  12,345 ex/s`.
pub fn run_epoch(
    step: &mut TrainStep,
    label: &str,
    total: usize,
    batches: impl IntoIterator<Item = (Vec<HostTensor>, usize)>,
    quiet: bool,
) -> Result<EpochStats> {
    let t0 = Clock::start();
    let mut st = EpochStats::default();
    for (k, (data, n)) in batches.into_iter().enumerate() {
        let l = step.step(&data)?;
        if !l.is_finite() {
            return Err(AdError::Arg(format!(
                "{label}: the loss became {l} at step {}",
                step.steps()
            )));
        }
        st.losses.push(l);
        st.examples += n;
        st.seconds = t0.seconds();
        if !quiet && (k % 10 == 0 || k + 1 == total) {
            progress(label, k + 1, total, &st);
        }
    }
    if !quiet {
        eprintln!();
    }
    Ok(st)
}

fn progress(label: &str, done: usize, total: usize, st: &EpochStats) {
    let width = 24;
    let filled = (done * width) / total.max(1);
    let recent = &st.losses[st.losses.len().saturating_sub(20)..];
    let loss = recent.iter().sum::<f64>() / recent.len().max(1) as f64;
    eprint!(
        "\r{label} [{}{}] {done}/{total}  loss {loss:.4}  {:.0} ex/s   ",
        "#".repeat(filled),
        ".".repeat(width - filled),
        st.examples_per_second()
    );
    let _ = std::io::stderr().flush();
}

/// Wall time for throughput. `std::time::Instant` panics on
/// wasm32-unknown-unknown, so there the clock reads zero and the progress
/// line shows no rate.
struct Clock(#[cfg(not(target_arch = "wasm32"))] std::time::Instant);
impl Clock {
    fn start() -> Clock {
        Clock(
            #[cfg(not(target_arch = "wasm32"))]
            std::time::Instant::now(),
        )
    }
    fn seconds(&self) -> f64 {
        #[cfg(not(target_arch = "wasm32"))]
        return self.0.elapsed().as_secs_f64();
        #[cfg(target_arch = "wasm32")]
        return 0.0;
    }
}
