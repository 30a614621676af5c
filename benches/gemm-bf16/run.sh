#!/usr/bin/env bash
# bf16 dot-product GEMM (rlx-cpu fast::bf16dot) vs the f32 GEMM rlx uses and
# PyTorch's bf16/fp32 matmul, same shapes, one run, 2 threads each. Writes
# benches/results/gemm-bf16.{jsonl,md}. Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -q --release -p rlx-cpu --example gemm_bf16
RLX_NUM_THREADS=2 "${CARGO_TARGET_DIR:-target}/release/examples/gemm_bf16" > /tmp/gemm-bf16-rlx.jsonl
python3 benches/gemm-bf16/torch_bf16.py > /tmp/gemm-bf16-torch.jsonl
python3 - <<'PY'
import json
rlx = [json.loads(l) for l in open("/tmp/gemm-bf16-rlx.jsonl")]
tor = {(r["m"], r["k"], r["n"]): r for r in map(json.loads, open("/tmp/gemm-bf16-torch.jsonl"))}
out = ["# bf16 GEMM on AVX512-BF16 (rlx-cpu `fast::bf16dot`) vs f32 and PyTorch", "",
       "This machine (2 cores, Zen 4, AVX512-BF16), 2 threads each, p50 of repeated calls, one run: "
       "`benches/gemm-bf16/run.sh`. rlx bf16 = `bf16dot::gemm` (weight packed once, outside the timing); "
       "rlx f32 = the `gemm` crate GEMM the fast engine uses (`rlx_cpu::sgemm`), on the same (bf16-exact) values; "
       "PyTorch = `a @ b` in bf16 (oneDNN) and fp32. GFLOP/s = 2mkn / time. "
       "The 2-core f32 FMA peak is ~235 GFLOP/s; bf16 dot products double it (~470).", "",
       "| m | k | n | rlx bf16 GFLOP/s | rlx f32 GFLOP/s | rlx bf16 / f32 speed | torch bf16 GFLOP/s | torch fp32 GFLOP/s | rlx bf16 vs torch bf16 | max rel diff bf16 vs f32 |",
       "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in rlx:
    t = tor.get((r["m"], r["k"], r["n"]), {})
    tb = t.get("torch_bf16_gflops")
    out.append(f"| {r['m']} | {r['k']} | {r['n']} | {r['bf16_gflops']:.0f} | {r['f32_gflops']:.0f} | {r['speedup']:.2f}x | "
               f"{tb:.0f} | {t['torch_f32_gflops']:.0f} | {r['bf16_gflops'] / tb:.2f}x | {r['max_rel_diff']:.1e} |" if tb else
               f"| {r['m']} | {r['k']} | {r['n']} | {r['bf16_gflops']:.0f} | {r['f32_gflops']:.0f} | {r['speedup']:.2f}x | - | - | - | {r['max_rel_diff']:.1e} |")
open("benches/results/gemm-bf16.md", "w").write("\n".join(out) + "\n")
open("benches/results/gemm-bf16.jsonl", "w").write(open("/tmp/gemm-bf16-rlx.jsonl").read() + open("/tmp/gemm-bf16-torch.jsonl").read())
print("\n".join(out))
PY
