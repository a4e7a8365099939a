"""A benchmark split: a folder of task folders (``BENCH/eval-fusible/<task>/``).

A benchmark folder holds ``manifest.json`` and one folder per split; each split folder
holds one PassBench task folder per task (:mod:`passnet.task._task`). Listing a split
validates each task's layout and lists its graph folders, without reading any sample.

A run can evaluate a sample of a split's tasks (:meth:`Split.sample`): the first K tasks of
the split's *sample order*, a fixed order in which every prefix spreads over the source
families in proportion to their share of the split. The order depends on the task folders'
names and families alone, so every compiler's sample of K is the same tasks, and a sample
of K extends to one of a larger K by adding tasks (a run resumes into it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from passnet.task._task import GRAPH_LIST, Task, TaskError, load_task

__all__ = [
    "BENCH_MANIFEST",
    "SAMPLE_ORDER",
    "Split",
    "find_split",
    "is_task_folder",
    "load_split",
    "sample_order",
    "task_family",
]

BENCH_MANIFEST = "manifest.json"
"""A benchmark folder's manifest, beside its split folders."""

SAMPLE_ORDER = "family-stratified-sha256-1"
"""The name of the rule :func:`sample_order` follows; a run of a sample records it, and
runs of samples taken by different rules are not resumed into one another."""


def task_family(task: Task) -> str:
    """The source family of ``task``: its metadata's ``family``, else the family of its
    first graph's parent sample (``timm`` of ``timm/resnet18``), else ``""``."""
    family = task.metadata.get("family")
    if isinstance(family, str) and family:
        return family
    for graph in task.graph_metadata:
        parent = graph.get("parent")
        if isinstance(parent, str) and parent:
            return parent.split("/")[0]
    return ""


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sample_order(tasks: Sequence[Task]) -> list[Task]:
    """``tasks`` in sample order: each family's tasks are ordered by the SHA-256 of their
    folder names, the r-th of a family of n placed at (r + ½)/n, and the families merged
    by that place (ties by family, then folder). Any prefix of K tasks holds each
    family's K·n/N tasks, give or take one."""
    by_family: dict[str, list[Task]] = {}
    for task in tasks:
        by_family.setdefault(task_family(task), []).append(task)
    keyed = []
    for family, members in by_family.items():
        members.sort(key=lambda task: (_digest(task.path.name), task.path.name))
        n = len(members)
        for rank, task in enumerate(members):
            keyed.append(((rank + 0.5) / n, family, task.path.name, task))
    keyed.sort(key=lambda item: item[:3])
    return [item[3] for item in keyed]


@dataclass(frozen=True)
class Split:
    """One split of a benchmark, its tasks in folder-name order."""

    name: str
    path: Path
    tasks: tuple[Task, ...]
    sampled_from: int | None = None
    """The split's task count when ``tasks`` is a sample of them (:meth:`sample`)."""

    def sample(self, k: int) -> Split:
        """The split's first ``k`` tasks in :func:`sample_order`, kept in folder order
        (the whole split where ``k`` covers it). ``k`` must be positive, and the split
        whole: the order places each task by its family's size in the whole split, so a
        sample of a sample would not be the split's sample."""
        if k < 1:
            raise ValueError(f"a sample needs at least one task, got {k}")
        if self.sampled_from is not None:
            raise ValueError("a sample is taken of the whole split, not of a sample of it")
        if k >= len(self.tasks):
            return self
        chosen = {task.path.name for task in sample_order(self.tasks)[:k]}
        kept = tuple(task for task in self.tasks if task.path.name in chosen)
        return replace(self, tasks=kept, sampled_from=len(self.tasks))

    def graph_labels(self, task: Task) -> list[str]:
        """The record labels of ``task``'s graphs: ``<task folder>/<graph_list.txt line>``,
        the same whatever the split folder is called or where it lies."""
        return [f"{task.path.name}/{entry}" for entry in task.graph_entries]


def is_task_folder(path: str | Path) -> bool:
    """Whether ``path`` is a task folder (it holds a ``graph_list.txt``)."""
    path = Path(path)
    return path.is_dir() and (path / GRAPH_LIST).is_file()


def load_split(path: str | Path, name: str | None = None) -> Split:
    """The tasks of the split folder ``path`` (named ``name``, default its folder name).

    Every sub-folder must be a task (hidden ones aside): a sub-folder that is not is a
    :class:`TaskError` naming it (a benchmark folder given where a split is meant says
    which splits it has); so is a split without tasks.
    """
    root = Path(path)
    if not root.is_dir():
        raise TaskError("no such split folder", task=root)
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    not_tasks = [p for p in folders if not is_task_folder(p)]
    if not_tasks:
        splits = [
            p.name for p in folders if any(is_task_folder(c) for c in p.iterdir() if c.is_dir())
        ]
        if splits:
            raise TaskError(
                f"this is a benchmark folder, not a split: name one of its splits "
                f"({', '.join(splits)})",
                task=root,
            )
        raise TaskError(
            f"{not_tasks[0].name}/ is not a task folder (no {GRAPH_LIST}): a split folder "
            "holds task folders only",
            task=root,
        )
    if not folders:
        raise TaskError("the split folder holds no task", task=root)
    return Split(name or root.resolve().name, root.resolve(), tuple(load_task(p) for p in folders))


def find_split(path: str | Path, split: str | None = None) -> Path:
    """The split folder that ``path`` (and ``split``) name: ``path`` itself, or with
    ``split``, the benchmark folder ``path``'s split of that name."""
    root = Path(path)
    if split is None:
        return root
    folder = root / split
    if not folder.is_dir():
        available = (
            sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
            if root.is_dir()
            else []
        )
        raise TaskError(
            f"the benchmark has no split {split!r}"
            + (f" (it has {', '.join(available)})" if available else ""),
            task=root,
        )
    return folder
