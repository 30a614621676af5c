//! Reading tokenizer.json (the subset a BERT WordPiece tokenizer uses) and
//! vocab.txt. Anything else is a typed `Unsupported` error naming the part.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::added::AddedToken;
use crate::encoding::{
    Direction, PadTo, PadToken, Padding, Piece, Template, Truncation, TruncationStrategy,
};
use crate::error::{Result, TokenizerError};
use crate::normalizer::BertNormalizer;
use crate::tokenizer::{Tokenizer, VocabOptions};
use crate::wordpiece::WordPiece;

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn invalid(&self, message: impl Into<String>) -> TokenizerError {
        TokenizerError::Invalid {
            file: self.file.to_string(),
            message: message.into(),
        }
    }

    fn unsupported(&self, message: impl Into<String>) -> TokenizerError {
        TokenizerError::Unsupported {
            file: self.file.to_string(),
            message: message.into(),
        }
    }

    fn object<'v>(&self, v: &'v Value, what: &str) -> Result<&'v Map<String, Value>> {
        v.as_object()
            .ok_or_else(|| self.invalid(format!("{what}: expected an object, found {}", kind(v))))
    }

    fn bool_or(
        &self,
        o: &Map<String, Value>,
        key: &str,
        what: &str,
        default: bool,
    ) -> Result<bool> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.invalid(format!(
                "{what}.{key}: expected a boolean, found {}",
                kind(v)
            ))),
        }
    }

    fn opt_bool(&self, o: &Map<String, Value>, key: &str, what: &str) -> Result<Option<bool>> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.invalid(format!(
                "{what}.{key}: expected a boolean or null, found {}",
                kind(v)
            ))),
        }
    }

    fn usize_of(&self, v: &Value, what: &str) -> Result<usize> {
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                self.invalid(format!(
                    "{what}: expected a non-negative integer, found {v}"
                ))
            })
    }

    fn u32_of(&self, v: &Value, what: &str) -> Result<u32> {
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| self.invalid(format!("{what}: expected a 32-bit id, found {v}")))
    }

    fn str_of<'v>(&self, v: &'v Value, what: &str) -> Result<&'v str> {
        v.as_str()
            .ok_or_else(|| self.invalid(format!("{what}: expected a string, found {}", kind(v))))
    }

    fn type_of<'v>(&self, o: &'v Map<String, Value>, what: &str) -> Result<Option<&'v str>> {
        o.get("type")
            .map(|t| self.str_of(t, &format!("{what}.type")))
            .transpose()
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses a tokenizer.json document; `file` names it in errors.
pub(crate) fn from_json(json: &str, file: &str) -> Result<Tokenizer> {
    let cx = Ctx { file };
    let root: Value = serde_json::from_str(json).map_err(|source| TokenizerError::Json {
        file: file.to_string(),
        source,
    })?;
    let root = cx.object(&root, "the document")?;

    // model
    let model = root
        .get("model")
        .ok_or_else(|| cx.invalid("`model` is missing"))?;
    let model = cx.object(model, "model")?;
    match cx.type_of(model, "model")? {
        Some("WordPiece") => {}
        // HF accepts an untagged model; a WordPiece one is recognised by its prefix field.
        None if model.contains_key("continuing_subword_prefix")
            && !model.contains_key("merges") => {}
        Some(other) => {
            return Err(cx.unsupported(format!(
                "model type `{other}` is not supported (only WordPiece)"
            )))
        }
        None => {
            return Err(cx.unsupported("model without a type is not supported (only WordPiece)"))
        }
    }
    let vocab_v = model
        .get("vocab")
        .ok_or_else(|| cx.invalid("model.vocab is missing"))?;
    let vocab_o = cx.object(vocab_v, "model.vocab")?;
    let mut vocab = HashMap::with_capacity(vocab_o.len());
    for (k, v) in vocab_o {
        vocab.insert(k.clone(), cx.u32_of(v, &format!("model.vocab[{k:?}]"))?);
    }
    let unk_token = match model.get("unk_token") {
        None | Some(Value::Null) => "[UNK]".to_string(),
        Some(v) => cx.str_of(v, "model.unk_token")?.to_string(),
    };
    let prefix = match model.get("continuing_subword_prefix") {
        None | Some(Value::Null) => "##".to_string(),
        Some(v) => cx.str_of(v, "model.continuing_subword_prefix")?.to_string(),
    };
    let max_chars = match model.get("max_input_chars_per_word") {
        None | Some(Value::Null) => 100,
        Some(v) => cx.usize_of(v, "model.max_input_chars_per_word")?,
    };
    let unk_id = *vocab.get(&unk_token).ok_or_else(|| {
        cx.invalid(format!(
            "model.unk_token `{unk_token}` is not in model.vocab"
        ))
    })?;
    let model = WordPiece::new(vocab, unk_token, unk_id, prefix, max_chars);

    // normalizer
    let normalizer = match root.get("normalizer") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let o = cx.object(v, "normalizer")?;
            match cx.type_of(o, "normalizer")? {
                Some("BertNormalizer") => Some(BertNormalizer {
                    clean_text: cx.bool_or(o, "clean_text", "normalizer", true)?,
                    handle_chinese_chars: cx.bool_or(
                        o,
                        "handle_chinese_chars",
                        "normalizer",
                        true,
                    )?,
                    strip_accents: cx.opt_bool(o, "strip_accents", "normalizer")?,
                    lowercase: cx.bool_or(o, "lowercase", "normalizer", true)?,
                }),
                Some(other) => {
                    return Err(cx.unsupported(format!(
                        "normalizer type `{other}` is not supported (only BertNormalizer)"
                    )))
                }
                None => return Err(cx.invalid("normalizer.type is missing")),
            }
        }
    };

    // pre-tokenizer
    let bert_pre_tokenizer = match root.get("pre_tokenizer") {
        None | Some(Value::Null) => false,
        Some(v) => {
            let o = cx.object(v, "pre_tokenizer")?;
            match cx.type_of(o, "pre_tokenizer")? {
                Some("BertPreTokenizer") => true,
                Some(other) => {
                    return Err(cx.unsupported(format!(
                        "pre_tokenizer type `{other}` is not supported (only BertPreTokenizer)"
                    )))
                }
                None => return Err(cx.invalid("pre_tokenizer.type is missing")),
            }
        }
    };

    // added tokens
    let mut added = Vec::new();
    if let Some(v) = root.get("added_tokens").filter(|v| !v.is_null()) {
        let arr = v.as_array().ok_or_else(|| {
            cx.invalid(format!(
                "added_tokens: expected an array, found {}",
                kind(v)
            ))
        })?;
        for (i, t) in arr.iter().enumerate() {
            let what = format!("added_tokens[{i}]");
            let o = cx.object(t, &what)?;
            let id = cx.u32_of(o.get("id").unwrap_or(&Value::Null), &format!("{what}.id"))?;
            let content = cx
                .str_of(
                    o.get("content").unwrap_or(&Value::Null),
                    &format!("{what}.content"),
                )?
                .to_string();
            let special = cx.bool_or(o, "special", &what, false)?;
            added.push(AddedToken {
                id,
                content,
                single_word: cx.bool_or(o, "single_word", &what, false)?,
                lstrip: cx.bool_or(o, "lstrip", &what, false)?,
                rstrip: cx.bool_or(o, "rstrip", &what, false)?,
                // HF's default: special tokens are not normalized, others are.
                normalized: cx.bool_or(o, "normalized", &what, !special)?,
                special,
            });
        }
    }

    // post-processor
    let template = match root.get("post_processor") {
        None | Some(Value::Null) => None,
        Some(v) => Some(parse_post_processor(&cx, v)?),
    };

    // truncation and padding as configured in the file
    let truncation = match root.get("truncation") {
        None | Some(Value::Null) => None,
        Some(v) => Some(parse_truncation(&cx, v)?),
    };
    let (padding, pad) = match root.get("padding") {
        None | Some(Value::Null) => (None, None),
        Some(v) => {
            let (p, t) = parse_padding(&cx, v)?;
            (Some(p), Some(t))
        }
    };
    let pad = pad.unwrap_or_else(|| PadToken {
        id: model.vocab.get("[PAD]").copied().unwrap_or(0),
        type_id: 0,
        token: "[PAD]".to_string(),
    });

    Ok(Tokenizer::assemble(
        normalizer,
        bert_pre_tokenizer,
        model,
        added,
        template,
        truncation,
        padding,
        pad,
    ))
}

fn parse_post_processor(cx: &Ctx, v: &Value) -> Result<Template> {
    let o = cx.object(v, "post_processor")?;
    match cx.type_of(o, "post_processor")? {
        Some("BertProcessing") => {
            let pair = |key: &str| -> Result<(String, u32)> {
                let what = format!("post_processor.{key}");
                let a = o
                    .get(key)
                    .and_then(Value::as_array)
                    .filter(|a| a.len() == 2)
                    .ok_or_else(|| cx.invalid(format!("{what}: expected [token, id]")))?;
                Ok((cx.str_of(&a[0], &what)?.to_string(), cx.u32_of(&a[1], &what)?))
            };
            Ok(Template::bert(pair("cls")?, pair("sep")?))
        }
        Some("TemplateProcessing") => {
            let mut specials: HashMap<String, (Vec<u32>, Vec<String>)> = HashMap::new();
            if let Some(st) = o.get("special_tokens").filter(|v| !v.is_null()) {
                for (k, s) in cx.object(st, "post_processor.special_tokens")? {
                    let what = format!("post_processor.special_tokens[{k:?}]");
                    let s = cx.object(s, &what)?;
                    let ids = s
                        .get("ids")
                        .and_then(Value::as_array)
                        .ok_or_else(|| cx.invalid(format!("{what}.ids: expected an array")))?
                        .iter()
                        .map(|i| cx.u32_of(i, &format!("{what}.ids")))
                        .collect::<Result<Vec<_>>>()?;
                    let tokens = s
                        .get("tokens")
                        .and_then(Value::as_array)
                        .ok_or_else(|| cx.invalid(format!("{what}.tokens: expected an array")))?
                        .iter()
                        .map(|t| cx.str_of(t, &format!("{what}.tokens")).map(str::to_string))
                        .collect::<Result<Vec<_>>>()?;
                    if ids.len() != tokens.len() {
                        return Err(cx.invalid(format!("{what}: ids and tokens differ in length")));
                    }
                    specials.insert(k.clone(), (ids, tokens));
                }
            }
            let template = |key: &str| -> Result<Vec<Piece>> {
                let what = format!("post_processor.{key}");
                let v = o.get(key).ok_or_else(|| cx.invalid(format!("{what} is missing")))?;
                let pieces: Vec<Value> = match v {
                    Value::String(s) => s.split(' ').map(|p| Value::String(p.to_string())).collect(),
                    Value::Array(a) => a.clone(),
                    _ => return Err(cx.invalid(format!("{what}: expected an array of pieces"))),
                };
                pieces
                    .iter()
                    .enumerate()
                    .map(|(i, p)| parse_piece(cx, p, &specials, &format!("{what}[{i}]")))
                    .collect()
            };
            Ok(Template {
                single: template("single")?,
                pair: template("pair")?,
            })
        }
        Some(other) => Err(cx.unsupported(format!(
            "post_processor type `{other}` is not supported (only TemplateProcessing and BertProcessing)"
        ))),
        None => Err(cx.invalid("post_processor.type is missing")),
    }
}

fn parse_piece(
    cx: &Ctx,
    p: &Value,
    specials: &HashMap<String, (Vec<u32>, Vec<String>)>,
    what: &str,
) -> Result<Piece> {
    let special = |id: &str, type_id: u32| -> Result<Piece> {
        let (ids, tokens) = specials.get(id).ok_or_else(|| {
            cx.invalid(format!(
                "{what}: special token `{id}` is not in special_tokens"
            ))
        })?;
        Ok(Piece::Special {
            ids: ids.clone(),
            tokens: tokens.clone(),
            type_id,
        })
    };
    match p {
        // {"SpecialToken": {"id": "[CLS]", "type_id": 0}} or {"Sequence": {"id": "A", "type_id": 0}}
        Value::Object(o) if o.len() == 1 => {
            let Some((k, inner)) = o.iter().next() else {
                return Err(cx.invalid(format!("{what}: empty piece")));
            };
            let inner = cx.object(inner, what)?;
            let type_id = match inner.get("type_id") {
                None | Some(Value::Null) => 0,
                Some(v) => cx.u32_of(v, &format!("{what}.type_id"))?,
            };
            let id = cx.str_of(
                inner.get("id").unwrap_or(&Value::Null),
                &format!("{what}.id"),
            )?;
            match k.as_str() {
                "SpecialToken" => special(id, type_id),
                "Sequence" => match id {
                    "A" => Ok(Piece::Sequence {
                        second: false,
                        type_id,
                    }),
                    "B" => Ok(Piece::Sequence {
                        second: true,
                        type_id,
                    }),
                    _ => {
                        Err(cx.invalid(format!("{what}: sequence id must be A or B, found `{id}`")))
                    }
                },
                _ => Err(cx.invalid(format!("{what}: unknown piece `{k}`"))),
            }
        }
        // HF's string form: "$A", "$B:1", "$1", "[CLS]", "[SEP]:1"
        Value::String(s) => {
            let (id, type_id) = match s.split(':').collect::<Vec<_>>().as_slice() {
                [id] => (*id, None),
                [id, t] => (
                    *id,
                    Some(
                        t.parse::<u32>()
                            .map_err(|_| cx.invalid(format!("{what}: bad piece `{s}`")))?,
                    ),
                ),
                _ => return Err(cx.invalid(format!("{what}: bad piece `{s}`"))),
            };
            if let Some(rest) = id.strip_prefix('$') {
                let (second, default_type) = match rest {
                    "" | "A" | "a" => (false, 0),
                    "B" | "b" => (true, 0),
                    n => (
                        false,
                        n.parse::<u32>()
                            .map_err(|_| cx.invalid(format!("{what}: bad piece `{s}`")))?,
                    ),
                };
                Ok(Piece::Sequence {
                    second,
                    type_id: type_id.unwrap_or(default_type),
                })
            } else {
                special(id, type_id.unwrap_or(0))
            }
        }
        _ => Err(cx.invalid(format!("{what}: expected a piece, found {}", kind(p)))),
    }
}

fn direction(cx: &Ctx, o: &Map<String, Value>, what: &str) -> Result<Direction> {
    match o.get("direction") {
        None | Some(Value::Null) => Ok(Direction::Right),
        Some(v) => match cx.str_of(v, &format!("{what}.direction"))? {
            "Right" | "right" => Ok(Direction::Right),
            "Left" | "left" => Ok(Direction::Left),
            d => Err(cx.invalid(format!(
                "{what}.direction: expected Left or Right, found `{d}`"
            ))),
        },
    }
}

fn parse_truncation(cx: &Ctx, v: &Value) -> Result<Truncation> {
    let o = cx.object(v, "truncation")?;
    let max_length = cx.usize_of(
        o.get("max_length").unwrap_or(&Value::Null),
        "truncation.max_length",
    )?;
    let strategy = match o.get("strategy") {
        None | Some(Value::Null) => TruncationStrategy::LongestFirst,
        Some(s) => match cx.str_of(s, "truncation.strategy")? {
            "LongestFirst" | "longest_first" => TruncationStrategy::LongestFirst,
            "OnlyFirst" | "only_first" => TruncationStrategy::OnlyFirst,
            "OnlySecond" | "only_second" => TruncationStrategy::OnlySecond,
            s => return Err(cx.invalid(format!("truncation.strategy: unknown `{s}`"))),
        },
    };
    // `stride` only shapes HF's overflowing encodings, which this crate does
    // not produce; the truncated encoding is the same for any stride.
    Ok(Truncation {
        max_length: Some(max_length),
        strategy,
        direction: direction(cx, o, "truncation")?,
    })
}

fn parse_padding(cx: &Ctx, v: &Value) -> Result<(Padding, PadToken)> {
    let o = cx.object(v, "padding")?;
    let to = match o.get("strategy") {
        None | Some(Value::Null) => PadTo::Longest,
        Some(Value::String(s)) if s == "BatchLongest" => PadTo::Longest,
        Some(Value::Object(s)) if s.contains_key("Fixed") => {
            PadTo::Fixed(cx.usize_of(&s["Fixed"], "padding.strategy.Fixed")?)
        }
        Some(s) => return Err(cx.invalid(format!("padding.strategy: unknown {s}"))),
    };
    let multiple_of = match o.get("pad_to_multiple_of") {
        None | Some(Value::Null) => None,
        Some(m) => Some(cx.usize_of(m, "padding.pad_to_multiple_of")?),
    };
    let pad = PadToken {
        id: match o.get("pad_id") {
            None | Some(Value::Null) => 0,
            Some(v) => cx.u32_of(v, "padding.pad_id")?,
        },
        type_id: match o.get("pad_type_id") {
            None | Some(Value::Null) => 0,
            Some(v) => cx.u32_of(v, "padding.pad_type_id")?,
        },
        token: match o.get("pad_token") {
            None | Some(Value::Null) => "[PAD]".to_string(),
            Some(v) => cx.str_of(v, "padding.pad_token")?.to_string(),
        },
    };
    Ok((
        Padding {
            to,
            multiple_of,
            direction: direction(cx, o, "padding")?,
        },
        pad,
    ))
}

/// Builds the tokenizer HF's `BertWordPieceTokenizer(vocab.txt)` builds: one
/// token per line (id = line number, trailing whitespace trimmed, a repeated
/// line keeps the last id), the BERT normalizer and pre-tokenizer, `[CLS] $A
/// [SEP]`, and the special tokens `[PAD] [UNK] [CLS] [SEP] [MASK]` that the
/// vocabulary contains.
pub(crate) fn from_vocab(text: &str, file: &str, opts: &VocabOptions) -> Result<Tokenizer> {
    let cx = Ctx { file };
    let mut vocab = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let id = u32::try_from(i).map_err(|_| cx.invalid("more than 2^32 lines"))?;
        vocab.insert(line.trim_end().to_string(), id);
    }
    let id_of = |t: &str| vocab.get(t).copied();
    let unk_id = id_of("[UNK]").ok_or_else(|| cx.invalid("`[UNK]` is not in the vocabulary"))?;
    let cls = id_of("[CLS]").ok_or_else(|| cx.invalid("`[CLS]` is not in the vocabulary"))?;
    let sep = id_of("[SEP]").ok_or_else(|| cx.invalid("`[SEP]` is not in the vocabulary"))?;
    let pad = PadToken {
        id: id_of("[PAD]").unwrap_or(0),
        type_id: 0,
        token: "[PAD]".to_string(),
    };
    let added = ["[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]"]
        .iter()
        .filter_map(|t| {
            id_of(t).map(|id| AddedToken {
                id,
                content: t.to_string(),
                single_word: false,
                lstrip: false,
                rstrip: false,
                normalized: false,
                special: true,
            })
        })
        .collect();
    let model = WordPiece::new(
        vocab,
        "[UNK]".to_string(),
        unk_id,
        "##".to_string(),
        opts.max_input_chars_per_word,
    );
    let mut tok = Tokenizer::assemble(
        Some(opts.normalizer),
        true,
        model,
        added,
        Some(Template::bert(("[CLS]".into(), cls), ("[SEP]".into(), sep))),
        None,
        None,
        pad,
    );
    tok.set_model_max_length(opts.model_max_length);
    Ok(tok)
}
