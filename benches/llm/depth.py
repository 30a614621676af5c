#!/usr/bin/env python3
"""Decoding after a long context on the CPU, rlx vs llama.cpp, side by side.

tg N @ depth D: tokens/s of N greedy tokens decoded after a D-token
context — rlx: `rlx bench llm --prompt D --gen N` (its decode rate; the
prefill is timed apart), llama.cpp: `llama-bench -p 0 -n N -d D`. Same
GGUF, same thread count, f32 activations for rlx (the default). The
passes interleave the two tools per model (rlx, llama.cpp, rlx, ...);
the table gives each pass's ratio and their median (this machine is
shared and noisy).

    python3 benches/llm/depth.py [--depth 1000] [--gen 64] [--threads 2] [--runs 2]
                                 [--passes 2] [--models smollm2,gemma3,qwen2]
                                 [--out benches/results/llm-cpu-depth]

Build rlx (`cargo build --release -p rlx-cli`) and llama-bench as for
benches/llm/run.py. Writes OUT.md and OUT.json.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from run import LLAMA, MODELS, ROOT, cpu_flags, cpu_name, llama, rlx  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--models", default="smollm2,gemma3,qwen2")
    ap.add_argument("--llama-build", default=str(LLAMA))
    ap.add_argument("--out", default=str(ROOT / "benches/results/llm-cpu-depth"))
    a = ap.parse_args()
    res = {"cpu": cpu_name(), "flags": cpu_flags(), "threads": a.threads, "runs": a.runs, "depth": a.depth,
           "gen": a.gen, "models": {}}
    for name in a.models.split(","):
        path = MODELS[name]
        if not path.exists():
            print(f"{name}: {path} missing (./scripts/fetch-models --all); skipped", file=sys.stderr)
            continue
        passes = []
        for i in range(a.passes):
            r = rlx(path, a.threads, a.runs, a.depth, a.gen)["tg"]
            l = llama(a.llama_build, path, a.threads, a.runs, 0, a.gen, a.depth)["tg"]
            print(f"{name} pass {i + 1}: rlx {r[0]:.1f} ± {r[1]:.1f}, llama.cpp {l[0]:.1f} ± {l[1]:.1f} tok/s",
                  file=sys.stderr)
            passes.append({"rlx": r, "llama": l, "ratio": r[0] / l[0]})
        res["models"][name] = {"file": path.name, "passes": passes}
    out = Path(a.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    lines = [f"# Decoding after a long context on the CPU: rlx vs llama.cpp\n",
             f"Machine: {res['cpu']} ({', '.join(res['flags'])}), {a.threads} threads for both. "
             f"tg{a.gen} @ d{a.depth}: {a.gen} tokens decoded after a {a.depth}-token context, tokens/s, mean ± sd of "
             f"{a.runs} runs per pass; {a.passes} interleaved passes. rlx with f32 activations (the default). "
             f"Ratio > 1: rlx is faster.\n",
             f"Command: `python3 benches/llm/depth.py --depth {a.depth} --gen {a.gen} --threads {a.threads} "
             f"--runs {a.runs} --passes {a.passes}`\n",
             "| model | rlx tok/s per pass | llama.cpp tok/s per pass | rlx / llama.cpp per pass | median |",
             "|---|---|---|---|---:|"]
    for name, m in res["models"].items():
        ps = m["passes"]
        lines.append(f"| {m['file']} | " + ", ".join(f"{p['rlx'][0]:.1f}" for p in ps) + " | "
                     + ", ".join(f"{p['llama'][0]:.1f}" for p in ps) + " | "
                     + ", ".join(f"{p['ratio']:.2f}×" for p in ps)
                     + f" | **{statistics.median(p['ratio'] for p in ps):.2f}×** |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
