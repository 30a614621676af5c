#!/usr/bin/env python3
"""Turn one run of benches/wgpu/run.sh (wgpu.jsonl, torch.json, log) into
benches/results/minilm-wgpu.{md,json}.

usage: report.py RUN_DIR
"""
import json, sys, os

d = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(d, "wgpu.jsonl")) if l.startswith("{")]
torch = json.load(open(os.path.join(d, "torch.json")))
prof = [json.loads(l) for l in open(os.path.join(d, "wgpu-profile.jsonl")) if l.startswith("{")] if os.path.exists(os.path.join(d, "wgpu-profile.jsonl")) else []
adapter = next(r for r in rows if "adapter" in r)
mini = {r["batch"]: r for r in rows if r.get("bench") == "minilm"}
mm = [r for r in rows if r.get("bench") == "matmul"]
t = {(r["variant"], r["batch"]): r["p50_ms"] for r in torch if "variant" in r}
tmm = {r["n"]: r for r in torch if r.get("bench") == "matmul"}
out = []
out.append("# MiniLM and matmul on the H200 through Vulkan: rlx-wgpu vs PyTorch CUDA (fp32)\n")
out.append(f"Adapter: {adapter['adapter']} ({adapter['backend']}, driver {adapter['driver']}); "
           f"shader-f16 {adapter['shader_f16']}, subgroups {adapter['subgroups']}. One run, rlx-wgpu then PyTorch, "
           "same machine. Command: `benches/wgpu/run.sh` on the GPU machine (binary: `cargo build --release -p rlx-wgpu "
           "--example wgpu_bench`); table: `benches/wgpu/report.py`.\n")
out.append("MiniLM = all-MiniLM-L6-v2 architecture, seq 128, seeded random weights (same shapes; the checkpoint is too "
           "large to carry to the GPU machine), encoder + mean pool + L2 normalize, fp32 (TF32 off in PyTorch). "
           "rlx-wgpu e2e = upload ids/mask/types, one compute pass, read both outputs back to the host (weights resident); "
           "rlx-wgpu GPU = the compute pass alone (30 passes in one submit, host-timed). PyTorch = one call + synchronize, "
           "inputs and outputs on the GPU, p50 of 30.\n")
out.append("| batch | rlx-wgpu e2e ms | rlx-wgpu GPU ms | torch eager ms | torch.compile+CUDA graph ms | e2e vs eager | GPU vs compile+graph |")
out.append("|---|---|---|---|---|---|---|")
for b in sorted(mini):
    r = mini[b]
    e, c = t.get(("eager", b)), t.get(("compile+graph", b))
    f = lambda x: f"{x:.3f}" if x is not None else "-"
    ratio = f"{e / r['e2e_ms_median']:.2f}x {'faster' if e > r['e2e_ms_median'] else 'slower'}" if e else "-"
    ratio2 = f"{r['gpu_ms'] / c:.2f}x the time" if c else "-"
    out.append(f"| {b} | {r['e2e_ms_median']:.3f} | {r['gpu_ms']:.3f} | {f(e)} | {f(c)} | {ratio} | {ratio2} |")
out.append("")
out.append("f32 matmul n×n×n (rlx-wgpu: the kernel alone; PyTorch: cuBLAS strict fp32); the H200's fp32 ceiling is 51 TFLOP/s "
           "(shared/TOOLCHAIN.md: 50.8 measured).\n")
out.append("| n | rlx-wgpu ms | rlx-wgpu GFLOP/s | % of 51 TFLOP/s | cuBLAS GFLOP/s |")
out.append("|---|---|---|---|---|")
for r in mm:
    c = tmm.get(r["n"])
    out.append(f"| {r['n']} | {r['ms']:.3f} | {r['gflops']:.0f} | {100 * r['gflops'] / 51000:.1f}% | {c['gflops']:.0f} |" if c else
               f"| {r['n']} | {r['ms']:.3f} | {r['gflops']:.0f} | {100 * r['gflops'] / 51000:.1f}% | - |")
if prof:
    out.append("\nSlowest kernels at batch 32 (each alone, ms):\n")
    out.append("| kernel | ms |")
    out.append("|---|---|")
    for p in prof:
        out.append(f"| {p['profile']} | {p['ms']:.3f} |")
open("benches/results/minilm-wgpu.md", "w").write("\n".join(out) + "\n")
json.dump({"adapter": adapter, "rlx_wgpu": rows, "profile": prof, "torch": torch}, open("benches/results/minilm-wgpu.json", "w"), indent=1)
print("\n".join(out))
