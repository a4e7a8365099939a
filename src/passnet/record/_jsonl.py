"""Reading the JSON Lines manifests of the batch dataset functions (decompose, generalize)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["read_manifest"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def read_manifest(
    path: str | Path,
    parse: Callable[[dict[str, Any]], T],
    what: str,
    errors: tuple[type[BaseException], ...] = (),
) -> list[T]:
    """``parse`` of every line of ``path``; a line that is not JSON or that ``parse`` refuses
    (``TypeError``, ``ValueError``, ``KeyError`` or one of ``errors``) is skipped with a
    warning naming the file, the line and ``what`` it should have been, so a torn last line
    (a run killed mid-write) or one bad record does not lose the rest."""
    out = []
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(parse(json.loads(line)))
        except (TypeError, ValueError, KeyError, *errors) as exc:  # JSONDecodeError is a ValueError
            log.warning("%s:%d: unreadable %s record: %s", path, lineno, what, exc)
    return out
