//! Decoder LLMs from GGUF: the architecture from the file's metadata
//! ([`LlmConfig`]), the tokenizer from its vocabulary, the weights by
//! tensor name (block-quantized matrices stay quantized and run through
//! `dequant_matmul`), and a [`Generator`] that prefills, decodes with a
//! key/value cache and samples, streaming tokens.
//!
//! ```no_run
//! # fn main() -> Result<(), rlx_models::llm::LlmError> {
//! use rlx_models::llm::{GenerateOptions, LlmModel};
//! let model = LlmModel::open("SmolLM2-135M-Instruct.Q4_1.gguf", |_| {})?;
//! let mut gen = model.generator(rlx::Device::Cpu);
//! for token in gen.generate("The capital of France is", &GenerateOptions::greedy(16))? {
//!     print!("{}", token?.text);
//! }
//! # Ok(())
//! # }
//! ```

mod blocks;
mod cache;
pub mod config;
mod embed;
mod generate;
mod load;
pub mod sample;
mod template;

pub use blocks::{DecoderModel, WeightTypes};
pub use config::{Arch, LlmConfig, RopeScaling};
pub use generate::{
    FinishReason, GenerateOptions, Generation, Generator, Steps, Stream, Timings, Token,
};
pub use load::LlmModel;
pub use sample::Sampling;
pub use template::ChatMessage;

/// The prompt of the generation benchmarks: `n` token ids from a
/// fixed-seed LCG (state 42; llama-bench also times random tokens).
/// `rlx bench llm`, the CUDA suite's `gpu gguf` and
/// benches/llm/cuda_transformers.py (its own copy, in Python) feed the
/// same ids.
pub fn bench_prompt(n: usize, vocab: usize) -> Vec<u32> {
    let mut state = 42u64;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % vocab.max(1) as u64) as u32
        })
        .collect()
}

use thiserror::Error;

/// Why loading a model or generating failed.
#[derive(Debug, Error)]
pub enum LlmError {
    /// The GGUF file cannot be read or lacks what the model needs.
    #[error(transparent)]
    Format(#[from] rlx_formats::FormatError),
    /// The file's hyper-parameters are unusable.
    #[error("{file}: {what}")]
    Config { file: String, what: String },
    /// A tensor the architecture needs is missing or has the wrong shape.
    #[error("{file}: tensor `{tensor}`: {what}")]
    Tensor {
        file: String,
        tensor: String,
        what: String,
    },
    #[error(transparent)]
    Tokenizer(#[from] rlx_tokenizers::TokenizerError),
    /// The prompt plus the tokens to generate exceed the context.
    #[error("the context holds {limit} tokens; {wanted} were asked for (prompt {prompt}); shorten the prompt or raise --context")]
    Context {
        limit: usize,
        wanted: usize,
        prompt: usize,
    },
    /// A bad option (sampling parameters, context size).
    #[error("{0}")]
    Options(String),
    /// The chat template failed to render.
    #[error("chat template: {0}")]
    Template(String),
    #[error(transparent)]
    Model(#[from] rlx::Error),
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
}

#[cfg(test)]
mod bench_prompt_tests {
    /// The ids benches/llm/cuda_transformers.py computes with Python's
    /// integers (`bench_ids(6, 49152)`): the two sides of the CUDA bench
    /// feed the same prompt.
    #[test]
    fn bench_prompt_equals_the_python_peer() {
        assert_eq!(
            super::bench_prompt(6, 49152),
            [17782, 31826, 8914, 25119, 5462, 47116]
        );
    }
}
