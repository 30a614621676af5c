#!/usr/bin/env python3
"""Table + plot of one GPU benchmark run: rlx_cuda.json and torch.json (as
written by tests/gpu/run.sh --bench) -> benches/results/minilm-cuda.{md,json,svg}.

usage: report.py RUN_OUT_DIR [COMMAND_THAT_MADE_IT]
"""
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

d = sys.argv[1]
cmd = sys.argv[2] if len(sys.argv) > 2 else "tests/gpu/run.sh --bench"
rlx = json.load(open(f"{d}/rlx_cuda.json"))
torch = json.load(open(f"{d}/torch.json"))
batches = sorted({r["batch"] for r in rlx})
rows = {}
for r in rlx:
    rows[(r["mode"], "rlx-cuda (CUDA graph)", r["batch"])] = r["p50_ms_graph"]
    rows[(r["mode"], "rlx-cuda (no graph)", r["batch"])] = r["p50_ms_eager"]
    if "p50_ms_e2e_copies" in r:
        rows[(r["mode"], "rlx-cuda (graph + pinned copies in/out)", r["batch"])] = r["p50_ms_e2e_copies"]
for r in torch:
    rows[(r["mode"], "torch " + r["variant"], r["batch"])] = r["p50_ms"]
# The PDL A/B (run.sh PDL_AB=1): the fp16 CUDA-graph p50 of the same run
# under the other RLX_CUDA_PDL setting, as one more row with its ratio.
import os, re
pdl_row = None
if os.path.exists(f"{d}/minilm-pdl-ab.log"):
    ab = open(f"{d}/minilm-pdl-ab.log").read()
    setting = re.search(r"launches, compile \d+ ms, (PDL o\w+)", ab)
    pdl_row = f"rlx-cuda (CUDA graph), {setting.group(1) if setting else 'PDL A/B'} (A/B rows)"
    for m in re.finditer(r"^minilm (\S+) B=(\d+) seq=\d+: p50 ([\d.]+) ms \(CUDA graph\)", ab, re.M):
        rows[(m.group(1), pdl_row, int(m.group(2)))] = float(m.group(3))
out = ["# MiniLM-L6 (seq 128) on the H200: rlx-cuda vs PyTorch", "",
       "p50 latency in ms of one forward (encoder + mean pooling + L2 normalize), inputs and weights resident on the GPU, "
       "wall time of launch + synchronize; same weights (fp16 file, upcast for fp32), same inputs, one run on one machine.",
       "fp32 = strict fp32 (no TF32) for both; tf32 = rlx-cuda with TF32 GEMMs (opt-in); fp16 = fp16 storage, fp32 accumulation.",
       "rlx-cuda (graph + pinned copies in/out) = `run_cuda` per request: ids and mask copied in through the pinned staging buffer, "
       "the CUDA graph, all outputs (hidden states + pooled) copied back and converted to host tensors (weights resident); "
       "the other rows keep every input resident and copy nothing back, like the torch rows.", "",
       f"Command: `{cmd}`", ""]
for mode in ["fp32", "tf32", "fp16"]:
    impls = sorted({k[1] for k in rows if k[0] == mode})
    if not impls:
        continue
    out += [f"## {mode}", "", "| impl | " + " | ".join(f"B={b}" for b in batches) + " |",
            "|---|" + "---|" * len(batches)]
    for i in impls:
        out.append(f"| {i} | " + " | ".join(f"{rows[(mode, i, b)]:.3f}" if (mode, i, b) in rows else "-" for b in batches) + " |")
    ref = "torch compile+graph"
    if mode in ("fp32", "fp16") and any((mode, ref, b) in rows for b in batches):
        out.append(f"| **ratio rlx-cuda (graph) / {ref}** | " + " | ".join(
            f"**{rows[(mode, 'rlx-cuda (CUDA graph)', b)] / rows[(mode, ref, b)]:.2f}**" if (mode, ref, b) in rows and (mode, 'rlx-cuda (CUDA graph)', b) in rows else "-"
            for b in batches) + " |")
        if pdl_row and any((mode, pdl_row, b) in rows for b in batches):
            out.append(f"| **ratio {pdl_row} / {ref}** | " + " | ".join(
                f"**{rows[(mode, pdl_row, b)] / rows[(mode, ref, b)]:.2f}**" if (mode, ref, b) in rows and (mode, pdl_row, b) in rows else "-"
                for b in batches) + " |")
    out.append("")
import os
if os.path.exists(f"{d}/train_rlx.json") and os.path.exists(f"{d}/train_torch.json"):
    tr, tt = json.load(open(f"{d}/train_rlx.json")), json.load(open(f"{d}/train_torch.json"))
    tb = {r["batch"]: r for r in tt}
    out += ["## Training step: MLP 784-512-512-10, SGD momentum 0.9, fp32 strict, whole step as one CUDA graph", "",
            "rlx-cuda: the autodiff step graph (forward, backward, optimizer) compiled for CUDA, parameters and momentum fed back on the device; "
            "PyTorch: forward + backward + torch.optim.SGD captured with torch.cuda.graph. img/s over 200 steps after 20 warm-up steps.", "",
            "| batch | rlx-cuda img/s | torch img/s | rlx / torch | rlx µs/step | rlx launches/step | max rel. diff to the CPU f64 reference after 5 steps (GPU) |",
            "|---|---|---|---|---|---|---|"]
    for r in tr:
        t = tb.get(r["batch"], {})
        ti = t.get("img_per_s")
        out.append(f"| {r['batch']} | {r['img_per_s']:,.0f} | {ti:,.0f} | {r['img_per_s'] / ti:.2f} | {r['us_per_step']:.1f} | {r['launches']} | {r['max_rel_diff_vs_cpu']:.1e} |" if ti else f"| {r['batch']} | {r['img_per_s']:,.0f} | - | - | {r['us_per_step']:.1f} | {r['launches']} | {r['max_rel_diff_vs_cpu']:.1e} |")
    out.append("")
    out.append("All columns from the benchmark run. The last column: GPU vs a float64 CPU run of the same step graph (the CPU's own f32 "
               "result differs from f64 by up to 2.7e-3 on two momentum tensors at B=1024 — ill-conditioned sums of nearly cancelling "
               "bias gradients). See train-mlp-cuda.log.")
    out.append("")
cos = [(r["mode"], r["batch"], r["min_cosine_vs_cpu"]) for r in rlx if r.get("min_cosine_vs_cpu") is not None]
out += ["## Accuracy (min cosine of the pooled embeddings vs the CPU fp32 reference)", "",
        "| mode | batch | min cosine |", "|---|---|---|"] + [f"| {m} | {b} | {c:.7f} |" for m, b, c in cos] + [""]
if os.path.exists(f"{d}/minilm.log"):
    import re
    log = open(f"{d}/minilm.log").read().split("\n")
    out += ["## Where the time goes (GPU time of each launch)", "",
            "`CudaExecutable::profile`: every launch timed alone, as a CUDA graph of 5 copies of it replayed between two CUDA events "
            "(no host launch gaps). Per op kind: summed milliseconds (launches); the sum is compared with the p50 of one whole-graph replay.", ""]
    i = 0
    while i < len(log):
        m = re.match(r"\s+profile (\S+) B=(\d+) .*sum ([\d.]+) ms vs ([\d.]+) ms", log[i])
        if m:
            rows_ = []
            j = i + 1
            while j < len(log) and log[j].startswith("    ") and len(log[j].split()) == 5:
                x = log[j].split()
                rows_.append(f"{x[0]} {x[3]} ms ({x[1]})")
                j += 1
            out += [f"**{m.group(1)} B={m.group(2)}** (sum {m.group(3)} ms; graph replay {m.group(4)} ms): " + ", ".join(rows_), ""]
        i += 1
    out += [open(f"{os.path.dirname(os.path.abspath(__file__))}/minilm-cuda-analysis.md").read(), ""]
open("benches/results/minilm-cuda.md", "w").write("\n".join(out))
json.dump({"rlx_cuda": rlx, "torch": torch, "command": cmd,
           "train_rlx": json.load(open(f"{d}/train_rlx.json")) if os.path.exists(f"{d}/train_rlx.json") else None,
           "train_torch": json.load(open(f"{d}/train_torch.json")) if os.path.exists(f"{d}/train_torch.json") else None}, open("benches/results/minilm-cuda.json", "w"), indent=1)
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for ax, mode in zip(axes, ["fp32", "fp16"]):
    for i in sorted({k[1] for k in rows if k[0] == mode}):
        ys = [rows.get((mode, i, b)) for b in batches]
        ax.plot(batches, ys, marker="o", label=i, linewidth=2.5 if i.startswith("rlx") else 1.2)
    ax.set_xscale("log", base=2); ax.set_yscale("log"); ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel("batch (seq 128)"); ax.set_ylabel("p50 ms"); ax.set_title(f"MiniLM-L6 {mode}, H200"); ax.grid(alpha=.3)
    ax.legend(fontsize=7)
fig.tight_layout(); fig.savefig("benches/results/minilm-cuda.svg")
print("\n".join(out))
