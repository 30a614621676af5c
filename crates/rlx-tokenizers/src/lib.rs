//! A BERT WordPiece tokenizer that reproduces HuggingFace `tokenizers`
//! exactly (ids, tokens, offsets, truncation, padding) for BERT-style
//! tokenizer.json files such as all-MiniLM-L6-v2's, natively and in wasm32.
//!
//! The pipeline is HF's, step for step:
//!
//! 1. **added tokens** (`[CLS]`, `[SEP]`, `[MASK]`, …) are split out of the
//!    raw text first (leftmost-longest);
//! 2. **normalizer** (`BertNormalizer`): clean text, space out CJK
//!    ideographs, strip accents (NFD, drop Mn), lowercase;
//! 3. **pre-tokenizer** (`BertPreTokenizer`): split on whitespace, isolate
//!    punctuation;
//! 4. **model** (`WordPiece`): greedy longest match, `##` continuations,
//!    `[UNK]` for words over `max_input_chars_per_word` or not coverable;
//! 5. **post-processor** (`TemplateProcessing` / `BertProcessing`):
//!    `[CLS] $A [SEP]`, pairs `[CLS] $A [SEP] $B:1 [SEP]:1`;
//! 6. **truncation** (keeps the special tokens) and **padding**.
//!
//! Only these components are implemented; anything else in a tokenizer.json
//! (a BPE model, another normalizer, …) is a typed [`TokenizerError`].
//! Encoding never fails or panics on any input string.
//!
//! For GGUF language models, [`LlmTokenizer`] (module [`llm`]) is
//! llama.cpp's byte-level BPE and SentencePiece tokenizers.
//!
//! ```no_run
//! # fn main() -> Result<(), rlx_tokenizers::TokenizerError> {
//! use rlx_tokenizers::{Padding, Tokenizer};
//! let tok = Tokenizer::from_file("model/tokenizer.json")?;
//! let batch = tok.encode_batch(&["Hello, World!", "café"], Padding::longest(), tok.default_truncation())?;
//! let (b, t) = batch.shape; // input_ids / attention_mask / token_type_ids: B × T i64
//! # let _ = (b, t);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod added;
mod config;
mod encoding;
mod error;
pub mod llm;
mod normalizer;
mod tokenizer;
mod unicode;
mod wordpiece;

pub use added::AddedToken;
pub use encoding::{Batch, Direction, Encoding, PadTo, Padding, Truncation, TruncationStrategy};
pub use error::{Result, TokenizerError};
pub use llm::{LlmTokenizer, LlmVocab, StreamDecoder, Utf8Stream};
pub use normalizer::BertNormalizer;
pub use tokenizer::{Tokenizer, VocabOptions};
