"""The reward: a real evaluation of a pass directory on a task's graphs.

Every graph is evaluated by the runner (:func:`passnet.runner.run_evaluations`) with the
``pass_mgr`` compiler, in the isolated evaluation child, from a results folder of its
own; the scores come from the records (:func:`passnet.score.compute_scores`). Nothing
the pass directory contains is imported or run here: what it computes, and what it
reports about itself, never reaches the reward except through the harness's records.

The reward is the aggregated score AS of the records when the submitted passes ran
(every graph evaluated, none ``pass_rejected``, something to score), and
:data:`MIN_REWARD` otherwise: a pass directory that the integrity defenses rejected on any
graph (a pass that cheats never scores), one that could not be evaluated at all (a broken
manifest, a file that does not parse or import: ``pass_rejected`` too), or one with
nothing to score. AS is a weighted geometric mean of positive numbers, so it is above 0
for every pass that runs, however slow, and :data:`MIN_REWARD` (-1) is strictly below it:
cheating never pays more than honest work. An empty pass directory (every graph
``pass_mismatch``) runs and earns AS = ``b``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from passnet.agent._errors import AgentError
from passnet.errors import PassnetError
from passnet.evaluate import EvalSettings, probe_device
from passnet.record import EvalRecord
from passnet.runner import (
    Executor,
    LocalExecutor,
    WorkItem,
    check_device,
    local_devices,
    run_evaluations,
)
from passnet.score import ScoreReport, compute_scores
from passnet.status import Status
from passnet.task import TASK_COMPILER, Task

__all__ = [
    "MIN_REWARD",
    "OUTCOMES",
    "Evaluation",
    "evaluate_pass_dir",
    "local_executor",
    "pass_dir_config",
    "quick_settings",
    "reward_of",
]

log = logging.getLogger(__name__)


MIN_REWARD = -1.0
"""What an episode earns when no submitted pass ran: the passes were rejected, the pass
directory could not be evaluated or scored, or nothing was submitted. Strictly below every
AS (AS > 0; in floating point AS >= 0, the exponential of a finite mean)."""

OUTCOMES = ("ran", "rejected", "unevaluable")
"""What became of an evaluated pass directory (:attr:`Evaluation.outcome`): its passes
ran (reward AS), the integrity defenses rejected them on a graph, or nothing could be
evaluated or scored (both: :data:`MIN_REWARD`)."""


def reward_of(records: Sequence[EvalRecord], score: ScoreReport | None) -> float:
    """The reward of an evaluation: AS of ``score`` when the passes ran, else
    :data:`MIN_REWARD` (a record ``pass_rejected``, or no score)."""
    if score is None or any(r.status is Status.PASS_REJECTED for r in records):
        return MIN_REWARD
    return score.score


QUICK_GRAPHS_PER_CHILD = 64
"""How many of a call's graphs ``pass_evaluator`` evaluates in one child (per device slot)."""


def quick_settings(base: EvalSettings | None = None) -> EvalSettings:
    """What ``pass_evaluator`` times with: 5 warm-up and 20 timed calls per side, exactly,
    and up to :data:`QUICK_GRAPHS_PER_CHILD` graphs in one evaluation child, so that a
    call pays the child's start and the pass directory's kernel compiles once, not once
    per graph (the final evaluation of a submission uses the full settings: a fresh child
    per graph)."""
    base = base or EvalSettings()
    fields = {
        **base.to_dict(),
        "warmup": 5,
        "trials": 20,
        "adaptive": False,
        "min_warmup_s": 0.0,
        "graphs_per_child": QUICK_GRAPHS_PER_CHILD,
    }
    return EvalSettings(**fields)


def local_executor(device: str, jobs: int = 1) -> LocalExecutor:
    """The executor of agent evaluations on this machine: ``jobs`` slots (on CUDA, one per
    GPU), shared by every episode or request that uses it. Checked once, in the calling
    thread: the device exists (which also loads the compiler registry's plugins before any
    worker thread asks for them) and, on CUDA, an evaluation child can use it."""
    import torch

    check_device(TASK_COMPILER, device)
    executor = LocalExecutor(local_devices(device, jobs, torch.cuda.device_count()))
    if device.startswith("cuda"):
        slot = executor.pool.slots[0]
        problem = probe_device(slot)
        if problem is not None:
            executor.close()
            raise AgentError(f"an evaluation child cannot use {slot}: {problem}", device=device)
    return executor


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of a pass directory on (some of) a task's graphs."""

    records: tuple[EvalRecord, ...]
    """One per graph evaluated, in the task's order."""
    reward: float
    """What the environment pays: AS, or :data:`MIN_REWARD` (see the module docstring)."""
    score: ScoreReport | None = None
    """The score of the records (None when nothing could be scored)."""
    problem: str | None = None
    """Why nothing was evaluated or scored (a broken manifest, only broken samples)."""
    elapsed_s: float = 0.0
    settings: EvalSettings = field(default_factory=EvalSettings)
    out_dir: Path | None = None
    """The results folder (results.jsonl, eval.log) of this evaluation."""

    @property
    def as_score(self) -> float | None:
        """The aggregated score AS of the records (None when nothing could be scored)."""
        return self.score.score if self.score is not None else None

    @property
    def es(self) -> dict[int, float]:
        """ES_t per tolerance level t ({} when nothing could be scored)."""
        return dict(self.score.es) if self.score is not None else {}

    @property
    def rejected(self) -> bool:
        """The integrity defenses rejected the passes on at least one graph."""
        return any(r.status is Status.PASS_REJECTED for r in self.records)

    @property
    def outcome(self) -> str:
        """One of :data:`OUTCOMES`: ``ran``, ``rejected`` or ``unevaluable``."""
        if self.rejected:
            return "rejected"
        return "unevaluable" if self.score is None else "ran"

    def phase_seconds(self) -> dict[str, float]:
        """Seconds summed over the records, split into ``start`` (the evaluation child's
        start), ``compile`` (load and compile), ``timing`` (the timed calls), ``check``
        (correctness calls and comparisons) and ``total`` (each evaluation's wall time)."""
        out = dict.fromkeys(("start", "compile", "timing", "check", "total"), 0.0)
        for rec in self.records:
            for phase, seconds in rec.phases_s.items():
                key = _PHASE_GROUP.get(phase)
                if key is not None:
                    out[key] += seconds
        return out


_PHASE_GROUP = {
    "process_start": "start",
    "load": "compile",
    "compile": "compile",
    "measure": "timing",
    "compiled_run": "check",
    "eager": "check",
    "compare": "check",
    "compiled_recheck": "check",
    "eager_recheck": "check",
    "compare_recheck": "check",
    "total": "total",
}


def pass_dir_config(task: Task, pass_dir: Path) -> dict[str, str]:
    """The ``pass_mgr`` configuration :func:`evaluate_pass_dir` evaluates ``pass_dir`` with
    on ``task`` (the task's const_pass_dir kept): its records carry this configuration's
    hash."""
    return {**task.compiler_config(), "pass_dir": str(pass_dir)}


def evaluate_pass_dir(
    task: Task,
    pass_dir: Path,
    out_dir: Path,
    *,
    settings: EvalSettings,
    device: str = "cpu",
    graphs: Sequence[str] | None = None,
    executor: Executor | None = None,
    b: float = 0.1,
) -> Evaluation:
    """Evaluate ``pass_dir`` (with the task's const_pass_dir) on the task's graphs.

    ``graphs`` limits it to those graph entries (graph_list.txt lines); ``executor`` runs
    the evaluations (default: one local slot on ``device``). ``out_dir`` must be a new
    folder. Problems of the pass directory (a broken manifest, a package its files import
    that this machine lacks) come back as :attr:`Evaluation.problem`, not as exceptions.
    """
    t0 = time.perf_counter()
    items = [
        WorkItem(path, entry)
        for path, entry in zip(task.graphs, task.graph_entries)
        if graphs is None or entry in graphs
    ]
    config = pass_dir_config(task, pass_dir)

    def ended(problem: str, records: tuple[EvalRecord, ...] = ()) -> Evaluation:
        return Evaluation(
            records, MIN_REWARD, None, problem, time.perf_counter() - t0, settings, out_dir
        )

    if not items:
        return ended("no graph of the task was selected")
    from rich.console import Console

    try:
        summary = run_evaluations(
            items,
            compiler=TASK_COMPILER,
            compiler_config=config,
            device=device,
            settings=settings,
            out_dir=out_dir,
            executor=executor,
            console=Console(quiet=True),
            echo_logs=False,
        )
    except PassnetError as exc:
        return ended(f"the pass directory cannot be evaluated: {exc}")
    records = tuple(summary.records)
    try:
        report = compute_scores(records, b=b, score_id=task.name, group_of=lambda r: task.name)
    except ValueError as exc:
        return ended(f"nothing to score: {exc}", records)
    reward = reward_of(records, report)
    return Evaluation(records, reward, report, None, time.perf_counter() - t0, settings, out_dir)
