"""Find samples: a sample folder, a folder searched recursively, or a list file."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from passnet.errors import InputFormatError
from passnet.sample._paddle import is_shape_patch_dir
from passnet.sample._sample import (
    GRAPH_NET_FILE,
    HASH_FILE,
    INPUT_META_FILE,
    MODEL_FILE,
    WEIGHT_META_FILE,
)

__all__ = ["find_samples", "is_sample_dir"]

# Files of a GraphNet sample besides model.py: a folder with one of them but no
# model.py is a broken sample, not an unrelated folder.
_SAMPLE_FILES = (WEIGHT_META_FILE, INPUT_META_FILE, HASH_FILE, GRAPH_NET_FILE)
# The files that only a sample has (a recursive search takes their folders as samples).
_META_FILES = (WEIGHT_META_FILE, INPUT_META_FILE)


def _looks_like_sample(path: Path) -> str | None:
    return next((name for name in _SAMPLE_FILES if (path / name).is_file()), None)


def is_sample_dir(path: Path) -> bool:
    """A folder with ``model.py``, or a Paddle subgraph's ``shape_patches_*`` variant."""
    return (path / MODEL_FILE).is_file() or is_shape_patch_dir(path)


def _from_list(path: Path, reading: tuple[Path, ...] = ()) -> list[Path]:
    if path.resolve() in reading:
        raise InputFormatError("a list of samples includes itself", file=path)
    reading = (*reading, path.resolve())
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(
            "not a list of samples (a text file, one sample folder per line): "
            f"it is not UTF-8 text ({exc.reason} at byte {exc.start})",
            file=path,
        ) from exc
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        candidate = Path(line)
        if not candidate.is_absolute():
            candidate = path.parent / candidate
        if not candidate.is_dir():
            raise InputFormatError(f"listed sample does not exist: {line}", file=path, line=lineno)
        out.extend(_find(candidate, reading))
    return out


def find_samples(paths: Iterable[str | Path]) -> list[Path]:
    """Expand each PATH (sample, folder, or text file listing samples) into sample folders.

    Order is deterministic (sorted within a folder); duplicates are dropped. A folder
    search follows symbolic links to folders, each real folder once (cycles end).
    """
    seen: dict[Path, None] = {}
    for raw in paths:
        for p in _find(Path(raw), ()):
            seen.setdefault(p, None)
    return list(seen)


def _find(path: Path, reading: tuple[Path, ...]) -> list[Path]:
    """The samples of one PATH; ``reading`` are the list files being read around it."""
    if path.is_file():
        found = _from_list(path, reading)
    elif is_sample_dir(path):
        found = [path]
    elif path.is_dir():
        list_file = path / "graph_list.txt"
        if list_file.is_file():
            found = _from_list(list_file, reading)
        elif (other := _looks_like_sample(path)) is not None:
            raise InputFormatError(
                f"sample folder has {other} but no {MODEL_FILE}", file=path / MODEL_FILE
            )
        else:
            found = sorted(_under(path))
    else:
        raise InputFormatError("no such sample, folder or list file", file=path)
    return found


def _under(root: Path) -> set[Path]:
    """Sample folders under ``root``: those with model.py, and broken ones.

    A folder with a sample's meta files but no model.py is a sample too: it ends as a
    ``sample_error`` record naming the missing file, like any other broken sample,
    rather than being skipped with a warning that a long run's output buries.

    Symbolic links to folders are followed, after the folders reached without one, and
    a folder is searched once by its real path: a second link to it, or a link to one
    of its ancestors (a cycle), adds nothing; a link to ``root`` or to a folder that
    holds it is not followed (it would search around ``root``, up to the whole disk). So a sample is found once, under its own
    path when that lies under ``root``, else under the first link that reaches it.
    """
    found = set()
    top_real = os.path.realpath(root)
    searched: set[str] = set()
    tops = [root]  # root, then the links met, in the order met
    while tops:
        for folder, subfolders, files in os.walk(tops.pop(0)):  # does not enter links
            real = os.path.realpath(folder)
            if real in searched:
                subfolders.clear()
                continue
            searched.add(real)
            subfolders.sort()
            tops.extend(
                Path(folder, name)
                for name in subfolders
                if os.path.islink(os.path.join(folder, name))
                and not _contains(os.path.realpath(os.path.join(folder, name)), top_real)
            )
            here = Path(folder)
            if "pass_dir" not in here.parts and not {MODEL_FILE, *_META_FILES}.isdisjoint(files):
                found.add(here)
    return found


def _contains(outer: str, inner: str) -> bool:
    """Whether real path ``outer`` is ``inner`` or one of its ancestors."""
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)
