//! # rlx-opt
//!
//! The graph optimizer of rlx: MIR → MIR cleanup passes and MIR → LIR
//! memory planning.
//!
//! * [`Pass`] and [`PassManager`]: a list of passes run to a (bounded)
//!   fixpoint, with per-pass statistics ([`PassReport`]).
//! * MIR passes, each in its own module: [`dce`] (dead code),
//!   [`cse`] (common subexpressions), [`const_fold`] (constant folding
//!   through a caller-supplied [`Evaluator`]), [`simplify`] (algebraic
//!   identities) and [`layout`] (canonical forms so CSE finds more).
//! * [`rules`]: the rewrite-rule engine behind `simplify` and `layout` —
//!   rules are data (name, matched ops, predicate, replacement); the fusion
//!   patterns live in the same kind of table.
//! * [`fuse`]: fusion as data — [`fuse::FUSION_RULES`] (softmax,
//!   log_softmax, layer/rms norm, gelu, gelu_tanh, silu, swiglu, matmul
//!   epilogues, attention, packed QKV) run by the [`Fuse`] pass with
//!   QK-RoPE pairing and elementwise regions ([`region`],
//!   `fused_elementwise`); [`Unfuse`] is the inverse.
//! * [`compile_pipeline`]: cleanup, fusion, DCE, with a [`PipelineReport`]
//!   (per-pass statistics, kernels before and after fusion);
//!   [`compile_pipeline_with`] adds mixed precision ([`autocast`]: f16/bf16
//!   for contractions, f32 for the range-sensitive ops, per-op lists).
//! * [`memory`]: liveness, buffer reuse (best fit, 64-byte aligned),
//!   in-place elementwise ops and views, producing an
//!   [`rlx_ir::lir::Program`] plus a [`MemoryReport`]; and
//!   [`memory::check_plan`], an independent checker of the result.
//!
//! Every pass rebuilds its graph through [`rlx_ir::GraphBuilder`] (the
//! approach of `rlx_ir::decompose`), so each result is verified by
//! construction. Passes recurse into sub-graphs (`if`/`while`/`scan`
//! bodies); sub-graph inputs and outputs, like the top-level graph's, are a
//! calling convention and are never changed.
//!
//! The crate depends on `rlx-ir` only, builds for wasm32, and never
//! evaluates a graph itself: constant folding asks an [`Evaluator`]
//! (the reference CPU interpreter, in practice).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod autocast;
mod bn_fold;
pub mod const_fold;
pub mod cse;
pub mod dce;
pub mod equiv;
mod error;
pub mod fuse;
pub mod layout;
pub mod memory;
pub mod pass;
pub mod pipeline;
pub mod rebuild;
pub mod region;
pub mod rules;
pub mod simplify;
pub mod unfuse;

pub use autocast::{Autocast, AutocastReport};
pub use const_fold::{ConstFold, Evaluator};
pub use cse::Cse;
pub use dce::Dce;
pub use error::OptError;
pub use fuse::{Fuse, FuseReport, FUSION_RULES};
pub use layout::Layout;
pub use memory::{check_plan, plan, plan_with_report, MemoryReport};
pub use pass::{standard_pipeline, Pass, PassManager, PassReport, PassStat};
pub use pipeline::{compile_pipeline, compile_pipeline_with, kernel_count, PipelineReport};
pub use rules::{Rule, RuleSet};
pub use simplify::Simplify;
pub use unfuse::Unfuse;
