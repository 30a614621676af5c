#!/usr/bin/env python3
"""The table of benches/results/llm-cuda.md from one run of benches/llm/cuda.sh:

    python3 benches/llm/cuda_report.py DIR [--commit REV]

DIR holds what the run left in $OUT for one model (MODEL.tgz unpacked:
rlx_cuda_llm.json, rlx_cuda_llm.log, transformers_cuda_llm.json, gpu.txt,
and, where Vulkan ran, rlx_vulkan_bench.json). Prints Markdown on stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path


def ms(v) -> str:
    if isinstance(v, tuple):  # (mean, sd) as `rlx bench llm --json` gives them
        return f"{v[0]:,.1f} ± {v[1]:,.1f}"
    m = statistics.mean(v)
    sd = statistics.pstdev(v) if len(v) > 1 else 0.0
    return f"{m:,.1f} ± {sd:,.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--commit", default="?")
    a = ap.parse_args()
    d = Path(a.dir)
    r = json.loads((d / "rlx_cuda_llm.json").read_text())
    t = json.loads((d / "transformers_cuda_llm.json").read_text())
    gpu = (d / "gpu.txt").read_text().strip()
    log = (d / "rlx_cuda_llm.log").read_text()
    peak = re.search(r"rlx peak GPU memory: (\d+) MiB", log)
    rows = [("rlx (CUDA graph per step)", r["pp_tok_s"], r["tg_tok_s"],
             f"{r['prompts_identical']}/{r['prompts']}", f"{peak.group(1)} MiB (process, nvidia-smi)" if peak else "?")]
    if r.get("host_cache_tg_tok_s"):
        rows.append(("rlx, cache not resident (whole cache copied in each step)", r["host_cache_pp_tok_s"],
                     r["host_cache_tg_tok_s"], "", ""))
    vk = d / "rlx_vulkan_bench.json"
    if vk.exists() and vk.read_text().strip():
        v = json.loads(vk.read_text())
        rows.append(("rlx on wgpu-Vulkan (same GPU)", (v["prefill_tok_s"], v["prefill_sd"]),
                     (v["decode_tok_s"], v["decode_sd"]), "", ""))
    for mode, v in t["modes"].items():
        name = {"eager": "transformers eager", "compile": "transformers + torch.compile (CUDA graphs)"}[mode]
        rows.append((name, v["pp_tok_s"], v["tg_tok_s"], f"{v['prompts_identical']}/{v['prompts']}",
                     f"{v['peak_mem_mb']:.0f} MiB (torch allocator)"))
    out = [f"| system | pp{r['pp']} tok/s | tg{r['tg']} tok/s | greedy prompts identical to the reference | peak GPU memory |",
           "|---|---:|---:|---|---|"]
    for name, pp, tg, same, mem in rows:
        out.append(f"| {name} | {ms(pp)} | {ms(tg)} | {same} | {mem} |")
    rpp, rtg = statistics.mean(r["pp_tok_s"]), statistics.mean(r["tg_tok_s"])
    ratios = ", ".join(f"{mode}: pp {rpp / statistics.mean(v['pp_tok_s']):.2f}×, tg {rtg / statistics.mean(v['tg_tok_s']):.2f}×"
                       for mode, v in t["modes"].items())
    print(f"GPU: {gpu}; torch {t['torch']}, transformers {t['transformers']}; rlx commit {a.commit}.\n")
    print("\n".join(out))
    print(f"\nrlx / transformers (tokens/s, > 1: rlx is faster) — {ratios}. "
          f"rlx logits max abs error vs the committed reference: {r['logits_max_abs_err']:.1e}; "
          f"decode-graph nodes not native on CUDA: {r['not_native']}.")


if __name__ == "__main__":
    main()
