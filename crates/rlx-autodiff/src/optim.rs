//! Optimizers as graph transforms: a loss graph becomes one training-step
//! graph that computes the loss, its gradient and the updated parameters
//! and optimizer state, so a single compiled program does the whole step.
//!
//! The step graph's inputs are `[params..., state..., data...]` and its
//! outputs `[loss, new params..., new state...]`: output `1 + i` replaces
//! input `i` for the next step (see [`crate::train::TrainStep`]).

use crate::emit::{self, inline, B};
use crate::error::{AdError, Result};
use crate::transforms::value_and_grad;
use rlx_ir::{Graph, GraphBuilder, HostTensor, Shape, TensorType, ValueId};

/// The update rule and its hyper-parameters (PyTorch's semantics).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Optimizer {
    /// `g += wd·p; buf = momentum·buf + g; p -= lr·buf` (buf starts at 0).
    Sgd {
        lr: f64,
        momentum: f64,
        weight_decay: f64,
    },
    /// Adam with L2 weight decay added to the gradient.
    Adam {
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
        weight_decay: f64,
    },
    /// Adam with decoupled weight decay: `p *= 1 - lr·wd` before the step.
    AdamW {
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
        weight_decay: f64,
    },
}

impl Optimizer {
    pub fn sgd(lr: f64) -> Self {
        Optimizer::Sgd {
            lr,
            momentum: 0.0,
            weight_decay: 0.0,
        }
    }
    pub fn adam(lr: f64) -> Self {
        Optimizer::Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }
    pub fn adamw(lr: f64, weight_decay: f64) -> Self {
        Optimizer::AdamW {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay,
        }
    }
    pub fn learning_rate(&self) -> f64 {
        match *self {
            Optimizer::Sgd { lr, .. }
            | Optimizer::Adam { lr, .. }
            | Optimizer::AdamW { lr, .. } => lr,
        }
    }
    /// Names of the per-parameter state tensors.
    pub fn slots(&self) -> &'static [&'static str] {
        match self {
            Optimizer::Sgd { momentum, .. } if *momentum != 0.0 => &["momentum"],
            Optimizer::Sgd { .. } => &[],
            _ => &["exp_avg", "exp_avg_sq"],
        }
    }
    /// Whether a step counter (scalar, same dtype as the params) is kept.
    fn counts_steps(&self) -> bool {
        !matches!(self, Optimizer::Sgd { .. })
    }
}

/// A training-step graph and how its inputs are laid out.
#[derive(Clone, Debug)]
pub struct StepGraph {
    pub graph: Graph,
    /// Parameter names (graph inputs 0..n).
    pub params: Vec<String>,
    /// State tensor names, after the parameters (`<param>.<slot>`, `step`).
    pub state: Vec<String>,
    /// The data inputs, after the state, in the loss graph's order (with
    /// loss scaling, `loss_scale` is the last).
    pub data: Vec<String>,
    /// Whether the step scales the loss ([`crate::amp`]): the last data
    /// input is the loss scale and the last output a bool saying whether
    /// every gradient was finite (the update was applied).
    pub scaled: bool,
}

impl StepGraph {
    /// Inputs carried from one step to the next (params then state).
    pub fn carried(&self) -> usize {
        self.params.len() + self.state.len()
    }
}

/// Build the training step for `loss` (one scalar float output), updating
/// the loss graph's inputs listed in `params`.
pub fn train_step(loss: &Graph, params: &[usize], opt: &Optimizer) -> Result<StepGraph> {
    build(loss, loss, params, opt, false)
}

/// The step graph of `diff` (the loss graph as differentiated: `loss`
/// itself, or its autocast form, or that with the loss scale as one more
/// input) — names and types of the parameters come from `loss`. With
/// `scaled`, `diff`'s last input is the loss scale: gradients are divided
/// by it in f32 and the update is applied only where every gradient is
/// finite (the last output says whether it was).
pub(crate) fn build(
    loss: &Graph,
    diff: &Graph,
    params: &[usize],
    opt: &Optimizer,
    scaled: bool,
) -> Result<StepGraph> {
    let vg = value_and_grad(diff, params)?;
    let mut b = GraphBuilder::new(format!("train_{}", loss.name));
    let name = |i: usize| {
        diff.values[diff.inputs[i].index()]
            .name
            .clone()
            .unwrap_or_else(|| format!("in{i}"))
    };
    let mut pv = vec![];
    for &i in params {
        pv.push(b.input(name(i), loss.ty(loss.inputs[i]).clone()));
    }
    let mut state_names = vec![];
    let mut sv: Vec<Vec<ValueId>> = vec![];
    for (k, &i) in params.iter().enumerate() {
        let mut slots = vec![];
        for s in opt.slots() {
            let nm = format!("{}.{s}", name(i));
            slots.push(b.input(nm.clone(), b.ty(pv[k]).clone()));
            state_names.push(nm);
        }
        sv.push(slots);
    }
    let dt = b.dtype(
        *pv.first()
            .ok_or_else(|| AdError::Arg("no parameters to train".into()))?,
    );
    let step = if opt.counts_steps() {
        state_names.push("step".into());
        Some(b.input("step", TensorType::new(dt, Shape::scalar())))
    } else {
        None
    };
    let mut data_names = vec![];
    let mut vg_inputs = vec![ValueId(0); diff.inputs.len()];
    for (k, &i) in params.iter().enumerate() {
        vg_inputs[i] = pv[k];
    }
    for (i, slot) in vg_inputs.iter_mut().enumerate() {
        if !params.contains(&i) {
            data_names.push(name(i));
            *slot = b.input(name(i), diff.ty(diff.inputs[i]).clone());
        }
    }
    let map = inline(&mut b, &vg, &vg_inputs)?;
    let outs: Vec<ValueId> = vg.outputs.iter().map(|v| map[v.index()]).collect();
    let mut loss_v = outs[0];
    let mut grads: Vec<ValueId> = outs[1..].to_vec();
    let finite = if scaled {
        let s = *vg_inputs.last().expect("the loss scale is an input");
        let (l, g, ok) = crate::amp::unscale(&mut b, loss_v, &grads, s)?;
        loss_v = l;
        grads = g;
        Some(ok)
    } else {
        None
    };
    let t1 = match step {
        Some(s) => {
            let one = emit::sc_of(&mut b, 1.0, dt)?;
            let t = emit::add(&mut b, s, one)?;
            Some(match finite {
                Some(ok) => b.op1("where", &[ok, t, s], rlx_ir::Attrs::new())?,
                None => t,
            })
        }
        None => None,
    };
    let mut new_p = vec![];
    let mut new_s = vec![];
    for (k, &p) in pv.iter().enumerate() {
        let (mut np, mut ns) = update(&mut b, opt, p, grads[k], &sv[k], t1)?;
        if let Some(ok) = finite {
            // A step with an overflowed gradient changes nothing.
            np = b.op1("where", &[ok, np, p], rlx_ir::Attrs::new())?;
            for (n, &old) in ns.iter_mut().zip(&sv[k]) {
                *n = b.op1("where", &[ok, *n, old], rlx_ir::Attrs::new())?;
            }
        }
        new_p.push(np);
        new_s.extend(ns);
    }
    let mut res = vec![loss_v];
    res.extend(new_p);
    res.extend(new_s);
    if let Some(t) = t1 {
        res.push(t);
    }
    if let Some(ok) = finite {
        res.push(ok);
    }
    Ok(StepGraph {
        graph: b.finish(&res)?,
        params: params.iter().map(|&i| name(i)).collect(),
        state: state_names,
        data: data_names,
        scaled,
    })
}

/// The update of one parameter: (new param, new state slots).
fn update(
    b: &mut B,
    opt: &Optimizer,
    p: ValueId,
    g: ValueId,
    st: &[ValueId],
    t: Option<ValueId>,
) -> Result<(ValueId, Vec<ValueId>)> {
    use emit::{add, div, mul, scale, sub};
    match *opt {
        Optimizer::Sgd {
            lr,
            momentum,
            weight_decay,
        } => {
            let g = if weight_decay != 0.0 {
                let d = scale(b, p, weight_decay)?;
                add(b, g, d)?
            } else {
                g
            };
            let (dir, ns) = if momentum != 0.0 {
                let m = scale(b, st[0], momentum)?;
                let buf = add(b, m, g)?;
                (buf, vec![buf])
            } else {
                (g, vec![])
            };
            let s = scale(b, dir, lr)?;
            Ok((sub(b, p, s)?, ns))
        }
        Optimizer::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
        }
        | Optimizer::AdamW {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
        } => {
            let decoupled = matches!(opt, Optimizer::AdamW { .. });
            let t = t.expect("Adam keeps a step counter");
            let (p, g) = if weight_decay == 0.0 {
                (p, g)
            } else if decoupled {
                (scale(b, p, 1.0 - lr * weight_decay)?, g)
            } else {
                let d = scale(b, p, weight_decay)?;
                (p, add(b, g, d)?)
            };
            let m0 = scale(b, st[0], beta1)?;
            let g1 = scale(b, g, 1.0 - beta1)?;
            let m = add(b, m0, g1)?;
            let v0 = scale(b, st[1], beta2)?;
            let gg = mul(b, g, g)?;
            let g2 = scale(b, gg, 1.0 - beta2)?;
            let v = add(b, v0, g2)?;
            // Bias corrections 1 - beta^t, from the step counter.
            let dt = b.dtype(p);
            let corr = |b: &mut B, beta: f64| -> Result<ValueId> {
                let bb = emit::sc_of(b, beta, dt)?;
                let pw = b.binary("pow", bb, t)?;
                let one = emit::sc_of(b, 1.0, dt)?;
                sub(b, one, pw)
            };
            let c1 = corr(b, beta1)?;
            let c2 = corr(b, beta2)?;
            let mh = div(b, m, c1)?;
            let vh = div(b, v, c2)?;
            let den = b.unary("sqrt", vh)?;
            let e = emit::sc_of(b, eps, dt)?;
            let den = add(b, den, e)?;
            let stepv = div(b, mh, den)?;
            let s = scale(b, stepv, lr)?;
            Ok((sub(b, p, s)?, vec![m, v]))
        }
    }
}

/// Zero-initialized optimizer state for `params` (in [`StepGraph::state`] order).
pub fn init_state(opt: &Optimizer, params: &[HostTensor]) -> Result<Vec<HostTensor>> {
    let mut out = vec![];
    for p in params {
        for _ in opt.slots() {
            out.push(HostTensor::zeros(p.dtype(), p.shape().clone())?);
        }
    }
    if opt.counts_steps() {
        let dt = params
            .first()
            .map(|p| p.dtype())
            .ok_or_else(|| AdError::Arg("no parameters".into()))?;
        out.push(HostTensor::from_f64(dt, Shape::scalar(), vec![0.0])?);
    }
    Ok(out)
}
