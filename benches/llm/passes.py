#!/usr/bin/env python3
"""Median over passes of benches/llm/run.py (each pass its own side-by-side
run, rlx and llama.cpp interleaved per model): per model and test, each
pass's ratio rlx / llama.cpp, and the median ratio.

    python3 benches/llm/passes.py PASS1.json PASS2.json PASS3.json > OUT.md

The machine this runs on is shared and noisy (one pass's ratios move by
±10%): a claim is the median of at least three passes.
"""

from __future__ import annotations

import json
import statistics
import sys


def main() -> None:
    passes = [json.load(open(p)) for p in sys.argv[1:]]
    if not passes:
        sys.exit(__doc__)
    first = passes[0]
    print(f"Machine: {first['cpu']} ({', '.join(first['flags']) if isinstance(first['flags'], list) else first['flags']}), {first['threads']} threads for both; "
          f"{len(passes)} passes, each the mean of {first['runs']} runs after a warm-up per system.\n")
    print("| model | test | rlx / llama.cpp per pass | median | rlx q8 / llama.cpp per pass | median | "
          "median tok/s rlx · rlx q8 · llama.cpp |")
    print("|---|---|---|---:|---|---:|---|")
    for name, m in first["models"].items():
        for test in ("pp", "tg"):
            size = first["prompt"] if test == "pp" else first["gen"]
            got = {s: [p["models"][name][s][test][0] for p in passes if s in p["models"][name]]
                   for s in ("rlx", "rlx_q8", "llama")}
            r = [a / b for a, b in zip(got["rlx"], got["llama"])]
            q = [a / b for a, b in zip(got["rlx_q8"], got["llama"])]
            med = {s: statistics.median(v) for s, v in got.items() if v}
            fmt = lambda v: ", ".join(f"{x:.2f}×" for x in v)
            qm = f"{statistics.median(q):.2f}×" if q else "-"
            print(f"| {m['file']} | {test}{size} | {fmt(r)} | **{statistics.median(r):.2f}×** | {fmt(q)} | {qm} | "
                  f"{med['rlx']:.1f} · {med.get('rlx_q8', float('nan')):.1f} · {med['llama']:.1f} |")


if __name__ == "__main__":
    main()
