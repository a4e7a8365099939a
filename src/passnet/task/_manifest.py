"""``sorted_output_pass_rule_names.json``: which pass files a pass directory holds, in load order."""

from __future__ import annotations

import json
import keyword
import os
from collections.abc import Sequence
from pathlib import Path

from passnet.errors import PassLoadError

__all__ = ["MANIFEST_FILE", "read_manifest", "write_manifest"]

MANIFEST_FILE = "sorted_output_pass_rule_names.json"


def _line_of(text: str, needle: str, start: int) -> tuple[int | None, int]:
    """Line of ``needle`` at or after ``start``, and where to search next."""
    pos = text.find(needle, start)
    if pos < 0:
        return None, start
    return text.count("\n", 0, pos) + 1, pos + len(needle)


def read_manifest(pass_dir: str | Path) -> list[str]:
    """The pass names of ``pass_dir`` in load order, each naming ``<pass_dir>/<name>.py``.

    Every problem is a :class:`~passnet.errors.PassLoadError` naming the file and,
    where there is one, the line: a missing directory or manifest, invalid JSON,
    something other than a list of strings, a name that is not a Python
    identifier, a duplicate, or a name with no ``.py`` file.
    """
    pass_dir = Path(pass_dir)
    if not pass_dir.is_dir():
        raise PassLoadError("pass directory does not exist", pass_dir=pass_dir)
    path = pass_dir / MANIFEST_FILE
    if not path.is_file():
        raise PassLoadError(
            f"missing {MANIFEST_FILE} (a JSON list of pass file names, in load order)",
            pass_dir=pass_dir,
            file=MANIFEST_FILE,
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PassLoadError(f"cannot read: {exc}", pass_dir=pass_dir, file=MANIFEST_FILE) from exc
    try:
        names = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PassLoadError(
            f"invalid JSON: {exc.msg}", pass_dir=pass_dir, file=MANIFEST_FILE, line=exc.lineno
        ) from exc
    if not isinstance(names, list):
        raise PassLoadError(
            f"must hold a JSON list of pass names, got {type(names).__name__}",
            pass_dir=pass_dir,
            file=MANIFEST_FILE,
            line=1,
        )
    seen: set[str] = set()
    cursor = 0
    for index, name in enumerate(names):
        line = None
        if isinstance(name, str):
            line, cursor = _line_of(text, json.dumps(name), cursor)

        def fail(message: str, *, at: int | None = line, entry: int = index) -> PassLoadError:
            return PassLoadError(
                message, pass_dir=pass_dir, file=MANIFEST_FILE, line=at, field=f"[{entry}]"
            )

        if not isinstance(name, str):
            raise fail(
                f"entry {index} must be a string (a pass file name without .py), got {name!r}"
            )
        if name.endswith(".py"):
            raise fail(f"entry {name!r} must name the file without its .py suffix")
        if not name.isidentifier() or keyword.iskeyword(name):
            raise fail(f"entry {name!r} is not a valid Python module name")
        if name in seen:
            raise fail(f"entry {name!r} is listed twice")
        seen.add(name)
        if not (pass_dir / f"{name}.py").is_file():
            raise fail(f"entry {name!r} has no file {name}.py in the pass directory")
    return list(names)


def write_manifest(pass_dir: str | Path, names: Sequence[str]) -> Path:
    """Write ``pass_dir``'s manifest listing ``names`` in load order (atomically: a reader
    never sees half a file)."""
    path = Path(pass_dir) / MANIFEST_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(list(names), indent=4) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
