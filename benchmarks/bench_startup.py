"""Where an evaluation's time goes before measuring: the forkserver's preload and
Inductor's compile-worker pool.

Every evaluation runs in a child forked from a forkserver. What the forkserver has
imported, no child imports again; what it has not, every child's first
``torch.compile`` imports (Dynamo and Inductor are about 1,000 modules). And on a
machine with several cores Inductor starts a pool of compile workers in every
child (a sidecar process that imports torch, then one worker per core), also when
its caches hold every kernel already.

This script evaluates a few dev samples with ``inductor`` under each variant, each
variant in its own fresh process (so its own forkserver), the variants alternating
over ``--rounds`` rounds, after one untimed pass that fills Inductor's caches:

* ``before``: the harness before commit 1e09f03: the forkserver preloads torch and
  passnet's child code only, and Inductor starts its compile-worker pool
  (``compile_threads`` left to Inductor);
* ``preload``: the current preload (Dynamo, AOTAutograd and the compile-worker
  code too), the pool still started;
* ``after``: the current harness: that preload, and ``compile_threads=1`` (no pool:
  kernels load in the child itself).

It prints, per variant, the mean of the record's ``process_start``, ``load``,
``compile`` and ``total`` phases and the whole process's wall time::

    PYTHONPATH=src python3 benchmarks/bench_startup.py --device cuda
    PYTHONPATH=src python3 benchmarks/bench_startup.py --device cpu --graphs torchvision/resnet18

With ``OUT`` set, the per-evaluation rows go to ``$OUT/bench_startup.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_GRAPHS = [
    "torchvision/resnet18",
    "torchvision/mobilenet_v3_small",
    "transformers-auto-model/prajjwal1_bert-tiny",
    "transformers-auto-model/vuiseng9_tiny-random-SwinModel",
    "torchgeometric/GCN",
]
# variant: (preload the minimal list?, Inductor's compile_threads)
VARIANTS = {"before": (True, None), "preload": (False, None), "after": (False, 1)}
# (importing passnet.evaluate imports its child code, as importing the child module did)
MINIMAL_PRELOAD = ["torch", "passnet.evaluate", "passnet.compilers", "passnet.sample"]
PHASES = ("process_start", "load", "compile", "total")


def _worker(args: argparse.Namespace) -> None:
    """One variant: evaluate the graphs one after the other; one JSON line per record."""
    from passnet.data import dev_samples_dir
    from passnet.evaluate import FORKSERVER_PRELOAD, EvalSettings, evaluate_sample

    minimal, threads = VARIANTS[args.variant]
    if minimal:
        FORKSERVER_PRELOAD[:] = MINIMAL_PRELOAD  # before the first child starts the forkserver
    settings = EvalSettings(warmup=5, trials=20, max_extra_s=0.5, max_retries=0)
    root = Path(args.samples or dev_samples_dir())
    for graph in args.graphs:
        rec = evaluate_sample(
            root / graph,
            "inductor",
            {"compile_threads": threads},
            device=args.device,
            settings=settings,
        )
        row = {"graph": graph, "status": rec.status.value, **rec.phases_s}
        print("ROW " + json.dumps(row), flush=True)


def _run_variant(variant: str, args: argparse.Namespace) -> tuple[float, list[dict]]:
    env = dict(os.environ)
    cmd = [sys.executable, __file__, "--worker", "--variant", variant, "--device", args.device]
    cmd += ["--graphs", *args.graphs]
    if args.samples:
        cmd += ["--samples", args.samples]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    rows = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]
    if proc.returncode != 0 or len(rows) != len(args.graphs):
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"variant {variant}: worker failed (exit {proc.returncode})")
    return wall, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--graphs", nargs="+", default=DEFAULT_GRAPHS)
    ap.add_argument("--samples", help="samples root (default: the dev samples)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args)
        return

    print("filling Inductor's caches (untimed) ...", flush=True)
    _run_variant("after", args)
    results: dict[str, list[tuple[float, list[dict]]]] = {v: [] for v in args.variants}
    for r in range(args.rounds):
        order = args.variants if r % 2 == 0 else list(reversed(args.variants))
        for variant in order:
            wall, rows = _run_variant(variant, args)
            results[variant].append((wall, rows))
            print(f"round {r + 1} {variant:18s} wall {wall:6.1f} s", flush=True)

    n = len(args.graphs)
    print(f"\nmeans over {args.rounds} rounds x {n} graphs (seconds; wall = whole process)")
    print(f"{'variant':18s} " + " ".join(f"{p:>13s}" for p in PHASES) + f" {'wall/graph':>11s}")
    for variant, runs in results.items():
        rows = [row for _, rs in runs for row in rs]
        cells = [statistics.mean(row.get(p, math.nan) for row in rows) for p in PHASES]
        wall = statistics.mean(w for w, _ in runs) / n
        print(f"{variant:18s} " + " ".join(f"{c:13.2f}" for c in cells) + f" {wall:11.2f}")
    print("\nper graph, compile phase (mean over rounds)")
    for g in args.graphs:
        cells = [
            statistics.mean(
                row.get("compile", math.nan) for _, rs in runs for row in rs if row["graph"] == g
            )
            for runs in results.values()
        ]
        statuses = {
            row["status"]
            for runs in results.values()
            for _, rs in runs
            for row in rs
            if row["graph"] == g
        }
        print(f"  {g[-45:]:45s} " + " ".join(f"{c:8.2f}" for c in cells) + f"  {sorted(statuses)}")
    if os.environ.get("OUT"):
        out = Path(os.environ["OUT"]) / "bench_startup.json"
        out.write_text(
            json.dumps(
                {v: [{"wall": w, "rows": rs} for w, rs in runs] for v, runs in results.items()},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
