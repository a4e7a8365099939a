"""Find samples: a sample folder, a folder searched recursively, or a list file."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from passnet.errors import InputFormatError

__all__ = ["find_samples", "is_sample_dir"]


def is_sample_dir(path: Path) -> bool:
    return (path / "model.py").is_file()


def _from_list(path: Path) -> list[Path]:
    out = []
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        candidate = Path(line)
        if not candidate.is_absolute():
            candidate = path.parent / candidate
        if not candidate.is_dir():
            raise InputFormatError(f"listed sample does not exist: {line}", file=path, line=lineno)
        out.extend(find_samples([candidate]))
    return out


def find_samples(paths: Iterable[str | Path]) -> list[Path]:
    """Expand each PATH (sample, folder, or text file listing samples) into sample folders.

    Order is deterministic (sorted within a folder); duplicates are dropped.
    """
    seen: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found = _from_list(path)
        elif is_sample_dir(path):
            found = [path]
        elif path.is_dir():
            list_file = path / "graph_list.txt"
            if list_file.is_file():
                found = _from_list(list_file)
            else:
                found = sorted(
                    p.parent for p in path.rglob("model.py") if "pass_dir" not in p.parts
                )
        else:
            raise InputFormatError("no such sample, folder or list file", file=path)
        for p in found:
            seen.setdefault(p, None)
    return list(seen)
