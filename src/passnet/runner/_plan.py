"""Turn command-line PATHs into work items: (sample folder, label used in records)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from passnet.errors import InputFormatError
from passnet.sample import find_samples, is_sample_dir

__all__ = ["WorkItem", "plan_items"]


@dataclass(frozen=True)
class WorkItem:
    path: Path
    label: str
    """Stable name of the graph in records: the path relative to the PATH it was found under
    (for a list file: relative to the folder its samples have in common)."""


def plan_items(paths: list[str | Path]) -> list[WorkItem]:
    """Samples under each PATH (a sample, a folder searched recursively, or a list file)."""
    items: dict[Path, tuple[WorkItem, Path]] = {}
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise InputFormatError("no such sample, folder or list file", file=root)
        # Labels come from resolved paths, so they do not depend on the current directory
        # or on how PATH was spelled (`.`, `a/../b`, absolute or relative).
        whole = root.resolve()
        found = find_samples([root])
        if root.is_file():
            # A list file: labels from the samples' own common folder, so a list of absolute
            # paths names its graphs as a search of that folder does (runs line up by graph).
            base = Path(os.path.commonpath([s.resolve().parent for s in found])) if found else whole
        else:
            base = whole.parent if is_sample_dir(root) else whole
        for sample in found:
            resolved = sample.resolve()
            # Under a searched folder the path keeps the links it was found through
            # (``set/link/x``), which are inside what was asked for; the same real sample
            # reached twice (two links, a link and its target) is one work item.
            below = _below(sample, root)
            target = resolved if below is None else whole / below
            label = Path(os.path.relpath(target, base)).as_posix()
            items.setdefault(resolved, (WorkItem(sample, label), target))
    return _unique_labels(list(items.values()))


def _below(sample: Path, root: Path) -> Path | None:
    """``sample``'s path below ``root`` as found there (no ``..``), or None if not below it."""
    try:
        below = sample.relative_to(root)
    except ValueError:
        return None
    return None if ".." in below.parts else below


def _unique_labels(items: list[tuple[WorkItem, Path]]) -> list[WorkItem]:
    """Distinct samples that got the same label (``a/good`` and ``b/good`` given as PATHs)
    get longer labels, from more of their path, until no two labels are alike: records, the
    resume key and scores tell graphs apart by label. A lengthened label is checked
    against all the others again (``a/good`` lengthened can meet ``c``'s ``a/good``). Each
    item comes with the absolute path its label is taken from."""
    labels = [item.label for item, _ in items]
    paths = [path for _, path in items]
    depth = [len(Path(label).parts) for label in labels]
    while True:
        by_label: dict[str, list[int]] = {}
        for i, label in enumerate(labels):
            by_label.setdefault(label, []).append(i)
        grow = [
            i
            for clash in by_label.values()
            if len(clash) > 1
            for i in clash
            if depth[i] < len(paths[i].parts)
        ]
        if not grow:
            break
        for i in grow:
            depth[i] += 1
            labels[i] = Path(*paths[i].parts[-depth[i] :]).as_posix()
    return [WorkItem(item.path, label) for (item, _), label in zip(items, labels)]
