#!/usr/bin/env python3
"""The peer of `gpu gguf` (native/rlx-cuda/examples/gpu/gguf.rs) on the same GPU:
Hugging Face transformers running the same GGUF (dequantized to f32 by its
gguf loader), measured as `rlx bench llm` measures rlx:

* pp: one forward over a prompt of --pp ids (the fixed-seed LCG of
  `rlx bench llm`, state 42), tokens/s;
* tg: --tg greedy tokens decoded one at a time from a one-token context
  with a KV cache (EOS ignored), tokens/s over the decode steps alone.

Modes: `eager` (DynamicCache, eager attention, no compile) and `compile`
(StaticCache, `torch.compile(mode="reduce-overhead")` on the decode step:
CUDA graphs, as transformers documents for fast generation). f32 weights
and activations, TF32 off (rlx's CUDA LLM path computes in strict f32).
Also checks greedy tokens on the reference prompts (tests/vectors/llm).

Run on the GPU machine (benches/llm/cuda.sh does):
    python3 benches/llm/cuda_transformers.py --model F.gguf \
        --reference tests/vectors/llm/smollm2.json --json out.json
Needs the `gguf` package there (carried as a wheel).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import AutoModelForCausalLM, StaticCache


def bench_ids(n: int, vocab: int) -> list[int]:
    s, out = 42, []
    for _ in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append((s >> 33) % vocab)
    return out


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@torch.no_grad()
def greedy_eager(model, ids: list[int], n: int) -> tuple[list[int], float]:
    """n greedy tokens (the first from the prompt); seconds of the n-1 decode steps."""
    dev = model.device
    out = model(torch.tensor([ids], device=dev), use_cache=True)
    past, t = out.past_key_values, int(torch.argmax(out.logits[0, -1]).item())
    toks = [t]
    sync()
    t0 = time.perf_counter()
    for i in range(n - 1):
        pos = torch.tensor([[len(ids) + i]], device=dev)
        out = model(torch.tensor([[t]], device=dev), past_key_values=past, position_ids=pos,
                    cache_position=pos[0], use_cache=True)
        past = out.past_key_values
        t = int(torch.argmax(out.logits[0, -1]).item())
        toks.append(t)
    sync()
    return toks, time.perf_counter() - t0


class Compiled:
    """Decode steps through a StaticCache and a CUDA-graphed compiled forward."""

    def __init__(self, model, max_len: int):
        self.model, self.max_len = model, max_len
        self.step = torch.compile(self._forward, mode="reduce-overhead", fullgraph=True)

    def _forward(self, tok, pos, cache):
        return self.model(tok, position_ids=pos.unsqueeze(0), cache_position=pos,
                          past_key_values=cache, use_cache=True).logits

    @torch.no_grad()
    def greedy(self, ids: list[int], n: int) -> tuple[list[int], float]:
        dev = self.model.device
        cache = StaticCache(config=self.model.config, max_cache_len=self.max_len)
        pos = torch.arange(len(ids), device=dev)
        lg = self.model(torch.tensor([ids], device=dev), position_ids=pos.unsqueeze(0),
                        cache_position=pos, past_key_values=cache, use_cache=True).logits
        t = int(torch.argmax(lg[0, -1]).item())
        toks = [t]
        sync()
        t0 = time.perf_counter()
        for i in range(n - 1):
            p = torch.tensor([len(ids) + i], device=dev)
            lg = self.step(torch.tensor([[t]], device=dev), p, cache)
            t = int(torch.argmax(lg[0, -1]).item())
            toks.append(t)
        sync()
        return toks, time.perf_counter() - t0


@torch.no_grad()
def prefill_s(model, ids: list[int]) -> float:
    x = torch.tensor([ids], device=model.device)
    sync()
    t0 = time.perf_counter()
    model(x, use_cache=True)
    sync()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--device", default="cuda", help="cpu: a quick check of this script off the GPU machine")
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ref = json.loads(Path(a.reference).read_text())
    path = Path(a.model)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager").to(a.device).eval()
    print(f"transformers: {path.name} loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    vocab = model.config.vocab_size
    gpu = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    res = {"model": path.name, "gpu": gpu, "torch": torch.__version__,
           "transformers": __import__("transformers").__version__, "pp": a.pp, "tg": a.tg, "modes": {}}
    ids = bench_ids(a.pp, vocab)
    for mode in a.modes.split(","):
        if a.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        prompts = ref["prompts"][: a.prompts]
        longest = max([len(p["prompt_ids"]) + len(p["generated_ids"]) for p in prompts] + [a.pp + a.tg])
        comp = Compiled(model, longest + 8) if mode == "compile" else None
        gen = comp.greedy if comp else (lambda p, n: greedy_eager(model, p, n))
        same = 0
        for p in prompts:
            want = p["generated_ids"]
            got, _ = gen(p["prompt_ids"], len(want))
            same += got == want
            k = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), len(want))
            print(f"transformers {mode}: prompt {p['kind']}: {k}/{len(want)} greedy tokens as the reference", flush=True)
        pps, tgs = [], []
        for run in range(a.runs + 1):
            pp = a.pp / prefill_s(model, ids)
            _, dt = gen(ids[:1], a.tg + 1)
            tg = a.tg / dt
            print(f"transformers {mode} {'timed' if run else 'warm-up'} run: pp{a.pp} {pp:.1f} tok/s, tg{a.tg} {tg:.1f} tok/s",
                  flush=True)
            if run:
                pps.append(pp)
                tgs.append(tg)
        res["modes"][mode] = {"prompts": len(prompts), "prompts_identical": same, "pp_tok_s": pps, "tg_tok_s": tgs,
                              "peak_mem_mb": torch.cuda.max_memory_allocated() / 2**20 if a.device == "cuda" else None}
        print(f"transformers {mode}: {same}/{len(prompts)} prompts token-identical; pp {sum(pps) / len(pps):.1f}, "
              f"tg {sum(tgs) / len(tgs):.1f} tok/s", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
