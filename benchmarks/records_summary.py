#!/usr/bin/env python3
"""Per result file: what the docs quote about a phase that ``bench_harness.py --phase report``
does not give (the report covers ``run1``/``run2``/``aa`` of one work folder only).

Per file: records, mean time per graph excluding compile, graphs flagged unstable, seconds
the core guard waited, its slow checks and rounds measured again, and what the GPU's clocks did (``bench_harness._gpu_summary``:
readings, SM clock range, reasons, hottest temperature, range of the per-graph median
power). With ``--graph``, that graph's speedup, each side's median and IQR/median, and its
re-measurements, per file::

    python3 benchmarks/records_summary.py benchmarks/results/harness_h200_fixed_layout/*.jsonl \\
        --graph ultralytics/yolov8n-cls
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from bench_harness import _gpu_summary  # this folder is on sys.path when run as a script

from passnet.record import EvalRecord, read_records


def summary(records: list[EvalRecord]) -> dict[str, object]:
    timed = [r for r in records if r.eager and r.compiled]
    gpus = [r.gpu for r in records if r.gpu]
    out: dict[str, object] = {
        "records": len(records),
        "mean_excl_compile_s": round(
            statistics.mean(r.phases_s["total"] - r.phases_s.get("compile", 0.0) for r in records),
            2,
        )
        if records
        else None,
        "unstable": sum(r.eager.unstable or r.compiled.unstable for r in timed),
        "guard_waited_s": round(sum(r.host.waited_s for r in records if r.host), 2),
        "guard_slow_checks": sum(r.host.slow_checks for r in records if r.host),
        "guard_remeasured_rounds": sum(r.host.remeasured_rounds for r in records if r.host),
    }
    out |= _gpu_summary(gpus)
    return out


def one_graph(r: EvalRecord) -> str:
    if not (r.eager and r.compiled and r.speedup_e2e):
        return f"{r.status.value}, no speedup"
    return (
        f"speedup {r.speedup_e2e:.3f}; eager {r.eager.e2e.median_ms:.3f} ms "
        f"(IQR/median {r.eager.e2e.relative_iqr:.3f}), compiled {r.compiled.e2e.median_ms:.3f} "
        f"ms (IQR/median {r.compiled.e2e.relative_iqr:.3f}); re-measured "
        f"{max(r.eager.retries, r.compiled.retries)}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--graph", help="also show this graph's figures per file")
    args = parser.parse_args()
    for path in args.files:
        records = list({r.graph: r for r in read_records(path)}.values())  # last per graph
        print(f"{path}: {summary(records)}")
        if args.graph:
            found = [r for r in records if r.graph == args.graph]
            print(f"  {args.graph}: {one_graph(found[0]) if found else 'not in this file'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
