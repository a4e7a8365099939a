"""Evaluate a benchmark split: every graph of every task, into one results folder.

The graphs of a split are work items like any others (labels ``<task folder>/graphs/...``),
so a split's run is a :func:`~passnet.runner.run_evaluations` run: the same store, resume,
executors, progress and eval.log. Tasks whose graphs are evaluated with the same compiler
configuration (every task with a compiler that applies no passes, or one pass directory
given for all) run as one run: the executor's slots, prepare workers and shared children
span task boundaries. A pass compiler on the tasks' own pass directories runs task by task.
The run's ``tasks.json`` (:class:`~passnet.record.BenchIndex`) says which task each graph
belongs to; it is written before any graph runs, so an interrupted run keeps it.

A run of a sample of the split's tasks (:meth:`~passnet.task.Split.sample`) says so in
``tasks.json``; a larger sample (or the whole split) resumes into its folder, since the
sample order only adds tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from passnet.errors import CompilerError, StoreError
from passnet.evaluate import EvalSettings, check_compiler
from passnet.record import (
    BenchIndex,
    BenchIndexTask,
    EvalRecord,
    compiler_config_hash,
    read_bench_index,
    write_bench_index,
)
from passnet.runner._executor import Executor
from passnet.runner._plan import WorkItem
from passnet.runner._run import check_run, run_evaluations
from passnet.task import SAMPLE_ORDER, Split, Task

__all__ = [
    "SplitPlan",
    "SplitSummary",
    "plan_split",
    "run_split",
    "split_index",
    "start_split_run",
]


@dataclass(frozen=True)
class SplitPlan:
    """What a split's run evaluates: its index and, per compiler configuration, the
    configuration and its work items (in split order)."""

    index: BenchIndex
    runs: tuple[tuple[dict[str, Any], tuple[WorkItem, ...]], ...]


@dataclass
class SplitSummary:
    """A split's run: every graph's record (split order) and what was new."""

    index: BenchIndex
    records: list[EvalRecord]
    evaluated: int
    resumed: int
    out_dir: Path


def _task_config(
    task: Task, config: dict[str, Any], pass_dir: Path | None, applies_passes: bool
) -> dict[str, Any]:
    """A task's compiler configuration: a pass compiler gets the task's pass directories
    (``pass_dir`` for every task when given), then what the command line sets."""
    if not applies_passes:
        return dict(config)
    own = task.compiler_config()
    if pass_dir is not None:
        own["pass_dir"] = str(Path(pass_dir).resolve())
    return {**own, **config}


def plan_split(
    split: Split,
    compiler: str,
    device: str,
    compiler_config: dict[str, Any] | None = None,
    pass_dir: Path | None = None,
) -> SplitPlan:
    """The runs of ``split`` with ``compiler`` on ``device``: one per distinct task
    configuration. ``pass_dir`` replaces each task's own passes (a pass compiler only)."""
    applies = check_compiler(compiler, check_config=False).applies_passes
    if pass_dir is not None and not applies:
        raise CompilerError(
            f"compiler {compiler!r} applies no passes: a pass directory needs a pass "
            "compiler (pass_mgr, pass_mgr+inductor)",
            compiler=compiler,
        )
    config = dict(compiler_config or {})
    configs = [_task_config(task, config, pass_dir, applies) for task in split.tasks]
    index = split_index(split, compiler, device, configs)
    groups: dict[str, tuple[dict[str, Any], list[WorkItem]]] = {}
    for task, cfg, entry in zip(split.tasks, configs, index.tasks, strict=True):
        items = groups.setdefault(entry.compiler_config_hash, (cfg, []))[1]
        items.extend(WorkItem(path, label) for path, label in zip(task.graphs, entry.graphs))
    return SplitPlan(index, tuple((cfg, tuple(items)) for cfg, items in groups.values()))


def split_index(
    split: Split, compiler: str, device: str, configs: Sequence[dict[str, Any]]
) -> BenchIndex:
    """The ``tasks.json`` of a run of ``split`` (or of its sample) with ``compiler`` on
    ``device``, the graphs of ``split.tasks[i]`` evaluated with configuration ``configs[i]``."""
    if len(configs) != len(split.tasks):
        raise ValueError(f"{len(configs)} configurations for {len(split.tasks)} tasks")
    tasks = tuple(
        BenchIndexTask(
            task.name,
            task.path.name,
            compiler_config_hash(compiler, cfg),
            tuple(split.graph_labels(task)),
        )
        for task, cfg in zip(split.tasks, configs, strict=True)
    )
    return BenchIndex(
        split.name,
        compiler,
        device.split(":")[0],
        tasks,
        sampled_from=split.sampled_from,
        sample_order=SAMPLE_ORDER if split.sampled_from is not None else None,
    )


def start_split_run(out_dir: str | Path, index: BenchIndex) -> None:
    """Claim ``out_dir`` for the benchmark run ``index``: a folder that holds another
    benchmark run (another split, compiler, device, task set or configuration) is refused,
    as its scores would mix two runs (a sample's run may grow into a larger sample of the
    same order, or into the whole split); then ``tasks.json`` is written, before anything
    is evaluated, so that an interrupted run keeps it."""
    out = Path(out_dir)
    _check_index(out, index)
    write_bench_index(out, index)


def _check_index(out_dir: Path, index: BenchIndex) -> None:
    """Refuse a results folder that holds another benchmark run (another split, compiler,
    device, task set or configuration): its scores would mix two runs. A sample's run
    may grow into a larger sample of the same order, or into the whole split."""
    found = read_bench_index(out_dir)
    if found is None:
        return
    found = replace(found, schema_version=index.schema_version)  # an older file, same run
    if found == index or _grows(found, index):
        return
    raise StoreError(
        f"this folder holds another benchmark run ({_difference(found, index)}): use another --out",
        path=out_dir / "tasks.json",
    )


def _same_run(found: BenchIndex, index: BenchIndex) -> bool:
    return (found.split, found.compiler, found.device) == (
        index.split,
        index.compiler,
        index.device,
    )


def _same_sample_rule(found: BenchIndex, index: BenchIndex) -> bool:
    """Whether ``index``, where it is a sample, samples the same split by the same rule."""
    return not index.is_sample or (index.sample_order, index.sampled_from) == (
        found.sample_order,
        found.sampled_from,
    )


def _grows(found: BenchIndex, index: BenchIndex) -> bool:
    """Whether ``index`` extends the sample ``found``: the same run and rule, and every
    task of ``found`` in it as it was (a larger sample, or the whole split)."""
    if not (found.is_sample and _same_run(found, index) and _same_sample_rule(found, index)):
        return False
    now = {t.folder: t for t in index.tasks}
    return all(now.get(t.folder) == t for t in found.tasks)


def _difference(found: BenchIndex, index: BenchIndex) -> str:
    """What sets the run in the folder (``found``) apart from this one, in words."""
    for field in ("split", "compiler", "device"):
        if getattr(found, field) != getattr(index, field):
            return f"{field} {getattr(found, field)!r} there, {getattr(index, field)!r} now"
    there = {t.folder: t for t in found.tasks}
    now = {t.folder: t for t in index.tasks}
    configs = sorted(
        f
        for f in now
        if f in there and there[f].compiler_config_hash != now[f].compiler_config_hash
    )
    if configs:
        return f"another compiler configuration (first task: {configs[0]})"
    if found.is_sample and index.sample_order not in (None, found.sample_order):
        return f"a sample in order {found.sample_order!r}, {index.sample_order!r} now"
    if found.is_sample and not _same_sample_rule(found, index):
        return f"a sample of a split of {found.sampled_from} tasks, of {index.sampled_from} now"
    if set(now) < set(there) and all(there[f] == task for f, task in now.items()):
        held = (
            f"a sample of {len(there)} of the split's {found.sampled_from} tasks"
            if found.is_sample
            else f"all {len(there)} tasks of the split"
        )
        return f"{held}; this run asks for {len(now)}: give --tasks {len(there)} or more"
    apart = sorted(set(there) ^ set(now))
    if apart:
        return f"the split's tasks differ (first: {apart[0]})"
    return "the tasks' graphs differ"


def run_split(
    plan: SplitPlan,
    *,
    out_dir: str | Path,
    device: str = "cpu",
    settings: EvalSettings | None = None,
    executor: Executor | None = None,
    console: Console | None = None,
    **run_options: Any,
) -> SplitSummary:
    """Evaluate every graph of a planned split into ``out_dir`` (resuming what is there).

    ``run_options`` go to :func:`run_evaluations` as they are (``jobs``,
    ``prepare_workers``, ``overlap``, ``overlap_scope``, ``echo_logs``). Before anything is
    written, each run is checked (:func:`check_run`: samples, device, configuration) and a
    folder holding another benchmark run refused; then ``tasks.json`` is written.
    """
    out = Path(out_dir)
    index = plan.index
    settings = settings or EvalSettings()
    for cfg, items in plan.runs:
        check_run(list(items), index.compiler, cfg, device, settings)
    start_split_run(out, index)
    by_label: dict[str, EvalRecord] = {}
    evaluated = resumed = 0
    for cfg, items in plan.runs:
        summary = run_evaluations(
            list(items),
            compiler=index.compiler,
            compiler_config=cfg,
            device=device,
            settings=settings,
            out_dir=out,
            executor=executor,
            console=console,
            **run_options,
        )
        by_label.update((r.graph, r) for r in summary.records)
        evaluated += summary.evaluated
        resumed += summary.resumed
    order = [g for t in index.tasks for g in t.graphs]
    records = [by_label[g] for g in order if g in by_label]
    return SplitSummary(index, records, evaluated, resumed, out.resolve())
