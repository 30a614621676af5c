//! Tokenizers of GGUF language models, as llama.cpp implements them:
//! byte-level BPE (`tokenizer.ggml.model = "gpt2"`: GPT-2, Llama 3, Qwen2,
//! SmolLM, StarCoder, …) and SentencePiece-style BPE (`"llama"`: Llama 2,
//! Phi-3, Gemma 3, …). Token ids match llama.cpp's `llama_tokenize` for the
//! same vocabulary, text, `add_special` and `parse_special`.
//!
//! This crate does not read GGUF: the caller copies the `tokenizer.ggml.*`
//! metadata into an [`LlmVocab`].

mod bpe;
mod chars;
mod pretok;
mod special;
mod spm;
mod stream;

use std::collections::HashMap;

pub use stream::{StreamDecoder, Utf8Stream};

use crate::TokenizerError;
use special::{attr, Fragment, Specials};

/// The `tokenizer.ggml.*` metadata of a GGUF file (field by field; `None`
/// or empty when the key is absent).
#[derive(Clone, Debug, Default)]
pub struct LlmVocab {
    /// `tokenizer.ggml.model`: `"gpt2"` (byte-level BPE) or `"llama"` (SentencePiece-style).
    pub model: String,
    /// `tokenizer.ggml.pre`: the BPE pre-tokenizer (`"llama-bpe"`, `"qwen2"`, `"smollm"`, …).
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores` (SentencePiece merge priorities).
    pub scores: Vec<f32>,
    /// `tokenizer.ggml.token_type`: 1 normal, 2 unknown, 3 control,
    /// 4 user-defined, 5 unused, 6 byte. Empty: all normal.
    pub token_type: Vec<i32>,
    /// `tokenizer.ggml.merges`: `"left right"`, highest priority first (BPE).
    pub merges: Vec<String>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<u32>,
    /// `tokenizer.ggml.eot_token_id` (else found by text: `<|eot_id|>`, `<|im_end|>`, …).
    pub eot: Option<u32>,
    /// `tokenizer.ggml.eom_token_id` (else `<|eom_id|>` if present).
    pub eom: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix`.
    pub add_space_prefix: Option<bool>,
    /// `general.name`: llama.cpp keys one rule on it (Phi-3's special
    /// tokens swallow the whitespace that follows them).
    pub name: Option<String>,
}

enum Model {
    Bpe {
        bpe: Box<bpe::Bpe>,
        pre: pretok::PreTokenizer,
    },
    Spm {
        scores: Vec<f32>,
        byte_token: Box<[Option<u32>; 256]>,
    },
}

/// A GGUF language-model tokenizer (see the [module docs](self)).
pub struct LlmTokenizer {
    model: Model,
    tokens: Vec<String>,
    token_to_id: HashMap<String, u32>,
    specials: Specials,
    /// Each token's bytes when decoded, concatenated; `piece_at[id]..piece_at[id + 1]`.
    pieces: Vec<u8>,
    piece_at: Vec<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    unk: Option<u32>,
    pad: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
}

impl std::fmt::Debug for LlmTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.model {
            Model::Bpe { .. } => "bpe",
            Model::Spm { .. } => "spm",
        };
        f.debug_struct("LlmTokenizer")
            .field("model", &kind)
            .field("vocab_size", &self.tokens.len())
            .finish()
    }
}

fn invalid(field: &'static str, message: String) -> TokenizerError {
    TokenizerError::InvalidVocab { field, message }
}

impl LlmTokenizer {
    /// Build the tokenizer. Fails on a model or pre-tokenizer that is not
    /// implemented, a malformed merge, a special-token id outside the
    /// vocabulary, or `scores`/`token_type` shorter than `tokens`.
    pub fn new(v: LlmVocab) -> Result<Self, TokenizerError> {
        let n = v.tokens.len();
        if n == 0 || n >= u32::MAX as usize / 2 {
            return Err(invalid("tokenizer.ggml.tokens", format!("{n} tokens")));
        }
        for (field, len) in [
            ("tokenizer.ggml.scores", v.scores.len()),
            ("tokenizer.ggml.token_type", v.token_type.len()),
        ] {
            if len != 0 && len < n {
                return Err(invalid(field, format!("{len} entries for {n} tokens")));
            }
        }
        // An empty token would match everywhere; llama.cpp renames it too.
        let tokens: Vec<String> = v
            .tokens
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                if t.is_empty() {
                    format!("[EMPTY_{i}]")
                } else {
                    t
                }
            })
            .collect();
        let mut token_to_id = HashMap::with_capacity(n);
        for (i, t) in tokens.iter().enumerate() {
            // A repeated text maps to its last id, as in llama.cpp.
            token_to_id.insert(t.clone(), i as u32);
        }
        let (model, mut bos, mut eos, mut unk, mut add_bos, add_space_prefix) =
            match v.model.as_str() {
                "gpt2" => {
                    let pre = pretok::PreTokenizer::from_name(v.pre.as_deref())?;
                    let bpe = bpe::Bpe::new(&token_to_id, n as u32, &v.merges)?;
                    let add_bos = pre.add_bos;
                    (
                        Model::Bpe {
                            bpe: Box::new(bpe),
                            pre,
                        },
                        None,
                        None,
                        None,
                        add_bos,
                        false,
                    )
                }
                "llama" => {
                    let mut byte_token = Box::new([None; 256]);
                    for b in 0..=255u8 {
                        byte_token[usize::from(b)] = token_to_id
                            .get(&format!("<0x{b:02X}>"))
                            .or_else(|| {
                                std::str::from_utf8(&[b])
                                    .ok()
                                    .and_then(|s| token_to_id.get(s))
                            })
                            .copied();
                    }
                    let scores = if v.scores.is_empty() {
                        vec![0.0; n]
                    } else {
                        v.scores
                    };
                    // SentencePiece's conventional ids, when the file names none.
                    let id = |i: u32| (i < n as u32).then_some(i);
                    (
                        Model::Spm { scores, byte_token },
                        id(1),
                        id(2),
                        id(0),
                        true,
                        true,
                    )
                }
                other => {
                    return Err(TokenizerError::UnsupportedVocab {
                        what: "tokenizer model",
                        name: other.to_string(),
                        supported: "gpt2 (byte-level BPE), llama (SentencePiece)",
                    })
                }
            };
        bos = v.bos.or(bos);
        eos = v.eos.or(eos);
        unk = v.unk.or(unk);
        add_bos = v.add_bos.unwrap_or(add_bos);
        let add_eos = v.add_eos.unwrap_or(false);
        let add_space_prefix = v.add_space_prefix.unwrap_or(add_space_prefix);
        for (key, id) in [
            ("tokenizer.ggml.bos_token_id", bos),
            ("tokenizer.ggml.eos_token_id", eos),
            ("tokenizer.ggml.unknown_token_id", unk),
            ("tokenizer.ggml.padding_token_id", v.pad),
            ("tokenizer.ggml.eot_token_id", v.eot),
            ("tokenizer.ggml.eom_token_id", v.eom),
        ] {
            if let Some(id) = id.filter(|&id| id as usize >= n) {
                return Err(invalid(
                    key,
                    format!("id {id} is outside the vocabulary of {n} tokens"),
                ));
            }
        }
        if add_bos && bos.is_none() {
            return Err(invalid(
                "tokenizer.ggml.add_bos_token",
                "is true but there is no BOS token id".into(),
            ));
        }
        if add_eos && eos.is_none() {
            return Err(invalid(
                "tokenizer.ggml.add_eos_token",
                "is true but there is no EOS token id".into(),
            ));
        }
        let attrs = if v.token_type.is_empty() {
            vec![attr::NORMAL; n]
        } else {
            v.token_type[..n]
                .iter()
                .map(|&t| special::attr_of_type(t))
                .collect()
        };
        let specials = Specials::new(
            &tokens,
            &token_to_id,
            attrs,
            [bos, eos, unk],
            (v.eot, v.eom),
            v.name.as_deref(),
        );
        let mut tok = LlmTokenizer {
            model,
            tokens,
            token_to_id,
            specials,
            pieces: Vec::new(),
            piece_at: Vec::with_capacity(n + 1),
            bos,
            eos,
            unk,
            pad: v.pad,
            add_bos,
            add_eos,
            add_space_prefix,
        };
        tok.build_pieces();
        Ok(tok)
    }

    /// What each token decodes to (llama.cpp's `token_to_piece` with
    /// special tokens shown): control, unknown and user-defined tokens are
    /// their text; byte tokens `<0xXX>` one byte; normal tokens their text
    /// with `▁` read as a space (SentencePiece) or their GPT-2 byte
    /// spelling undone (BPE); unused and untyped tokens nothing.
    fn build_pieces(&mut self) {
        let mut pieces = Vec::new();
        let mut at = vec![0u32];
        for (id, text) in self.tokens.iter().enumerate() {
            let a = self.specials.attrs[id];
            if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
                pieces.extend_from_slice(text.as_bytes());
            } else if a & attr::NORMAL != 0 {
                match &self.model {
                    Model::Spm { .. } => {
                        pieces.extend_from_slice(text.replace('\u{2581}', " ").as_bytes())
                    }
                    Model::Bpe { bpe, .. } => {
                        for c in text.chars() {
                            // A character outside the byte alphabet (rare,
                            // hand-added tokens) is kept as its UTF-8.
                            match bpe.alphabet.byte_of(c) {
                                Some(b) => pieces.push(b),
                                None => {
                                    pieces.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes())
                                }
                            }
                        }
                    }
                }
            } else if a & attr::BYTE != 0 {
                match text.get(3..5).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) if text.len() == 6 => pieces.push(b),
                    _ => pieces.extend_from_slice(text.as_bytes()),
                }
            }
            at.push(pieces.len() as u32);
        }
        self.pieces = pieces;
        self.piece_at = at;
    }

    /// Token ids of `text`, as llama.cpp's `llama_tokenize(text,
    /// add_special, parse_special)`: with `add_special`, BOS/EOS as the
    /// vocabulary asks (`add_bos`/`add_eos`); with `parse_special`, control
    /// tokens written in the text (`<|im_start|>`, …) become those tokens
    /// (user-defined tokens always do). Never fails.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let frags = self.specials.partition(&self.tokens, text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        match &self.model {
            Model::Bpe { bpe, pre } => {
                let mut scratch = bpe::Scratch::default();
                for f in frags {
                    match f {
                        Fragment::Token(id) => out.push(id),
                        Fragment::Text(a, b) => {
                            let text = &text[a..b];
                            for (x, y) in pre.split(text) {
                                let piece = &text.as_bytes()[x..y];
                                let whole = if pre.ignore_merges {
                                    bpe.spell(piece, &mut scratch.spelled);
                                    self.token_to_id.get(&scratch.spelled).copied()
                                } else {
                                    None
                                };
                                bpe.encode_piece(piece, whole, &mut scratch, &mut out);
                            }
                        }
                    }
                }
            }
            Model::Spm { scores, byte_token } => {
                let vocab = spm::SpmVocab {
                    token_to_id: &self.token_to_id,
                    scores,
                    byte_token,
                    unk: self.unk,
                };
                // A text fragment at the start or after a special token gets
                // the SentencePiece space prefix.
                let mut after_special = true;
                let mut escaped = String::new();
                for f in frags {
                    match f {
                        Fragment::Token(id) => {
                            out.push(id);
                            after_special = true;
                        }
                        Fragment::Text(a, b) => {
                            escaped.clear();
                            if self.add_space_prefix && after_special {
                                escaped.push('\u{2581}');
                            }
                            escaped.extend(text[a..b].chars().map(|c| {
                                if c == ' ' {
                                    '\u{2581}'
                                } else {
                                    c
                                }
                            }));
                            spm::encode(&vocab, &escaped, &mut out);
                            after_special = false;
                        }
                    }
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        out
    }

    /// The bytes token `id` decodes to, as llama.cpp's `token_to_piece`
    /// without special tokens: control and unknown tokens decode to nothing.
    /// Empty for an id outside the vocabulary. One character may span
    /// several tokens: see [`StreamDecoder`] to print as tokens arrive.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        match self.specials.attrs.get(id as usize) {
            Some(a) if a & (attr::CONTROL | attr::UNKNOWN) == 0 => self.piece(id),
            _ => &[],
        }
    }

    /// The bytes of token `id` with control tokens shown as their text.
    pub fn token_bytes_special(&self, id: u32) -> &[u8] {
        self.piece(id)
    }

    fn piece(&self, id: u32) -> &[u8] {
        let i = id as usize;
        match (self.piece_at.get(i), self.piece_at.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.pieces[a as usize..b as usize],
            _ => &[],
        }
    }

    /// The text of `ids`: their [`token_bytes`](Self::token_bytes) joined
    /// (invalid UTF-8 shown as U+FFFD). With a SentencePiece space prefix,
    /// the first space of the first piece with text is dropped, so
    /// `decode(encode(s, …)) == s`. llama.cpp's optional clean-up of
    /// spaces before punctuation is not applied.
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        let mut strip = self.add_space_prefix;
        for &id in ids {
            let mut piece = self.token_bytes(id);
            if strip && !piece.is_empty() {
                piece = piece.strip_prefix(b" ").unwrap_or(piece);
                strip = false;
            }
            bytes.extend_from_slice(piece);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// A decoder that turns ids into text as they are generated.
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }

    /// The vocabulary string of `id` (GPT-2 byte spelling or `▁` for spaces, as stored).
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The id of a vocabulary string.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.token_to_id.get(token).copied()
    }

    /// Number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// End-of-turn token (`<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`, …).
    pub fn eot(&self) -> Option<u32> {
        self.specials.eot
    }

    /// End-of-message token (`<|eom_id|>`).
    pub fn eom(&self) -> Option<u32> {
        self.specials.eom
    }

    /// Unknown token.
    pub fn unk(&self) -> Option<u32> {
        self.unk
    }

    /// Padding token.
    pub fn pad(&self) -> Option<u32> {
        self.pad
    }

    /// Whether `encode(…, add_special = true, …)` starts with BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `encode(…, add_special = true, …)` ends with EOS.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether generating `id` ends generation: EOS, end of turn, and the
    /// other end tokens llama.cpp recognises.
    pub fn is_eog(&self, id: u32) -> bool {
        self.specials.eog.binary_search(&id).is_ok()
    }

    /// Every end-of-generation id, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        &self.specials.eog
    }

    /// Whether `id` is a control token (hidden by [`decode`](Self::decode)).
    pub fn is_control(&self, id: u32) -> bool {
        self.specials
            .attrs
            .get(id as usize)
            .is_some_and(|a| a & attr::CONTROL != 0)
    }
}
