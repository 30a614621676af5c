//! Mixed-precision training: the forward pass autocast to f16 or bf16
//! (the optimizer's autocast pass, applied to the loss graph before it is
//! differentiated, so the backward contractions run in 16 bits too), f32
//! master weights and optimizer state, and dynamic loss scaling.
//!
//! Loss scaling follows PyTorch's `GradScaler`: the loss is multiplied by
//! the scale before differentiation (so small f16 gradients do not flush
//! to zero), the gradients are divided by it in f32, and a step whose
//! gradients hold an inf or NaN is skipped — inside the compiled step, as
//! a select between the updated and the old weights and state. After each
//! step the host halves the scale on a skipped step and doubles it after
//! `growth_interval` finite steps in a row.

use crate::emit::{self, inline, B};
use crate::error::{AdError, Result};
use rlx_ir::{Attrs, DType, Graph, GraphBuilder, Shape, TensorType, ValueId};

/// Dynamic loss scaling (PyTorch `GradScaler`'s rule and defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossScaler {
    /// The first scale.
    pub init_scale: f64,
    /// Factor applied after `growth_interval` finite steps in a row.
    pub growth_factor: f64,
    /// Factor applied after a step with a non-finite gradient.
    pub backoff_factor: f64,
    /// Finite steps in a row before the scale grows.
    pub growth_interval: u32,
}

impl Default for LossScaler {
    fn default() -> Self {
        LossScaler {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
        }
    }
}

impl LossScaler {
    fn check(&self) -> Result<()> {
        let ok = self.init_scale.is_finite()
            && self.init_scale > 0.0
            && self.growth_factor > 1.0
            && self.backoff_factor > 0.0
            && self.backoff_factor < 1.0
            && self.growth_interval > 0;
        if ok {
            Ok(())
        } else {
            Err(AdError::Arg(format!(
                "loss scaler {self:?}: needs init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0"
            )))
        }
    }
}

/// How a training step runs in mixed precision.
#[derive(Clone, Debug, PartialEq)]
pub struct MixedPrecision {
    /// Which ops run in 16 bits (and in which dtype).
    pub autocast: rlx::opt::Autocast,
    /// Dynamic loss scaling; `None` trains without it (bf16 has f32's range
    /// and needs none).
    pub scaler: Option<LossScaler>,
}

impl MixedPrecision {
    /// f16 compute with dynamic loss scaling (the default scaler).
    pub fn f16() -> Self {
        MixedPrecision {
            autocast: rlx::opt::Autocast::f16(),
            scaler: Some(LossScaler::default()),
        }
    }

    /// bf16 compute, no loss scaling.
    pub fn bf16() -> Self {
        MixedPrecision {
            autocast: rlx::opt::Autocast::bf16(),
            scaler: None,
        }
    }
}

/// The scaler's running state (what `GradScaler` keeps between steps).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScalerState {
    /// The scale the next step multiplies the loss by.
    pub scale: f64,
    /// Finite steps since the scale last changed.
    pub good_steps: u32,
    /// Steps skipped so far (a gradient was not finite).
    pub skipped: u64,
}

impl ScalerState {
    pub(crate) fn new(cfg: &LossScaler) -> Self {
        ScalerState {
            scale: cfg.init_scale,
            good_steps: 0,
            skipped: 0,
        }
    }

    /// After a step: `finite` says whether every gradient was finite.
    pub(crate) fn update(&mut self, cfg: &LossScaler, finite: bool) {
        if finite {
            self.good_steps += 1;
            if self.good_steps >= cfg.growth_interval {
                let grown = self.scale * cfg.growth_factor;
                // f32 holds the scale in the step graph.
                if grown.is_finite() && grown <= f32::MAX as f64 {
                    self.scale = grown;
                }
                self.good_steps = 0;
            }
        } else {
            self.scale *= cfg.backoff_factor;
            self.good_steps = 0;
            self.skipped += 1;
        }
    }
}

/// The loss graph as it is differentiated: autocast, and with loss scaling
/// one more input (`loss_scale`, a scalar of the loss's dtype) multiplying
/// the loss.
pub(crate) fn prepare(loss: &Graph, mp: &MixedPrecision) -> Result<Graph> {
    if let Some(s) = &mp.scaler {
        s.check()?;
    }
    let (cast, _) = mp
        .autocast
        .apply(loss)
        .map_err(|e| AdError::Arg(format!("autocast of `{}`: {e}", loss.name)))?;
    if mp.scaler.is_none() {
        return Ok(cast);
    }
    let out = *cast
        .outputs
        .first()
        .ok_or_else(|| AdError::Arg("the loss graph has no output".into()))?;
    let dt = cast.ty(out).dtype;
    if !matches!(dt, DType::F32 | DType::F64) || !cast.ty(out).shape.dims().is_empty() {
        return Err(AdError::Arg(format!(
            "loss scaling needs a scalar f32 or f64 loss, `{}` gives {}",
            loss.name,
            cast.ty(out)
        )));
    }
    let mut b = GraphBuilder::new(loss.name.clone());
    let mut ins = vec![];
    for &v in &cast.inputs {
        let val = &cast.values[v.index()];
        let name = val.name.clone().unwrap_or_else(|| format!("in{}", v.0));
        ins.push(b.input(name, val.ty.clone()));
    }
    let scale = b.input("loss_scale", TensorType::new(dt, Shape::scalar()));
    let map = inline(&mut b, &cast, &ins)?;
    let scaled = emit::mul(&mut b, map[out.index()], scale)?;
    Ok(b.finish(&[scaled])?)
}

/// Undo the scale on the loss and the gradients (in their dtype: f32 for
/// f32 parameters) and say whether every gradient is finite.
pub(crate) fn unscale(
    b: &mut B,
    loss: ValueId,
    grads: &[ValueId],
    scale: ValueId,
) -> Result<(ValueId, Vec<ValueId>, ValueId)> {
    let l = emit::div(b, loss, scale)?;
    let mut ok: Option<ValueId> = None;
    let mut out = vec![];
    for &g in grads {
        let s = match b.dtype(g) {
            d if d == b.dtype(scale) => scale,
            d => b.op1("cast", &[scale], Attrs::new().with("dtype", d))?,
        };
        let g = emit::div(b, g, s)?;
        let fin = b.unary("isfinite", g)?;
        let all = b.op1("reduce_all", &[fin], Attrs::new())?;
        ok = Some(match ok {
            None => all,
            Some(o) => b.binary("and", o, all)?,
        });
        out.push(g);
    }
    let ok = ok.ok_or_else(|| AdError::Arg("no gradients to unscale".into()))?;
    Ok((l, out, ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyTorch GradScaler's update rule, step by step: backoff on an
    /// overflow, growth after `growth_interval` finite steps in a row, the
    /// count reset by an overflow.
    #[test]
    fn scaler_follows_grad_scaler() {
        let cfg = LossScaler {
            growth_interval: 3,
            ..LossScaler::default()
        };
        let mut st = ScalerState::new(&cfg);
        let mut seen = vec![];
        for finite in [false, false, true, true, false, true, true, true, true] {
            st.update(&cfg, finite);
            seen.push(st.scale);
        }
        assert_eq!(
            seen,
            [32768.0, 16384.0, 16384.0, 16384.0, 8192.0, 8192.0, 8192.0, 16384.0, 16384.0]
        );
        assert_eq!(st.skipped, 3);
        assert_eq!(st.good_steps, 1);
    }

    #[test]
    fn a_bad_scaler_is_refused() {
        let bad = LossScaler {
            backoff_factor: 1.5,
            ..LossScaler::default()
        };
        let e = bad.check().unwrap_err().to_string();
        assert!(e.contains("backoff_factor"), "{e}");
    }
}
