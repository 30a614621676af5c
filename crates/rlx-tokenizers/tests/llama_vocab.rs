//! The LLM tokenizers against llama.cpp's own tokenizer tests: for each
//! vocabulary `ggml-vocab-<name>.gguf`, llama.cpp ships test strings
//! (`.inp`, separated by `\n__ggml_vocab_test__\n`) and the ids its
//! `llama_tokenize(text, add_special = false, parse_special = false)` gives
//! (`.out`, one line per string) — tests/test-tokenizer-0.cpp. Every id
//! list here is llama.cpp's, never ours.
//!
//! The files come from the llama-cpp-python 0.3.36 sdist (vendored
//! llama.cpp); `./scripts/fetch-models` extracts them into
//! `.cache/models/llama-vocab/`.

use std::path::PathBuf;
use std::time::Instant;

use rlx_formats::gguf::Value;
use rlx_formats::GgufFile;
use rlx_tokenizers::{LlmTokenizer, LlmVocab, TokenizerError};

fn vocab_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../.cache/models/llama-vocab"
    ));
    assert!(
        dir.join(".done").exists(),
        "llama.cpp vocabularies not found in {} — run ./scripts/fetch-models (./scripts/setup does)",
        dir.display()
    );
    dir
}

/// The test-only GGUF → `LlmVocab` glue (rlx-models has the real one).
fn read_vocab(name: &str) -> LlmVocab {
    let path = vocab_dir().join(format!("ggml-vocab-{name}.gguf"));
    let g = GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let key = |k: &str| format!("tokenizer.ggml.{k}");
    let strings = |k: &str| -> Vec<String> {
        g.get(&key(k))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().expect("string array").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let id = |k: &str| {
        g.get(&key(k))
            .and_then(Value::as_i128)
            .map(|v| u32::try_from(v).expect("token id"))
    };
    let flag = |k: &str| match g.get(&key(k)) {
        Some(Value::Bool(b)) => Some(*b),
        _ => None,
    };
    let text = |k: &str| g.get(k).and_then(Value::as_str).map(str::to_string);
    LlmVocab {
        model: text("tokenizer.ggml.model").expect("tokenizer.ggml.model"),
        pre: text("tokenizer.ggml.pre"),
        tokens: strings("tokens"),
        scores: g
            .get(&key("scores"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|v| v.as_f64().expect("score") as f32)
                    .collect()
            })
            .unwrap_or_default(),
        token_type: g
            .get(&key("token_type"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|v| v.as_i128().expect("token type") as i32)
                    .collect()
            })
            .unwrap_or_default(),
        merges: strings("merges"),
        bos: id("bos_token_id"),
        eos: id("eos_token_id"),
        unk: id("unknown_token_id"),
        pad: id("padding_token_id"),
        eot: id("eot_token_id"),
        eom: id("eom_token_id"),
        add_bos: flag("add_bos_token"),
        add_eos: flag("add_eos_token"),
        add_space_prefix: flag("add_space_prefix"),
        name: text("general.name"),
    }
}

/// llama.cpp's test cases: (text, expected ids).
fn read_cases(name: &str) -> Vec<(String, Vec<u32>)> {
    let dir = vocab_dir();
    let inp =
        std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.inp"))).expect(".inp");
    let out =
        std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.out"))).expect(".out");
    // Split as test-tokenizer-0.cpp does: on the separator line, the last
    // string being whatever follows the last separator (if anything).
    let sep = "\n__ggml_vocab_test__\n";
    let mut texts = Vec::new();
    let mut rest = inp.as_str();
    while !rest.is_empty() {
        match rest.find(sep) {
            Some(i) => {
                texts.push(rest[..i].to_string());
                rest = &rest[i + sep.len()..];
            }
            None => {
                texts.push(rest.to_string());
                rest = "";
            }
        }
    }
    let ids: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| t.parse().expect("id"))
                .collect()
        })
        .collect();
    assert_eq!(
        texts.len(),
        ids.len(),
        "{name}: .inp and .out disagree on the number of cases"
    );
    texts.into_iter().zip(ids).collect()
}

/// Encode every case; returns (matched, total) and prints each mismatch.
fn check(name: &str) -> (LlmTokenizer, usize, usize) {
    let t0 = Instant::now();
    let tok = LlmTokenizer::new(read_vocab(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    eprintln!(
        "{name}: loaded {} tokens in {:?}",
        tok.vocab_size(),
        t0.elapsed()
    );
    let cases = read_cases(name);
    let mut ok = 0;
    for (text, want) in &cases {
        let got = tok.encode(text, false, false);
        if &got == want {
            ok += 1;
        } else {
            eprintln!("{name}: MISMATCH {text:?}\n  llama.cpp {want:?}\n  ours      {got:?}");
        }
    }
    eprintln!("{name}: {ok}/{} llama.cpp cases match", cases.len());
    (tok, ok, cases.len())
}

fn assert_all(name: &str) -> LlmTokenizer {
    let (tok, ok, n) = check(name);
    assert_eq!(ok, n, "{name}: {ok}/{n} cases match llama.cpp");
    tok
}

/// Byte-level BPE is lossless: the decoded ids give the input back.
fn assert_round_trip(name: &str, tok: &LlmTokenizer) {
    for (text, _) in read_cases(name) {
        assert_eq!(
            tok.decode(&tok.encode(&text, false, false)),
            text,
            "{name}: round trip of {text:?}"
        );
    }
}

#[test]
fn gpt2() {
    let tok = assert_all("gpt-2");
    assert_round_trip("gpt-2", &tok);
}

#[test]
fn llama3() {
    let tok = assert_all("llama-bpe");
    assert_round_trip("llama-bpe", &tok);
    // llama.cpp: Llama-3 vocabularies add BOS; <|eot_id|> ends a turn.
    assert_eq!(tok.encode("Hello", true, false), [128000, 9906]);
    let eot = tok.token_id("<|eot_id|>").unwrap();
    assert!(tok.is_eog(eot) && tok.is_eog(128001) && !tok.is_eog(9906));
    assert_eq!(tok.eot(), Some(eot));
}

#[test]
fn qwen2() {
    let tok = assert_all("qwen2");
    assert_round_trip("qwen2", &tok);
    // Control tokens are text unless parse_special.
    let im_start = tok.token_id("<|im_start|>").unwrap();
    let ids = tok.encode("<|im_start|>user\nhi", false, true);
    assert_eq!(ids[0], im_start);
    assert_eq!(tok.decode(&ids[1..]), "user\nhi");
    assert!(!tok
        .encode("<|im_start|>user", false, false)
        .contains(&im_start));
    assert!(tok.is_eog(tok.token_id("<|im_end|>").unwrap()));
}

#[test]
fn qwen35() {
    let tok = assert_all("qwen35");
    assert_round_trip("qwen35", &tok);
}

#[test]
fn starcoder_family() {
    for name in ["starcoder", "refact"] {
        let tok = assert_all(name);
        assert_round_trip(name, &tok);
    }
}

#[test]
fn mpt_falcon_command_r() {
    for name in ["mpt", "falcon", "command-r"] {
        let tok = assert_all(name);
        assert_round_trip(name, &tok);
    }
}

#[test]
fn llama_spm() {
    let tok = assert_all("llama-spm");
    // SentencePiece adds BOS and a space prefix; decoding drops that space.
    assert_eq!(tok.encode("Hello", true, false)[0], 1);
    for (text, _) in read_cases("llama-spm") {
        let ids = tok.encode(&text, true, false);
        // Characters with no token fall back to bytes, which come back too.
        assert_eq!(tok.decode(&ids), text, "round trip of {text:?}");
    }
}

#[test]
fn phi3() {
    assert_all("phi-3");
}

#[test]
fn unsupported_vocabularies_are_typed_errors() {
    let mut v = read_vocab("gpt-2");
    v.pre = Some("deepseek-llm".into());
    match LlmTokenizer::new(v.clone()) {
        Err(TokenizerError::UnsupportedVocab {
            what: "pre-tokenizer",
            name,
            ..
        }) => assert_eq!(name, "deepseek-llm"),
        other => panic!("{other:?}"),
    }
    v.pre = Some("gpt-2".into());
    v.model = "t5".into();
    assert!(matches!(
        LlmTokenizer::new(v.clone()),
        Err(TokenizerError::UnsupportedVocab { .. })
    ));
    v.model = "gpt2".into();
    v.merges[7] = "nospace".into();
    assert!(matches!(
        LlmTokenizer::new(v.clone()),
        Err(TokenizerError::InvalidVocab {
            field: "tokenizer.ggml.merges",
            ..
        })
    ));
    let mut v = read_vocab("gpt-2");
    v.eos = Some(v.tokens.len() as u32);
    assert!(matches!(
        LlmTokenizer::new(v),
        Err(TokenizerError::InvalidVocab { .. })
    ));
    let mut v = read_vocab("llama-spm");
    v.scores.truncate(10);
    assert!(matches!(
        LlmTokenizer::new(v),
        Err(TokenizerError::InvalidVocab {
            field: "tokenizer.ggml.scores",
            ..
        })
    ));
}

/// Strings that stress the pre-tokenizers and the byte fallback: every
/// tokenizer gives them back exactly, and the streaming decoder agrees
/// with `decode` token by token.
const HARD: &[&str] = &[
    "",
    " ",
    "\t\n\r\n  \u{3000}\u{85}x",
    "emoji 👩‍👩‍👧‍👦 🇫🇷 🦙🦙 ✅",
    "中文字符与日本語のテキスト、한국어",
    "e\u{301}\u{302} n\u{303} combining",
    "fn main() {\n    println!(\"{}\", 1_000_000u64 >> 3);\n}\n",
    "    indented\n\n\n\ttabs\t\tand   spaces   ",
    "'s 're 'VE 'Ll don't I'M",
    "1234567890 ١٢٣ ²³ Ⅻ",
    "\u{0}\u{1}\u{7f}\u{ad}\u{feff}\u{fffd}\u{10ffff}\u{e000}",
    "<|im_start|><s></s><unk><|endoftext|> <0x41>",
];

#[test]
fn hard_strings_round_trip_and_stream() {
    for name in ["gpt-2", "llama-bpe", "qwen2", "starcoder", "llama-spm"] {
        let tok = LlmTokenizer::new(read_vocab(name)).unwrap();
        for s in HARD {
            let ids = tok.encode(s, false, false);
            assert_eq!(tok.decode(&ids), *s, "{name}: round trip of {s:?}");
            let mut stream = tok.stream_decoder();
            let mut text: String = ids.iter().map(|&id| stream.push(id)).collect();
            text.push_str(&stream.finish());
            // The SentencePiece prefix space is dropped by decode only.
            let want = if name == "llama-spm" && !s.is_empty() {
                format!(" {s}")
            } else {
                s.to_string()
            };
            assert_eq!(text, want, "{name}: stream of {s:?}");
            let ids = tok.encode(s, true, true);
            assert!(ids.iter().all(|&id| (id as usize) < tok.vocab_size()));
        }
    }
}

/// Generated strings (a fixed-seed mix of ASCII, whitespace, multi-byte
/// and special-token fragments) never panic and decode back.
#[test]
fn generated_strings_never_panic() {
    let pieces = [
        "a",
        "Z",
        " ",
        "  ",
        "\n",
        "\r\n",
        "\t",
        "'",
        "'s",
        "1",
        "42",
        "é",
        "e\u{301}",
        "中",
        "🦙",
        "\u{200d}",
        "<",
        "|",
        ">",
        "<|endoftext|>",
        "<s>",
        "▁",
        "Ġ",
        "\u{0}",
        ".",
        "?!",
        "\u{3000}",
        "ـ",
        "\u{10ffff}",
    ];
    let toks: Vec<LlmTokenizer> = ["gpt-2", "llama-bpe", "qwen2", "starcoder", "llama-spm"]
        .iter()
        .map(|n| LlmTokenizer::new(read_vocab(n)).unwrap())
        .collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..600 {
        let len = (next() % 24) as usize;
        let s: String = (0..len)
            .map(|_| pieces[(next() % pieces.len() as u64) as usize])
            .collect();
        for (i, tok) in toks.iter().enumerate() {
            let ids = tok.encode(&s, next() % 2 == 0, next() % 2 == 0);
            let plain = tok.encode(&s, false, false);
            // SentencePiece reads a `▁` in the input as the space it stands for.
            let want = if i == 4 {
                s.replace('▁', " ")
            } else {
                s.clone()
            };
            assert_eq!(tok.decode(&plain), want, "vocab {i}: round trip of {s:?}");
            let _ = tok.decode(&ids);
        }
    }
}

/// About 2 KB of mixed prose and code, timed (debug builds are ~10x slower
/// than release; the bound is loose on purpose).
#[test]
fn encoding_2kb_is_fast() {
    let text =
        "The quick brown fox jumps over the lazy dog. It's 2024; prices rose 3.5% to $1,234.56!\n\
        fn fib(n: u64) -> u64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }\n\
        Ünïcödé façade naïve coöperate — 東京タワー 🗼 and emojis 😀😃😄.\n"
            .repeat(10);
    assert!(text.len() > 2000);
    for name in ["llama-bpe", "qwen2", "llama-spm"] {
        let tok = LlmTokenizer::new(read_vocab(name)).unwrap();
        let t0 = Instant::now();
        let runs = 20;
        let mut n = 0;
        for _ in 0..runs {
            n = tok.encode(&text, true, false).len();
        }
        let per = t0.elapsed() / runs;
        eprintln!("{name}: {} bytes -> {n} tokens in {per:?}", text.len());
        assert!(per.as_millis() < 200, "{name}: {per:?} for 2 KB");
    }
}
