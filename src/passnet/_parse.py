"""``ast.parse`` safe to call from several threads at once.

CPython 3.11 keeps the recursion depth of the C-to-Python AST conversion in state shared by
the threads of an interpreter; two threads parsing at once can fail with ``SystemError: AST
constructor recursion depth mismatch`` (seen with parallel evaluations and agent episodes
loading samples and pass files in threads). Every parse in passnet goes through this lock.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse_python"]

_LOCK = threading.Lock()


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename)
