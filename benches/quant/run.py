#!/usr/bin/env python3
"""Quantized matrix-vector products on the CPU, rlx vs llama.cpp, side by side.

One weight of 4096 x 14336 per GGUF type (llama.cpp's own perf case:
`test-backend-ops perf -o MUL_MAT`, type_a=T, type_b=f32, n=1), the time
of one product with one activation row (decoding one token). llama.cpp's
test-backend-ops runs its CPU backend on hardware_concurrency/2 threads
(1 on a 2-core machine), so rlx runs with RLX_NUM_THREADS=1 too.
llama.cpp's perf mode repeats one weight (33 MB at Q4_0, about this
machine's 32 MB L3), and so does rlx's compared column (--one-weight);
rlx's time with every byte from memory (128 MB of copies) is listed too.

    python3 benches/quant/run.py [--llama-build DIR] [--out benches/results/quant-cpu.md] [--passes 3]

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


def rlx_ms(threads, one_weight):
    env = dict(os.environ, RLX_NUM_THREADS=str(threads))
    cmd = ["cargo", "run", "--release", "-q", "-p", "rlx-cpu", "--example", "qmatmul", "--",
           str(N), str(K), "--decode"] + (["--one-weight"] if one_weight else [])
    p = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    out = {}
    for line in p.stdout.splitlines():
        # "q4_0   m=   1    Avx512  :  1.178 ms ..." — each f32 kernel the
        # CPU has, widest (the default) first; then each q8 kernel, best first.
        m = re.match(r"(\S+)\s+m=\s*(\d+)\s*(q8)?\s+(\S+)\s*:\s+([\d.]+) ms", line)
        if m and m.group(2) == "1":
            out.setdefault((m.group(1), bool(m.group(3))), float(m.group(5)))
    return out, p.stdout.splitlines()[0]


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


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
    ap.add_argument("--passes", type=int, default=3,
                    help="passes over every type and side; each cell is the median pass")
    a = ap.parse_args()
    cells = {}  # (type, column) -> [times in us]
    simd = ""
    for i in range(a.passes):
        print(f"pass {i + 1}/{a.passes}", file=sys.stderr)
        one, simd = rlx_ms(1, True)
        mem, _ = rlx_ms(1, False)
        for t in TYPES:
            ours = t.lower()
            cells.setdefault((t, "llama"), []).append(llama_us(a.llama_build, t))
            cells.setdefault((t, "f32"), []).append(one[(ours, False)] * 1e3)
            cells.setdefault((t, "q8"), []).append(one.get((ours, True), float("nan")) * 1e3)
            cells.setdefault((t, "q8mem"), []).append(mem.get((ours, True), float("nan")) * 1e3)
            cells.setdefault((t, "f32mem"), []).append(mem[(ours, False)] * 1e3)
    flags = open("/proc/cpuinfo").read()
    isa = ", ".join(f for f in ["avx512f", "avx512_vnni", "avx_vnni", "amx_tile", "avx2", "f16c"] if f in flags)
    lines = [
        "# Quantized matrix-vector product on the CPU: rlx vs llama.cpp",
        "",
        f"Machine: {cpu_name()} ({os.cpu_count()} cores; {isa}); rlx kernels: {simd}.",
        f"Weight {N} x {K} per type, one f32 activation row (decoding one token), one thread each. llama.cpp: "
        "`test-backend-ops perf -b CPU -o MUL_MAT` (llama-cpp-python 0.3.36's vendored sources, "
        "-DGGML_NATIVE=ON; it runs 1 thread here and repeats one weight). rlx: "
        f"`cargo run --release -p rlx-cpu --example qmatmul -- {N} {K} --decode --one-weight` (the same: one weight, "
        "repeated) and without `--one-weight` (cycling through 128 MB of copies: every byte from memory). "
        f"Each cell is the median of {a.passes} passes (this machine is shared); "
        "ratio = llama.cpp time / rlx time (> 1: rlx faster).",
        "",
        "rlx f32 act.: activations stay f32 (the default; equal to dequantize-then-matmul up to f32 sums). "
        "rlx q8 act.: `RLX_CPU_Q8_ACTIVATIONS=1`, activations rounded to 8 bits per 32 values and integer dot "
        "products (llama.cpp's numerics; its K-quant activations are rounded per 256).",
        "",
        f"Command: `python3 benches/quant/run.py --passes {a.passes}`",
        "",
        "| type | llama.cpp (µs) | rlx f32 act. (µs) | ratio | rlx q8 act. (µs) | ratio | rlx f32 act., from memory (µs) | rlx q8 act., from memory (µs) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in TYPES:
        us, f1, q1 = (median(cells[(t, c)]) for c in ("llama", "f32", "q8"))
        fm, qm = median(cells[(t, "f32mem")]), median(cells[(t, "q8mem")])
        lines.append(f"| {t} | {us:.0f} | {f1:.0f} | {us / f1:.2f}x | {q1:.0f} | {us / q1:.2f}x | {fm:.0f} | {qm:.0f} |")
    lines += ["", "Every pass (µs):", "", "| type | column | passes |", "|---|---|---|"]
    for (t, c), v in cells.items():
        lines.append(f"| {t} | {c} | {', '.join(f'{x:.0f}' for x in v)} |")
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    open(a.out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
