#!/usr/bin/env python3
"""MiniLM (all-MiniLM-L6-v2) on the CPU with 16-bit weights and activations:
rlx's fast engine with f32 / f16 / bf16 graphs, next to PyTorch eager with
fp32, bf16 autocast and plain fp16 (`model.half()`), in one run.

    ./scripts/fetch-models
    cargo build --release -p rlx-models --example half_bench
    python3 benches/minilm/half.py

Timed, for every system: encoder forward + masked mean pool + L2 normalize
(the graph `rlx bench minilm` runs), seq 128, the LCG ids of run.py; 2
threads each (rlx: RLX_NUM_THREADS=2); p50 = sorted[n//2]. Each system runs
in its own subprocess, one after another. Accuracy: the smallest per-
sequence cosine of the pooled embedding against the same system's fp32
result at that batch size.

Writes benches/results/minilm-cpu-half.{json,md}. Uses the model directory
and helpers of benches/minilm/run.py. Target dir: $CARGO_TARGET_DIR or
./target.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as base  # noqa: E402

ROOT = base.ROOT
RESULTS = base.RESULTS
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
BENCH = TARGET / "release/examples/half_bench"
TORCH_MODES = {"torch-fp32": None, "torch-bf16-autocast": "bf16", "torch-fp16": "fp16"}
LABELS = {
    "rlx-f32": "rlx f32",
    "rlx-f16": "rlx f16",
    "rlx-bf16": "rlx bf16",
    "rlx-amp-f16": "rlx f16 autocast",
    "rlx-amp-bf16": "rlx bf16 autocast",
    "torch-fp32": "PyTorch fp32",
    "torch-bf16-autocast": "PyTorch bf16 autocast",
    "torch-fp16": "PyTorch fp16 (.half())",
}


def torch_worker(mode, batches, seq, runs, warmup):
    import numpy as np
    import torch
    torch.set_num_threads(base.THREADS)
    w = base.torch_wrapper("sdpa")
    if mode == "fp16":
        w = w.half()
    rows = []
    for b in batches:
        x = {k: torch.from_numpy(v) for k, v in base.np_inputs(b, seq).items()}

        def fwd():
            with torch.inference_mode():
                if mode == "bf16":
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        return w(**x)[1]
                return w(**x)[1]

        pooled = fwd().float().numpy()
        ref = None
        if mode is not None:
            w32 = base.torch_wrapper("sdpa")
            with torch.inference_mode():
                ref = w32(**x)[1].float().numpy()
        p50, mn = base.time_loop(fwd, runs, warmup)
        cos = 1.0
        if ref is not None:
            num = (pooled * ref).sum(1)
            den = np.linalg.norm(pooled, axis=1) * np.linalg.norm(ref, axis=1)
            cos = float((num / den).min())
        name = [k for k, v in TORCH_MODES.items() if v == mode][0]
        print(f"[half.py] {name} batch {b} p50 {p50:.2f} ms", file=sys.stderr, flush=True)
        rows.append({"system": name, "batch": b, "seq": seq, "p50_ms": p50, "min_ms": mn,
                     "min_cos_vs_f32": cos})
    print(json.dumps(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--worker")
    ap.add_argument("--max-load", type=float, default=1.5,
                    help="wait (up to --wait s) until the 1-min load is below this")
    ap.add_argument("--wait", type=int, default=600)
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    if a.worker:
        torch_worker(TORCH_MODES[a.worker], batches, 128, a.runs, a.warmup)
        return
    # A quiet machine first: 2 cores, and other work would skew one system.
    waited = 0
    while os.getloadavg()[0] >= a.max_load and waited < a.wait:
        time.sleep(10)
        waited += 10
    load_start = base.loadavg()
    per_system = {}
    env = dict(os.environ, RLX_NUM_THREADS=str(base.THREADS))
    per_system["rlx"] = base.loadavg()
    out = subprocess.run([str(BENCH), str(base.MODEL), a.batches, str(a.runs), str(a.warmup)],
                         env=env, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for name in TORCH_MODES:
        per_system[name] = base.loadavg()
        out = subprocess.run([sys.executable, __file__, "--worker", name, "--batches", a.batches,
                              "--runs", str(a.runs), "--warmup", str(a.warmup)],
                             check=True, capture_output=True, text=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
    load_end = base.loadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    import torch
    res = {"generated": time.strftime("%Y-%m-%d %H:%M %Z"),
           "command": "python3 benches/minilm/half.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""),
           "commit": commit, "threads": base.THREADS, "runs": a.runs, "warmup": a.warmup,
           "torch": torch.__version__, "load": {"start": load_start, "per_system_start": per_system, "end": load_end},
           "rows": rows}
    (RESULTS / "minilm-cpu-half.json").write_text(json.dumps(res, indent=1) + "\n")
    systems = list(LABELS)
    by = {(r["system"], r["batch"]): r for r in rows}
    md = [f"# MiniLM CPU latency with 16-bit weights and activations\n",
          f"Generated {res['generated']} by `{res['command']}` (rlx commit {commit}, "
          f"torch {res['torch']}). Load average (1/5/15 min) at start {load_start}, at each "
          f"system's start {per_system}, at end {load_end}.\n",
          "What is timed: all-MiniLM-L6-v2 encoder + masked mean pool + L2 normalize, seq 128, "
          "the LCG ids of `benches/minilm/run.py`; **2 threads for every system**; p50 = "
          f"sorted[n//2] of {a.runs} runs after {a.warmup} warm-up runs. rlx's f32 / f16 / bf16 "
          "run in one process, timed interleaved run by run (so a disturbance hits all three "
          "alike); each PyTorch mode in its own process, one after another.\n",
          "rlx f16 / bf16: the f32 graph with every f32 type turned into the 16-bit type, weights "
          "rounded once and kept resident (`keep_resident`): the engine widens them to f32 once, "
          "on the first run (so they also hold f32 memory); activations are stored as 16 bits and "
          "widened per kernel into staging buffers; compute is f32, except that bf16 matmuls run on "
          "AVX512-BF16 dot products where the CPU has them (bf16 products, f32 sums; weights packed "
          "once). rlx f16 / bf16 autocast: the f32 graph and f32 weights compiled with "
          "`CompileOptions { amp: Amp::f16() / Amp::bf16() }`: matmuls and attention in 16 bits, "
          "layer norms, softmax and pooling in f32, the resident weights rounded to 16 bits once. "
          "PyTorch: fp32; bf16 under "
          "`torch.autocast('cpu', dtype=torch.bfloat16)` (weights fp32, matmuls in bf16); fp16 "
          "with `model.half()` (weights and activations fp16).\n",
          "## p50 latency (ms)\n",
          "| batch | " + " | ".join(LABELS[s] for s in systems) + " |",
          "|---:|" + "---:|" * len(systems)]
    for b in batches:
        md.append(f"| {b} | " + " | ".join(
            f"{by[(s, b)]['p50_ms']:.2f}" if (s, b) in by else "–" for s in systems) + " |")
    md += ["", "## min latency (ms)\n",
           "| batch | " + " | ".join(LABELS[s] for s in systems) + " |",
           "|---:|" + "---:|" * len(systems)]
    for b in batches:
        md.append(f"| {b} | " + " | ".join(
            f"{by[(s, b)]['min_ms']:.2f}" if (s, b) in by else "–" for s in systems) + " |")
    md += ["", "1-minute load average when each rlx batch size finished: " + ", ".join(
        f"{r['system']} B={r['batch']}: {r.get('load_after')}" for r in rows if "load_after" in r) + "."]
    md += ["", "## 16-bit / fp32 latency of the same system\n",
           "| batch | rlx f16 / f32 | rlx bf16 / f32 | rlx bf16 autocast / f32 | PyTorch bf16 autocast / fp32 | PyTorch fp16 / fp32 |",
           "|---:|---:|---:|---:|---:|---:|"]
    for b in batches:
        def ratio(s, r):
            return f"{by[(s, b)]['p50_ms'] / by[(r, b)]['p50_ms']:.2f}" if (s, b) in by and (r, b) in by else "–"
        md.append(f"| {b} | {ratio('rlx-f16', 'rlx-f32')} | {ratio('rlx-bf16', 'rlx-f32')} | {ratio('rlx-amp-bf16', 'rlx-f32')} | "
                  f"{ratio('torch-bf16-autocast', 'torch-fp32')} | {ratio('torch-fp16', 'torch-fp32')} |")
    md += ["", "## rlx bf16 autocast / PyTorch bf16 autocast (p50; below 1: rlx faster)\n",
           "| batch | ratio |", "|---:|---:|"]
    for b in batches:
        if ("rlx-amp-bf16", b) in by and ("torch-bf16-autocast", b) in by:
            md.append(f"| {b} | {by[('rlx-amp-bf16', b)]['p50_ms'] / by[('torch-bf16-autocast', b)]['p50_ms']:.2f} |")
    md += ["", "## Accuracy: smallest per-sequence cosine of the pooled embedding vs the same "
           "system's fp32 result\n",
           "| batch | " + " | ".join(LABELS[s] for s in systems if s not in ("rlx-f32", "torch-fp32")) + " |",
           "|---:|" + "---:|" * (len(systems) - 2)]
    for b in batches:
        md.append(f"| {b} | " + " | ".join(
            f"{by[(s, b)]['min_cos_vs_f32']:.7f}" if (s, b) in by else "–"
            for s in systems if s not in ("rlx-f32", "torch-fp32")) + " |")
    refs = {r["system"]: r.get("ref_kernels") for r in rows if r.get("ref_kernels") is not None}
    md += ["", "rlx nodes on the reference kernels (the same for f32 and 16-bit: the id/mask "
           "preprocessing and the pooling head's clamp/region): "
           + "; ".join(f"{k}: {len(v)}" for k, v in refs.items() if k.endswith(("f32", "f16", "bf16"))) + ".", ""]
    (RESULTS / "minilm-cpu-half.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
