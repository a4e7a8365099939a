"""Turn command-line PATHs into work items: (sample folder, label used in records)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from passnet.errors import InputFormatError
from passnet.sample import find_samples, is_sample_dir

__all__ = ["WorkItem", "plan_items"]


@dataclass(frozen=True)
class WorkItem:
    path: Path
    label: str
    """Stable name of the graph in records: the path relative to the PATH it was found under."""


def plan_items(paths: list[str | Path]) -> list[WorkItem]:
    """Samples under each PATH (a sample, a folder searched recursively, or a list file)."""
    items: dict[Path, WorkItem] = {}
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise InputFormatError("no such sample, folder or list file", file=root)
        base = root.parent if (root.is_file() or is_sample_dir(root)) else root
        for sample in find_samples([root]):
            try:
                label = sample.resolve().relative_to(base.resolve()).as_posix()
            except ValueError:
                label = sample.as_posix()
            items.setdefault(sample.resolve(), WorkItem(sample, label))
    return list(items.values())
