#!/usr/bin/env python3
"""rlx CPU in wasm32 (simd128, Node, one thread) vs natively (one thread,
and all threads), in one run, on the same graph: one MiniLM-sized encoder
block (DSL-built, hidden 384, 12 heads, ffn 1536, seq 128, deterministic
weights), batches 1, 2, 4, 8.

    ./scripts/build-wasm && cargo build --release -p rlx-models --example block_bench
    python3 benches/wasm/run.py

Writes benches/results/wasm-vs-native.{md,json}. With `--relaxed [WASM]`
(default: target/wasm-relaxed/…/rlx_web.wasm from `./scripts/build-wasm
--relaxed`) it also times the relaxed-SIMD build (gemm128 with
f32x4.relaxed_madd) under `node --experimental-wasm-relaxed-simd` and shows
both wasm builds side by side. With `--before WASM NATIVE`
(the two binaries built at an earlier commit) it also times those in the
same run and adds a before/after table; with `--sgemm WASM` (the module
of crates/rlx-cpu/examples/wasm_sgemm.rs) it adds the GEMM kernels' GFLOP/s
in Node from benches/wasm/sgemm.mjs, and with `--sgemm-relaxed WASM` (that
module built with relaxed SIMD) those kernels' columns beside them.
"""

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
WASM = ROOT / "target/wasm/wasm32-unknown-unknown/release/rlx_web.wasm"
WASM_RELAXED = ROOT / "target/wasm-relaxed/wasm32-unknown-unknown/release/rlx_web.wasm"
RELAXED_FLAG = "--experimental-wasm-relaxed-simd"
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
    before = sys.argv[sys.argv.index("--before") + 1 :][:2] if "--before" in sys.argv else None
    relaxed = None
    if "--relaxed" in sys.argv:
        nxt = sys.argv[sys.argv.index("--relaxed") + 1 :][:1]
        relaxed = nxt[0] if nxt and not nxt[0].startswith("--") else str(WASM_RELAXED)
    wasm = lines(["node", str(ROOT / "benches/wasm/run.mjs"), str(WASM), *BATCHES])
    if relaxed:
        wasm_r = lines(["node", RELAXED_FLAG, str(ROOT / "benches/wasm/run.mjs"), relaxed, *BATCHES])
    one = lines([str(NATIVE), *BATCHES], env={**os.environ, "RLX_NUM_THREADS": "1"})
    # Natively, f32 products with a resident weight run on the AMX tiles
    # where the CPU has them; the same binary without them, for reference.
    one_noamx = lines([str(NATIVE), *BATCHES], env={**os.environ, "RLX_NUM_THREADS": "1", "RLX_CPU_AMX": "0"})
    if before:
        wasm_b = lines(["node", str(ROOT / "benches/wasm/run.mjs"), before[0], *BATCHES])
        one_b = lines([before[1], *BATCHES], env={**os.environ, "RLX_NUM_THREADS": "1"})
    alln = lines([str(NATIVE), *BATCHES], env={**os.environ, "RLX_NUM_THREADS": str(os.cpu_count())})
    rows = []
    for b in map(int, BATCHES):
        w, o, a = wasm[b]["p50_ms"], one[b]["p50_ms"], alln[b]["p50_ms"]
        rows.append({"batch": b, "wasm_simd128_1t": w, "native_1t": o, f"native_{os.cpu_count()}t": a, "wasm_over_native_1t": w / o, "wasm_gemm": wasm[b].get("gemm"),
                     "native_gemm": one[b].get("gemm"), "native_1t_amx_off": one_noamx[b]["p50_ms"], "wasm_over_native_1t_amx_off": w / one_noamx[b]["p50_ms"]})
        if relaxed:
            r = wasm_r[b]["p50_ms"]
            rows[-1].update({"wasm_relaxed_1t": r, "relaxed_over_native_1t": r / o, "wasm_relaxed_gemm": wasm_r[b].get("gemm")})
        if before:
            rows[-1].update({"wasm_before": wasm_b[b]["p50_ms"], "native_1t_before": one_b[b]["p50_ms"]})
    (ROOT / "benches/results/wasm-vs-native.json").write_text(json.dumps({"commit": commit, "rows": rows}, indent=1) + "\n")
    kernel = lambda runs: "; ".join(dict.fromkeys(f"`{r.get('gemm')}`" for r in runs.values()))
    md = [
        "# rlx CPU: wasm32 (simd128" + (", relaxed-simd" if relaxed else "") + ") vs native",
        "",
        f"Generated {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC by `python3 benches/wasm/run.py` (rlx commit {commit}).",
        "",
        f"One MiniLM-sized encoder block (seq 128, hidden 384, 12 heads, ffn 1536; {GFLOP:.3f} GFLOP per sequence), the same graph and inputs in both builds. wasm: `scripts/build-wasm` (simd128, one thread) under Node {subprocess.run(['node', '--version'], capture_output=True, text=True).stdout.strip()}; native: the x86-64 build, AVX-512 kernels (matmuls: {kernel(one)}). p50 of 20 runs after warm-up runs (natively 2; in Node 2 and at least 1 s, so V8's optimizing tier is in place).",
        "",
        f"The wasm build's matmuls (its dispatch report): {kernel(wasm)}"
        + (f"; the relaxed-SIMD build (`./scripts/build-wasm --relaxed`, run with `node {RELAXED_FLAG}`, in the same run): {kernel(wasm_r)}." if relaxed else "."),
        "",
    ]
    if relaxed:
        md += [
            f"| batch | wasm simd128, 1 thread (ms) | wasm relaxed-simd, 1 thread (ms) | native, 1 thread (ms) | native, {os.cpu_count()} threads (ms) | simd128 / native 1 thread | relaxed / native 1 thread | relaxed speedup |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            md.append(
                f"| {r['batch']} | {r['wasm_simd128_1t']:.2f} | {r['wasm_relaxed_1t']:.2f} | {r['native_1t']:.2f} | {r[f'native_{os.cpu_count()}t']:.2f} | "
                f"{r['wasm_over_native_1t']:.2f} | {r['relaxed_over_native_1t']:.2f} | {r['wasm_simd128_1t'] / r['wasm_relaxed_1t']:.2f}× |"
            )
    else:
        md += [
            f"| batch | wasm simd128, 1 thread (ms) | native, 1 thread (ms) | native, {os.cpu_count()} threads (ms) | wasm / native 1 thread |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            md.append(f"| {r['batch']} | {r['wasm_simd128_1t']:.2f} | {r['native_1t']:.2f} | {r[f'native_{os.cpu_count()}t']:.2f} | {r['wasm_over_native_1t']:.2f} |")
    md.append("")
    md += [
        "Native, one thread, with `RLX_CPU_AMX=0` (f32 products on the `gemm` crate's AVX-512 kernels even where the CPU has AMX tiles), same run: "
        + ", ".join(f"B={r['batch']} {r['native_1t_amx_off']:.2f} ms (simd128 / it {r['wasm_over_native_1t_amx_off']:.2f}"
                    + (f", relaxed / it {r['wasm_relaxed_1t'] / r['native_1t_amx_off']:.2f}" if relaxed else "") + ")" for r in rows) + ".",
        "",
    ]
    if before:
        md += [
            f"Before/after in the same run (before: `{before[0]}` and `{before[1]}`, built at an earlier commit):",
            "",
            "| batch | wasm before (ms) | wasm after (ms) | native 1 thread before (ms) | native 1 thread after (ms) | wasm / native 1T before | after |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for b in map(int, BATCHES):
            wb, wa, nb, na = wasm_b[b]["p50_ms"], wasm[b]["p50_ms"], one_b[b]["p50_ms"], one[b]["p50_ms"]
            md.append(f"| {b} | {wb:.2f} | {wa:.2f} | {nb:.2f} | {na:.2f} | {wb / nb:.2f} | {wa / na:.2f} |")
        md.append("")
    if "--sgemm" in sys.argv:
        mod = sys.argv[sys.argv.index("--sgemm") + 1]
        out = subprocess.run(["node", str(ROOT / "benches/wasm/sgemm.mjs"), mod, "1", "8"], check=True, capture_output=True, text=True).stdout
        rs = [json.loads(x) for x in out.splitlines() if x.strip()]
        if "--sgemm-relaxed" in sys.argv:
            mod_r = sys.argv[sys.argv.index("--sgemm-relaxed") + 1]
            out = subprocess.run(["node", RELAXED_FLAG, str(ROOT / "benches/wasm/sgemm.mjs"), mod_r, "1", "8"], check=True, capture_output=True, text=True).stdout
            # The packing rows come from the simd128 module.
            rs += [r for r in map(json.loads, filter(str.strip, out.splitlines())) if "gflops" in r and r["kernel"] != "gemm crate"]
        kernels = list(dict.fromkeys(r["kernel"] for r in rs if "gflops" in r))
        md += [
            "f32 GEMM alone in the wasm build under Node (`node benches/wasm/sgemm.mjs wasm_sgemm.wasm 1 8`"
            + (f"; the relaxed-madd columns: the same module built with rlx-cpu's feature `relaxed-simd` (command in crates/rlx-cpu/examples/wasm_sgemm.rs), `node {RELAXED_FLAG} benches/wasm/sgemm.mjs wasm_sgemm.wasm 1 8`" if "--sgemm-relaxed" in sys.argv else "")
            + ", same run; GFLOP/s, p50 of 7 after a warm-up; last column: packing the weight alone, ns per float):",
            "",
            "| m × k × n (weight) | " + " | ".join(kernels) + " | gemm128 packing |",
            "|---|" + "---:|" * (len(kernels) + 1),
        ]
        for shape in dict.fromkeys((r["m"], r["k"], r["n"], r["bt"]) for r in rs):
            at = {r["kernel"]: r for r in rs if (r["m"], r["k"], r["n"], r["bt"]) == shape}
            cells = [f"{at[k]['gflops']:.1f}" for k in kernels] + [f"{at['gemm128 weight packing']['ns_per_float']:.2f}"]
            md.append(f"| {shape[0]} × {shape[1]} × {shape[2]} ({'transposed' if shape[3] else 'row-major'}) | " + " | ".join(cells) + " |")
        md.append("")
    # Hand-written notes (from the first "## Notes" heading on) survive a rerun.
    out = ROOT / "benches/results/wasm-vs-native.md"
    old = out.read_text() if out.exists() else ""
    notes = old[old.index("\n## Notes") + 1 :] if "\n## Notes" in old else ""
    out.write_text("\n".join(md) + ("\n" + notes if notes else ""))
    print("\n".join(md))


if __name__ == "__main__":
    main()
