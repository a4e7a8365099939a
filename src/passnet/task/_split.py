"""A benchmark split: a folder of task folders (``BENCH/eval-fusible/<task>/``).

A benchmark folder holds ``manifest.json`` and one folder per split; each split folder
holds one PassBench task folder per task (:mod:`passnet.task._task`). Listing a split
validates each task's layout and lists its graph folders, without reading any sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from passnet.task._task import GRAPH_LIST, Task, TaskError, load_task

__all__ = ["BENCH_MANIFEST", "Split", "find_split", "load_split"]

BENCH_MANIFEST = "manifest.json"
"""A benchmark folder's manifest, beside its split folders."""


@dataclass(frozen=True)
class Split:
    """One split of a benchmark, its tasks in folder-name order."""

    name: str
    path: Path
    tasks: tuple[Task, ...]

    def graph_labels(self, task: Task) -> list[str]:
        """The record labels of ``task``'s graphs: ``<task folder>/<graph_list.txt line>``,
        the same whatever the split folder is called or where it lies."""
        return [f"{task.path.name}/{entry}" for entry in task.graph_entries]


def _is_task(path: Path) -> bool:
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
    not_tasks = [p for p in folders if not _is_task(p)]
    if not_tasks:
        splits = [p.name for p in folders if any(_is_task(c) for c in p.iterdir() if c.is_dir())]
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
