"""Check a compiler before a run without importing code under test in this process.

A compiler named by a code spec (``path/file.py:Class``, ``module:Class``) is imported,
checked against its configuration and described in a disposable child
(:func:`~passnet.isolate.run_isolated`, with the evaluation children's preload), which sends
back a :class:`~passnet.compilers.CompilerInfo` or the error, with the file and line
where the import failed. A registered name is looked up here. Answers are kept per
(spec, configuration, file version), so the several checks of one run start one child.
"""

from __future__ import annotations

import json
import threading
import traceback
from pathlib import Path
from typing import Any

from passnet.compilers import CompilerInfo, compiler_info, is_code_spec
from passnet.errors import CompilerConfigError, PassnetError, RegistryError
from passnet.evaluate._settings import FORKSERVER_PRELOAD
from passnet.isolate import run_isolated

__all__ = ["check_compiler"]

CHECK_TIMEOUT_S = 300.0
"""How long the child may take to import and check a compiler (a first torch import)."""

_ERRORS: dict[str, type[PassnetError]] = {
    "RegistryError": RegistryError,
    "CompilerConfigError": CompilerConfigError,
}
_Answer = CompilerInfo | tuple[type[PassnetError], str]
_cache: dict[tuple[str, str, bool, tuple[int, int] | None], _Answer] = {}
_lock = threading.Lock()


def check_compiler(
    name: str,
    config: dict[str, Any] | None = None,
    *,
    check_config: bool = True,
    timeout_s: float = CHECK_TIMEOUT_S,
) -> CompilerInfo:
    """The facts of compiler ``name`` with ``config``, checked (a spec that cannot be
    loaded; with ``check_config``, the configuration): a
    :class:`~passnet.errors.RegistryError` or :class:`~passnet.errors.CompilerConfigError`
    says what is wrong. A code spec is only ever imported in a child process."""
    config = dict(config or {})
    if not is_code_spec(name):
        return compiler_info(name, config, check_config=check_config)
    text = json.dumps(config, sort_keys=True, default=str)
    key = (name, text, check_config, _version(name))
    with _lock:
        known = _cache.get(key)
        checked = _cache.get((name, text, True, key[3]))
        if known is None and isinstance(checked, CompilerInfo):
            known = checked  # the configuration was checked too: the facts are the same
    if known is None:
        known = _check_in_child(name, config, check_config, timeout_s)
        with _lock:
            _cache[key] = known
    if isinstance(known, CompilerInfo):
        return known
    error, message = known
    raise error(message, compiler=name)


def _version(spec: str) -> tuple[int, int] | None:
    """The spec file's modification time and size (a changed file is checked again)."""
    target = spec.rpartition(":")[0]
    if not target.endswith(".py"):
        return None
    try:
        stat = Path(target).stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


def _check_in_child(
    name: str, config: dict[str, Any], check_config: bool, timeout_s: float
) -> _Answer:
    args = (name, config, check_config)
    outcome = run_isolated(
        _check_child, args, timeout_s, preload=FORKSERVER_PRELOAD, capture_stderr=True
    )
    result = outcome.result
    if result is None:
        _, how = outcome.death(timeout_s)
        return RegistryError, f"cannot check compiler {name!r}: {how}"
    if "info" in result:
        return CompilerInfo.from_dict(result["info"])
    return _ERRORS.get(result["type"], RegistryError), result["message"]


def _check_child(name: str, config: dict[str, Any], check_config: bool, send: Any) -> None:
    """In the child: import and check the compiler; send its facts or the error."""
    try:
        info = compiler_info(name, config, check_config=check_config)
    except Exception as exc:  # noqa: BLE001 - anything the code under test raises is an answer
        kind = type(exc).__name__ if type(exc).__name__ in _ERRORS else "RegistryError"
        message = (
            exc.message
            if isinstance(exc, PassnetError)
            else f"compiler {name!r}: {type(exc).__name__}: {exc}"
        )
        where = _where(name, exc)
        if where and where not in message:
            message = f"{message} (at {where})"
        send(("result", {"type": kind, "message": message}))
        return
    send(("result", {"info": info.to_dict()}))


def _where(spec: str, exc: BaseException) -> str | None:
    """``file, line N``: the innermost frame in the spec's file of the error (or of its
    cause: the registry wraps import failures)."""
    target = spec.rpartition(":")[0]
    if not target.endswith(".py"):
        return None
    path = str(Path(target).resolve())
    for err in (exc.__cause__, exc):
        if err is None:
            continue
        if isinstance(err, SyntaxError) and err.filename and err.lineno:
            return f"{err.filename}, line {err.lineno}"
        frames = [
            f
            for f in traceback.extract_tb(err.__traceback__)
            if str(Path(f.filename).resolve()) == path
        ]
        if frames:
            return f"{target}, line {frames[-1].lineno}"
    return None
