"""Loading a pass directory: inspect, import as package ``pass_dir``, validate, trace.

Loading runs pass code, so it happens only inside the evaluation child process;
the judging side uses :func:`passnet.passes.inspect_pass_dir`, which does not
import anything.

The directory is imported as the package ``pass_dir`` (so a pass can write
``from pass_dir.helper import fused``) by a dedicated importer that maps
``pass_dir.<name>`` to ``<dir>/<name>.py`` and nothing else: no bytecode cache
is read or written, no compiled extension or ``.pyc`` can stand in for a
source, no subpackage. The sources executed are the very text the static
inspection read. Passes are imported in the manifest's order; helpers on
first import.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import logging
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from passnet.errors import PassLoadError
from passnet.passes._pattern import ArgSpec, Pattern, _line_in, derive_arg_spec, trace_pattern
from passnet.passes.integrity import PACKAGE, rejection, scan_pass_dir
from passnet.task import read_manifest

__all__ = ["PassRule", "load_pass_dir"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassRule:
    """One loaded pass: its traced pattern, argument selection and replacement function."""

    name: str
    file: Path
    pattern: Pattern
    arg_spec: ArgSpec
    replacement: Callable[..., Any]
    trusted: bool = False
    """Fixed passes of the task (``const_pass_dir``): not inspected, not guarded."""


class _SourceImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads ``<package>`` and ``<package>.<name>`` from in-memory sources only."""

    def __init__(self, package: str, directory: Path, sources: dict[str, str]) -> None:
        self.package = package
        self.directory = directory
        self.sources = sources

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == self.package:
            spec = importlib.machinery.ModuleSpec(
                fullname, self, origin=str(self.directory), is_package=True
            )
            # An empty search path: no other finder can find anything inside the package.
            spec.submodule_search_locations = []
            return spec
        prefix = self.package + "."
        if not fullname.startswith(prefix):
            return None
        name = fullname[len(prefix) :]
        if "." in name or f"{name}.py" not in self.sources:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: the pass directory has no {name.replace('.', '/')}.py",
                name=fullname,
            )
        spec = importlib.machinery.ModuleSpec(
            fullname, self, origin=str(self.directory / f"{name}.py")
        )
        spec.has_location = True
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == self.package:
            return
        name = module.__name__[len(self.package) + 1 :]
        path = self.directory / f"{name}.py"
        code = compile(self.sources[f"{name}.py"], str(path), "exec", dont_inherit=True)
        exec(code, module.__dict__)  # noqa: S102 - pass code runs here, in the evaluation child


def _purge(package: str) -> None:
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


@contextmanager
def _importing(importer: _SourceImporter) -> Iterator[None]:
    # Modules stay alive through the functions that were loaded from them; the
    # package names are released afterwards so another directory can be loaded
    # under the same name in this process.
    _purge(importer.package)
    sys.meta_path.insert(0, importer)
    try:
        yield
    finally:
        sys.meta_path.remove(importer)
        _purge(importer.package)


def _innermost_in(exc: BaseException, directory: Path, default: Path) -> tuple[str, int | None]:
    """(file name, line) of the innermost traceback frame inside ``directory``."""
    found: tuple[str, int | None] = (default.name, None)
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename)
        if path.parent == directory:
            found = (path.name, frame.lineno)
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).parent == directory:
        found = (Path(exc.filename).name, exc.lineno)
    return found


def _function(module: types.ModuleType, attr: str, name: str, file: Path) -> Callable[..., Any]:
    value = getattr(module, attr, None)
    if value is None:
        raise PassLoadError(f"pass file must define {attr}()", pass_name=name, file=file.name)
    if not isinstance(value, types.FunctionType):
        raise PassLoadError(
            f"{attr} must be a function, got {type(value).__name__}", pass_name=name, file=file.name
        )
    return value


def _replacement(
    module: types.ModuleType, name: str, file: Path, package: str
) -> Callable[..., Any]:
    factory = _function(module, "replacement_func", name, file)
    line = factory.__code__.co_firstlineno
    where = {"pass_name": name, "file": file.name, "line": line}
    try:
        first, second = factory(), factory()
    except Exception as exc:  # noqa: BLE001 - pass code failing is a load error of that pass
        raise PassLoadError(
            f"replacement_func() raised {type(exc).__name__}: {exc}",
            **{**where, "line": _line_in(exc, file) or line},
        ) from exc
    if not isinstance(first, types.FunctionType):
        raise PassLoadError(
            f"replacement_func() must return a Python function (the wrapper that launches the kernel), "
            f"got {type(first).__name__}",
            **where,
        )
    if first.__name__ == "<lambda>" or "<locals>" in first.__qualname__:
        raise PassLoadError(
            f"replacement_func() returned {first.__qualname__}: it must be a module-level function, "
            "not a lambda or a nested def",
            **where,
        )
    if first is not second:
        raise PassLoadError(
            "replacement_func() must return the same module-level function on every call "
            "(no lambda, no nested def, no functools.partial)",
            **where,
        )
    if not (first.__module__ or "").startswith(package + "."):
        raise PassLoadError(
            f"replacement_func() returned {first.__module__}.{first.__qualname__}, which is not defined in "
            "the pass directory",
            **where,
        )
    return first


def load_pass_dir(
    pass_dir: str | Path, *, package: str = PACKAGE, trusted: bool = False
) -> list[PassRule]:
    """Load every pass of ``pass_dir`` in manifest order, as package ``package``.

    Untrusted directories (the default) first go through the static inspection,
    and a violation raises :class:`~passnet.errors.PassRejected` before any of
    their code runs. ``trusted`` is for the task's own ``const_pass_dir``. Every
    problem names the file and line: :class:`~passnet.errors.PassLoadError` for a
    malformed pass, :class:`~passnet.errors.PassRejected` for an integrity violation.
    """
    directory = Path(pass_dir).resolve()
    names = read_manifest(directory)
    findings, sources = scan_pass_dir(directory, names)
    if not trusted and findings:
        raise rejection(findings, directory)
    top_level = {f: s for f, s in sources.items() if "/" not in f}
    rules: list[PassRule] = []
    with _importing(_SourceImporter(package, directory, top_level)):
        modules = []
        for name in names:
            file = directory / f"{name}.py"
            try:
                modules.append(importlib.import_module(f"{package}.{name}"))
            except Exception as exc:  # noqa: BLE001 - any import failure is a load error of that pass
                culprit, line = _innermost_in(exc, directory, file)
                raise PassLoadError(
                    f"importing {package}.{name} failed: {type(exc).__name__}: {exc}",
                    pass_dir=directory,
                    pass_name=name,
                    file=culprit,
                    line=line,
                ) from exc
    for name, module in zip(names, modules):
        file = directory / f"{name}.py"
        pattern_fn = _function(module, "pattern", name, file)
        args_fn = _function(module, "replacement_args", name, file)
        replacement = _replacement(module, name, file, package)
        pattern = trace_pattern(pattern_fn, pass_name=name, file=file)
        spec = derive_arg_spec(args_fn, len(pattern.placeholders), pass_name=name, file=file)
        rules.append(PassRule(name, file, pattern, spec, replacement, trusted))
    log.debug("loaded %d passes from %s: %s", len(rules), directory, [r.name for r in rules])
    return rules
