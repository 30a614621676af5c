"""Training-throughput benchmark: MLP 784-512-512-10, fp32, batch 128 and
1024 — rlx CPU vs PyTorch CPU vs hand-written NumPy (OpenBLAS), one after
another in one run. Writes benches/results/training-mlp-cpu.{md,json}.

    cargo build --release -p rlx-autodiff --example train_bench
    python3 benches/training/run.py [--target-dir DIR]
"""
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
tdir = sys.argv[sys.argv.index("--target-dir") + 1] if "--target-dir" in sys.argv else os.path.join(ROOT, "target")
RLX = os.path.join(tdir, "release", "examples", "train_bench")
PEERS = os.path.join(ROOT, "benches", "training", "peers.py")
THREADS = 2
PLAN = {128: 20, 1024: 4}  # steps per timing
REPEATS = 5


def one(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# Other work on this machine skews every system: wait (up to 10 min) for a
# quiet moment and record the load before and after.
t0 = time.time()
while os.getloadavg()[0] > 1.5 and time.time() - t0 < 600:
    time.sleep(15)
load_before = os.getloadavg()
rows = []
for batch, steps in PLAN.items():
    env = dict(os.environ, RLX_NUM_THREADS=str(THREADS), OMP_NUM_THREADS=str(THREADS), OPENBLAS_NUM_THREADS=str(THREADS))
    rows.append(one([RLX, "--batch", str(batch), "--steps", str(steps), "--repeats", str(REPEATS)], env))
    for system in ["torch", "numpy"]:
        rows.append(one([sys.executable, PEERS, system, str(batch), str(steps), str(REPEATS), str(THREADS)], env))
    for r in rows[-3:]:
        print(r["system"], batch, r["img_per_s"], file=sys.stderr)

load = os.getloadavg()
res = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.processor() or platform.machine(),
       "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": load, "rows": rows}
os.makedirs(os.path.join(ROOT, "benches", "results"), exist_ok=True)
with open(os.path.join(ROOT, "benches", "results", "training-mlp-cpu.json"), "w") as f:
    json.dump(res, f, indent=1)
lines = [
    "# MLP 784-512-512-10 training throughput, CPU (img/s, higher is better)",
    "",
    f"{res['when']}, {res['cpus']} CPUs, 1-min load average {load_before[0]:.2f} before, {load[0]:.2f} after (other engineers share this machine).",
    "fp32, SGD(momentum 0.9), mean cross-entropy,",
    f"fixed synthetic batch; median of {REPEATS} timings after 3 warm-up steps; {THREADS} threads for every system.",
    "Command: `cargo build --release -p rlx-autodiff --example train_bench && python3 benches/training/run.py`",
    "",
    "| batch | rlx | PyTorch | NumPy (hand-written) | rlx / best peer |",
    "|---|---|---|---|---|",
]
for batch in PLAN:
    r = {x["system"]: x["img_per_s"] for x in rows if x["batch"] == batch}
    best = max(r["torch"], r["numpy"])
    lines.append(f"| {batch} | {r['rlx']:,.0f} | {r['torch']:,.0f} | {r['numpy']:,.0f} | {r['rlx'] / best:.3f}x |")
if max(load_before[0], load[0]) > 1.5:
    lines += ["", f"**Caveat:** the machine was busy (load {load_before[0]:.1f} → {load[0]:.1f} on {res['cpus']} CPUs), so every",
              "system ran below its idle speed and the spread between timings is large; these ratios are not a",
              "reliable speed claim. Re-run on an idle machine."]
lines += ["", "All timings (img/s) per system and batch:", ""]
for r in rows:
    lines.append(f"* {r['system']} B={r['batch']}: " + ", ".join(f"{x:,.0f}" for x in r["runs"]))
with open(os.path.join(ROOT, "benches", "results", "training-mlp-cpu.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
