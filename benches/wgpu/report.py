#!/usr/bin/env python3
"""Turn one run of benches/wgpu/run.sh (wgpu.jsonl, torch.json, log) into
benches/results/minilm-wgpu.{md,json}.

usage: report.py RUN_DIR ["what the base binary of the A/B lacks"]
RUN_DIR/notes.md, when present, is appended (what the run changed, read-outs).
"""
import json, sys, os

d = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(d, "wgpu.jsonl")) if l.startswith("{")]
torch = json.load(open(os.path.join(d, "torch.json")))
allprof = [json.loads(l) for l in open(os.path.join(d, "wgpu-profile.jsonl")) if l.startswith("{")] if os.path.exists(os.path.join(d, "wgpu-profile.jsonl")) else []
prof = [p for p in allprof if "profile" in p]
kinds = [p for p in allprof if "profile_kind" in p]
totals = {(p["dtype"], p["batch"]): p for p in allprof if "profile_total" in p}
adapter = next(r for r in rows if "adapter" in r)
mini = {r["batch"]: r for r in rows if r.get("bench") == "minilm" and r.get("dtype", "f32") == "f32"}
mini16 = {r["batch"]: r for r in rows if r.get("bench") == "minilm" and r.get("dtype") == "f16"}
mm = [r for r in rows if r.get("bench") == "matmul"]
checks = {r["batch"]: r for r in rows if r.get("check") == "minilm"}
t = {(r["variant"], r["batch"]): r["p50_ms"] for r in torch if "variant" in r}
tmm = {(r.get("dtype", "f32"), r["n"]): r for r in torch if r.get("bench") == "matmul"}
out = []
out.append("# MiniLM and matmul on the H200 through Vulkan: rlx-wgpu vs PyTorch CUDA (fp32 and f16)\n")
out.append(f"Adapter: {adapter['adapter']} ({adapter['backend']}, driver {adapter['driver']}); "
           f"shader-f16 {adapter['shader_f16']}, subgroups {adapter['subgroups']}, "
           f"16x16x16 f16 cooperative matrices {adapter.get('coop_f16', False)}. One run, rlx-wgpu then PyTorch, "
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
if mini16:
    out.append("")
    coop = " Matmuls on cooperative matrices (tensor cores: f16 operands, f32 accumulation)." if adapter.get("coop_f16") else ""
    out.append("MiniLM in f16 (rlx-wgpu: f16 types and weights, stored as f16 — the adapter has shader-f16 — with f32 "
               f"compute and accumulation.{coop} PyTorch: the model in fp16, eager). Same inputs and timing as above. "
               "Cosine = worst token / sentence cosine of rlx-wgpu f16 against rlx's CPU backend in f32 on the same weights.\n")
    out.append("| batch | rlx-wgpu f16 e2e ms | rlx-wgpu f16 GPU ms | torch eager fp16 ms | torch eager fp32 ms | f16 e2e vs eager fp16 | f16 e2e vs eager fp32 | min cosine token / sentence |")
    out.append("|---|---|---|---|---|---|---|---|")
    for b in sorted(mini16):
        r = mini16[b]
        e16, e32 = t.get(("eager-fp16", b)), t.get(("eager", b))
        f = lambda x: f"{x:.3f}" if x is not None else "-"
        rat = lambda e: (f"{e / r['e2e_ms_median']:.2f}x {'faster' if e > r['e2e_ms_median'] else 'slower'}" if e else "-")
        c = checks.get(b)
        cos = f"{c['token_cosine_min']:.7f} / {c['pooled_cosine_min']:.7f}" if c else "-"
        out.append(f"| {b} | {r['e2e_ms_median']:.3f} | {r['gpu_ms']:.3f} | {f(e16)} | {f(e32)} | {rat(e16)} | {rat(e32)} | {cos} |")
# Like for like: both sides read their outputs back to the host, or both
# leave them on the GPU (rlx: one pass per submit, waited for; PyTorch: one
# call + synchronize).
if any(("eager+host", b) in t for b in mini) and mini16:
    out.append("")
    out.append("Against PyTorch eager fp32 like for like — **to host**: rlx-wgpu e2e (upload the inputs, one pass, read "
               "both outputs back) vs PyTorch eager + both outputs copied to the host (`.cpu()`); **on the GPU**: "
               "rlx-wgpu one pass per submit, waited for, outputs left on the GPU (`pass_ms`) vs PyTorch eager, one "
               "call + synchronize. Ratio = PyTorch time / rlx time (> 1: rlx faster).\n")
    out.append("| batch | rlx f16 e2e | torch fp32 eager+host | ratio | rlx f32 e2e | ratio | rlx f16 pass | torch fp32 eager | ratio | rlx f32 pass | ratio |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for b in sorted(mini16):
        h, e = t.get(("eager+host", b)), t.get(("eager", b))
        r16, r32 = mini16[b], mini.get(b, {})
        q = lambda x, y: f"{x / y:.2f}" if x and y else "-"
        f = lambda x: f"{x:.3f}" if x else "-"
        out.append(f"| {b} | {f(r16['e2e_ms_median'])} | {f(h)} | {q(h, r16['e2e_ms_median'])} | {f(r32.get('e2e_ms_median'))} | "
                   f"{q(h, r32.get('e2e_ms_median'))} | {f(r16.get('pass_ms'))} | {f(e)} | {q(e, r16.get('pass_ms'))} | "
                   f"{f(r32.get('pass_ms'))} | {q(e, r32.get('pass_ms'))} |")
out.append("")
out.append("matmul n×n×n (rlx-wgpu: the kernel alone; PyTorch: cuBLAS, strict fp32 / fp16 with fp32 accumulation); the H200's "
           "ceilings are 51 TFLOP/s fp32 and ~750 fp16 dense (shared/TOOLCHAIN.md: 50.8 and 749 measured).\n")
out.append("| dtype | n | rlx-wgpu ms | rlx-wgpu GFLOP/s | % of ceiling | cuBLAS GFLOP/s |")
out.append("|---|---|---|---|---|---|")
for r in mm:
    dt = r.get("dtype", "f32")
    c = tmm.get((dt, r["n"]))
    ceil = 51000 if dt == "f32" else 749000
    cub = f"{c['gflops']:.0f}" if c else "-"
    out.append(f"| {dt} | {r['n']} | {r['ms']:.3f} | {r['gflops']:.0f} | {100 * r['gflops'] / ceil:.1f}% | {cub} |")
base_mini = {r["batch"]: r for r in rows if r.get("bench") == "base_minilm"}
base_mm = {r["n"]: r for r in rows if r.get("bench") == "base_matmul"}
if base_mini or base_mm:
    base_note = sys.argv[2] if len(sys.argv) > 2 else "the previous build"
    bdt = next(iter(base_mini.values()), {}).get("dtype", "f32")
    this = mini16 if bdt == "f16" else mini
    out.append(f"\nA/B in the same run: {base_note} against this build, {bdt}.\n")
    out.append("| what | previous ms | this ms | previous / this |")
    out.append("|---|---|---|---|")
    for b, r in sorted(base_mini.items()):
        if b in this:
            out.append(f"| MiniLM B={b} GPU | {r['gpu_ms']:.3f} | {this[b]['gpu_ms']:.3f} | {r['gpu_ms'] / this[b]['gpu_ms']:.2f} |")
            out.append(f"| MiniLM B={b} e2e | {r['e2e_ms_median']:.3f} | {this[b]['e2e_ms_median']:.3f} | {r['e2e_ms_median'] / this[b]['e2e_ms_median']:.2f} |")
    for r in mm:
        o = base_mm.get(r["n"])
        if o and o.get("dtype", "f32") == r.get("dtype", "f32"):
            out.append(f"| matmul {r['n']}³ | {o['ms']:.3f} | {r['ms']:.3f} | {o['ms'] / r['ms']:.2f} |")
if kinds:
    stamped = all(t.get("stamped") for t in totals.values())
    out.append("\nGPU time by kernel kind, " + ("from GPU timestamps between the dispatches of whole passes (median of 5; "
               "each interval includes the barrier after the kernel, so they add up to the pass)" if stamped else
               "each kernel alone (host-timed submits)") + ", ms:\n")
    out.append("| dtype | batch | kind | kernels | ms | share |")
    out.append("|---|---|---|---|---|---|")
    for (dt, b), tot in sorted(totals.items()):
        ks = sorted((k for k in kinds if k["dtype"] == dt and k["batch"] == b), key=lambda k: -k["ms"])
        for k in ks:
            out.append(f"| {dt} | {b} | {k['profile_kind']} | {k['count']} | {k['ms']:.3f} | {100 * k['ms'] / tot['profile_total']:.0f}% |")
        out.append(f"| {dt} | {b} | **all** | {sum(k['count'] for k in ks)} | {tot['profile_total']:.3f} | 100% |")
if prof:
    out.append("\nSlowest kernels (same timing), ms:\n")
    out.append("| dtype | batch | kernel | ms |")
    out.append("|---|---|---|---|")
    for p in prof:
        out.append(f"| {p.get('dtype', 'f32')} | {p['batch']} | {p['profile']} | {p['ms']:.3f} |")
notes = os.path.join(d, "notes.md")
if os.path.exists(notes):
    out.append("")
    out.append(open(notes).read().rstrip())
open("benches/results/minilm-wgpu.md", "w").write("\n".join(out) + "\n")
json.dump({"adapter": adapter, "rlx_wgpu": rows, "profile": allprof, "torch": torch}, open("benches/results/minilm-wgpu.json", "w"), indent=1)
print("\n".join(out))
