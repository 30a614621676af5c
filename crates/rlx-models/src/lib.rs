//! # rlx-models
//!
//! Model builders made of HIR blocks, loadable from real checkpoints by
//! tensor name. Today: the BERT encoder family ([`bert`]) with the
//! sentence-transformers head (masked mean pooling + L2 normalization),
//! which serves all-MiniLM-L6-v2.
#![forbid(unsafe_code)]

pub mod bert;
pub mod config;
pub mod dsl_block;
pub mod embed;
pub mod gptq;
pub mod llm;

pub use embed::{EmbedError, Progress, SentenceEmbedder};
