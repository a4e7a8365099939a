"""The episode's private copy of a task's ``pass_dir`` and the ``file_editor`` tool on it.

An episode never writes into the task: :meth:`Workspace.copy_of` copies the task's pass
directory (regular files only: no links, no ``__pycache__``) into a folder of the
episode, and every edit goes there. Paths come from the model and are refused unless
they name a file inside that folder: an absolute path, a ``..`` component, a symbolic
link on the way, a hidden name or a folder where a file is wanted ends in a
:class:`ToolError` whose message says what to give instead. Edits follow the
SWE-agent / R2E-Gym ``str_replace_editor`` convention PassNet's agent uses (``view``,
``create``, ``str_replace``, ``insert``, ``undo_edit``), with one difference: ``create``
also replaces an existing file (the edit can be undone).
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path, PurePosixPath

__all__ = ["MAX_FILE_BYTES", "MAX_FILES", "ToolError", "Workspace"]

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 256 * 1024
"""Largest file the editor writes (a pass file is a few kilobytes)."""
MAX_FILES = 64
"""Most files a pass directory may hold."""
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_PREFIX = "pass_dir"
_SNIPPET_LINES = 4


class ToolError(Exception):
    """A tool call that cannot be carried out; its message is the observation the model gets."""


class Workspace:
    """A private pass directory: the only folder an episode's tools may write."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._history: dict[str, list[str | None]] = {}

    @classmethod
    def copy_of(cls, source: Path, root: Path) -> Workspace:
        """Copy the regular files of ``source`` (a task's pass_dir) into the new folder ``root``."""
        root.mkdir(parents=True, exist_ok=False)
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if "__pycache__" in rel.parts or path.is_symlink() or not path.is_file():
                continue
            if any(p.is_symlink() for p in (source / q for q in _prefixes(rel))):
                continue
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, root / rel)
        return cls(root)

    # -- paths -----------------------------------------------------------------------

    def resolve(self, raw: object, *, directory_ok: bool = False) -> Path:
        """The file (or, with ``directory_ok``, folder) inside the workspace ``raw`` names."""
        if not isinstance(raw, str):
            raise ToolError("path must be a string: a file name relative to pass_dir")
        text = raw.strip()
        hint = "give a path relative to pass_dir, e.g. 'MyPass.py'"
        if text.startswith(("/", "\\", "~")) or re.match(r"[A-Za-z]:[\\/]", text):
            raise ToolError(f"refused: {raw!r} is an absolute path; {hint}")
        if "\\" in text or "\0" in text:
            raise ToolError(f"refused: {raw!r} contains a backslash or NUL; {hint}")
        parts = [p for p in PurePosixPath(text).parts if p != "."]
        if parts and parts[0] == _PREFIX:
            parts = parts[1:]
        if ".." in parts:
            raise ToolError(f"refused: {raw!r} leads outside pass_dir ('..'); {hint}")
        for part in parts:
            if not _NAME.fullmatch(part):
                raise ToolError(
                    f"refused: {part!r} in {raw!r} is not a plain file name (letters, digits, "
                    f"'_', '-', '.', not starting with '.'); {hint}"
                )
        path = self.root.joinpath(*parts)
        for prefix in _prefixes(PurePosixPath(*parts)) if parts else ():
            if (self.root / prefix).is_symlink():
                raise ToolError(f"refused: {raw!r} goes through a symbolic link; {hint}")
        try:
            path.resolve().relative_to(self.root)
        except ValueError:
            raise ToolError(f"refused: {raw!r} is outside pass_dir; {hint}") from None
        if not parts and not directory_ok:
            raise ToolError(f"{raw!r} is the pass directory itself; name a file in it")
        if path.is_dir() and not directory_ok:
            raise ToolError(f"{raw!r} is a folder; name a file")
        return path

    def name(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    # -- the five commands -----------------------------------------------------------

    def view(self, raw: object, view_range: object = None) -> str:
        path = self.resolve(raw if raw not in (None, "") else ".", directory_ok=True)
        if path.is_dir():
            files = self.files()
            if not files:
                return "pass_dir is empty"
            lines = [f"{name}  ({len(text.encode())} bytes)" for name, text in files.items()]
            return "files in pass_dir:\n" + "\n".join(lines)
        if not path.is_file():
            raise ToolError(f"{self.name(path)} does not exist (view '.' lists pass_dir)")
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        start, stop = 1, len(lines)
        if view_range is not None:
            if (
                not isinstance(view_range, list)
                or len(view_range) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)
            ):
                raise ToolError("view_range must be two integers [first_line, last_line]")
            start, stop = view_range
            stop = len(lines) if stop == -1 else stop
            if not 1 <= start <= max(1, len(lines)) or stop < start:
                raise ToolError(f"view_range {view_range} is outside the file's {len(lines)} lines")
        return _numbered(lines[start - 1 : stop], start) or f"{self.name(path)} is empty"

    def create(self, raw: object, file_text: object) -> str:
        path = self.resolve(raw)
        text = _text(file_text, "file_text")
        if not path.exists() and len(self.files()) >= MAX_FILES:
            raise ToolError(f"pass_dir already holds {MAX_FILES} files, the most it may hold")
        existed = path.exists()
        self._write(path, text)
        verb = "replaced" if existed else "created"
        return f"{self.name(path)} {verb} ({len(text.splitlines())} lines)"

    def str_replace(self, raw: object, old_str: object, new_str: object) -> str:
        path = self._existing(raw)
        old = _text(old_str, "old_str")
        new = _text(new_str if new_str is not None else "", "new_str")
        if not old:
            raise ToolError("old_str must not be empty")
        text = path.read_text(encoding="utf-8", errors="replace")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_str does not occur in {self.name(path)} (it must match exactly)")
        if count > 1:
            lines = [
                i + 1 for i, line in enumerate(text.splitlines()) if old.splitlines()[0] in line
            ]
            raise ToolError(
                f"old_str occurs {count} times in {self.name(path)} (lines {lines[:10]}); "
                "include more context so that it is unique"
            )
        at = text[: text.index(old)].count("\n")
        updated = text.replace(old, new, 1)
        self._write(path, updated)
        return self._edited(path, updated, at, new.count("\n") + 1)

    def insert(self, raw: object, insert_line: object, new_str: object) -> str:
        path = self._existing(raw)
        new = _text(new_str, "new_str")
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        if isinstance(insert_line, bool) or not isinstance(insert_line, int):
            raise ToolError("insert_line must be an integer (0 inserts at the top)")
        if not 0 <= insert_line <= len(lines):
            raise ToolError(f"insert_line must be between 0 and {len(lines)}, got {insert_line}")
        if lines and not lines[-1].endswith("\n") and insert_line == len(lines):
            lines[-1] += "\n"
        block = new if new.endswith("\n") else new + "\n"
        updated = "".join(lines[:insert_line]) + block + "".join(lines[insert_line:])
        self._write(path, updated)
        return self._edited(path, updated, insert_line, block.count("\n"))

    def undo_edit(self, raw: object) -> str:
        path = self.resolve(raw)
        history = self._history.get(self.name(path))
        if not history:
            raise ToolError(f"no edit of {self.name(path)} to undo")
        previous = history.pop()
        if previous is None:
            path.unlink()
            return f"undid the creation of {self.name(path)}: it is gone"
        path.write_text(previous, encoding="utf-8")
        return f"undid the last edit of {self.name(path)}:\n" + _numbered(
            previous.splitlines()[: 2 * _SNIPPET_LINES], 1
        )

    # -- state -------------------------------------------------------------------------

    def files(self) -> dict[str, str]:
        """Every file of the workspace: relative name → text (what a trajectory keeps)."""
        out = {}
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
                out[self.name(path)] = path.read_text(encoding="utf-8", errors="replace")
        return out

    def restore(self, files: dict[str, str]) -> None:
        """Make the workspace hold exactly ``files`` (a snapshot from :meth:`files`)."""
        for name in self.files():
            if name not in files:
                (self.root / name).unlink()
        for name, text in files.items():
            path = self.resolve(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        self._history.clear()

    def _existing(self, raw: object) -> Path:
        path = self.resolve(raw)
        if not path.is_file():
            raise ToolError(f"{self.name(path)} does not exist (create it first)")
        return path

    def _write(self, path: Path, text: str) -> None:
        if len(text.encode()) > MAX_FILE_BYTES:
            raise ToolError(f"the file would exceed {MAX_FILE_BYTES} bytes")
        before = path.read_text(encoding="utf-8", errors="replace") if path.exists() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self._history.setdefault(self.name(path), []).append(before)

    def _edited(self, path: Path, text: str, at: int, count: int) -> str:
        lines = text.splitlines()
        first = max(0, at - _SNIPPET_LINES)
        last = min(len(lines), at + count + _SNIPPET_LINES)
        return f"{self.name(path)} edited; lines {first + 1}-{last} now read:\n" + _numbered(
            lines[first:last], first + 1
        )


def _prefixes(rel: PurePosixPath) -> list[PurePosixPath]:
    """``a``, ``a/b``, ``a/b/c`` for ``a/b/c``: each folder on the way and the path itself."""
    return [PurePosixPath(*rel.parts[: i + 1]) for i in range(len(rel.parts))]


def _text(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise ToolError(f"{field} must be a string")
    return value


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(lines, start))
