"""How a dataset stage's throughput scales with its number of jobs on one machine.

The stage (``decompose`` or ``generalize``) runs on N copies of one sample (the same work
for every job, so jobs can be compared), once per job count, each for a fixed window of
wall time (``timeout``: finished samples are recorded as they finish, so a stopped run
keeps them). From each run's records:

* ``per-sample s``: the median wall time of one sample in its child;
* ``samples/h``: jobs × 3600 / that median (steady state, start-up excluded);
* ``efficiency``: samples/h over (jobs × samples/h with one job): 1.0 is linear scaling;
* ``finished``: samples recorded within the window (start-up included).

    PYTHONPATH=src python3 benchmarks/dataset/stage_scaling.py SAMPLE --work DIR \\
        [--stage decompose] [--jobs 1 4 8 14] [--window-s 30] [--copies 64] [-- EXTRA CLI ARGS]

Prints one table and writes ``DIR/scaling_<stage>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

RECORDS = {"decompose": "decompose.jsonl", "generalize": "generalize.jsonl"}


def _copies(sample: Path, root: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        dst = root / f"copy{i:03d}" / sample.name
        if not dst.exists():
            shutil.copytree(sample, dst)
        paths.append(dst)
    return paths


def run_one(stage: str, paths: list[Path], root: Path, out: Path, jobs: int, args) -> dict:
    """One run of ``stage`` with ``jobs`` jobs for ``args.window_s`` seconds: its figures."""
    cmd = [sys.executable, "-m", "passnet.cli", stage, *map(str, paths), "--out", str(out)]
    cmd += ["--root", str(root), "--jobs", str(jobs), *args.extra]
    if stage == "generalize":  # copies share one graph hash: generalize every one of them
        cmd.append("--keep-duplicates")
    start = time.monotonic()
    with open(out.with_suffix(".log"), "w") as log:
        try:
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.window_s)
        except subprocess.TimeoutExpired:
            pass
    wall_s = time.monotonic() - start
    records_file = out / RECORDS[stage]
    records = []
    if records_file.exists():
        for line in records_file.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    times = [r["elapsed_s"] for r in records if r.get("status") == "ok" and r.get("elapsed_s")]
    median_s = statistics.median(times) if times else None
    return {
        "jobs": jobs,
        "wall_s": round(wall_s, 1),
        "finished": len(records),
        "ok": len(times),
        "statuses": sorted({r.get("status") for r in records}),
        "per_sample_median_s": median_s,
        "samples_per_h": jobs * 3600 / median_s if median_s else None,
    }


def main() -> None:
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sample", type=Path)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--stage", choices=sorted(RECORDS), default="decompose")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 4, 8, 14])
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument("--copies", type=int, default=64)
    args = parser.parse_args(argv)
    args.extra = extra
    root = args.work / "samples"
    paths = _copies(args.sample, root, args.copies)
    rows = []
    for jobs in args.jobs:
        out = args.work / f"{args.stage}_j{jobs}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        rows.append(run_one(args.stage, paths, root, out, jobs, args))
    base = next((r["samples_per_h"] for r in rows if r["jobs"] == 1), None)
    for r in rows:
        per_h = r["samples_per_h"]
        r["efficiency"] = per_h / (r["jobs"] * base) if base and per_h else None
    meta = {"cpus": os.cpu_count(), "stage": args.stage, "sample": str(args.sample)}
    (args.work / f"scaling_{args.stage}.json").write_text(
        json.dumps({**meta, "rows": rows}, indent=1) + "\n"
    )
    print(f"{args.stage} of {args.sample.name} on {os.cpu_count()} cores")
    print(f"{'jobs':>4} {'finished':>8} {'per-sample s':>12} {'samples/h':>10} {'efficiency':>10}")
    for r in rows:
        med, per_h, eff = r["per_sample_median_s"], r["samples_per_h"], r["efficiency"]
        print(
            f"{r['jobs']:4d} {r['finished']:8d} "
            f"{(f'{med:.2f}' if med else '-'):>12} {(f'{per_h:.0f}' if per_h else '-'):>10} "
            f"{(f'{eff:.2f}' if eff else '-'):>10}"
        )


if __name__ == "__main__":
    main()
