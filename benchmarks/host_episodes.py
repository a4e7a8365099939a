#!/usr/bin/env python3
"""How often, and how, a child's host speed moves between evaluations (repeat-run diagnosis).

Evaluates a few launch-bound graphs with Inductor, round-robin, several times each,
each evaluation in its own child as the harness does (``evaluate_sample``), and
around every evaluation times the host's launch path in a separate short process
(CUDA init, then 2,000 one-element ``torch.add`` launches, synchronised at the end,
best of 5 loops of 200). If slow episodes are machine-wide time windows, the probe
before or after a slow evaluation is slow too; if they belong to one process, it is
not. Prints one line per evaluation and a table at the end.

With ``--ab`` every graph is evaluated twice per repetition, with the core guard
(``EvalSettings.core_guard``, the default) and without it (one fixed core, as before
the guard), alternately, and the table is split by the two; the guard's report (moves,
rounds measured again, probes that found every core slow) is printed per evaluation.

Usage (CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/host_episodes.py --reps 6 --json $OUT/host_episodes.json
    PYTHONPATH=src python3 benchmarks/host_episodes.py --reps 5 --ab --no-probes --json $OUT/ab.json
"""

from __future__ import annotations

import argparse
import dataclasses
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
    parser.add_argument(
        "--ab", action="store_true", help="each evaluation with and without the core guard"
    )
    parser.add_argument(
        "--no-probes", action="store_true", help="no probe processes around evaluations"
    )
    args = parser.parse_args()
    guards = (True, False) if args.ab else (True,)
    rows = []
    for rep in range(args.reps):
        for rel in GRAPHS:
            for i, guard in enumerate(guards):
                on = guard if rep % 2 == 0 else guards[len(guards) - 1 - i]  # alternate the order
                settings = EvalSettings(warmup=25, trials=100, core_guard=on)
                rows.append(_evaluate(rep, rel, settings, probes=not args.no_probes))
                print(json.dumps(rows[-1]), flush=True)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=1) + "\n")
    for on in guards:
        _table([r for r in rows if r["core_guard"] == on], f"core guard {'on' if on else 'off'}")
    return 0


def _evaluate(rep: int, rel: str, settings: EvalSettings, probes: bool) -> dict:
    before = probe() if probes else None
    t0 = time.time()
    rec = evaluate_sample(dev_samples_dir() / rel, "inductor", device="cuda", settings=settings)
    after = probe() if probes else None
    host = rec.host
    return {
        "rep": rep,
        "graph": Path(rel).name,
        "core_guard": settings.core_guard,
        "t": round(t0, 1),
        "status": rec.status.value,
        "eager_ms": rec.eager.e2e.median_ms if rec.eager else None,
        "compiled_ms": rec.compiled.e2e.median_ms if rec.compiled else None,
        "speedup": rec.speedup_e2e,
        "measure_s": rec.phases_s.get("measure"),
        "probe_before_us": before,
        "probe_after_us": after,
        "host": None if host is None else dataclasses.asdict(host),
    }


def _table(rows: list[dict], title: str) -> None:
    print(f"\n== {title}")
    print(
        f"{'graph':22} {'rep':>3} {'eager ms':>9} {'/median':>8} {'comp ms':>8} {'/median':>8} "
        f"{'speedup':>8} {'probe before':>12} {'after':>7} {'moves':>5} {'again':>5} {'allslow':>7}"
    )
    for g in dict.fromkeys(r["graph"] for r in rows):
        mine = [r for r in rows if r["graph"] == g and r["eager_ms"]]
        if not mine:
            continue
        me = statistics.median(r["eager_ms"] for r in mine)
        mc = statistics.median(r["compiled_ms"] for r in mine)
        for r in mine:
            h = r["host"] or {}
            print(
                f"{g:22} {r['rep']:3d} {r['eager_ms']:9.3f} {r['eager_ms'] / me:8.2f} "
                f"{r['compiled_ms']:8.3f} {r['compiled_ms'] / mc:8.2f} {r['speedup']:8.3f} "
                f"{_us(r['probe_before_us']):>12} {_us(r['probe_after_us']):>7} "
                f"{h.get('moves', '-'):>5} {h.get('remeasured_rounds', '-'):>5} {h.get('all_slow', '-'):>7}"
            )
        speedups = [r["speedup"] for r in mine]
        print(f"{g:22} spread max/min {100 * (max(speedups) / min(speedups) - 1):.1f} %")


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main())
