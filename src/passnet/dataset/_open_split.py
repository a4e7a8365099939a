"""The split a command names: ``SPLIT [--split NAME] [--tasks K]``, as every benchmark command
resolves it (``passnet bench eval``, ``passnet agent run``).

SPLIT is a split folder, a benchmark folder with ``split``, or a bare split name that is no
folder here: the split of the benchmark shipped with passnet (:func:`bench_path`). With
``tasks``, the split's sample of that many tasks (:meth:`passnet.task.Split.sample`): every
command that takes a sample of K takes the same tasks.
"""

from __future__ import annotations

from pathlib import Path

from passnet.errors import PassnetError
from passnet.task import Split, find_split, load_split

__all__ = ["open_split", "split_folder"]


def _shipped_split(name: str) -> Path:
    """The folder of the shipped benchmark's split ``name``."""
    try:
        # looked up on the package, where an installation without the shipped benchmark
        # (or a test standing in for one) has no bench_path
        from passnet.dataset import bench_path  # type: ignore[attr-defined]
    except ImportError:
        raise PassnetError(
            f"no shipped benchmark in this installation: {name!r} is no folder either; give "
            "a split folder (BENCH/eval-fusible) or a benchmark folder with --split NAME"
        ) from None
    folder = Path(bench_path(name))
    # the shipped benchmark's folder, or already its split's
    return folder / name if (folder / name).is_dir() else folder


def split_folder(spec: str, split: str | None = None) -> tuple[Path, str]:
    """(the split folder, the split's name) that ``spec`` (and ``split``) name: a split
    folder, a benchmark folder and its split ``split``, or a bare name of a shipped split.
    Anything else is a :class:`~passnet.errors.PassnetError` saying what was expected."""
    path = Path(spec)
    if path.exists():
        folder = find_split(path, split)
        return folder, split or folder.resolve().name
    if split is None and "/" not in spec and "\\" not in spec:
        return _shipped_split(spec), spec
    raise PassnetError("no such split or benchmark folder", path=spec)


def open_split(spec: str, split: str | None = None, tasks: int | None = None) -> Split:
    """The split ``spec`` names (:func:`split_folder`), its tasks loaded and, with
    ``tasks``, its sample of that many tasks in the split's sample order. A ``tasks`` below
    1 is refused before the split is read."""
    if tasks is not None and tasks < 1:
        raise PassnetError(f"--tasks must be a positive number of tasks, got {tasks}")
    folder, name = split_folder(spec, split)
    loaded = load_split(folder, name)
    return loaded.sample(tasks) if tasks is not None else loaded
