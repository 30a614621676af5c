//! The tokenizer: loading, and the HF pipeline — added tokens, normalizer,
//! pre-tokenizer, WordPiece, post-processor, truncation, padding.

use std::collections::HashMap;
use std::path::Path;

use crate::added::{AddedToken, Matcher, Split};
use crate::config;
use crate::encoding::{
    pad_batch, post_process, Batch, Encoding, PadToken, Padding, Template, Truncation,
};
use crate::error::{Result, TokenizerError};
use crate::normalizer::{BertNormalizer, NChar};
use crate::unicode::is_punctuation;
use crate::wordpiece::{Tok, WordPiece};

/// Options of [`Tokenizer::from_vocab_txt_with`] (a vocab.txt carries no
/// settings). The default is uncased BERT, like HF's
/// `BertWordPieceTokenizer(vocab, lowercase=True)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VocabOptions {
    /// The normalizer (use `lowercase: false` for cased models).
    pub normalizer: BertNormalizer,
    /// Longer words become `[UNK]` (HF default: 100).
    pub max_input_chars_per_word: usize,
    /// The model's maximum sequence length (BERT: 512).
    pub model_max_length: usize,
}

impl Default for VocabOptions {
    fn default() -> Self {
        Self {
            normalizer: BertNormalizer::default(),
            max_input_chars_per_word: 100,
            model_max_length: 512,
        }
    }
}

/// A BERT WordPiece tokenizer equivalent to HuggingFace `tokenizers` loaded
/// from the same tokenizer.json.
///
/// ```
/// # fn main() -> Result<(), rlx_tokenizers::TokenizerError> {
/// use rlx_tokenizers::{Padding, Tokenizer, Truncation};
/// let tok = Tokenizer::from_vocab_txt_str("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n!\n##s")?;
/// let e = tok.encode("Hello worlds!");
/// assert_eq!(e.tokens, ["[CLS]", "hello", "world", "##s", "!", "[SEP]"]);
/// let batch = tok.encode_batch(&["hello", "hello world"], Padding::longest(), Truncation::default())?;
/// assert_eq!(batch.shape, (2, 4));
/// assert_eq!(batch.ids, [2, 4, 3, 0, 2, 4, 5, 3]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Tokenizer {
    normalizer: Option<BertNormalizer>,
    bert_pre_tokenizer: bool,
    model: WordPiece,
    added: Vec<AddedToken>,
    raw_matcher: Matcher,
    normalized_matcher: Matcher,
    template: Option<Template>,
    truncation: Option<Truncation>,
    padding: Option<Padding>,
    pad: PadToken,
    model_max_length: usize,
    id_to_token: HashMap<u32, String>,
}

impl Tokenizer {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        normalizer: Option<BertNormalizer>,
        bert_pre_tokenizer: bool,
        model: WordPiece,
        added: Vec<AddedToken>,
        template: Option<Template>,
        truncation: Option<Truncation>,
        padding: Option<Padding>,
        pad: PadToken,
    ) -> Self {
        let added = assign_added_ids(added, &model.vocab);
        let raw_matcher = Matcher::new(
            added
                .iter()
                .enumerate()
                .filter(|(_, t)| !t.normalized && !t.content.is_empty())
                .map(|(i, t)| (t.content.clone(), i))
                .collect(),
        );
        // Normalized tokens are matched by their normalized content (HF).
        let normalized_matcher = Matcher::new(
            added
                .iter()
                .enumerate()
                .filter(|(_, t)| t.normalized)
                .map(|(i, t)| {
                    let content = match &normalizer {
                        Some(n) => n.normalize(&t.content, 0).iter().map(|c| c.c).collect(),
                        None => t.content.clone(),
                    };
                    (content, i)
                })
                .filter(|(c, _)| !c.is_empty())
                .collect(),
        );
        let mut id_to_token: HashMap<u32, String> =
            model.vocab.iter().map(|(k, &v)| (v, k.clone())).collect();
        for t in &added {
            id_to_token.insert(t.id, t.content.clone());
        }
        Self {
            normalizer,
            bert_pre_tokenizer,
            model,
            added,
            raw_matcher,
            normalized_matcher,
            template,
            truncation,
            padding,
            pad,
            model_max_length: 512,
            id_to_token,
        }
    }

    pub(crate) fn set_model_max_length(&mut self, n: usize) {
        self.model_max_length = n;
    }

    /// Loads a tokenizer.json. When a `tokenizer_config.json` sits next to
    /// it, its integer `model_max_length` becomes [`Self::model_max_length`]
    /// (otherwise 512).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let json = read(path)?;
        let mut tok = config::from_json(&json, &path.display().to_string())?;
        if let Some(cfg) = path.parent().map(|d| d.join("tokenizer_config.json")) {
            if cfg.is_file() {
                let text = read(&cfg)?;
                let v: serde_json::Value =
                    serde_json::from_str(&text).map_err(|source| TokenizerError::Json {
                        file: cfg.display().to_string(),
                        source,
                    })?;
                // HF writes a huge float (1e30) when the model has no limit: ignored.
                if let Some(n) = v
                    .get("model_max_length")
                    .and_then(serde_json::Value::as_u64)
                    .and_then(|n| usize::try_from(n).ok())
                {
                    tok.model_max_length = n;
                }
            }
        }
        Ok(tok)
    }

    /// Parses the contents of a tokenizer.json.
    pub fn from_json_str(json: &str) -> Result<Self> {
        config::from_json(json, "tokenizer.json")
    }

    /// Loads a BERT vocab.txt with uncased-BERT settings
    /// ([`VocabOptions::default`]).
    pub fn from_vocab_txt(path: impl AsRef<Path>) -> Result<Self> {
        Self::from_vocab_txt_with(path, &VocabOptions::default())
    }

    /// Loads a BERT vocab.txt with the given settings.
    pub fn from_vocab_txt_with(path: impl AsRef<Path>, opts: &VocabOptions) -> Result<Self> {
        let path = path.as_ref();
        config::from_vocab(&read(path)?, &path.display().to_string(), opts)
    }

    /// Parses the contents of a vocab.txt (uncased-BERT settings).
    pub fn from_vocab_txt_str(text: &str) -> Result<Self> {
        config::from_vocab(text, "vocab.txt", &VocabOptions::default())
    }

    /// Parses the contents of a vocab.txt with the given settings.
    pub fn from_vocab_txt_str_with(text: &str, opts: &VocabOptions) -> Result<Self> {
        config::from_vocab(text, "vocab.txt", opts)
    }

    /// Vocabulary size (the model's vocabulary; added tokens with new ids not counted).
    pub fn vocab_size(&self) -> usize {
        self.model.vocab.len()
    }

    /// The added tokens (`[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]` for
    /// BERT), with the ids HF gives them; special tokens first.
    pub fn added_tokens(&self) -> &[AddedToken] {
        &self.added
    }

    /// The id of a token (vocabulary or added token).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.added
            .iter()
            .find(|t| t.content == token)
            .map(|t| t.id)
            .or_else(|| self.model.vocab.get(token).copied())
    }

    /// The token of an id.
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.id_to_token.get(&id).map(String::as_str)
    }

    /// The padding id (tokenizer.json's `padding.pad_id`, else `[PAD]`'s id, else 0).
    pub fn pad_id(&self) -> u32 {
        self.pad.id
    }

    /// The unknown token's id.
    pub fn unk_id(&self) -> u32 {
        self.model.unk_id
    }

    /// The model's maximum sequence length (tokenizer_config.json's
    /// `model_max_length`, default 512).
    pub fn model_max_length(&self) -> usize {
        self.model_max_length
    }

    /// Truncation to [`Self::model_max_length`].
    pub fn default_truncation(&self) -> Truncation {
        Truncation::max_length(self.model_max_length)
    }

    /// The truncation tokenizer.json itself configures, if any
    /// (all-MiniLM-L6-v2: 128). HF applies it on every encode; here it is
    /// only used when passed explicitly.
    pub fn file_truncation(&self) -> Option<Truncation> {
        self.truncation
    }

    /// The padding tokenizer.json itself configures, if any
    /// (all-MiniLM-L6-v2: fixed 128). Only used when passed explicitly.
    pub fn file_padding(&self) -> Option<Padding> {
        self.padding
    }

    /// Encodes one text with special tokens (`[CLS] … [SEP]`), without
    /// truncation or padding. Never fails and never panics.
    pub fn encode(&self, text: &str) -> Encoding {
        let a = self.tokenize(text);
        post_process(self.template.as_ref(), a, None, &Truncation::none(), true).unwrap_or_default()
    }

    /// Encodes a pair (`[CLS] a [SEP] b [SEP]`, type ids 0 then 1), without
    /// truncation or padding.
    pub fn encode_pair(&self, a: &str, b: &str) -> Encoding {
        let (a, b) = (self.tokenize(a), self.tokenize(b));
        post_process(
            self.template.as_ref(),
            a,
            Some(b),
            &Truncation::none(),
            true,
        )
        .unwrap_or_default()
    }

    /// Encodes a text, or a pair when `pair` is given, with truncation.
    /// Fails only when the truncation cannot be honoured.
    pub fn encode_with(
        &self,
        text: &str,
        pair: Option<&str>,
        truncation: Truncation,
    ) -> Result<Encoding> {
        self.encode_full(text, pair, truncation, true)
    }

    /// Like [`Self::encode_with`], choosing whether the template's special
    /// tokens are added.
    pub fn encode_full(
        &self,
        text: &str,
        pair: Option<&str>,
        truncation: Truncation,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        let a = self.tokenize(text);
        let b = pair.map(|p| self.tokenize(p));
        post_process(
            self.template.as_ref(),
            a,
            b,
            &truncation,
            add_special_tokens,
        )
    }

    /// Encodes a batch of texts into padded `B × T` tensors.
    pub fn encode_batch(
        &self,
        texts: &[&str],
        padding: Padding,
        truncation: Truncation,
    ) -> Result<Batch> {
        let encodings = texts
            .iter()
            .map(|t| self.encode_with(t, None, truncation))
            .collect::<Result<Vec<_>>>()?;
        pad_batch(encodings, &padding, &self.pad)
    }

    /// Encodes a batch of pairs into padded `B × T` tensors.
    pub fn encode_pair_batch(
        &self,
        pairs: &[(&str, &str)],
        padding: Padding,
        truncation: Truncation,
    ) -> Result<Batch> {
        let encodings = pairs
            .iter()
            .map(|(a, b)| self.encode_with(a, Some(b), truncation))
            .collect::<Result<Vec<_>>>()?;
        pad_batch(encodings, &padding, &self.pad)
    }

    /// One sequence, before post-processing: added tokens, then normalize,
    /// pre-tokenize and WordPiece the text between them.
    fn tokenize(&self, text: &str) -> Vec<Tok> {
        let mut out = Vec::new();
        for split in self.raw_matcher.split(text, &self.added) {
            match split {
                Split::Token(i, start, end) => out.push(Tok {
                    id: self.added[i].id,
                    value: text[start..end].to_string(),
                    start,
                    end,
                }),
                Split::Text(start, end) => {
                    let piece = &text[start..end];
                    let chars: Vec<NChar> = match &self.normalizer {
                        Some(n) => n.normalize(piece, start),
                        None => piece
                            .char_indices()
                            .map(|(i, c)| NChar {
                                c,
                                start: start + i,
                                end: start + i + c.len_utf8(),
                            })
                            .collect(),
                    };
                    self.tokenize_normalized(&chars, &mut out);
                }
            }
        }
        out
    }

    fn tokenize_normalized(&self, chars: &[NChar], out: &mut Vec<Tok>) {
        if self.normalized_matcher.is_empty() {
            self.words(chars, out);
            return;
        }
        let s: String = chars.iter().map(|c| c.c).collect();
        // byte offset in `s` -> char index
        let mut starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
        starts.push(s.len());
        let ci = |b: usize| starts.partition_point(|&x| x < b);
        for split in self.normalized_matcher.split(&s, &self.added) {
            match split {
                Split::Text(a, b) => self.words(&chars[ci(a)..ci(b)], out),
                Split::Token(i, a, b) => {
                    let (ca, cb) = (ci(a), ci(b));
                    if ca < cb {
                        out.push(Tok {
                            id: self.added[i].id,
                            value: s[a..b].to_string(),
                            start: chars[ca].start,
                            end: chars[cb - 1].end,
                        });
                    }
                }
            }
        }
    }

    /// BERT pre-tokenizer: split on whitespace (dropped) and around each
    /// punctuation character (kept alone); WordPiece each word.
    fn words(&self, chars: &[NChar], out: &mut Vec<Tok>) {
        if !self.bert_pre_tokenizer {
            self.model.tokenize(chars, out);
            return;
        }
        let mut word_start = 0;
        for (i, n) in chars.iter().enumerate() {
            if n.c.is_whitespace() {
                self.model.tokenize(&chars[word_start..i], out);
                word_start = i + 1;
            } else if is_punctuation(n.c) {
                self.model.tokenize(&chars[word_start..i], out);
                self.model.tokenize(&chars[i..i + 1], out);
                word_start = i + 1;
            }
        }
        self.model.tokenize(&chars[word_start..], out);
    }
}

/// HF's `AddedVocabulary::add_tokens` as run when a tokenizer.json is
/// loaded: the ids written in the file are *not* used. A token whose content
/// is in the vocabulary gets that id; the others get new ids from the
/// vocabulary size upwards, in file order. Empty and repeated contents are
/// dropped (the first one is kept); special tokens are matched first.
fn assign_added_ids(tokens: Vec<AddedToken>, vocab: &HashMap<String, u32>) -> Vec<AddedToken> {
    let mut next_id = u32::try_from(vocab.len()).unwrap_or(u32::MAX);
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut out: Vec<AddedToken> = Vec::with_capacity(tokens.len());
    for mut t in tokens {
        if t.content.is_empty() || seen.contains_key(&t.content) {
            continue;
        }
        t.id = match vocab.get(&t.content) {
            Some(&id) => id,
            None => {
                let id = next_id;
                next_id = next_id.saturating_add(1);
                id
            }
        };
        seen.insert(t.content.clone(), t.id);
        out.push(t);
    }
    // Stable: specials first, as in HF's matcher.
    out.sort_by_key(|t| !t.special);
    out
}

/// Read a tokenizer file whole, bounded by `max_file_bytes`.
fn read(path: &Path) -> Result<String> {
    use rlx_ir::limits::ReadError;
    rlx_ir::limits::read_bounded_to_string(path).map_err(|e| match e {
        ReadError::Io { path, source } => TokenizerError::Io { path, source },
        ReadError::Limit(l) => TokenizerError::Limit(l),
        ReadError::NotUtf8 { path, offset } => TokenizerError::NotUtf8 { path, offset },
    })
}
