#!/usr/bin/env python3
"""The corpus sweep's table (docs/dataset.md, "The corpus sweep"): per source family, the
samples in the corpus, those recorded, and their statuses; then how many of the recorded
samples that fit in memory run::

    PYTHONPATH=src python3 benchmarks/dataset/corpus_sweep_table.py \\
        benchmarks/results/corpus_eager_cpu/results.jsonl --corpus /path/to/graphnet-corpus \\
        [--rerun benchmarks/results/corpus_eager_cpu/aimv2_1b_rerun.jsonl]

A sample's family is the first part of its path. The latest record of a sample counts;
``--rerun`` files' records replace the sweep's for their samples (a re-run of samples
recorded before the evaluation bounded its memory). "Fit" excludes ``too_large`` records
and those whose child the kernel killed (``SIGKILL``): the samples that do not fit in
this machine's memory.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from datetime import datetime
from pathlib import Path

from passnet.record import EvalRecord, read_records

STATUSES = ("ok", "sample_error", "too_large", "timeout")


def _latest(results: str, reruns: list[str]) -> dict[str, EvalRecord]:
    """The sweep's latest record per sample, a re-run's in place of the sweep's for the
    samples it holds (a re-run names a sample by its path as given: matched on the end)."""
    records = {record.graph: record for record in read_records(results)}
    for path in reruns:
        for record in read_records(path):
            name = record.graph.rstrip("/")
            matches = [g for g in records if g == name or g.endswith("/" + name.split("/")[-1])]
            if len(matches) != 1:
                raise SystemExit(f"{path}: {record.graph} matches {len(matches)} sweep samples")
            record.graph = matches[0]
            records[matches[0]] = record
    return records


def _killed(record: EvalRecord) -> bool:
    return record.error is not None and "SIGKILL" in record.error.message


def _corpus_counts(root: Path | None) -> Counter[str]:
    if root is None:
        return Counter()
    return Counter(p.relative_to(root).parts[0] for p in root.rglob("model.py"))


def _seconds(record: EvalRecord) -> float:
    start = datetime.fromisoformat(record.started_at)
    return (datetime.fromisoformat(record.finished_at) - start).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="the sweep's results.jsonl")
    parser.add_argument("--corpus", type=Path, default=None, help="the corpus root (counts)")
    parser.add_argument("--rerun", action="append", default=[], help="results of a re-run")
    args = parser.parse_args()
    records = _latest(args.results, args.rerun)
    in_corpus = _corpus_counts(args.corpus)
    families = sorted(set(in_corpus) | {r.graph.split("/")[0] for r in records.values()})
    others = sorted({r.status.value for r in records.values()} - set(STATUSES), key=str.lower)
    columns = ["family", "samples in corpus", "recorded", *STATUSES, *others]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for family in families:
        mine = [r for r in records.values() if r.graph.split("/")[0] == family]
        counts = Counter(r.status.value for r in mine)
        cells = [family, f"{in_corpus.get(family, 0):,}", f"{len(mine):,}"]
        cells += [str(counts.get(s, 0)) if mine else "—" for s in (*STATUSES, *others)]
        print("| " + " | ".join(cells) + " |")
    fit = [r for r in records.values() if r.status.value != "too_large" and not _killed(r)]
    ran = sum(1 for r in fit if r.status.value == "ok")
    total = sum(in_corpus.values())
    print()
    print(f"recorded: {len(records):,}" + (f" of {total:,}" if total else ""))
    print(f"fit in memory: {len(fit):,}; run: {ran:,} ({100 * ran / max(1, len(fit)):.1f} %)")
    times = [_seconds(r) for r in records.values() if r.started_at and r.finished_at]
    if times:
        print(f"seconds per sample: median {statistics.median(times):.1f}, max {max(times):.0f}")


if __name__ == "__main__":
    main()
