"""The benchmark table: PassNet's Table 1 columns per run, and the speedup distribution.

Per run (one compiler configuration over a benchmark split), at tolerance level t
(default the baseline t = -5, the strict-correctness regime where AS's weight is full):

* **fast_1**: the share of all scored subgraphs correct at t *and* with speedup ≥ 1.0;
* **Samp. CR**: the share of tasks whose every subgraph is correct at t;
* **Sub. CR**: the share of subgraphs correct at t (timing not required);
* **G-mean**: the geometric-mean speedup over the subgraphs correct at t (with a usable
  speedup);
* **AS**: the aggregated speedup of :func:`compute_scores` over all subgraphs;
* the distribution of the speedups of those correct subgraphs over
  ``< 1.0 | 1.0–1.2 | 1.2–2.0 | ≥ 2.0`` (each bin holds its lower bound).

"Correct at t" is the ``correct_{t,i}`` of ES_t (:meth:`GraphOutcome.correct_at`: the
graph ran and its outputs are allclose at t); N leaves out what scores leave out (sample
errors, graphs too large), so AS and the ratios count the same subgraphs.

A run of a sample of the split's tasks (``bench eval --tasks K``) estimates the split's
figures: its G-mean and AS come with 95 % percentile bootstrap intervals over tasks (the
tasks drawn again with replacement, each with all its subgraphs, :data:`BOOTSTRAP_RESAMPLES`
times from a fixed seed, so the interval is a function of the records alone). Two sample
runs over the same tasks are compared paired (:func:`paired_ratios`): each resample draws
the same tasks for both, so what the tasks share (their size, their family) cancels in
the ratio of their G-means and of their AS.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.markup import escape
from rich.table import Table

from passnet.errors import InputFormatError
from passnet.record import BASELINE_T, TOLERANCE_LEVELS, BenchIndex, EvalRecord, read_bench_index
from passnet.score._io import load_records, split_by_run
from passnet.score._metrics import (
    aggregate_log_terms,
    compute_scores,
    correct_speedups,
    gmean,
    sample_correctness,
    scored_outcomes,
    subgraph_correctness,
)
from passnet.score._outcome import GraphOutcome, SpeedupKind, default_group_of
from passnet.score._result import ScoreReport

__all__ = [
    "BENCH_TABLE_SCHEMA_VERSION",
    "BOOTSTRAP_RESAMPLES",
    "SPEEDUP_BINS",
    "BenchRow",
    "BenchRun",
    "PairedRatio",
    "bench_markdown",
    "bench_notes",
    "bench_row",
    "bench_table",
    "bench_table_dict",
    "load_bench_runs",
    "paired_ratios",
    "speedup_bin",
    "task_intervals",
]

BENCH_TABLE_SCHEMA_VERSION = 1
"""Of the ``--json`` file of ``passnet bench table``."""

BOOTSTRAP_RESAMPLES = 4000
"""Resamples of a sample run's tasks behind its intervals."""
BOOTSTRAP_SEED = 0
INTERVAL = 0.95

SPEEDUP_EDGES = (1.0, 1.2, 2.0)
SPEEDUP_BINS = ("< 1.0", "1.0–1.2", "1.2–2.0", "≥ 2.0")
"""The speedup distribution's bins: a speedup on an edge falls in the bin above it."""


def speedup_bin(speedup: float) -> int:
    """The index in :data:`SPEEDUP_BINS` of ``speedup`` (lower bounds inclusive)."""
    return bisect.bisect_right(SPEEDUP_EDGES, speedup)


@dataclass(frozen=True)
class BenchRun:
    """One run to tabulate: its records, and its ``tasks.json`` where it is a benchmark run."""

    name: str
    records: list[EvalRecord]
    index: BenchIndex | None = None
    path: str = ""


@dataclass(frozen=True)
class BenchRow:
    """One run's Table 1 row and speedup distribution."""

    name: str
    compiler: str
    device: str
    split: str | None
    """The split of a benchmark run (None for records without ``tasks.json``)."""
    tolerance: int
    speedup_kind: str
    n_subgraphs: int
    """Subgraphs scored (N)."""
    n_expected: int | None
    """The split's subgraphs (``tasks.json``): more than N while a run is under way or
    where sample errors are left out; None where unknown."""
    n_excluded: int
    n_tasks: int
    fast_1: float
    sample_cr: float
    subgraph_cr: float
    gmean_speedup: float | None
    aggregated_speedup: float
    bins: tuple[int, ...]
    """Correct subgraphs per :data:`SPEEDUP_BINS`."""
    sampled_from: int | None = None
    """The split's task count where the run is of a sample of its tasks (``tasks.json``)."""
    gmean_interval: tuple[float, float] | None = None
    """A sample run's 95 % bootstrap interval of G-mean over tasks (None otherwise)."""
    as_interval: tuple[float, float] | None = None
    """A sample run's 95 % bootstrap interval of AS over tasks (None otherwise)."""
    graphs: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    """Identities of the run's graphs (graph_hash, else the label): to compare runs."""
    task_sums: tuple[tuple[str, float, float, float, float], ...] = field(
        default=(), repr=False, compare=False
    )
    """A sample run's per-task sums behind its intervals, by task name: (task, Σ log-AS
    terms, subgraphs, Σ log speedups of the correct subgraphs, correct subgraphs)."""
    score: ScoreReport | None = field(default=None, repr=False, compare=False)

    @property
    def n_correct(self) -> int:
        """Subgraphs correct at t with a usable speedup (the distribution's total)."""
        return sum(self.bins)

    def bin_shares(self) -> tuple[float, ...]:
        total = self.n_correct
        return tuple(n / total if total else 0.0 for n in self.bins)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "compiler": self.compiler,
            "device": self.device,
            "split": self.split,
            "n_subgraphs": self.n_subgraphs,
            "n_expected": self.n_expected,
            "n_excluded": self.n_excluded,
            "n_tasks": self.n_tasks,
            "fast_1": self.fast_1,
            "sample_correctness_ratio": self.sample_cr,
            "subgraph_correctness_ratio": self.subgraph_cr,
            "gmean_speedup": self.gmean_speedup,
            "aggregated_speedup": self.aggregated_speedup,
            "sampled_from": self.sampled_from,
            "gmean_speedup_interval": _listed(self.gmean_interval),
            "aggregated_speedup_interval": _listed(self.as_interval),
            "n_correct": self.n_correct,
            "speedup_bins": dict(zip(SPEEDUP_BINS, self.bins, strict=True)),
        }


def _listed(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else list(interval)


def _task_sums(
    scored: Sequence[GraphOutcome], tolerance: int, report: ScoreReport
) -> tuple[tuple[str, float, float, float, float], ...]:
    """Per task (group) of ``scored``, by name: (task, Σ log-AS terms, subgraphs, Σ log
    speedups of the subgraphs correct at ``tolerance``, those subgraphs)."""
    terms = aggregate_log_terms(scored, report.params)
    tasks: dict[str, list[float]] = {}
    for outcome, term in zip(scored, terms, strict=True):
        sums = tasks.setdefault(outcome.group, [0.0, 0.0, 0.0, 0.0])
        sums[0] += term
        sums[1] += 1
        if outcome.scores_speedup_at(tolerance) and outcome.speedup is not None:
            sums[2] += math.log(outcome.speedup)
            sums[3] += 1
    return tuple((name, *tasks[name]) for name in sorted(tasks))  # type: ignore[misc]


def _resampled(sums: tuple[tuple[str, float, float, float, float], ...]) -> np.ndarray:
    """The per-task sums added up over each of :data:`BOOTSTRAP_RESAMPLES` draws of the
    tasks with replacement (rows: resamples; columns: the four sums). The draws depend on
    the number of tasks alone, so two runs over the same tasks get the same draws."""
    table = np.array([row[1:] for row in sums], dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    return table[rng.integers(0, len(table), size=(BOOTSTRAP_RESAMPLES, len(table)))].sum(1)


def _percentiles(logs: np.ndarray) -> tuple[float, float]:
    low, high = np.exp(np.percentile(logs, [100 * (1 - INTERVAL) / 2, 100 * (1 + INTERVAL) / 2]))
    return float(low), float(high)


def _log_means(drawn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per resample: log AS, log G-mean (NaN without a correct subgraph), and which
    resamples have a correct subgraph."""
    timed = drawn[:, 3] > 0
    log_gmean = np.full(len(drawn), np.nan)
    log_gmean[timed] = drawn[timed, 2] / drawn[timed, 3]
    return drawn[:, 0] / drawn[:, 1], log_gmean, timed


def task_intervals(
    scored: Sequence[GraphOutcome], tolerance: int, report: ScoreReport
) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """(G-mean's, AS's) 95 % percentile bootstrap intervals over the tasks (groups) of
    ``scored``, the outcomes ``report`` scored: tasks are drawn again with replacement,
    each with all its subgraphs. None where fewer than two tasks were scored, and G-mean's
    None where no subgraph is correct at ``tolerance``."""
    return _intervals(_task_sums(scored, tolerance, report))


def _intervals(
    sums: tuple[tuple[str, float, float, float, float], ...],
) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """:func:`task_intervals` from the per-task sums (:func:`_task_sums`)."""
    if len(sums) < 2:
        return None, None
    log_as, log_gmean, timed = _log_means(_resampled(sums))
    gmean_interval = _percentiles(log_gmean[timed]) if timed.any() else None
    return gmean_interval, _percentiles(log_as)


@dataclass(frozen=True)
class PairedRatio:
    """One sample run's G-mean and AS over another's on the same tasks, with 95 % paired
    bootstrap intervals (each resample draws the same tasks for both runs)."""

    name: str
    versus: str
    n_tasks: int
    gmean_ratio: float | None
    """None where either run has no correct subgraph."""
    gmean_interval: tuple[float, float] | None
    as_ratio: float
    as_interval: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.name,
            "versus": self.versus,
            "n_tasks": self.n_tasks,
            "gmean_ratio": self.gmean_ratio,
            "gmean_ratio_interval": _listed(self.gmean_interval),
            "aggregated_speedup_ratio": self.as_ratio,
            "aggregated_speedup_ratio_interval": list(self.as_interval),
        }


def paired_ratios(rows: Sequence[BenchRow]) -> list[PairedRatio]:
    """Each later sample run of ``rows`` over the first, where both are samples scored
    over the same tasks (at least two); nothing for other runs."""
    if not rows or not rows[0].task_sums:
        return []
    first = rows[0]
    tasks = [t[0] for t in first.task_sums]
    if len(tasks) < 2:
        return []
    base_as, base_gmean, base_timed = _log_means(_resampled(first.task_sums))
    out = []
    for row in rows[1:]:
        if [t[0] for t in row.task_sums] != tasks:
            continue
        log_as, log_gmean, timed = _log_means(_resampled(row.task_sums))
        both = timed & base_timed
        gmean_ratio = gmean_interval = None
        if row.gmean_speedup and first.gmean_speedup and both.any():
            gmean_ratio = row.gmean_speedup / first.gmean_speedup
            gmean_interval = _percentiles(log_gmean[both] - base_gmean[both])
        out.append(
            PairedRatio(
                name=row.name,
                versus=first.name,
                n_tasks=len(tasks),
                gmean_ratio=gmean_ratio,
                gmean_interval=gmean_interval,
                as_ratio=row.aggregated_speedup / first.aggregated_speedup,
                as_interval=_percentiles(log_as - base_as),
            )
        )
    return out


def _graph_id(record: EvalRecord) -> str:
    return record.graph_hash or f"name:{record.graph}"


def _bench_records(run: BenchRun) -> list[EvalRecord]:
    """A benchmark run's records of its own graphs, compiler, configuration and device;
    records of other evaluations in the folder are not its."""
    index = run.index
    if index is None:
        return run.records
    wanted = {
        (g, index.compiler, t.compiler_config_hash, index.device)
        for t in index.tasks
        for g in t.graphs
    }
    return [r for r in run.records if r.slot in wanted]


def bench_row(
    run: BenchRun,
    *,
    tolerance: int = BASELINE_T,
    speedup_kind: SpeedupKind = "e2e",
    b: float = 0.1,
    p: float = 0.0,
    interpretation: str = "default",
) -> BenchRow:
    """The row of ``run`` at tolerance level ``tolerance`` (see the module docstring).

    A benchmark run's graphs are grouped by the task ``tasks.json`` gives them; other
    records by :func:`default_group_of` (the path before ``/graphs/``). Raises
    ``ValueError`` for a level outside -10..1 and when nothing can be scored.
    """
    if tolerance not in TOLERANCE_LEVELS:
        raise ValueError(
            f"tolerance level must be one of {TOLERANCE_LEVELS[0]}..{TOLERANCE_LEVELS[-1]} "
            f"(numeric correctness), got {tolerance}"
        )
    records = _bench_records(run)
    if run.index is not None:
        task_of = run.index.task_of()
        group: Callable[[EvalRecord], str] = lambda r: task_of[r.graph]  # noqa: E731
    else:
        group = default_group_of
    outcomes = [GraphOutcome.from_record(r, speedup_kind, group) for r in records]
    report = compute_scores(
        outcomes,
        b=b,
        p=p,
        interpretation=interpretation,
        speedup_kind=speedup_kind,
        score_id=run.name,
    )
    scored = scored_outcomes(outcomes)
    speedups = correct_speedups(scored, tolerance)
    bins = [0] * len(SPEEDUP_BINS)
    for s in speedups:
        bins[speedup_bin(s)] += 1
    sample_cr, n_tasks = sample_correctness(scored, tolerance)
    index = run.index
    gmean_interval = as_interval = None
    task_sums: tuple[tuple[str, float, float, float, float], ...] = ()
    if index is not None and index.is_sample:
        task_sums = _task_sums(scored, tolerance, report)
        gmean_interval, as_interval = _intervals(task_sums)
    return BenchRow(
        name=run.name,
        compiler=index.compiler if index else ", ".join(sorted({r.compiler for r in records})),
        device=index.device if index else ", ".join(sorted({r.device for r in records})),
        split=index.split if index else None,
        tolerance=tolerance,
        speedup_kind=speedup_kind,
        n_subgraphs=len(scored),
        n_expected=index.graph_count() if index else None,
        n_excluded=report.n_excluded,
        n_tasks=n_tasks,
        fast_1=sum(1 for s in speedups if s >= 1.0) / len(scored),
        sample_cr=sample_cr,
        subgraph_cr=subgraph_correctness(scored, tolerance),
        gmean_speedup=gmean(speedups) if speedups else None,
        aggregated_speedup=report.score,
        bins=tuple(bins),
        sampled_from=index.sampled_from if index else None,
        gmean_interval=gmean_interval,
        as_interval=as_interval,
        graphs=frozenset(_graph_id(r) for r in records),
        task_sums=task_sums,
        score=report,
    )


def load_bench_runs(name: str, path: str | Path) -> list[BenchRun]:
    """The runs in a results folder (or records/log file) ``path`` named ``name``.

    A benchmark run's folder (with ``tasks.json``) is one run. Otherwise the records are
    split by compiler configuration and device (:func:`split_by_run`), each group a run
    named ``name`` (``name:label`` where there are several).
    """
    records = load_records(path)
    index = read_bench_index(path)
    if index is not None:
        return [BenchRun(name, records, index, str(path))]
    groups = split_by_run(records)
    if not groups:
        raise InputFormatError("no evaluation records", file=path)
    if len(groups) == 1:
        return [BenchRun(name, records, None, str(path))]
    return [BenchRun(f"{name}:{label}", group, None, str(path)) for label, group in groups.items()]


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _speedup(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _estimate(value: float | None, interval: tuple[float, float] | None) -> str:
    """A figure, with its interval where it has one: ``0.846 [0.801, 0.893]``."""
    text = _speedup(value)
    if interval is None or value is None:
        return text
    return f"{text} [{interval[0]:.3f}, {interval[1]:.3f}]"


def _bin_cells(row: BenchRow) -> list[str]:
    return [f"{n} ({_pct(s)}%)" for n, s in zip(row.bins, row.bin_shares(), strict=True)]


TABLE_COLUMNS = (
    "run",
    "N",
    "fast_1 (%)",
    "Samp. CR (%)",
    "Sub. CR (%)",
    "G-mean",
    "AS",
    *(f"s {b}" for b in SPEEDUP_BINS),
)


def _cells(row: BenchRow) -> list[str]:
    n = str(row.n_subgraphs)
    if row.n_expected is not None and row.n_expected != row.n_subgraphs:
        n += f"/{row.n_expected}"
    return [
        row.name,
        n,
        _pct(row.fast_1),
        _pct(row.sample_cr),
        _pct(row.subgraph_cr),
        _estimate(row.gmean_speedup, row.gmean_interval),
        _estimate(row.aggregated_speedup, row.as_interval),
        *_bin_cells(row),
    ]


def bench_notes(rows: Sequence[BenchRow]) -> list[str]:
    """What a reader of the table must know: the tolerance, runs still under way, sample
    errors left out, runs over different graphs."""
    if not rows:
        return []
    notes = [
        f"correct = allclose at t = {rows[0].tolerance} (the ES_t correctness at that level); "
        f"{rows[0].speedup_kind} speedups over eager; fast_1 = correct and speedup ≥ 1.0, of "
        "all N subgraphs; Samp. CR over tasks; G-mean and the distribution over correct "
        "subgraphs (bins hold their lower bound); AS over all subgraphs"
    ]
    for row in rows:
        if row.sampled_from is not None:
            notes.append(
                f"{row.name}: a sample of the {row.sampled_from} tasks of {row.split} "
                f"(bench eval --tasks; {row.n_tasks} task{'' if row.n_tasks == 1 else 's'} scored); "
                "[low, high]: 95% "
                "bootstrap interval over tasks"
            )
        if row.n_expected is not None and row.n_subgraphs + row.n_excluded < row.n_expected:
            notes.append(
                f"{row.name}: {row.n_subgraphs + row.n_excluded} of the {row.n_expected} "
                f"subgraphs of {row.split} have a record (a run under way: resume it)"
            )
        if row.n_excluded:
            notes.append(
                f"{row.name}: {row.n_excluded} subgraphs left out of N (sample errors: eager "
                "itself fails; or too large to evaluate), as scores leave them out"
            )
    for pair in paired_ratios(rows):
        gmean_text = (
            "-"
            if pair.gmean_ratio is None or pair.gmean_interval is None
            else f"×{pair.gmean_ratio:.3f} [{pair.gmean_interval[0]:.3f}, "
            f"{pair.gmean_interval[1]:.3f}]"
        )
        notes.append(
            f"{pair.name} over {pair.versus}, paired on the same {pair.n_tasks} tasks: G-mean "
            f"{gmean_text}, AS ×{pair.as_ratio:.3f} [{pair.as_interval[0]:.3f}, "
            f"{pair.as_interval[1]:.3f}] (95% paired bootstrap interval)"
        )
    sets = {row.name: row.graphs for row in rows}
    if len(rows) > 1 and len({frozenset(g) for g in sets.values()}) > 1:
        first = rows[0]
        shared = frozenset.intersection(*sets.values())
        if not shared:
            notes.append(
                f"these {len(rows)} runs share no graph (by graph_hash or name): their figures "
                "are over different graphs"
            )
        else:
            differ = [r.name for r in rows[1:] if r.graphs != first.graphs]
            notes.append(
                f"the runs cover different graphs ({len(shared)} in all of them; "
                f"{', '.join(differ)} differ from {first.name}): their figures are over "
                "different graphs"
            )
    return notes


def bench_table(rows: Sequence[BenchRow], *, title: str | None = None) -> Table:
    """The rows as a rich table, the notes as its caption."""
    table = Table(title=title)
    for name in TABLE_COLUMNS:
        table.add_column(name, justify="left" if name == "run" else "right")
    for row in rows:
        table.add_row(*_cells(row))
    table.caption = escape("\n".join(bench_notes(rows)))  # "[low, high]" is no markup
    return table


def bench_markdown(rows: Sequence[BenchRow]) -> str:
    """The rows as a Markdown table (for docs), the notes below it."""
    lines = [
        "| " + " | ".join(TABLE_COLUMNS) + " |",
        "|" + "|".join(":---" if c == "run" else "---:" for c in TABLE_COLUMNS) + "|",
    ]
    for row in rows:
        cells = [c.replace("|", "\\|") for c in _cells(row)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = bench_notes(rows)
    return (
        "\n".join(lines)
        + "\n"
        + ("\n" + "\n".join(f"- {n}" for n in notes) + "\n" if notes else "")
    )


def bench_table_dict(rows: Sequence[BenchRow]) -> dict[str, Any]:
    """The ``--json`` document: the rows, the tolerance and speedup kind, the notes."""
    return {
        "schema_version": BENCH_TABLE_SCHEMA_VERSION,
        "tolerance": rows[0].tolerance if rows else BASELINE_T,
        "speedup_kind": rows[0].speedup_kind if rows else "e2e",
        "speedup_bins": list(SPEEDUP_BINS),
        "runs": [row.to_dict() for row in rows],
        "paired": [pair.to_dict() for pair in paired_ratios(rows)],
        "notes": bench_notes(rows),
    }
