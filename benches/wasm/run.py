#!/usr/bin/env python3
"""rlx CPU in wasm32 (simd128, Node, one thread) vs natively (one thread,
and all threads), in one run, on the same graph: one MiniLM-sized encoder
block (DSL-built, hidden 384, 12 heads, ffn 1536, seq 128, deterministic
weights), batches 1, 2, 4, 8.

    ./scripts/build-wasm && cargo build --release -p rlx-models --example block_bench
    python3 benches/wasm/run.py

Writes benches/results/wasm-vs-native.{md,json}.
"""

import datetime
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
WASM = ROOT / "target/wasm/wasm32-unknown-unknown/release/rlx_web.wasm"
NATIVE = ROOT / "target/release/examples/block_bench"
BATCHES = ["1", "2", "4", "8"]
# One block at seq 128: 4 projections 2·S·H·H, FFN 2·2·S·H·F, attention 2·2·S·S·H.
S, H, F = 128, 384, 1536
GFLOP = (4 * 2 * S * H * H + 2 * 2 * S * H * F + 2 * 2 * S * S * H) / 1e9


def lines(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return {j["batch"]: j for j in map(json.loads, filter(None, out.splitlines()))}


def main():
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    wasm = lines(["node", str(ROOT / "benches/wasm/run.mjs"), str(WASM), *BATCHES])
    one = lines([str(NATIVE), *BATCHES], env={**os.environ, "RLX_NUM_THREADS": "1"})
    alln = lines([str(NATIVE), *BATCHES], env={**os.environ, "RLX_NUM_THREADS": str(os.cpu_count())})
    rows = []
    for b in map(int, BATCHES):
        w, o, a = wasm[b]["p50_ms"], one[b]["p50_ms"], alln[b]["p50_ms"]
        rows.append({"batch": b, "wasm_simd128_1t": w, "native_1t": o, f"native_{os.cpu_count()}t": a, "wasm_over_native_1t": w / o})
    (ROOT / "benches/results/wasm-vs-native.json").write_text(json.dumps({"commit": commit, "rows": rows}, indent=1) + "\n")
    md = [
        "# rlx CPU: wasm32 (simd128) vs native",
        "",
        f"Generated {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC by `python3 benches/wasm/run.py` (rlx commit {commit}).",
        "",
        f"One MiniLM-sized encoder block (seq 128, hidden 384, 12 heads, ffn 1536; {GFLOP:.3f} GFLOP per sequence), the same graph and inputs in both builds. wasm: `scripts/build-wasm` (simd128, one thread) under Node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}; native: the x86-64 build, AVX-512 kernels. p50 of 10 runs after 2 warm-up runs.",
        "",
        f"| batch | wasm simd128, 1 thread (ms) | native, 1 thread (ms) | native, {os.cpu_count()} threads (ms) | wasm / native 1 thread |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        md.append(f"| {r['batch']} | {r['wasm_simd128_1t']:.2f} | {r['native_1t']:.2f} | {r[f'native_{os.cpu_count()}t']:.2f} | {r['wasm_over_native_1t']:.2f} |")
    md.append("")
    (ROOT / "benches/results/wasm-vs-native.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
