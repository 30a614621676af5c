#!/usr/bin/env python3
"""Quantized matrix-vector products on the CPU, rlx vs llama.cpp, side by side.

One weight of 4096 x 14336 per GGUF type (llama.cpp's own perf case:
`test-backend-ops perf -o MUL_MAT`, type_a=T, type_b=f32, n=1), the time
of one product with one activation row (decoding one token). llama.cpp's
test-backend-ops runs its CPU backend on hardware_concurrency/2 threads
(1 on a 2-core machine), so rlx runs with RLX_NUM_THREADS=1 too; rlx's
2-thread time is listed beside it. rlx cycles through ~128 MB of weight
copies so they come from memory; llama.cpp's perf mode repeats one weight
(33 MB at Q4_0, larger than this machine's caches).

    python3 benches/quant/run.py [--llama-build DIR] [--out benches/results/quant-cpu.md]

Build llama.cpp first (../shared/TOOLCHAIN.md): the sources vendored in the
llama-cpp-python==0.3.36 sdist, cmake -DGGML_NATIVE=ON
-DLLAMA_BUILD_TESTS=ON, target test-backend-ops.
"""
import argparse
import os
import platform
import re
import subprocess
import sys

TYPES = ["q4_0", "q4_1", "q5_0", "q8_0", "q4_K", "q5_K", "q6_K"]
N, K = 4096, 14336


def llama_us(bin_dir, t):
    p = subprocess.run(
        [os.path.join(bin_dir, "test-backend-ops"), "perf", "-b", "CPU", "-o", "MUL_MAT",
         "-p", f"type_a={t},type_b=f32,m={N},n=1,k={K},"],
        capture_output=True, text=True, check=True)
    m = re.search(r"runs -\s+([\d.]+) us/run", p.stdout)
    if not m:
        sys.exit(f"no perf line for {t}:\n{p.stdout}")
    return float(m.group(1))


def rlx_ms(threads):
    env = dict(os.environ, RLX_NUM_THREADS=str(threads))
    p = subprocess.run(["cargo", "run", "--release", "-q", "-p", "rlx-cpu", "--example", "qmatmul", "--", str(N), str(K)],
                       capture_output=True, text=True, check=True, env=env)
    out = {}
    for line in p.stdout.splitlines():
        # "q4_0   m=   1    Avx512  :  1.178 ms ..." — each f32 kernel the
        # CPU has, widest (the default) first; then "q8 int8".
        m = re.match(r"(\S+)\s+m=\s*(\d+)\s*(q8)?\s+(\S+)\s*:\s+([\d.]+) ms", line)
        if m and m.group(2) == "1":
            out.setdefault((m.group(1), bool(m.group(3))), float(m.group(5)))
    return out, p.stdout.splitlines()[0]


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-build", default=".cache/llama/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin")
    ap.add_argument("--out", default="benches/results/quant-cpu.md")
    a = ap.parse_args()
    r1, simd = rlx_ms(1)
    r2, _ = rlx_ms(2)
    rows = []
    for t in TYPES:
        us = llama_us(a.llama_build, t)
        ours = t.lower()
        f1, q1 = r1[(ours, False)] * 1e3, r1.get((ours, True), float("nan")) * 1e3
        f2 = r2[(ours, False)] * 1e3
        rows.append((t, us, f1, q1, f2))
    flags = open("/proc/cpuinfo").read()
    isa = ", ".join(f for f in ["avx512f", "avx512_vnni", "avx_vnni", "amx_tile", "avx2", "f16c"] if f in flags)
    lines = [
        "# Quantized matrix-vector product on the CPU: rlx vs llama.cpp",
        "",
        f"Machine: {cpu_name()} ({os.cpu_count()} cores; {isa}); rlx kernels: {simd}.",
        f"Weight {N} x {K} per type, one f32 activation row (decoding one token). llama.cpp: "
        "`test-backend-ops perf -b CPU -o MUL_MAT` (llama-cpp-python 0.3.36's vendored sources, "
        "-DGGML_NATIVE=ON; it runs 1 thread here). rlx: `cargo run --release -p rlx-cpu --example qmatmul -- 4096 14336`. "
        "Ratio = llama.cpp time / rlx time (> 1: rlx faster), same thread count.",
        "",
        "rlx f32 act.: activations stay f32 (the default; equal to dequantize-then-matmul up to f32 sums). "
        "rlx q8 act.: `RLX_CPU_Q8_ACTIVATIONS=1`, activations rounded to 8 bits and integer dot products (llama.cpp's numerics).",
        "",
        "Command: `python3 benches/quant/run.py`",
        "",
        "| type | llama.cpp 1 thread (µs) | rlx f32 act. 1 thread (µs) | ratio | rlx q8 act. 1 thread (µs) | ratio | rlx f32 act. 2 threads (µs) |",
        "|---|---|---|---|---|---|---|",
    ]
    for t, us, f1, q1, f2 in rows:
        lines.append(f"| {t} | {us:.0f} | {f1:.0f} | {us / f1:.2f}x | {q1:.0f} | {us / q1:.2f}x | {f2:.0f} |")
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    open(a.out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
