"""What a baseline run's records say beyond its table: the spread of an eager-against-eager
run (the harness's A/A check), the failures (at which tolerance level they first pass,
their dtypes, their tasks) and the graphs whose timing spread persisted::

    python3 benchmarks/passbench/baseline_facts.py \\
        benchmarks/passbench/results/baselines_h200/eval-fusible-*-sample

Each RUN is a ``passnet bench eval`` folder (``results.jsonl`` and ``tasks.json``). A graph's
dtype is the folder its variant is filed under (``<task>/graphs/<dtype>/...``).
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Sequence
from pathlib import Path

from passnet.record import BASELINE_T, EvalRecord, read_bench_index, read_records
from passnet.status import Status


def _dtype(record: EvalRecord) -> str:
    return record.graph.split("/graphs/", 1)[1].split("/", 1)[0]


def _strictest_passed(record: EvalRecord) -> int | None:
    """The lowest tolerance level t at which the outputs are allclose (None: at none)."""
    passed = [t for t, ok in record.correctness.allclose.items() if ok]  # type: ignore[union-attr]
    return min(passed) if passed else None


def facts(records: Sequence[EvalRecord], task_of: dict[str, str]) -> list[str]:
    """The lines for one run's records; ``task_of`` maps a graph label to its task."""
    lines = [
        f"records {len(records)}: "
        + ", ".join(
            f"{s} {n}"
            for s, n in collections.Counter(r.status.value for r in records).most_common()
        )
    ]
    timed = [r for r in records if r.status is Status.OK and r.speedup_e2e is not None]
    if timed and all(r.compiler == "eager" for r in records):
        speedups = sorted(r.speedup_e2e for r in timed)  # type: ignore[misc]
        within = sum(1 for s in speedups if abs(s - 1) <= 0.01)
        lines.append(
            f"A/A: speedups {speedups[0]:.3f}–{speedups[-1]:.3f}; {within} of {len(speedups)} "
            "within 1 %"
        )
    failed = [r for r in records if r.status is Status.ACCURACY and r.correctness]
    if failed:
        first = collections.Counter(_strictest_passed(r) for r in failed)
        levels = ", ".join(
            f"t = {t}: {n}" if t is not None else f"never: {n}"
            for t, n in sorted(first.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
        )
        dtypes = collections.Counter(_dtype(r) for r in failed)
        tasks = {task_of.get(r.graph, r.graph) for r in failed}
        lines.append(
            f"accuracy (not allclose at t = {BASELINE_T}): {len(failed)} in {len(tasks)} tasks; "
            f"first allclose at {levels}; dtypes "
            + ", ".join(f"{d} {n}" for d, n in sorted(dtypes.items()))
        )
    unstable = [r for r in timed if r.compiled and r.compiled.unstable]
    lines.append(
        f"timed correct graphs {len(timed)}; compiled side flagged unstable {len(unstable)}"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="bench eval folders")
    args = parser.parse_args()
    failing: dict[frozenset[str], list[str]] = collections.defaultdict(list)
    for run in args.runs:
        index = read_bench_index(run)
        task_of = index.task_of() if index else {}
        records = read_records(Path(run) / "results.jsonl")
        print(f"{Path(run).name}:")
        for line in facts(records, task_of):
            print(f"  {line}")
        failed = frozenset(
            r.graph for r in records if not r.status.ran or r.status is not Status.OK
        )
        if failed:
            failing[failed].append(Path(run).name)
    for names in failing.values():
        if len(names) > 1:
            print(f"the same graphs fail in {' and '.join(names)}")


if __name__ == "__main__":
    main()
