#!/usr/bin/env python3
"""Compare two result files of the same graphs: how far apart, and in which direction.

For the graphs both files hold with a speedup: the median and the largest per-graph
|log(s_a/s_b)| (the repeat-run figure of ``bench_harness.py``), the signed median of
log(s_a/s_b) (a shift of the whole run rather than scatter), and, per side, the signed
median change of its own median time from A to B with the number of graphs that got
slower. Records measured with the core guard also say in how many of them the reported
``probe_ns`` equals the reference handed down (before commit 571adbc the guard reported
the smaller of the two).

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

from passnet.record import EvalRecord, read_records


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
    out |= _state_shifts(a, b, both)
    for name, recs in (("a", a), ("b", b)):
        hosts = [r.host for r in recs.values() if r.host and r.host.reference_ns is not None]
        out[f"{name}_probe_equals_reference"] = sum(
            h.probe_ns is not None and abs(h.probe_ns - round(h.reference_ns, 3)) < 1e-9
            for h in hosts
        )
    return out


def _log(x: float | None, y: float | None) -> float | None:
    return math.log(y / x) if x and y else None


def _states(a: EvalRecord, b: EvalRecord) -> dict[str, float | None]:
    """Per graph, B over A as logs: the speedup, each side's median, the GPU's SM clock and
    the guard's round probes (the host's speed while timing; larger is slower)."""
    return {
        "speedup": _log(b.speedup_e2e, a.speedup_e2e),  # log(s_a / s_b), as the repeat figure
        "eager": _log(a.eager.e2e.median_ms, b.eager.e2e.median_ms),
        "compiled": _log(a.compiled.e2e.median_ms, b.compiled.e2e.median_ms),
        "sm_mhz": _log(*(r.gpu.sm_mhz_median if r.gpu else None for r in (a, b))),
        "round_probe": _log(*(r.host.probe_median_ns if r.host else None for r in (a, b))),
    }


def _state_shifts(
    a: dict[str, EvalRecord], b: dict[str, EvalRecord], both: list[str]
) -> dict[str, float | int]:
    """How the GPU's clock and the host's speed moved from A to B, and how well each
    explains the sides' drift (Pearson correlation over graphs; printed as ``_corr``)."""
    rows = [_states(a[g], b[g]) for g in both]
    out: dict[str, float | int] = {}
    for state in ("sm_mhz", "round_probe"):
        known = [r for r in rows if r[state] is not None]
        if not known:
            continue
        out[f"{state}_signed_median_log_b_over_a"] = statistics.median(r[state] for r in known)
        if len(known) < 3 or len({r[state] for r in known}) < 2:
            continue
        for what in ("speedup", "eager", "compiled"):
            xs = [r[state] for r in known]
            out[f"{what}_vs_{state}_corr"] = statistics.correlation(xs, [r[what] for r in known])
    return out


def per_graph(a: dict[str, EvalRecord], b: dict[str, EvalRecord]) -> str:
    """One line per graph: the |log| figures' parts, in per cent, largest repeat gap first."""
    both = [g for g in a if g in b and a[g].speedup_e2e and b[g].speedup_e2e]
    rows = sorted(((g, _states(a[g], b[g])) for g in both), key=lambda r: -abs(r[1]["speedup"]))
    head = f"{'graph':44} {'speedup':>8} {'eager':>7} {'compiled':>8} {'sm_mhz':>7} {'probe':>7}"
    lines = [head]
    for g, r in rows:
        cells = [
            f"{100 * r[k]:+{w}.2f}" if r[k] is not None else f"{'-':>{w + 1}}"
            for k, w in (
                ("speedup", 7),
                ("eager", 6),
                ("compiled", 7),
                ("sm_mhz", 6),
                ("round_probe", 6),
            )
        ]
        lines.append(f"{g[:44]:44} " + " ".join(cells))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument(
        "--per-graph", action="store_true", help="also print each graph's changes, B over A"
    )
    args = parser.parse_args()
    a, b = _by_graph(args.a), _by_graph(args.b)
    for key, value in compare(a, b).items():
        if key.endswith("_corr"):
            shown = f"{value:+.2f}"
        else:
            shown = f"{100 * value:+.2f} %" if isinstance(value, float) else str(value)
        print(f"{key:40} {shown}")
    if args.per_graph:
        print(per_graph(a, b))
    return 0


if __name__ == "__main__":
    sys.exit(main())
