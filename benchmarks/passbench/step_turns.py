"""Where a baseline step's time went, from its records: the rate and the timing turns.

    python3 benchmarks/passbench/step_turns.py \\
        benchmarks/passbench/results/baselines_h200/eval-fusible-inductor-sample/results.jsonl

A run taken in steps (device calls, each resuming the last) is split into its steps where
no evaluation ran for more than ``--gap`` seconds. Per step: graphs, the span (the first
evaluation's start to the last one's end), graphs per minute over that span, and the time
the timing turns filled (with ``--overlap``, a graph's timed rounds run in a turn that
stops every other evaluation it covers, so what the turns fill is time in which nothing
else advanced), as seconds, as a share of the span, and per graph; the seconds of the
timed calls the records keep (calls times mean, both sides: what a turn is for; the rest
of a turn is warm-up, series a re-measurement replaced, and the work around each call);
and the mean of the evaluations' phases per graph (a stopped evaluation's phase counts
the time it was stopped).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from datetime import datetime

from passnet.record import EvalRecord, read_records

PHASES = ("compile", "measure", "compare", "compare_recheck")
"""The phases whose mean per graph the table gives."""


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def steps(records: Sequence[EvalRecord], gap_s: float) -> list[list[EvalRecord]]:
    """The records in order of start, cut where nothing ran for more than ``gap_s``."""
    out: list[list[EvalRecord]] = []
    last_end = None
    for r in sorted(records, key=lambda r: _ts(r.started_at)):
        if last_end is None or _ts(r.started_at) - last_end > gap_s:
            out.append([])
            last_end = _ts(r.finished_at)
        out[-1].append(r)
        last_end = max(last_end, _ts(r.finished_at))
    return out


def _kept_calls_s(record: EvalRecord) -> float:
    """Seconds of the timed calls a record keeps, both sides (0 for an untimed graph)."""
    sides = [t.e2e for t in (record.eager, record.compiled) if t is not None]
    return sum(stats.n * stats.mean_ms for stats in sides) / 1000


def report(records: Sequence[EvalRecord], gap_s: float = 15.0) -> str:
    """The table, as Markdown."""
    dated = [r for r in records if r.started_at and r.finished_at]
    if not dated:
        raise SystemExit("no record says when it ran (started_at, finished_at)")
    lines = [
        "| step | graphs | span (s) | graphs/min | turns (s) | turns/span | turn per graph (s) | "
        "kept calls (s) | " + " | ".join(f"{p} (s/graph)" for p in PHASES) + " |",
        "|---" * (8 + len(PHASES)) + "|",
    ]
    for i, step in enumerate(steps(dated, gap_s), 1):
        span = max(_ts(r.finished_at) for r in step) - min(_ts(r.started_at) for r in step)
        turns = sum(r.turn.ended - r.turn.began for r in step if r.turn)
        timed = sum(1 for r in step if r.turn)
        per_min = f"{60 * len(step) / span:.1f}" if span > 0 else "-"
        share = f"{turns / span:.0%}" if span > 0 and timed else "-"
        per_graph = f"{turns / timed:.2f}" if timed else "-"
        calls = sum(_kept_calls_s(r) for r in step)
        phases = [statistics.fmean(r.phases_s.get(p, 0.0) for r in step) for p in PHASES]
        lines.append(
            f"| {i} | {len(step)} | {span:.0f} | {per_min} | {turns:.0f} | {share} | {per_graph} | "
            f"{calls:.0f} | " + " | ".join(f"{v:.2f}" for v in phases) + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", help="a run's results.jsonl")
    parser.add_argument(
        "--gap", type=float, default=15.0, help="seconds without an evaluation that end a step"
    )
    args = parser.parse_args()
    print(report(read_records(args.records), args.gap))


if __name__ == "__main__":
    main()
