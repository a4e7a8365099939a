#!/usr/bin/env python3
"""Compare two result files of the same graphs: how far apart, and in which direction.

For the graphs both files hold with a speedup: the median and the largest per-graph
|log(s_a/s_b)| (the repeat-run figure of ``bench_harness.py``), the signed median of
log(s_a/s_b) (a shift of the whole run rather than scatter), and, per side, the signed
median change of its own median time from A to B with the number of graphs that got
slower. Records measured with the core guard also say in how many of them the reported
``probe_ns`` equals the reference handed down (before the fix of session 15, the guard
reported the smaller of the two).

Usage::

    python3 benchmarks/compare_runs.py benchmarks/results/harness_h200_guard/run1.jsonl \\
        benchmarks/results/harness_h200_guard/run2.jsonl
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

from passnet.evaluate import EvalRecord, read_records


def _by_graph(path: Path) -> dict[str, EvalRecord]:
    return {r.graph: r for r in read_records(path)}  # a later record of a graph wins


def compare(a: dict[str, EvalRecord], b: dict[str, EvalRecord]) -> dict[str, float | int]:
    both = [g for g in a if g in b and a[g].speedup_e2e and b[g].speedup_e2e]
    logs = [math.log(a[g].speedup_e2e / b[g].speedup_e2e) for g in both]
    out: dict[str, float | int] = {"graphs": len(both)}
    if logs:
        out |= {
            "median_abs_log": statistics.median(abs(x) for x in logs),
            "max_abs_log": max(abs(x) for x in logs),
            "signed_median_log": statistics.median(logs),
        }
    for side in ("eager", "compiled"):
        drift = [
            math.log(getattr(b[g], side).e2e.median_ms / getattr(a[g], side).e2e.median_ms)
            for g in both
            if getattr(a[g], side) and getattr(b[g], side)
        ]
        if drift:
            out[f"{side}_signed_median_log_b_over_a"] = statistics.median(drift)
            out[f"{side}_slower_in_b"] = sum(x > 0 for x in drift)
    for name, recs in (("a", a), ("b", b)):
        hosts = [r.host for r in recs.values() if r.host and r.host.reference_ns is not None]
        out[f"{name}_probe_equals_reference"] = sum(
            h.probe_ns is not None and abs(h.probe_ns - round(h.reference_ns, 3)) < 1e-9
            for h in hosts
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    args = parser.parse_args()
    for key, value in compare(_by_graph(args.a), _by_graph(args.b)).items():
        shown = f"{100 * value:+.2f} %" if isinstance(value, float) else str(value)
        print(f"{key:40} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
