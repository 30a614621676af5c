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
            if let Ok(t) = f.tensor(n) {
                if let Ok((dt, shape)) = info {
                    assert_eq!(t.dtype(), dt, "`{n}`: tensor dtype differs from info()");
                    assert_eq!(t.shape(), &shape, "`{n}`: tensor shape differs from info()");
                }
                loaded.push((n.clone(), t));
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
    if let Ok(e) = tok.encode_with(a, b, t) {
        assert!(e.len() <= max, "truncated to {max}, got {} tokens", e.len());
    }
    if let Ok(batch) = tok.encode_batch(&[a, b.unwrap_or("x")], Padding::longest(), t) {
        assert_eq!(batch.shape.0, 2);
        assert!(batch.shape.1 <= max, "batch longer than the truncation");
    }
}

/// ONNX import: bytes → `ModelProto` → IR graph. An import either fails
/// with a typed error or gives a graph that verifies and whose text
/// round-trips; symbolic dimensions are bound to 2. Every external data
/// file resolves to the input's own bytes (offsets and lengths then point
/// anywhere, or past the end).
pub fn onnx(data: &[u8]) {
    crate::init();
    let mut opts = rlx_onnx::ImportOptions::default();
    let own = data.to_vec();
    opts.external = Some(rlx_onnx::ExternalData::new(move |_| Ok(own.clone())));
    if let Ok(m) = <rlx_onnx::proto::ModelProto as prost::Message>::decode(data) {
        for vi in m.graph.iter().flat_map(|g| &g.input) {
            use rlx_onnx::proto::{tensor_shape_proto::dimension::Value, type_proto};
            if let Some(type_proto::Value::TensorType(t)) =
                vi.r#type.as_ref().and_then(|t| t.value.as_ref())
            {
                for d in t.shape.iter().flat_map(|s| &s.dim) {
                    if let Some(Value::DimParam(p)) = &d.value {
                        opts.dims.insert(p.clone(), 2);
                    }
                }
            }
        }
    }
    let Ok(m) = rlx_onnx::import(data, &opts) else {
        return;
    };
    crate::note(|| format!("onnx: imported {} nodes", m.graph.nodes.len()));
    m.graph
        .verify()
        .unwrap_or_else(|e| panic!("an imported graph does not verify: {e}"));
    text_round_trip(&m.graph, false);
}

/// .rten models: the header, the FlatBuffers graph (every offset and
/// length checked), conversion to ONNX, then the import; symbolic
/// dimensions bound to 2.
pub fn rten(data: &[u8]) {
    crate::init();
    let Ok(model) = rlx_onnx::rten::to_onnx(data) else {
        return;
    };
    let mut opts = rlx_onnx::ImportOptions::default();
    for vi in model.graph.iter().flat_map(|g| &g.input) {
        use rlx_onnx::proto::{tensor_shape_proto::dimension::Value, type_proto};
        if let Some(type_proto::Value::TensorType(t)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        {
            for d in t.shape.iter().flat_map(|s| &s.dim) {
                if let Some(Value::DimParam(p)) = &d.value {
                    opts.dims.insert(p.clone(), 2);
                }
            }
        }
    }
    let Ok(m) = rlx_onnx::import_model(&model, &opts) else {
        return;
    };
    crate::note(|| format!("rten: imported {} nodes", m.graph.nodes.len()));
    m.graph
        .verify()
        .unwrap_or_else(|e| panic!("an imported graph does not verify: {e}"));
}

/// Random valid graphs through the compile pipeline, against the reference
/// interpreter.
pub fn compile(data: &[u8]) {
    crate::init();
    crate::graphgen::check(data);
}

/// tokenizer.json settings drawn from the fuzz bytes (padding, truncation,
/// normalizer flags, word length, an added token) over the small MiniLM
/// tokenizer, then texts from the rest of the bytes: reaches the numbers
/// (a padding of 10¹² tokens, a `pad_to_multiple_of` of u64::MAX) that
/// byte mutation of whole JSON files seldom writes.
pub fn tokenizer_config(data: &[u8]) {
    use crate::graphgen::Choices;
    use rlx_tokenizers::{Padding, Tokenizer, Truncation};
    use serde_json::{json, Value};
    crate::init();
    static BASE: OnceLock<Value> = OnceLock::new();
    // A 1,216-token vocabulary (the special tokens, single characters and
    // the first word pieces): loading it is most of an execution.
    let base = BASE.get_or_init(|| {
        let mut t: Value = serde_json::from_str(include_str!("../data/minilm-trimmed.json"))
            .expect("the embedded tokenizer is JSON");
        let vocab = t["model"]["vocab"].as_object().expect("a vocabulary");
        let mut kept: Vec<(&String, u64)> = vocab
            .iter()
            .filter_map(|(k, v)| v.as_u64().map(|id| (k, id)))
            .filter(|&(_, id)| id <= 103 || (999..2100).contains(&id))
            .collect();
        kept.sort_by_key(|&(_, id)| id);
        // Ids 0..=103 (every special token) keep theirs.
        let small: serde_json::Map<String, Value> = kept
            .iter()
            .enumerate()
            .map(|(i, (k, _))| ((*k).clone(), json!(i)))
            .collect();
        t["model"]["vocab"] = Value::Object(small);
        t
    });
    let mut c = Choices::new(data);
    // A small number most of the time, any u64 sometimes.
    let num = |c: &mut Choices| -> u64 {
        match c.below(4) {
            0 => u64::from_le_bytes(std::array::from_fn(|_| c.byte())),
            1 => 1u64 << c.below(64),
            _ => c.byte() as u64,
        }
    };
    let mut t = base.clone();
    let dir = |c: &mut Choices| if c.flag() { "Left" } else { "Right" };
    t["padding"] = match c.below(3) {
        0 => Value::Null,
        k => {
            let strategy = if k == 1 {
                json!("BatchLongest")
            } else {
                json!({ "Fixed": num(&mut c) })
            };
            let multiple = if c.flag() {
                json!(num(&mut c))
            } else {
                Value::Null
            };
            json!({"strategy": strategy, "direction": dir(&mut c), "pad_to_multiple_of": multiple,
                   "pad_id": c.below(110), "pad_type_id": c.below(3), "pad_token": "[PAD]"})
        }
    };
    t["truncation"] = if c.flag() {
        Value::Null
    } else {
        let strategy = ["LongestFirst", "OnlyFirst", "OnlySecond"][c.below(3)];
        json!({"max_length": num(&mut c), "strategy": strategy, "stride": num(&mut c), "direction": dir(&mut c)})
    };
    let strip = [Value::Null, json!(true), json!(false)][c.below(3)].clone();
    t["normalizer"]["lowercase"] = json!(c.flag());
    t["normalizer"]["strip_accents"] = strip;
    t["normalizer"]["handle_chinese_chars"] = json!(c.flag());
    t["normalizer"]["clean_text"] = json!(c.flag());
    t["model"]["max_input_chars_per_word"] = json!(num(&mut c));
    if c.flag() {
        let content: String =
            ["hello world", "##", " ", "[MASK]", "é", "", "x y"][c.below(7)].into();
        let id = 1216 + c.below(3) as u64;
        if let Some(a) = t["added_tokens"].as_array_mut() {
            a.push(
                json!({"id": id, "special": c.flag(), "content": content, "single_word": c.flag(),
                          "lstrip": c.flag(), "rstrip": c.flag(), "normalized": c.flag()}),
            );
        }
    }
    let src = t.to_string();
    let tok = match Tokenizer::from_json_str(&src) {
        Ok(t) => t,
        Err(e) => {
            crate::note(|| format!("tokenizer_config: refused: {e}"));
            return;
        }
    };
    let text = String::from_utf8_lossy(c.rest());
    let (a, b) = match text.split_once('\0') {
        Some((a, b)) => (a, Some(b)),
        None => (text.as_ref(), None),
    };
    crate::note(|| format!("tokenizer_config: loaded; {a:?} {b:?}"));
    let e = tok.encode(a);
    check_encoding(&tok, &e, &[a]);
    if let Some(b) = b {
        check_encoding(&tok, &tok.encode_pair(a, b), &[a, b]);
    }
    let trunc = tok
        .file_truncation()
        .unwrap_or_else(|| tok.default_truncation());
    let pad = tok.file_padding().unwrap_or_else(Padding::longest);
    if let Ok(e) = tok.encode_with(a, b, trunc) {
        check_encoding(&tok, &e, &[a, b.unwrap_or("")]);
        if let Some(m) = trunc.max_length {
            assert!(
                e.len() <= m.max(tok.encode("").len()),
                "truncated to {m}, got {}",
                e.len()
            );
        }
    }
    let texts = [a, b.unwrap_or("hello")];
    if let Ok(batch) = tok.encode_batch(&texts, pad, trunc) {
        assert_eq!(batch.shape.0, 2);
        assert_eq!(batch.ids.len(), batch.shape.0 * batch.shape.1, "batch ids");
    }
    let _ = tok.encode_batch(&texts, pad, Truncation::none());
}

/// GGUF from a byte buffer: every metadata value and tensor is read (as a
/// tensor where rlx has the type, as bytes otherwise), then written back
/// with `GgufWriter`: the written file must read to the same metadata and
/// tensor bytes, and writing that again must give the same bytes.
pub fn gguf(data: &[u8]) {
    use rlx_formats::gguf::{GgufFile, GgufWriter};
    crate::init();
    let Ok(f) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    let mut w = GgufWriter::new();
    let mut writable = true;
    for (k, v) in f.metadata() {
        let _ = v.to_string();
        writable &= w.metadata(k, v.clone()).is_ok();
    }
    let mut loaded = 0;
    for t in f.tensors() {
        let info = f
            .info(&t.name)
            .unwrap_or_else(|e| panic!("listed `{}` has no info: {e}", t.name));
        assert_eq!(info, t);
        let raw = f
            .raw_bytes(&t.name)
            .unwrap_or_else(|e| panic!("`{}`: {e}", t.name));
        assert_eq!(raw.len() as u64, t.size);
        if let Ok(h) = f.tensor(&t.name) {
            assert_eq!(h.shape().dims(), &t.shape[..], "`{}`: shape", t.name);
            assert_eq!(Some(h.dtype()), t.ggml_type.dtype());
            loaded += 1;
        }
        writable &= w
            .raw_tensor(&t.name, t.ggml_type, &t.shape, raw.to_vec())
            .is_ok();
    }
    crate::note(|| {
        format!(
            "gguf: {} metadata, {loaded} of {} tensors load",
            f.metadata().len(),
            f.tensors().len()
        )
    });
    // Empty arrays are legal to read but refused by the writer (as gguf's).
    if !writable {
        return;
    }
    let bytes = w.to_bytes();
    let g = GgufFile::from_bytes(bytes.clone())
        .unwrap_or_else(|e| panic!("a written file does not read: {e}"));
    // Debug formatting compares NaN metadata values too (NaN != NaN);
    // the idempotency check below compares their bits.
    assert_eq!(
        format!("{:?}", g.metadata()),
        format!("{:?}", f.metadata()),
        "metadata changed in the round trip"
    );
    assert_eq!(g.tensors().len(), f.tensors().len());
    for t in f.tensors() {
        assert!(
            g.raw_bytes(&t.name).ok() == f.raw_bytes(&t.name).ok(),
            "`{}` bytes changed",
            t.name
        );
    }
    let mut w2 = GgufWriter::new();
    for (k, v) in g.metadata() {
        w2.metadata(k, v.clone())
            .expect("metadata that was written writes again");
    }
    for t in g.tensors() {
        w2.raw_tensor(
            &t.name,
            t.ggml_type,
            &t.shape,
            g.raw_bytes(&t.name).unwrap().to_vec(),
        )
        .expect("a tensor that was written writes again");
    }
    assert!(w2.to_bytes() == bytes, "writing is not idempotent");
}

/// The GGUF LLM tokenizers (`rlx_tokenizers::LlmTokenizer`). The input is
/// split at the first 0xFF byte: before it, one vocabulary entry per line
/// (a line with one space is also tried as a merge; the first byte picks
/// the model and pre-tokenizer); after it, the text. A vocabulary that is
/// refused must be a typed error; a built one must encode any text, and
/// for byte-level BPE with every byte in the vocabulary decode must give
/// the text back.
pub fn llm_tokenizer(data: &[u8]) {
    use rlx_tokenizers::{LlmTokenizer, LlmVocab};
    crate::init();
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let cut = rest.iter().position(|&b| b == 0xFF).unwrap_or(rest.len());
    let (vocab, text) = (&rest[..cut], rest.get(cut + 1..).unwrap_or(&[]));
    let text = String::from_utf8_lossy(text);
    let lines: Vec<String> = String::from_utf8_lossy(vocab)
        .lines()
        .take(512)
        .map(str::to_string)
        .collect();
    const PRE: [&str; 6] = ["default", "gpt-2", "llama-bpe", "qwen2", "smollm", "falcon"];
    let bpe = sel % 2 == 0;
    // Byte-level BPE: the 256 byte characters first, so every text encodes.
    let mut tokens: Vec<String> = if bpe {
        (0u32..256)
            .map(|b| {
                let direct = (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
                let n = (0..b)
                    .filter(|&c| !((33..=126).contains(&c) || (161..=172).contains(&c) || c >= 174))
                    .count() as u32;
                char::from_u32(if direct { b } else { 256 + n })
                    .unwrap()
                    .to_string()
            })
            .collect()
    } else {
        (0..256).map(|b| format!("<0x{b:02X}>")).collect()
    };
    tokens.extend(lines.iter().cloned());
    let n = tokens.len();
    let v = LlmVocab {
        model: if bpe { "gpt2" } else { "llama" }.into(),
        pre: Some(PRE[(sel as usize / 2) % PRE.len()].into()),
        merges: lines
            .iter()
            .filter(|l| l.matches(' ').count() == 1)
            .cloned()
            .collect(),
        scores: (0..n).map(|i| -(i as f32)).collect(),
        token_type: (0..n)
            .map(|i| {
                if i < 256 && !bpe {
                    6
                } else if sel & 4 != 0 && i == n - 1 {
                    3
                } else {
                    1
                }
            })
            .collect(),
        eos: Some((n - 1) as u32),
        ..LlmVocab::default()
    };
    let Ok(tok) = LlmTokenizer::new(v) else {
        return;
    };
    for (add, parse) in [(false, false), (true, true)] {
        let ids = tok.encode(&text, add, parse);
        assert!(
            ids.iter().all(|&i| (i as usize) < n),
            "an id outside the vocabulary"
        );
        let mut stream = tok.stream_decoder();
        let streamed: String =
            ids.iter().map(|&i| stream.push(i)).collect::<String>() + &stream.finish();
        let _ = streamed;
    }
    if bpe {
        let ids = tok.encode(&text, false, false);
        assert_eq!(tok.decode(&ids), text, "byte-level BPE lost text");
    }
    crate::note(|| {
        format!(
            "llm_tokenizer: {} tokens, {} chars",
            n,
            text.chars().count()
        )
    });
}
