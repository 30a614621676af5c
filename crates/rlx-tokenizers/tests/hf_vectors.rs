//! Parity with HuggingFace `tokenizers` on the committed reference vectors
//! (tests/vectors/tokenizer/minilm.json, made by generate.py there from the
//! real all-MiniLM-L6-v2 tokenizer.json, of which a copy is committed beside
//! it). Needs neither Python nor the model cache.

use std::path::PathBuf;
use std::sync::OnceLock;

use rlx_tokenizers::{Direction, PadTo, Padding, Tokenizer, Truncation, TruncationStrategy};
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/tokenizer")
}

fn vectors() -> &'static Value {
    static V: OnceLock<Value> = OnceLock::new();
    V.get_or_init(|| {
        let text = std::fs::read_to_string(dir().join("minilm.json")).expect("minilm.json");
        serde_json::from_str(&text).expect("minilm.json parses")
    })
}

fn tokenizer() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| {
        Tokenizer::from_file(dir().join("tokenizer.json")).expect("tokenizer.json loads")
    })
}

fn list<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not an array"))
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn i64s(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()))
        .collect()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn offsets(v: &Value) -> Vec<(usize, usize)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_u64().unwrap() as usize,
                p[1].as_u64().unwrap() as usize,
            )
        })
        .collect()
}

fn truncation(v: &Value) -> Truncation {
    if v.is_null() {
        return Truncation::none();
    }
    let strategy = match v["strategy"].as_str().unwrap() {
        "longest_first" => TruncationStrategy::LongestFirst,
        "only_first" => TruncationStrategy::OnlyFirst,
        "only_second" => TruncationStrategy::OnlySecond,
        s => panic!("strategy {s}"),
    };
    Truncation::max_length(v["max_length"].as_u64().unwrap() as usize)
        .with_strategy(strategy)
        .with_direction(direction(&v["direction"]))
}

fn direction(v: &Value) -> Direction {
    match v.as_str() {
        None | Some("right") => Direction::Right,
        Some("left") => Direction::Left,
        Some(d) => panic!("direction {d}"),
    }
}

fn padding(v: &Value) -> Padding {
    let to = match &v["strategy"] {
        Value::String(s) if s == "longest" => PadTo::Longest,
        Value::Object(o) => PadTo::Fixed(o["fixed"].as_u64().unwrap() as usize),
        s => panic!("padding strategy {s}"),
    };
    Padding {
        to,
        multiple_of: v["pad_to_multiple_of"].as_u64().map(|m| m as usize),
        direction: direction(&v["direction"]),
    }
}

/// Checks every single-text case with `tok`; returns the failures.
fn check_cases(tok: &Tokenizer, with_offsets: bool) -> (usize, Vec<String>) {
    let mut fails = vec![];
    let cases = list(vectors(), "cases");
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let text = c["text"].as_str().unwrap();
        let e = tok.encode(text);
        if e.ids != u32s(&c["ids"]) {
            fails.push(format!(
                "{name}: ids\n  got  {:?}\n  want {:?}",
                e.ids,
                u32s(&c["ids"])
            ));
        }
        if e.tokens != strs(&c["tokens"]) {
            fails.push(format!(
                "{name}: tokens\n  got  {:?}\n  want {:?}",
                e.tokens,
                strs(&c["tokens"])
            ));
        }
        if e.type_ids != u32s(&c["type_ids"]) {
            fails.push(format!("{name}: type_ids"));
        }
        if with_offsets && e.offsets != offsets(&c["offsets"]) {
            fails.push(format!(
                "{name}: offsets\n  got  {:?}\n  want {:?}",
                e.offsets,
                offsets(&c["offsets"])
            ));
        }
    }
    (cases.len(), fails)
}

#[test]
fn single_texts_match_hf() {
    let (n, fails) = check_cases(tokenizer(), true);
    assert!(n >= 60, "only {n} cases");
    assert!(
        fails.is_empty(),
        "{} of {n} cases differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn vocab_txt_matches_tokenizer_json() {
    // The vocab.txt of the same model is the vocabulary in id order: derive
    // it from tokenizer.json instead of committing a second copy.
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("tokenizer.json")).unwrap())
            .unwrap();
    let vocab = json["model"]["vocab"].as_object().unwrap();
    let mut lines = vec![String::new(); vocab.len()];
    for (k, v) in vocab {
        lines[v.as_u64().unwrap() as usize] = k.clone();
    }
    let tok = Tokenizer::from_vocab_txt_str(&(lines.join("\n") + "\n")).unwrap();
    assert_eq!(tok.vocab_size(), 30522);
    let (n, fails) = check_cases(&tok, true);
    assert!(
        fails.is_empty(),
        "{} of {n} cases differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

#[test]
fn pairs_match_hf() {
    let tok = tokenizer();
    for c in list(vectors(), "pairs") {
        let e = tok.encode_pair(c["a"].as_str().unwrap(), c["b"].as_str().unwrap());
        assert_eq!(e.ids, u32s(&c["ids"]), "{}", c["name"]);
        assert_eq!(e.tokens, strs(&c["tokens"]), "{}", c["name"]);
        assert_eq!(e.type_ids, u32s(&c["type_ids"]), "{}", c["name"]);
    }
}

#[test]
fn truncation_matches_hf() {
    let tok = tokenizer();
    let cases = list(vectors(), "truncation");
    for c in cases {
        let t = truncation(&c["truncation"]);
        let e = match c.get("text") {
            Some(text) => tok.encode_with(text.as_str().unwrap(), None, t),
            None => tok.encode_with(c["a"].as_str().unwrap(), c["b"].as_str(), t),
        }
        .unwrap_or_else(|err| panic!("{}: {err}", c["name"]));
        assert_eq!(e.ids, u32s(&c["ids"]), "{}", c["name"]);
        assert_eq!(e.tokens, strs(&c["tokens"]), "{}", c["name"]);
        assert_eq!(e.type_ids, u32s(&c["type_ids"]), "{}", c["name"]);
    }
    // The 600-token text at the default (512): [CLS] … [SEP] kept.
    let long = list(vectors(), "cases")
        .iter()
        .find(|c| c["name"] == "long_text_600")
        .unwrap();
    assert!(long["ids"].as_array().unwrap().len() > 600);
    let e = tok
        .encode_with(
            long["text"].as_str().unwrap(),
            None,
            tok.default_truncation(),
        )
        .unwrap();
    assert_eq!(e.len(), 512);
    assert_eq!((e.ids[0], e.ids[511]), (101, 102));
    assert_eq!(e.ids[..511], u32s(&long["ids"])[..511]);
}

#[test]
fn batches_match_hf() {
    let tok = tokenizer();
    for c in list(vectors(), "batches") {
        let name = c["name"].as_str().unwrap();
        let p = padding(&c["padding"]);
        let t = truncation(&c["truncation"]);
        let b = match c.get("texts") {
            Some(texts) => {
                let texts = strs(texts);
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                tok.encode_batch(&refs, p, t)
            }
            None => {
                let pairs: Vec<(String, String)> = list(c, "pairs")
                    .iter()
                    .map(|p| (p[0].as_str().unwrap().into(), p[1].as_str().unwrap().into()))
                    .collect();
                let refs: Vec<(&str, &str)> = pairs
                    .iter()
                    .map(|(a, b)| (a.as_str(), b.as_str()))
                    .collect();
                tok.encode_pair_batch(&refs, p, t)
            }
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let shape = (
            c["shape"][0].as_u64().unwrap() as usize,
            c["shape"][1].as_u64().unwrap() as usize,
        );
        assert_eq!(b.shape, shape, "{name}: shape");
        assert_eq!(b.ids, i64s(&c["ids"]), "{name}: ids");
        assert_eq!(
            b.attention_mask,
            i64s(&c["attention_mask"]),
            "{name}: attention_mask"
        );
        assert_eq!(b.type_ids, i64s(&c["type_ids"]), "{name}: type_ids");
        for (i, row) in list(c, "tokens").iter().enumerate() {
            assert_eq!(
                b.encodings[i].tokens,
                strs(row),
                "{name}: tokens of row {i}"
            );
        }
    }
}

#[test]
fn file_configuration_matches_hf_as_loaded() {
    // HF applies tokenizer.json's own truncation (128) and padding (fixed
    // 128) on every encode; here they are opt-in, with the same result.
    let tok = tokenizer();
    let c = &vectors()["file_config"];
    let padding = tok.file_padding().expect("the file pads");
    let truncation = tok.file_truncation().expect("the file truncates");
    assert_eq!(padding.to, PadTo::Fixed(128));
    assert_eq!(truncation.max_length, Some(128));
    assert_eq!(tok.model_max_length(), 512);
    let texts = strs(&c["texts"]);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let b = tok.encode_batch(&refs, padding, truncation).unwrap();
    assert_eq!(b.shape, (3, 128));
    assert_eq!(b.ids, i64s(&c["ids"]));
    assert_eq!(b.attention_mask, i64s(&c["attention_mask"]));
    assert_eq!(b.type_ids, i64s(&c["type_ids"]));
}

#[test]
fn random_strings_match_hf() {
    let tok = tokenizer();
    let cases = list(vectors(), "random");
    assert!(cases.len() >= 300);
    let mut fails = vec![];
    for (i, c) in cases.iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        let e = tok.encode(text);
        if e.ids != u32s(&c["ids"]) || e.offsets != offsets(&c["offsets"]) {
            fails.push(format!(
                "random[{i}] {text:?}\n  got  {:?} {:?}\n  want {} {}",
                e.ids, e.offsets, c["ids"], c["offsets"]
            ));
        }
    }
    assert!(
        fails.is_empty(),
        "{} differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

fn fnv(h: &mut u64, w: u32) {
    *h ^= u64::from(w);
    *h = h.wrapping_mul(0x100000001B3);
}

#[test]
fn every_code_point_matches_hf() {
    // For every Unicode scalar c, the ids of "a{c}a" without special tokens,
    // hashed per block of 4096 code points exactly as generate.py does: this
    // pins the whitespace/control/punctuation/Mn/CJK tables, NFD and
    // lowercasing code point by code point.
    let tok = tokenizer();
    let s = &vectors()["codepoint_sweep"];
    let (left, right) = (s["left"].as_str().unwrap(), s["right"].as_str().unwrap());
    let block = s["block"].as_u64().unwrap() as u32;
    let want = strs(&s["fnv1a64_u32"]);
    assert_eq!(want.len() as u32, 0x110000 / block);
    let mut bad = vec![];
    let mut text = String::new();
    for (bi, want) in want.iter().enumerate() {
        let mut h: u64 = 0xCBF29CE484222325;
        let start = bi as u32 * block;
        for cp in start..start + block {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            text.clear();
            text.push_str(left);
            text.push(c);
            text.push_str(right);
            let e = tok
                .encode_full(&text, None, Truncation::none(), false)
                .unwrap();
            fnv(&mut h, cp);
            fnv(&mut h, e.ids.len() as u32);
            for id in &e.ids {
                fnv(&mut h, *id);
            }
        }
        if format!("{h:016x}") != *want {
            bad.push(format!("U+{start:04X}..U+{:04X}", start + block - 1));
        }
    }
    assert!(
        bad.is_empty(),
        "blocks that differ from HF: {}",
        bad.join(", ")
    );
}

#[test]
fn configuration_variants_match_hf() {
    // The same file with other settings (cased, no normalizer, no
    // pre-tokenizer, BertProcessing, added tokens with lstrip/rstrip/
    // single_word/normalized, …), each patched in like generate.py does.
    let base: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("tokenizer.json")).unwrap())
            .unwrap();
    let variants = list(vectors(), "variants");
    assert!(variants.len() >= 10);
    let mut fails = vec![];
    for v in variants {
        let name = v["name"].as_str().unwrap();
        let patch = &v["patch"];
        let mut d = base.clone();
        if let Some(set) = patch.get("set").and_then(Value::as_object) {
            for (k, x) in set {
                d[k] = x.clone();
            }
        }
        if let Some(m) = patch.get("model").and_then(Value::as_object) {
            for (k, x) in m {
                d["model"][k] = x.clone();
            }
        }
        if let Some(extra) = patch.get("added_tokens").and_then(Value::as_array) {
            d["added_tokens"]
                .as_array_mut()
                .unwrap()
                .extend(extra.iter().cloned());
        }
        let tok =
            Tokenizer::from_json_str(&d.to_string()).unwrap_or_else(|e| panic!("{name}: {e}"));
        for c in list(v, "cases") {
            let text = c["text"].as_str().unwrap();
            let e = tok.encode(text);
            let want = (
                u32s(&c["ids"]),
                strs(&c["tokens"]),
                u32s(&c["type_ids"]),
                offsets(&c["offsets"]),
            );
            if (
                e.ids.clone(),
                e.tokens.clone(),
                e.type_ids.clone(),
                e.offsets.clone(),
            ) != want
            {
                fails.push(format!(
                    "{name} {text:?}\n  got  {:?} {:?} {:?}\n  want {:?} {:?} {:?}",
                    e.ids, e.tokens, e.offsets, want.0, want.1, want.3
                ));
            }
        }
        let p = &v["pair"];
        let e = tok.encode_pair(p["a"].as_str().unwrap(), p["b"].as_str().unwrap());
        if (e.ids.clone(), e.tokens.clone(), e.type_ids.clone())
            != (u32s(&p["ids"]), strs(&p["tokens"]), u32s(&p["type_ids"]))
        {
            fails.push(format!(
                "{name} pair\n  got  {:?} {:?}\n  want {} {}",
                e.ids, e.tokens, p["ids"], p["tokens"]
            ));
        }
    }
    assert!(
        fails.is_empty(),
        "{} differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}
