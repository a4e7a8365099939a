"""Where Inductor slows a benchmark run's graphs down, read from its records alone.

For the graphs of a ``passnet bench eval`` run that ran correctly and were timed, prints
the roofline's verdict (what bounds each graph: compute, memory, or the launch of one
kernel), the shortest compiled and eager calls, the correlation of the speedup with the
size of the eager call, and the speedups binned by that size: a compiled call that costs
a near-constant time whatever the graph's work makes the small graphs slower and the
large ones faster::

    python3 benchmarks/passbench/slowdown_by_size.py \\
        benchmarks/passbench/results/baselines_h200/eval-fusible-inductor-dynamic_false/results.jsonl

Where the records carry a kernel profile on both sides (a GPU run with
``--profile-kernels``), a last table divides each side's call into what the GPU ran (the
summed device activities per call) and the rest (the call's host work and the gaps
between its launches): the near-constant compiled call is then host work or kernels, by
the records.
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
from collections.abc import Sequence

from passnet.record import EvalRecord, read_records
from passnet.score import gmean
from passnet.status import Status

EDGES_MS = (0.03, 0.05, 0.08, 0.12, 0.2)
"""The eager call's median time, in ms, at which the bins of the table break."""


def _timed(records: Sequence[EvalRecord]) -> list[EvalRecord]:
    return [
        r
        for r in records
        if r.status is Status.OK and r.eager and r.compiled and r.speedup_e2e is not None
    ]


def _bin_label(lo: float | None, hi: float | None) -> str:
    if lo is None:
        return f"< {hi:g}"
    return f"≥ {lo:g}" if hi is None else f"{lo:g}–{hi:g}"


def report(records: Sequence[EvalRecord]) -> str:
    """The tables, as Markdown."""
    timed = _timed(records)
    if len(timed) < 2:
        raise SystemExit(f"{len(timed)} correct timed graphs: too few to say anything")
    eager = {r.graph: r.eager.e2e.median_ms for r in timed}  # type: ignore[union-attr]
    compiled = {r.graph: r.compiled.e2e.median_ms for r in timed}  # type: ignore[union-attr]
    lines = [f"{len(timed)} correct timed graphs of {len(records)} records", ""]
    bounds = collections.Counter(r.roofline.bound if r.roofline else "unmeasured" for r in timed)
    floors = [r.roofline.floor_ms for r in timed if r.roofline]
    lines.append(
        "roofline: "
        + ", ".join(f"{b} {n}" for b, n in bounds.most_common())
        + (f"; median floor {statistics.median(floors) * 1000:.2f} µs" if floors else "")
    )
    lines.append(
        f"shortest compiled call {min(compiled.values()):.4f} ms (10th percentile "
        f"{sorted(compiled.values())[len(timed) // 10]:.4f}); shortest eager call "
        f"{min(eager.values()):.4f} ms (median {statistics.median(eager.values()):.4f})"
    )
    logs = [math.log(r.speedup_e2e) for r in timed]  # type: ignore[arg-type]
    size = [math.log(eager[r.graph]) for r in timed]
    lines.append(
        f"correlation of log speedup with log eager time: {statistics.correlation(size, logs):.2f}"
    )
    lines += [
        "",
        "| eager call (ms) | graphs | slower than eager | G-mean | median compiled − eager (ms) |",
        "|---|---|---|---|---|",
    ]
    edges: list[float | None] = [None, *EDGES_MS, None]
    for lo, hi in zip(edges, edges[1:], strict=False):
        group = [
            r
            for r in timed
            if (lo is None or eager[r.graph] >= lo) and (hi is None or eager[r.graph] < hi)
        ]
        if not group:
            continue
        slow = sum(1 for r in group if r.speedup_e2e < 1.0)  # type: ignore[operator]
        gap = statistics.median(compiled[r.graph] - eager[r.graph] for r in group)
        g = gmean([r.speedup_e2e for r in group])  # type: ignore[misc]
        lines.append(f"| {_bin_label(lo, hi)} | {len(group)} | {slow} | {g:.3f} | {gap:+.4f} |")
    lines += _kernel_split(timed)
    return "\n".join(lines)


def _kernel_split(timed: Sequence[EvalRecord]) -> list[str]:
    """Each side's call divided into device activity and the rest, over the graphs profiled
    on both sides (medians); nothing without a profile."""
    both = [r for r in timed if r.eager.kernels and r.compiled.kernels]  # type: ignore[union-attr]
    if not both:
        return []
    lines = [
        "",
        f"kernel profile ({len(both)} graphs profiled on both sides; medians per call):",
        "",
        "| side | call (ms) | on the GPU (ms) | the rest (ms) | activities |",
        "|---|---|---|---|---|",
    ]
    for side in ("eager", "compiled"):
        timings = [getattr(r, side) for r in both]
        call = [t.e2e.median_ms for t in timings]
        gpu = [t.kernels.ms_per_call for t in timings]
        lines.append(
            f"| {side} | {statistics.median(call):.4f} | {statistics.median(gpu):.4f} | "
            f"{statistics.median(c - g for c, g in zip(call, gpu, strict=True)):.4f} | "
            f"{statistics.median(t.kernels.activities_per_call for t in timings):g} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", help="a run's results.jsonl")
    args = parser.parse_args()
    print(report(read_records(args.records)))


if __name__ == "__main__":
    main()
