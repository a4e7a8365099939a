#!/usr/bin/env python3
"""How often, and how, a child's host speed moves between evaluations (repeat-run diagnosis).

Evaluates a few launch-bound graphs with Inductor, round-robin, several times each,
each evaluation in its own child as the harness does (``evaluate_sample``), and
around every evaluation times the host's launch path in a separate short process
(CUDA init, then 2,000 one-element ``torch.add`` launches, synchronised at the end,
best of 5 loops of 200). If slow episodes are machine-wide time windows, the probe
before or after a slow evaluation is slow too; if they belong to one process, it is
not. Prints one line per evaluation and a table at the end.

Usage (CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/host_episodes.py --reps 6 --json $OUT/host_episodes.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from passnet.data import dev_samples_dir
from passnet.evaluate import EvalSettings, evaluate_sample

GRAPHS = (
    "transformers-auto-model/falcon-tiny-random",
    "transformers-auto-model/opt-tiny-random",
    "transformers-auto-model/bge-small-zh",
    "torchgeometric/GAE",
)

PROBE = r"""
import time, torch
x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
best = float("inf")
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(200):
        x = torch.add(x, 1)
    torch.cuda.synchronize()
    best = min(best, (time.perf_counter() - t0) / 200 * 1e6)
print(best)
"""


def probe() -> float:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    settings = EvalSettings(warmup=25, trials=100)
    rows = []
    for rep in range(args.reps):
        for rel in GRAPHS:
            before = probe()
            t0 = time.time()
            rec = evaluate_sample(
                dev_samples_dir() / rel, "inductor", device="cuda", settings=settings
            )
            after = probe()
            row = {
                "rep": rep,
                "graph": Path(rel).name,
                "t": round(t0, 1),
                "status": rec.status.value,
                "eager_ms": rec.eager.e2e.median_ms if rec.eager else None,
                "compiled_ms": rec.compiled.e2e.median_ms if rec.compiled else None,
                "speedup": rec.speedup_e2e,
                "probe_before_us": before,
                "probe_after_us": after,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(
        f"\n{'graph':22} {'rep':>3} {'eager ms':>9} {'/median':>8} {'comp ms':>8} {'/median':>8} {'speedup':>8} {'probe before':>12} {'after':>7}"
    )
    for g in {r["graph"] for r in rows}:
        mine = [r for r in rows if r["graph"] == g and r["eager_ms"]]
        me = statistics.median(r["eager_ms"] for r in mine)
        mc = statistics.median(r["compiled_ms"] for r in mine)
        for r in mine:
            print(
                f"{g:22} {r['rep']:3d} {r['eager_ms']:9.3f} {r['eager_ms'] / me:8.2f} {r['compiled_ms']:8.3f} "
                f"{r['compiled_ms'] / mc:8.2f} {r['speedup']:8.3f} {r['probe_before_us']:12.2f} {r['probe_after_us']:7.2f}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
