#!/usr/bin/env python3
"""MiniLM with int8 matmuls on the CPU: rlx vs ONNX Runtime's int8, side by side.

    ./scripts/fetch-models && cargo build --release -p rlx-cli
    python3 benches/minilm/int8.py [--batches 1,8] [--passes 3] [--runs 20]

Four systems, each with 2 threads, on the same synthetic ids as
`rlx bench minilm` (seq 128), in --passes interleaved passes (medians of
the passes' p50s; this machine drifts between minutes):

* rlx f32 — `rlx bench minilm`;
* rlx int8 — `rlx bench minilm --quantize q8_0` with
  `RLX_CPU_Q8_ACTIVATIONS=1`: dense-layer weights in Q8_0 blocks,
  activations rounded to 8 bits per 32 values, integer GEMM
  (AVX-512 VNNI where the CPU has it);
* ONNX Runtime f32 — the torch.onnx export of benches/minilm/run.py;
* ONNX Runtime int8 — that export through
  `onnxruntime.quantization.quantize_dynamic` (int8 weights, per-tensor
  scales; activations quantized per tensor at run time; MatMulInteger).

Accuracy: each int8 system's sentence embeddings against
sentence-transformers' f32 ones on the parity texts (cosine). Writes
benches/results/minilm-int8-cpu.{md,json}.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as base  # noqa: E402  (export, ids, machine info)

ROOT = base.ROOT
RLX = base.RLX
MODEL = base.MODEL
INT8 = base.OUT / "minilm-int8.onnx"
THREADS = base.THREADS
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "rlx is a tensor compiler written in Rust.",
    "MiniLM maps sentences to a 384-dimensional dense vector space.",
    "A man is playing a guitar on the street.",
    "Quantized models trade a little accuracy for speed and memory.",
    "The weather today is sunny with a light breeze.",
]
SYSTEMS = {
    "rlx-f32": "rlx f32",
    "rlx-int8": "rlx int8 (q8_0 weights, 8-bit activations)",
    "ort-f32": "ONNX Runtime f32",
    "ort-int8": "ONNX Runtime int8 (quantize_dynamic)",
}


def quantize():
    from onnxruntime.quantization import QuantType, quantize_dynamic
    base.export_onnx()
    if not INT8.exists():
        quantize_dynamic(str(base.OUT / "minilm.onnx"), str(INT8), weight_type=QuantType.QInt8)
    return {"quantize_dynamic": "weight_type=QInt8, per_channel=False, reduce_range=False"}


def rlx_env(int8):
    env = dict(os.environ, RLX_NUM_THREADS=str(THREADS))
    env["RLX_CPU_Q8_ACTIVATIONS"] = "1" if int8 else "0"
    return env


def measure(system, batches, runs, warmup):
    common = ["--batches", ",".join(map(str, batches)), "--seq", "128", "--runs", str(runs),
              "--warmup", str(warmup)]
    if system.startswith("rlx"):
        int8 = system == "rlx-int8"
        cmd = [str(RLX), "bench", "minilm", *common, "--model", str(MODEL), "--json"]
        if int8:
            cmd += ["--quantize", "q8_0"]
        out = subprocess.run(cmd, env=rlx_env(int8), stdout=subprocess.PIPE, text=True, check=True).stdout
    else:
        cmd = [sys.executable, __file__, "--worker", system, *common]
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    rows = json.loads(out[out.index("["):])
    return {r["batch"]: r["p50_ms"] for r in rows}


def ort_session(system):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    path = INT8 if system == "ort-int8" else base.OUT / "minilm.onnx"
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def worker(system, batches, seq, runs, warmup):
    sess = ort_session(system)
    rows = []
    for b in batches:
        x = base.np_inputs(b, seq)
        p50, mn = base.time_loop(lambda: sess.run(None, x), runs, warmup)
        rows.append({"system": system, "batch": b, "p50_ms": p50, "min_ms": mn})
    print(json.dumps(rows))


def cosines():
    """Each system's sentence embeddings against sentence-transformers (f32)."""
    import numpy as np
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer
    want = SentenceTransformer(str(MODEL), device="cpu").encode(TEXTS, convert_to_numpy=True)

    def cos(got):
        got = np.asarray(got, dtype=np.float32)
        c = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
        return {"min": float(c.min()), "mean": float(c.mean())}

    res = {}
    for system, int8 in (("rlx-f32", False), ("rlx-int8", True)):
        cmd = [str(RLX), "embed", "--json", "--model", str(MODEL), *TEXTS]
        if int8:
            cmd[3:3] = ["--quantize", "q8_0"]
        out = subprocess.run(cmd, env=rlx_env(int8), stdout=subprocess.PIPE, text=True, check=True).stdout
        res[system] = cos([r["embedding"] for r in json.loads(out[out.index("["):])])
    tok = AutoTokenizer.from_pretrained(str(MODEL))
    for system in ("ort-f32", "ort-int8"):
        sess = ort_session(system)
        embs = []
        for t in TEXTS:
            enc = tok(t, return_tensors="np")
            x = {k: enc[k].astype(np.int64) for k in base.INPUTS}
            embs.append(sess.run(["sentence_embedding"], x)[0][0])
        res[system] = cos(embs)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--worker")
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    if a.worker:
        return worker(a.worker, batches, a.seq, a.runs, a.warmup)
    info = quantize()
    passes = []
    for p in range(a.passes):
        passes.append({s: measure(s, batches, a.runs, a.warmup) for s in SYSTEMS})
        print(f"pass {p + 1}: {json.dumps(passes[-1])}", file=sys.stderr)
    med = {s: {b: statistics.median(p[s][b] for p in passes) for b in batches} for s in SYSTEMS}
    acc = cosines()
    m = base.machine_info()
    res = {"machine": m, "threads": THREADS, "passes": passes, "median_p50_ms": med, "cosine": acc, **info}
    out = ROOT / "benches/results/minilm-int8-cpu"
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    lines = ["# MiniLM int8 on the CPU: rlx vs ONNX Runtime\n",
             f"Machine: {m['cpu']} ({m['cpu_detail']}; {', '.join(m['cpu_isa'])}), {THREADS} threads "
             f"for every system; onnxruntime {m['onnxruntime']}; rlx {m['rlx_commit']}. "
             f"Median over {a.passes} interleaved passes of each pass's p50 ({a.runs} runs after "
             f"{a.warmup} warm-up), seq 128, the synthetic ids of `rlx bench minilm`.\n",
             f"Command: `python3 benches/minilm/int8.py --batches {a.batches} --passes {a.passes} "
             f"--runs {a.runs}`\n",
             "| batch | " + " | ".join(SYSTEMS.values()) + " | rlx int8 / ORT int8 | rlx int8 / ORT f32 |",
             "|---:|" + "---:|" * (len(SYSTEMS) + 2)]
    for b in batches:
        cells = [f"{med[s][b]:.2f} ms" for s in SYSTEMS]
        lines.append(f"| {b} | " + " | ".join(cells) + f" | {med['rlx-int8'][b] / med['ort-int8'][b]:.2f} "
                     f"| {med['rlx-int8'][b] / med['ort-f32'][b]:.2f} |")
    lines += ["", "Sentence-embedding cosine against sentence-transformers (f32), "
              f"{len(TEXTS)} sentences (min / mean):", "",
              "| system | min | mean |", "|---|---:|---:|"]
    for s, c in acc.items():
        lines.append(f"| {SYSTEMS[s]} | {c['min']:.6f} | {c['mean']:.6f} |")
    lines.append("\nRatios < 1: rlx is faster. Per-pass p50s are in the .json.\n")
    out.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
