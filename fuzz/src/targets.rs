//! The fuzz targets. Each returns normally on any input rlx handles (a
//! value or a typed error) and panics on a broken property.

use rlx_ir::{text, Graph, HostTensor};
use std::sync::OnceLock;

/// Graphs equal as values; `Debug` text decides where a float literal is
/// NaN (NaN != NaN, but prints the same).
fn same_graph(a: &Graph, b: &Graph) -> bool {
    a == b || format!("{a:?}") == format!("{b:?}")
}

fn same_tensor(a: &HostTensor, b: &HostTensor) -> bool {
    a == b || format!("{a:?}") == format!("{b:?}")
}

/// `print(g)` parses back to an equal graph, and printing that gives the
/// same text. `exact`: also compare the graphs (the text form does not
/// keep a node's HIR origin, which only JSON carries).
fn text_round_trip(g: &Graph, exact: bool) {
    let printed = text::print(g);
    let g2 = match text::parse(&printed) {
        Ok(g2) => g2,
        Err(e) => panic!("the printed form of an accepted graph does not parse: {e}\n{printed}"),
    };
    if exact && !same_graph(g, &g2) {
        panic!("parse(print(g)) != g\nprinted:\n{printed}\ng: {g:?}\nre-parsed: {g2:?}");
    }
    let reprinted = text::print(&g2);
    if reprinted != printed {
        panic!("print(parse(print(g))) != print(g)\nfirst:\n{printed}\nsecond:\n{reprinted}");
    }
}

/// JSON round trip: `from_json(to_json(g)) == g`.
fn json_round_trip(g: &Graph) {
    let v = g.to_json();
    let s = v.to_string();
    let g2 = match Graph::from_json_str(&s) {
        Ok(g2) => g2,
        Err(e) => panic!("the JSON form of an accepted graph does not load: {e}\n{s}"),
    };
    if !same_graph(g, &g2) {
        panic!("from_json(to_json(g)) != g\njson: {s}\ng: {g:?}\nre-read: {g2:?}");
    }
}

/// IR text: parse → verify → print → parse to an equal graph.
pub fn ir_text(data: &[u8]) {
    crate::init();
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = text::parse(src) else {
        return;
    };
    if let Err(e) = g.verify() {
        panic!("parse accepted a graph that verify rejects: {e}\n{src}");
    }
    crate::note(|| format!("ir_text: parsed, {} nodes", g.nodes.len()));
    text_round_trip(&g, true);
    json_round_trip(&g);
}

/// JSON IR: `Graph::from_json_str` → JSON and text round trips.
pub fn ir_json(data: &[u8]) {
    crate::init();
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(g) = Graph::from_json_str(src) else {
        return;
    };
    if let Err(e) = g.verify() {
        panic!("from_json_str accepted a graph that verify rejects: {e}");
    }
    crate::note(|| format!("ir_json: loaded, {} nodes", g.nodes.len()));
    json_round_trip(&g);
    text_round_trip(&g, false);
}

/// safetensors from a byte buffer: every accessor on every tensor, then
/// (when all load) write the tensors back and read them again.
pub fn safetensors(data: &[u8]) {
    use rlx_formats::SafetensorsFile;
    crate::init();
    // The first byte picks whether NaN/inf weights are allowed, so both
    // paths are covered.
    let allow = data.first().is_some_and(|b| b & 1 == 1);
    for allow_non_finite in [false, allow] {
        let Ok(f) = SafetensorsFile::from_bytes(data.to_vec()) else {
            return;
        };
        let f = f.allow_non_finite(allow_non_finite);
        let _ = f.metadata();
        let names: Vec<String> = f.names().iter().map(|s| s.to_string()).collect();
        assert_eq!(names.len(), f.len());
        let mut loaded = Vec::new();
        for n in &names {
            assert!(f.contains(n), "listed tensor `{n}` is not contained");
            let info = f.info(n);
            let _ = f.file_dtype(n);
            let _ = f.raw_bytes(n);
            match f.tensor(n) {
                Ok(t) => {
                    if let Ok((dt, shape)) = info {
                        assert_eq!(t.dtype(), dt, "`{n}`: tensor dtype differs from info()");
                        assert_eq!(t.shape(), &shape, "`{n}`: tensor shape differs from info()");
                    }
                    loaded.push((n.clone(), t));
                }
                Err(_) => {}
            }
        }
        crate::note(|| {
            format!(
                "safetensors: {} of {} tensors load",
                loaded.len(),
                names.len()
            )
        });
        let all = f.tensors();
        if loaded.len() == names.len() {
            let all = all.unwrap_or_else(|e| panic!("every tensor loads, tensors() fails: {e}"));
            assert_eq!(all.len(), names.len());
            let refs: Vec<(&str, &HostTensor)> =
                loaded.iter().map(|(n, t)| (n.as_str(), t)).collect();
            if let Ok(bytes) = rlx_formats::safetensors::serialize(&refs, f.metadata()) {
                let g = SafetensorsFile::from_bytes(bytes)
                    .unwrap_or_else(|e| panic!("a written file does not read: {e}"))
                    .allow_non_finite(true);
                for (n, t) in &loaded {
                    let t2 = g
                        .tensor(n)
                        .unwrap_or_else(|e| panic!("written `{n}` does not load: {e}"));
                    assert!(
                        same_tensor(t, &t2),
                        "`{n}` changed in a write/read round trip"
                    );
                }
            }
        }
    }
}

/// .npy: read → write → read to an equal tensor.
pub fn npy(data: &[u8]) {
    crate::init();
    let Ok(t) = rlx_formats::npy::read("fuzz.npy", data) else {
        return;
    };
    crate::note(|| format!("npy: read {:?} {:?}", t.dtype(), t.shape()));
    if let Ok(bytes) = rlx_formats::npy::write("fuzz.npy", &t) {
        let t2 = rlx_formats::npy::read("fuzz.npy", &bytes)
            .unwrap_or_else(|e| panic!("a written .npy does not read: {e}"));
        assert!(
            same_tensor(&t, &t2),
            "a .npy changed in a write/read round trip"
        );
    }
}

const TEXTS: &[&str] = &[
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "naïve café — Ünïcödé, 東京タワー, 🙂 [MASK] [unused1]",
    "",
    "   \t\n  ",
    "unaffable antidisestablishmentarianism",
];

fn check_encoding(tok: &rlx_tokenizers::Tokenizer, e: &rlx_tokenizers::Encoding, texts: &[&str]) {
    let n = e.ids.len();
    assert_eq!(e.type_ids.len(), n, "type_ids length");
    assert_eq!(e.attention_mask.len(), n, "attention_mask length");
    assert_eq!(e.special_tokens_mask.len(), n, "special_tokens_mask length");
    assert_eq!(e.tokens.len(), n, "tokens length");
    assert_eq!(e.offsets.len(), n, "offsets length");
    let longest = texts.iter().map(|t| t.len()).max().unwrap_or(0);
    for (i, &(a, b)) in e.offsets.iter().enumerate() {
        assert!(
            a <= b && b <= longest,
            "offset {i} ({a}, {b}) outside the input"
        );
    }
    let _ = tok.vocab_size();
}

/// tokenizer.json: load, then encode texts, pairs and a padded batch.
pub fn tokenizer(data: &[u8]) {
    use rlx_tokenizers::{Padding, Tokenizer, Truncation};
    crate::init();
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let tok = match Tokenizer::from_json_str(src) {
        Ok(t) => t,
        Err(e) => {
            crate::note(|| format!("tokenizer: refused: {e}"));
            return;
        }
    };
    crate::note(|| format!("tokenizer: loaded, vocab {}", tok.vocab_size()));
    for t in TEXTS {
        let e = tok.encode(t);
        check_encoding(&tok, &e, &[t]);
        for id in &e.ids {
            let _ = tok.id_to_token(*id);
        }
    }
    let e = tok.encode_pair(TEXTS[0], TEXTS[2]);
    check_encoding(&tok, &e, &[TEXTS[0], TEXTS[2]]);
    let trunc = tok
        .file_truncation()
        .unwrap_or_else(|| tok.default_truncation());
    let pad = tok.file_padding().unwrap_or_else(Padding::longest);
    if let Ok(b) = tok.encode_batch(TEXTS, pad, trunc) {
        assert_eq!(b.shape.0, TEXTS.len());
        assert_eq!(b.ids.len(), b.shape.0 * b.shape.1, "batch ids");
    }
    let _ = tok.encode_with(TEXTS[1], Some(TEXTS[2]), Truncation::none());
}

/// The trimmed MiniLM tokenizer (the first 6,000 ids of the real vocab),
/// loaded once.
fn minilm() -> &'static rlx_tokenizers::Tokenizer {
    static TOK: OnceLock<rlx_tokenizers::Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        rlx_tokenizers::Tokenizer::from_json_str(include_str!("../data/minilm-trimmed.json"))
            .expect("the embedded tokenizer loads")
    })
}

/// A real tokenizer on fuzzed text: the first byte picks truncation; a
/// NUL byte splits the input into a pair.
pub fn tokenizer_text(data: &[u8]) {
    use rlx_tokenizers::{Padding, Truncation};
    crate::init();
    let tok = minilm();
    let (ctl, rest) = data.split_first().map_or((0, data), |(c, r)| (*c, r));
    let s = String::from_utf8_lossy(rest);
    let (a, b) = match s.split_once('\0') {
        Some((a, b)) => (a, Some(b)),
        None => (s.as_ref(), None),
    };
    let e = tok.encode(a);
    crate::note(|| format!("tokenizer_text: {:?}", e.tokens));
    check_encoding(tok, &e, &[a]);
    let vocab = tok.vocab_size();
    for (id, t) in e.ids.iter().zip(&e.tokens) {
        assert!(
            (*id as usize) < vocab,
            "id {id} outside the vocabulary ({vocab})"
        );
        assert_eq!(tok.id_to_token(*id), Some(t.as_str()), "token of id {id}");
    }
    for &(x, y) in &e.offsets {
        assert!(
            a.is_char_boundary(x) && a.is_char_boundary(y),
            "offsets ({x}, {y}) split a character of {a:?}"
        );
    }
    if let Some(b) = b {
        let e = tok.encode_pair(a, b);
        check_encoding(tok, &e, &[a, b]);
    }
    let max = 2 + (ctl as usize % 64);
    let mut t = Truncation::none();
    t.max_length = Some(max);
    match tok.encode_with(a, b, t) {
        Ok(e) => assert!(e.len() <= max, "truncated to {max}, got {} tokens", e.len()),
        Err(_) => {}
    }
    if let Ok(batch) = tok.encode_batch(&[a, b.unwrap_or("x")], Padding::longest(), t) {
        assert_eq!(batch.shape.0, 2);
        assert!(batch.shape.1 <= max, "batch longer than the truncation");
    }
}

/// Random valid graphs through the compile pipeline, against the reference
/// interpreter.
pub fn compile(data: &[u8]) {
    crate::init();
    crate::graphgen::check(data);
}
