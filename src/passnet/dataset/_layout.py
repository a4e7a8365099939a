"""Where a batch stage writes each sample: ``OUT/<name>/``, ``name`` its place under a root.

``decompose`` and ``generalize`` write each sample's outputs under ``OUT/<name>/``, where
``name`` is the sample folder's path relative to a **root** folder. The root does not
depend on which other samples are in the batch, so a corpus processed whole or in
chunks (resumed across stops, split over machines) writes the same files:

1. the root the caller names (``--root``);
2. else the root recorded in ``OUT``'s records by an earlier run, if every sample lies
   under it: a later chunk into the same ``OUT`` lands where the whole run put it;
3. else the common folder of the samples' parent folders: the corpus folder for a
   corpus (``OUT/mmseg/OCRNet_R101``), the folder holding it for one sample.

A sample outside the root, or two samples given one name, is a
:class:`~passnet.errors.DatasetError` raised before any work starts.

The same root names each sample's *parent* in the files the stages write
(``graph_net.json`` ``subgraph.parent``, ``generalization.parent``):
:func:`relative_name` writes it, :func:`resolve_name` reads it back, so those files
do not depend on the folders the stage ran in.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from passnet.errors import DatasetError

__all__ = ["output_root", "relative_name", "resolve_name", "resolve_root", "sample_names"]


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_root(
    samples: Sequence[Path], root: str | Path | None = None, recorded: str | Path | None = None
) -> Path:
    """The root the samples are named relative to (resolved), by the rules of the module."""
    resolved = [p.resolve() for p in samples]
    if root is not None:
        return Path(root).resolve()
    if recorded:
        rec = Path(recorded).resolve()
        if all(_under(p, rec) and p != rec for p in resolved):
            return rec
    if not resolved:
        return Path.cwd().resolve()
    return Path(os.path.commonpath([str(p.parent) for p in resolved]))


def output_root(
    out: Path, samples: Sequence[Path], root: str | Path | None, recorded: str | Path | None
) -> Path:
    """:func:`resolve_root` for a run into ``out``, whose earlier records named their
    samples relative to ``recorded``: a run that would name them relative to another root
    is refused (its outputs would not line up with those already in ``out``)."""
    chosen = resolve_root(samples, root, recorded)
    if recorded and Path(recorded) != chosen:
        raise DatasetError(
            f"{out} holds samples named relative to {recorded}; this run would name them "
            f"relative to {chosen}: give --root {recorded} or another output folder",
            file=out,
        )
    return chosen


def sample_names(samples: Sequence[Path], root: Path) -> list[str]:
    """Each sample's path relative to ``root`` (POSIX separators)."""
    names: list[str] = []
    seen: dict[str, Path] = {}
    for p in samples:
        real = p.resolve()
        if not _under(real, root) or real == root:
            raise DatasetError(
                f"sample is not under the root {root}: name a root that holds every sample "
                "(--root)",
                sample=p,
            )
        name = real.relative_to(root).as_posix()
        if name in seen and seen[name] != real:
            raise DatasetError(
                f"two samples would be written to one folder {name!r}: {seen[name]} and {real}",
                sample=p,
            )
        seen[name] = real
        names.append(name)
    return names


def relative_name(path: str | Path, root: str | Path) -> str:
    """How a written file names the sample ``path``: its path relative to ``root`` (POSIX
    separators) when it lies under it, else its resolved absolute path (no root applies)."""
    real, base = Path(path).resolve(), Path(root).resolve()
    if real != base and _under(real, base):
        return real.relative_to(base).as_posix()
    return str(real)


def resolve_name(name: str, root: str | Path) -> Path:
    """The sample a name of :func:`relative_name` stands for: an absolute name as it is,
    a relative one under ``root``."""
    path = Path(name)
    return path if path.is_absolute() else Path(root).resolve() / path
