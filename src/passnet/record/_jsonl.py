"""JSON Lines: the one reader and the one writer of every ``.jsonl`` file passnet keeps.

``results.jsonl``, validation reports and the decompose/generalize manifests are appended to
one JSON object per line, each line written whole and ``fsync``-ed, so a run killed at any
moment leaves every finished line intact and at most one torn line at the end: a final line
without its newline. One policy reads them all (:func:`read_jsonl`, :func:`iter_jsonl`):

* a final line without a trailing newline that does not parse is that torn write: it is
  skipped with a warning naming the file and the line;
* any other bad line (not UTF-8, not JSON, not an object, or refused by ``parse``) is an
  :class:`~passnet.errors.InputFormatError` naming the file, the line and what it should
  have been: passnet never leaves one there, so it is damage the user should hear about.

The writer (:func:`append_jsonl`) first repairs a torn tail (:func:`repair_jsonl_tail`): a
fragment is cut off, a whole object that lacks only its newline is ended, so the next line
never joins a fragment into a bad line in the middle of the file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from passnet.errors import InputFormatError

__all__ = ["append_jsonl", "iter_jsonl", "read_jsonl", "repair_jsonl_tail"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_PARSE_ERRORS: tuple[type[BaseException], ...] = (
    TypeError,
    ValueError,
    KeyError,
    InputFormatError,
)
"""What a ``parse`` function raises for a line it refuses (``JSONDecodeError`` is a ``ValueError``)."""

_CHUNK = 1 << 16


def iter_jsonl(
    path: str | Path,
    parse: Callable[[dict[str, Any]], T],
    *,
    what: str,
    errors: tuple[type[BaseException], ...] = (),
) -> Iterator[tuple[int, T]]:
    """``(line number, parse(object))`` for every non-blank line of the JSON Lines file ``path``.

    ``what`` names what each line should be (``"an evaluation record"``) in errors and
    warnings. A line ``parse`` refuses (``TypeError``, ``ValueError``, ``KeyError``,
    :class:`InputFormatError` or one of ``errors``) is a bad line, as is one that is not
    UTF-8, not JSON or not a JSON object. A bad final line without a trailing newline is a
    write torn by a kill: skipped with a warning. Any other bad line raises
    :class:`InputFormatError` with the file, the line and what the line should have been;
    an unreadable file raises it with the file.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputFormatError(f"cannot read the file: {exc.strerror}", file=path) from exc
    lines = data.split(b"\n")  # not str.splitlines: it also splits at \x1c, \x85, \u2028, ...
    last = len(lines)  # the final element: b"" when the file ends with its newline
    start = 0
    for number, raw in enumerate(lines, start=1):
        offset, start = start, start + len(raw) + 1
        if not raw.strip():
            continue
        try:
            yield number, _parse_line(raw, offset, parse, (*_PARSE_ERRORS, *errors))
        except _BadLine as bad:
            if number == last:
                log.warning(
                    "%s:%d: skipping a torn last line (a write cut short by a kill): not %s: %s",
                    path,
                    number,
                    what,
                    bad.message,
                )
                continue
            raise InputFormatError(
                f"not {what}: {bad.message}", **{**bad.context, "file": path, "line": number}
            ) from bad.__cause__


def read_jsonl(
    path: str | Path,
    parse: Callable[[dict[str, Any]], T],
    *,
    what: str,
    errors: tuple[type[BaseException], ...] = (),
) -> list[T]:
    """``parse`` of every line of the JSON Lines file ``path``, read as :func:`iter_jsonl` reads it."""
    return [value for _, value in iter_jsonl(path, parse, what=what, errors=errors)]


class _BadLine(Exception):
    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = {k: v for k, v in context.items() if v is not None}


def _parse_line(
    raw: bytes,
    offset: int,
    parse: Callable[[dict[str, Any]], T],
    errors: tuple[type[BaseException], ...],
) -> T:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadLine(
            f"not UTF-8 text ({exc.reason} at byte {offset + exc.start}): a damaged file, "
            "or not a JSON Lines file"
        ) from exc
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _BadLine(f"invalid JSON: {exc.msg}", column=exc.colno) from exc
    if not isinstance(value, dict):
        raise _BadLine(f"a line must be a JSON object, not {type(value).__name__}")
    try:
        return parse(value)
    except errors as exc:
        if isinstance(exc, InputFormatError):
            raise _BadLine(exc.message, **exc.context) from exc
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise _BadLine(detail) from exc


def _is_whole_object(fragment: bytes) -> bool:
    try:
        return isinstance(json.loads(fragment.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError):
        return False


def _ends_on_newline(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size == 0 or os.pread(fd, 1, size - 1) == b"\n"


def _repair_tail(fd: int, path: Path) -> None:
    """End the last line of ``fd``, open for reading and appending (see :func:`repair_jsonl_tail`)."""
    if _ends_on_newline(fd):
        return
    size = os.fstat(fd).st_size
    cut, tail = 0, b""
    end = size
    while end > 0:  # back to the last newline, a chunk at a time
        begin = max(0, end - _CHUNK)
        chunk = os.pread(fd, end - begin, begin)
        tail = chunk + tail
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            cut = begin + newline + 1
            tail = tail[newline + 1 :]
            break
        end = begin
    if _is_whole_object(tail):  # a whole line that lacks only its newline: keep it
        os.write(fd, b"\n")
        return
    log.warning(
        "%s: cutting off a torn last line (%d bytes of a write cut short by a kill)",
        path,
        size - cut,
    )
    os.ftruncate(fd, cut)


def repair_jsonl_tail(path: str | Path) -> None:
    """End a JSON Lines file on a newline, as a kill mid-write may not have: a torn last line
    that is not a whole JSON object is cut off (with a warning), and a whole one that lacks
    only its newline gets it. A missing file, an empty one or one that ends on a newline is
    left as it is. :func:`append_jsonl` does this before each line; a store calls it on open.
    Raises ``OSError`` when the file cannot be read or written.
    """
    path = Path(path)
    if not path.exists():
        return
    fd = os.open(path, os.O_RDONLY)  # a sound file is only read: it may be read-only
    try:
        if _ends_on_newline(fd):
            return
    finally:
        os.close(fd)
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        _repair_tail(fd, path)
        os.fsync(fd)
    finally:
        os.close(fd)


def append_jsonl(path: str | Path, value: Mapping[str, Any]) -> None:
    """Append ``value`` to the JSON Lines file ``path`` (created if missing) as one line.

    The line (``json.dumps`` with sorted keys) is written with one ``write``, newline
    terminated, and ``fsync``-ed before this returns, so a kill loses no line that was
    appended. A torn last line left by an earlier kill is repaired first
    (:func:`repair_jsonl_tail`), so the new line starts a line of its own. Raises
    ``TypeError`` for a value that is not a mapping (every line is a JSON object) or not
    JSON-serializable, ``OSError`` when the file cannot be written.
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"a JSON Lines line is a JSON object, not {type(value).__name__}")
    line = (json.dumps(value, sort_keys=True) + "\n").encode("utf-8")
    path = Path(path)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _repair_tail(fd, path)
        view = memoryview(line)
        while view:  # one write, unless the system writes less (a full disk, a signal)
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
