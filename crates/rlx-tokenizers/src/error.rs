//! Typed errors. Loading can fail (I/O, JSON, unsupported or inconsistent
//! configuration); encoding text never fails, only the truncation and
//! padding settings can be impossible to honour.

use std::path::PathBuf;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file is larger than `rlx_ir::limits().max_file_bytes` (or endless,
    /// like a device): refused before it is read whole.
    #[error(transparent)]
    Limit(#[from] rlx_ir::LimitError),
    /// A file is not valid UTF-8.
    #[error("{}: not valid UTF-8 (bad byte at offset {offset})", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// A file is not valid JSON.
    #[error("{file}: invalid JSON: {source}")]
    Json {
        /// The file (or `tokenizer.json` for in-memory input).
        file: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A component or setting this crate does not implement, e.g.
    /// ``tokenizer.json: model type `BPE` is not supported (only WordPiece)``.
    #[error("{file}: {message}")]
    Unsupported {
        /// The file (or `tokenizer.json` for in-memory input).
        file: String,
        /// What is not supported.
        message: String,
    },
    /// A setting is missing, has the wrong type, or is inconsistent (e.g. the
    /// unknown token is not in the vocabulary).
    #[error("{file}: {message}")]
    Invalid {
        /// The file (or `tokenizer.json` for in-memory input).
        file: String,
        /// What is wrong.
        message: String,
    },
    /// An LLM vocabulary ([`LlmVocab`](crate::LlmVocab)) names a tokenizer
    /// model or pre-tokenizer that is not implemented here.
    #[error("GGUF vocabulary: {what} `{name}` is not supported (supported: {supported})")]
    UnsupportedVocab {
        /// `tokenizer model` or `pre-tokenizer`.
        what: &'static str,
        /// The name found in the vocabulary.
        name: String,
        /// The names that are implemented.
        supported: &'static str,
    },
    /// An LLM vocabulary is inconsistent: a merge without a space, a special
    /// token id out of range, `scores`/`token_type` shorter than `tokens`, …
    #[error("GGUF vocabulary: {field}: {message}")]
    InvalidVocab {
        /// The metadata field at fault (`tokenizer.ggml.merges`, …).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// `max_length` leaves no room for the special tokens the post-processor adds.
    #[error("truncation max_length {max_length} is shorter than the {added} special tokens added to every sequence")]
    TruncationTooShort {
        /// The requested maximum length.
        max_length: usize,
        /// Special tokens added by the template.
        added: usize,
    },
    /// `OnlySecond` truncation was asked for a single sequence that is too long.
    #[error("truncation: strategy only_second needs a second sequence")]
    SecondSequenceNotProvided,
    /// `OnlyFirst`/`OnlySecond` truncation cannot remove enough tokens from the chosen sequence.
    #[error(
        "truncation: the sequence to truncate is too short to respect max_length {max_length}"
    )]
    SequenceTooShort {
        /// The requested maximum length.
        max_length: usize,
    },
    /// Fixed padding is shorter than an encoded row (truncate to at most that length).
    #[error("padding: row {row} has {len} tokens, more than the fixed length {fixed} (truncate to at most {fixed})")]
    PaddingTooShort {
        /// Index of the row in the batch.
        row: usize,
        /// Its length after truncation.
        len: usize,
        /// The fixed padding length.
        fixed: usize,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, TokenizerError>;
