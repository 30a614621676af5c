#!/usr/bin/env python3
"""Summarize RLX_CUDA_TUNE_LOG=1 lines (stderr of `gpu minilm`): per GEMM,
cuBLASLt's fastest candidate vs our fastest kernel (sgemm.rs), in us.

    RLX_CUDA_TUNE_LOG=1 .cuda-run/gpu minilm ... 2>&1 | python3 benches/cuda/tune_summary.py
"""
import re
import sys

for line in sys.stdin:
    if not line.startswith("tune "):
        continue
    mnk = re.search(r"mnk: \((\d+), (\d+), (\d+)\)", line).groups()
    batch = re.search(r"batch: (\d+)", line).group(1)
    lt = [float(x) for x in re.search(r"cuBLASLt \[([^\]]*)\]", line).group(1).split() if x != "-"]
    own = []
    for item in re.search(r"own \[([^\]]*)\]", line).group(1).split(", "):
        if item:
            name, t = item.rsplit(" ", 1)
            if t != "-":
                own.append((float(t), name))
    best_lt = min(lt) if lt else float("nan")
    t, name = min(own) if own else (float("nan"), "-")
    print(f"m{mnk[0]} n{mnk[1]} k{mnk[2]} batch {batch}: cuBLASLt {best_lt:.1f} (heuristic #0 {lt[0]:.1f}), ours {t:.1f} {name}: {t / best_lt:.2f}x")
