//! # rlx-autodiff
//!
//! Differentiation as MIR → MIR transforms, so derivatives run through the
//! same optimizer, fusion, dispatch and backends as any other graph.
//!
//! * [`rules`]: one table of VJP/JVP rules keyed by op name, written with
//!   primitive ops so derivatives stack (grad of grad of grad);
//! * transforms: [`grad`], [`value_and_grad`], [`vjp`], [`jvp`], [`hvp`],
//!   [`vmap`];
//! * [`optim`]: SGD (momentum, weight decay), Adam and AdamW as graph
//!   transforms that turn a loss graph into one training-step graph;
//! * [`amp`]: mixed-precision training (autocast forward and backward,
//!   f32 master weights, dynamic loss scaling);
//! * [`train`]: a compiled training step that keeps weights and optimizer
//!   state between steps, a loop with a progress line, safetensors
//!   checkpoints.
#![forbid(unsafe_code)]

pub mod amp;
mod core;
pub mod emit;
pub mod error;
pub mod nets;
pub mod optim;
pub mod rules;
pub mod train;
mod transforms;
mod vmap;

pub use amp::{LossScaler, MixedPrecision, ScalerState};
pub use error::{AdError, Result};
pub use optim::{train_step, Optimizer, StepGraph};
pub use train::{run_epoch, EpochStats, TrainStep};
pub use transforms::{grad, hvp, jvp, value_and_grad, vjp};
pub use vmap::vmap;
