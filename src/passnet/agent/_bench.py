"""A policy as a row of the benchmark table: its episodes on a split's tasks, and the records
of what each episode submitted in one benchmark run folder.

``run_agent_split`` runs one episode per task of a split (or of the split's sample, the same
tasks ``passnet bench eval --tasks K`` takes) as :func:`~passnet.agent.run_agent` does, and
keeps in the output folder, beside ``trajectories.jsonl`` and ``episodes/``, what
``passnet bench eval`` keeps in its: ``tasks.json`` (:class:`~passnet.record.BenchIndex`,
written before the first episode), ``results.jsonl`` / ``results.sqlite`` / ``eval.log``
with the records of every task's graphs. Those records are not a second evaluation: they
are the records of the final evaluation the episode's reward comes from (the submission's,
with full timing, in the isolated evaluation child), under the split's labels
(``<task folder>/graphs/...``). An episode that ends without a submission is scored as
the task's pass_dir as given (:meth:`~passnet.agent.PassEnv.submitted_evaluation`).

The configuration of a task's records is ``pass_mgr`` on the episode's private pass_dir
(``episodes/<episode>/pass_dir``, whose path is fixed by the task and the policy before the
episode starts), so ``tasks.json`` can name each task's configuration hash up front, and a
rerun is checked against it as ``bench eval``'s is: a folder that holds another run is
refused, a sample grows into a larger one.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from passnet.agent._env import EnvConfig, PassEnv
from passnet.agent._errors import AgentError
from passnet.agent._evaluator import pass_dir_config
from passnet.agent._loop import AgentRunSummary, episode_name, run_agent
from passnet.agent._policy import Policy
from passnet.record import BenchIndex, BenchIndexTask, EvalRecord, render_log
from passnet.runner import Executor, ResultStore, WorkItem, check_run, split_index, start_split_run
from passnet.task import TASK_COMPILER, Split, Task

__all__ = ["AgentSplitSummary", "episode_pass_dir", "run_agent_split"]

log = logging.getLogger(__name__)

EVAL_LOG = "eval.log"


@dataclass
class AgentSplitSummary:
    """What :func:`run_agent_split` did: the episodes, and the benchmark run they make."""

    agent: AgentRunSummary
    index: BenchIndex
    records: list[EvalRecord]
    """Every task's records that the folder holds, in split order."""
    out_dir: Path


def episode_pass_dir(out_dir: str | Path, task: Task, model: str) -> Path:
    """The private pass_dir of ``model``'s episode on ``task`` in the run folder ``out_dir``
    (absolute: the configuration of the episode's records names it)."""
    return (Path(out_dir) / "episodes" / episode_name(task, model) / "pass_dir").resolve()


def run_agent_split(
    split: Split,
    make_policy: Callable[[], Policy],
    out_dir: str | Path,
    *,
    config: EnvConfig | None = None,
    workers: int = 1,
    jobs: int = 1,
    max_tokens: int | None = None,
    max_model_errors: int = 3,
    executor: Executor | None = None,
) -> AgentSplitSummary:
    """Run ``make_policy``'s episodes on every task of ``split`` into ``out_dir``, a
    benchmark run folder (see the module docstring) that ``passnet bench table`` and
    ``passnet report`` read.

    Before any episode: every task's run is checked (:func:`~passnet.runner.check_run`:
    samples, device, configuration), a folder holding another benchmark run is refused and
    ``tasks.json`` written. A task is done when its trajectory is in ``trajectories.jsonl``
    and each of its graphs has a record; a rerun runs the others. An episode whose
    submitted pass directory left a graph without a record (it could not be evaluated at
    all) is a failed episode: named in the summary, its trajectory not appended, run again
    by a rerun; nothing is left out of the row without saying so.
    """
    config = config or EnvConfig()
    out = Path(out_dir).resolve()
    model = make_policy().name
    configs = [pass_dir_config(t, episode_pass_dir(out, t, model)) for t in split.tasks]
    index = split_index(split, TASK_COMPILER, config.device, configs)
    for task, entry in zip(split.tasks, index.tasks, strict=True):
        items = [WorkItem(p, label) for p, label in zip(task.graphs, entry.graphs, strict=True)]
        # checked with the task's own pass_dir: the episode's copy of it does not exist yet
        cfg = pass_dir_config(task, task.pass_dir)
        check_run(items, TASK_COMPILER, cfg, config.device, config.final_settings)
    start_split_run(out, index)
    entries = {t.path.name: entry for t, entry in zip(split.tasks, index.tasks, strict=True)}
    store = ResultStore(out)
    lock = threading.Lock()

    def finished(task: Task) -> bool:
        entry = entries[task.path.name]
        recorded = {r.graph for r in store if r.slot[1:] == _slot(index, entry)}
        return recorded >= set(entry.graphs)

    def keep(task: Task, env: PassEnv) -> None:
        evaluation = env.submitted_evaluation()
        entry = entries[task.path.name]
        label_of = dict(zip(task.graph_entries, entry.graphs, strict=True))
        records = [replace(r, graph=label_of[r.graph]) for r in evaluation.records]
        missing = set(entry.graphs) - {r.graph for r in records}
        if missing:
            raise AgentError(
                f"{len(missing)} of the task's {len(entry.graphs)} graphs have no record of "
                f"the submitted pass directory ({evaluation.problem or 'not evaluated'}); "
                "rerun to run its episode again",
                task=task.name,
            )
        wrong = [r.graph for r in records if r.slot[1:] != _slot(index, entry)]
        if wrong:  # the evaluation and tasks.json disagree: the row would drop these records
            raise AgentError(
                "the submission's records are not of the configuration tasks.json names",
                task=task.name,
                graph=wrong[0],
            )
        with lock:
            _log_records(out / EVAL_LOG, records)
            for rec in records:
                store.add(rec)

    try:
        agent = run_agent(
            split.tasks,
            make_policy,
            out,
            config=config,
            workers=workers,
            jobs=jobs,
            max_tokens=max_tokens,
            max_model_errors=max_model_errors,
            executor=executor,
            finished=finished,
            keep=keep,
        )
        wanted = {(g, *_slot(index, t)) for t in index.tasks for g in t.graphs}
        by_label = {r.graph: r for r in store if r.slot in wanted}
    finally:
        store.close()
    records = [by_label[g] for t in index.tasks for g in t.graphs if g in by_label]
    return AgentSplitSummary(agent, index, records, out)


def _slot(index: BenchIndex, entry: BenchIndexTask) -> tuple[str, str, str]:
    """(compiler, configuration hash, device) of a task's records in the run ``index``."""
    return (index.compiler, entry.compiler_config_hash, index.device)


def _log_records(path: Path, records: list[EvalRecord]) -> None:
    """Append the records' PassNet log entries to the run's ``eval.log`` (before they are
    stored, as the runner does: a kill between leaves a logged record, never a stored one
    missing from the log)."""
    with open(path, "a", encoding="utf-8") as log_file:
        for rec in records:
            log_file.write("\n".join(render_log(rec)) + "\n")
        log_file.flush()
        os.fsync(log_file.fileno())
