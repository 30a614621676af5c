#!/usr/bin/env python3
"""sgemm GFLOP/s: rlx's GEMM (the `gemm` crate, AVX-512 microkernels,
rayon) vs NumPy/OpenBLAS, square sizes 256..2048, in one run, against the
machine's FP32 peak where it is known (see main()).

    cargo build --release -p rlx-cpu --example sgemm
    python3 benches/sgemm/run.py

NumPy runs with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (this machine's
environment pins an older kernel for safety; the benchmark wants the
current one — threadpoolctl reports which it used). Writes
benches/results/sgemm.{md,json}.
"""

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SIZES = [256, 512, 1024, 2048]
THREADS = os.cpu_count()

NUMPY = r"""
import json, sys, time
import numpy as np
try:
    from threadpoolctl import threadpool_info
    info = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]
except Exception as e:
    info = [str(e)]
print(json.dumps({"info": info}))
for n in map(int, sys.argv[1:]):
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    c = a @ b
    t0 = time.perf_counter(); c = a @ b; once = time.perf_counter() - t0
    reps = max(3, min(1000, int(0.5 / max(once, 1e-9))))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); np.matmul(a, b, out=c); ts.append(time.perf_counter() - t0)
    ts.sort(); p50 = ts[len(ts) // 2]
    print(json.dumps({"n": n, "p50_ms": p50 * 1e3, "gflops": 2 * n**3 / p50 / 1e9}))
"""


def clock_ghz():
    try:
        mhz = [float(l.split(":")[1]) for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")]
        return max(mhz) / 1000
    except Exception:
        return float("nan")


def cpu_field(name):
    """The first /proc/cpuinfo value of `name` ("" if absent)."""
    try:
        for l in open("/proc/cpuinfo"):
            k, _, v = l.partition(":")
            if k.strip() == name:
                return v.strip()
    except OSError:
        pass
    return ""


def run(cmd, env):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def main():
    env = {**os.environ, "RLX_NUM_THREADS": str(THREADS)}
    rlx = {r["n"]: r for r in run([str(ROOT / "target/release/examples/sgemm"), *map(str, SIZES)], env)}
    np_env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    np_env["OPENBLAS_NUM_THREADS"] = str(THREADS)
    np_rows = run([sys.executable, "-c", NUMPY, *map(str, SIZES)], np_env)
    info = np_rows[0]["info"]
    npr = {r["n"]: r for r in np_rows[1:]}
    # The VM's /proc/cpuinfo shows the nominal clock and hides the cycle
    # counters, so the peak is only stated where it is known: the Zen 4 of
    # the CPU-speed issue (32 FLOP/cycle: its 512-bit FMAs run as two
    # 256-bit halves; ~3.67 GHz under load, the figure that issue
    # measured). Elsewhere set RLX_FLOP_PER_CYCLE and RLX_CLOCK_GHZ (an
    # Intel core with two 512-bit FMA units does 64 FLOP/cycle).
    nominal = clock_ghz()
    zen4 = cpu_field("vendor_id") == "AuthenticAMD" and cpu_field("cpu family") == "25"
    fpc = os.environ.get("RLX_FLOP_PER_CYCLE", "32" if zen4 else "")
    ghz_s = os.environ.get("RLX_CLOCK_GHZ", "3.67" if zen4 else "")
    ghz = float(ghz_s) if ghz_s else None
    peak = THREADS * float(fpc) * ghz if fpc and ghz else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rows = [
        {"n": n, "rlx_gflops": rlx[n]["gflops"], "numpy_gflops": npr[n]["gflops"], "ratio": rlx[n]["gflops"] / npr[n]["gflops"], "rlx_of_peak": rlx[n]["gflops"] / peak if peak else None}
        for n in SIZES
    ]
    (ROOT / "benches/results/sgemm.json").write_text(json.dumps({"commit": commit, "threads": THREADS, "clock_ghz": ghz, "nominal_clock_ghz": nominal, "peak_gflops": peak, "numpy": info, "rows": rows}, indent=1) + "\n")
    md = [
        "# sgemm: rlx vs NumPy/OpenBLAS",
        "",
        f"Generated {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC by `python3 benches/sgemm/run.py` (rlx commit {commit}); {THREADS} threads each; square C = A·B, f32, p50.",
        (f"Peak: {THREADS} cores × {float(fpc):.0f} FLOP/cycle × {ghz:.2f} GHz = {peak:.0f} GFLOP/s (cpuinfo's nominal clock: {nominal:.2f} GHz). NumPy's BLAS: {info}."
         if peak else
         f"CPU: {cpu_field('model name')} (cpuinfo's nominal clock {nominal:.2f} GHz); its peak is not stated: the VM hides the real clock (set RLX_FLOP_PER_CYCLE and RLX_CLOCK_GHZ to add it). NumPy's BLAS: {info}."),
        "",
        "| n | rlx GFLOP/s | NumPy GFLOP/s | rlx / NumPy | rlx / peak |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        of_peak = f"{r['rlx_of_peak']:.0%}" if r["rlx_of_peak"] is not None else "–"
        md.append(f"| {r['n']} | {r['rlx_gflops']:.1f} | {r['numpy_gflops']:.1f} | {r['ratio']:.2f} | {of_peak} |")
    md.append("")
    (ROOT / "benches/results/sgemm.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
