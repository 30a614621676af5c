//! Typed errors for missing, invalid and unsupported inputs.

use rlx_tokenizers::{Padding, Tokenizer, TokenizerError, Truncation};

fn err_of(json: &str) -> TokenizerError {
    Tokenizer::from_json_str(json).expect_err("should fail")
}

const VOCAB: &str = r#"{"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3}"#;

#[test]
fn unsupported_components_are_named() {
    let e = err_of(r#"{"model": {"type": "BPE", "vocab": {}, "merges": []}}"#);
    assert!(matches!(e, TokenizerError::Unsupported { .. }));
    assert_eq!(
        e.to_string(),
        "tokenizer.json: model type `BPE` is not supported (only WordPiece)"
    );

    let e = err_of(&format!(
        r#"{{"model": {{"type": "WordPiece", "vocab": {VOCAB}}}, "normalizer": {{"type": "Lowercase"}}}}"#
    ));
    assert_eq!(
        e.to_string(),
        "tokenizer.json: normalizer type `Lowercase` is not supported (only BertNormalizer)"
    );
    let e = err_of(&format!(
        r#"{{"model": {{"type": "WordPiece", "vocab": {VOCAB}}}, "pre_tokenizer": {{"type": "ByteLevel"}}}}"#
    ));
    assert!(e
        .to_string()
        .contains("pre_tokenizer type `ByteLevel` is not supported"));
    let e = err_of(&format!(
        r#"{{"model": {{"type": "WordPiece", "vocab": {VOCAB}}}, "post_processor": {{"type": "RobertaProcessing"}}}}"#
    ));
    assert!(e
        .to_string()
        .contains("post_processor type `RobertaProcessing` is not supported"));
}

#[test]
fn invalid_documents() {
    assert!(matches!(err_of("{not json"), TokenizerError::Json { .. }));
    assert!(err_of("{not json")
        .to_string()
        .starts_with("tokenizer.json: invalid JSON"));
    assert_eq!(
        err_of("{}").to_string(),
        "tokenizer.json: `model` is missing"
    );
    assert_eq!(
        err_of("[]").to_string(),
        "tokenizer.json: the document: expected an object, found an array"
    );
    let e = err_of(r#"{"model": {"type": "WordPiece", "vocab": {"a": 0}}}"#);
    assert_eq!(
        e.to_string(),
        "tokenizer.json: model.unk_token `[UNK]` is not in model.vocab"
    );
    let e = err_of(r#"{"model": {"type": "WordPiece", "vocab": {"[UNK]": -1}}}"#);
    assert!(e
        .to_string()
        .contains("model.vocab[\"[UNK]\"]: expected a 32-bit id"));
    let e = err_of(&format!(
        r#"{{"model": {{"type": "WordPiece", "vocab": {VOCAB}}},
            "post_processor": {{"type": "TemplateProcessing", "single": ["[CLS]", "$A"], "pair": ["$A", "$B"], "special_tokens": {{}}}}}}"#
    ));
    assert!(
        e.to_string()
            .contains("special token `[CLS]` is not in special_tokens"),
        "{e}"
    );
}

#[test]
fn files() {
    let e = Tokenizer::from_file("/nonexistent/tokenizer.json").unwrap_err();
    assert!(matches!(e, TokenizerError::Io { .. }));
    assert!(e.to_string().starts_with("/nonexistent/tokenizer.json: "));
    assert!(matches!(
        Tokenizer::from_vocab_txt("/nonexistent/vocab.txt"),
        Err(TokenizerError::Io { .. })
    ));
    let e = Tokenizer::from_vocab_txt_str("[CLS]\n[SEP]\nhello\n").unwrap_err();
    assert_eq!(e.to_string(), "vocab.txt: `[UNK]` is not in the vocabulary");
}

#[test]
fn minimal_json_and_string_templates() {
    // Defaults for everything but the model; HF's string template form.
    let tok = Tokenizer::from_json_str(&format!(
        r###"{{"model": {{"vocab": {VOCAB}, "continuing_subword_prefix": "##"}},
            "post_processor": {{"type": "TemplateProcessing", "single": "[CLS] $A [SEP]", "pair": "[CLS] $A [SEP] $B:1 [SEP]:1",
              "special_tokens": {{"[CLS]": {{"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]}},
                                  "[SEP]": {{"id": "[SEP]", "ids": [2], "tokens": ["[SEP]"]}}}}}}}}"###
    ))
    .unwrap();
    // No normalizer or pre-tokenizer: the whole text is one word.
    assert_eq!(tok.encode("a").ids, [1, 3, 2]);
    assert_eq!(tok.encode("a a").ids, [1, 0, 2]);
    let p = tok.encode_pair("a", "a");
    assert_eq!(
        (p.ids, p.type_ids),
        (vec![1, 3, 2, 3, 2], vec![0, 0, 0, 1, 1])
    );
}

#[test]
fn impossible_truncation_and_padding() {
    let tok = Tokenizer::from_vocab_txt_str("[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n").unwrap();
    let e = tok
        .encode_with("a a", None, Truncation::max_length(1))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "truncation max_length 1 is shorter than the 2 special tokens added to every sequence"
    );
    let e = tok
        .encode_batch(&["a a a"], Padding::fixed(3), Truncation::none())
        .unwrap_err();
    assert!(matches!(
        e,
        TokenizerError::PaddingTooShort {
            row: 0,
            len: 5,
            fixed: 3
        }
    ));
    let b = tok
        .encode_batch(&["a a a"], Padding::fixed(3), Truncation::max_length(3))
        .unwrap();
    assert_eq!(b.ids, [2, 4, 3]);
    let b = tok
        .encode_batch(&[], Padding::fixed(4), Truncation::default())
        .unwrap();
    assert_eq!(b.shape, (0, 4));
    assert!(b.ids.is_empty());
}
