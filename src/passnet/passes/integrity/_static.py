"""Static integrity inspection of a pass directory (docs/passes.md, first layer).

Every ``.py`` file of the pass directory is parsed with :mod:`ast` and checked;
nothing is imported or executed, so the judging side can run this on untrusted
code. The rules are the static entries of the registry
(:data:`passnet.passes.integrity._checks.CHECKS`), the checks live in
:mod:`passnet.passes.integrity._checker`; this module reads the directory (refusing
compiled code and symlinks) and turns findings into errors.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable, Sequence
from pathlib import Path

from passnet._parse import parse_python
from passnet.errors import MissingDependency, PassError, PassLoadError, PassRejected
from passnet.passes.integrity._checker import check_sources
from passnet.passes.integrity._rules import BINARY_SUFFIXES, PACKAGE, Finding
from passnet.task import read_manifest

__all__ = [
    "PACKAGE",
    "Finding",
    "check_pass_dir",
    "inspect_pass_dir",
    "inspect_sources",
    "rejection",
    "require_imported_packages",
    "scan_pass_dir",
]


def inspect_sources(sources: dict[str, str], pass_names: Sequence[str]) -> list[Finding]:
    """Check pass sources (file name relative to the pass directory → text).

    ``pass_names`` are the manifest entries: ``<name>.py`` must define the three
    pass functions; every other file is a helper. Returns all findings, ordered
    by file and line; an empty list means the sources pass the static layer.
    Raises :class:`~passnet.errors.MissingDependency` when the sources import Triton
    and it is not installed: the rules resolve Triton's names on the real module, and
    without it every use would read as a violation.
    """
    require_imported_packages(sources)
    return check_sources(sources, pass_names)


_INSTALLABLE = {"triton": "pip install triton"}
"""Packages pass files may import that an environment can lack, and how to install them."""


def require_imported_packages(sources: dict[str, str]) -> None:
    """Raise :class:`~passnet.errors.MissingDependency` if a source imports an installable
    package (Triton) that this environment lacks; sources that do not parse are left to
    the checks, which report them."""
    for file, text in sorted(sources.items()):
        try:
            tree = parse_python(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                root = name.split(".")[0]
                if root in _INSTALLABLE and importlib.util.find_spec(root) is None:
                    raise MissingDependency(
                        f"{file}:{node.lineno} imports {root}, which is not installed here "
                        f"({_INSTALLABLE[root]})",
                        package=root,
                        needed_by=file,
                        install=_INSTALLABLE[root],
                    )


def _read_sources(pass_dir: Path, findings: list[Finding]) -> dict[str, str]:
    sources: dict[str, str] = {}
    for path in sorted(pass_dir.rglob("*")):
        rel = path.relative_to(pass_dir).as_posix()
        if "__pycache__" in path.relative_to(pass_dir).parts:
            continue
        if path.is_symlink():
            findings.append(
                Finding(rel, 1, 1, "file", "symbolic links are not allowed in a pass directory")
            )
            continue
        if path.is_file() and path.suffix in BINARY_SUFFIXES:
            findings.append(
                Finding(
                    rel,
                    1,
                    1,
                    "file",
                    f"compiled code ({path.suffix}) is not allowed; "
                    "pass code must be Python/Triton source",
                )
            )
            continue
        if path.is_file() and path.suffix == ".py":
            try:
                sources[rel] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                findings.append(Finding(rel, 1, 1, "format", f"cannot read as UTF-8 text: {exc}"))
    return sources


def scan_pass_dir(
    pass_dir: Path, pass_names: Sequence[str]
) -> tuple[list[Finding], dict[str, str]]:
    """Read every source of ``pass_dir`` once and inspect it: (findings, sources).

    The loader executes exactly the ``sources`` returned here, so what runs is
    what was inspected.
    """
    findings: list[Finding] = []
    sources = _read_sources(pass_dir, findings)
    # A pass file that could not be read has its finding already; it is not also missing.
    unreadable = {f.file for f in findings}
    findings += inspect_sources(sources, [n for n in pass_names if f"{n}.py" not in unreadable])
    return sorted(findings, key=lambda f: (f.file, f.line, f.col)), sources


def inspect_pass_dir(
    pass_dir: str | Path, pass_names: Iterable[str] | None = None
) -> list[Finding]:
    """Statically inspect every file of ``pass_dir``; nothing is imported.

    ``pass_names`` defaults to the directory's manifest (a malformed manifest
    raises :class:`~passnet.errors.PassLoadError`).
    """
    pass_dir = Path(pass_dir)
    names = list(pass_names) if pass_names is not None else read_manifest(pass_dir)
    return scan_pass_dir(pass_dir, names)[0]


def rejection(findings: Sequence[Finding], pass_dir: str | Path | None = None) -> PassError:
    """The error for a non-empty list of findings: :class:`PassLoadError` when every
    finding is about the format (missing functions, syntax), else :class:`PassRejected`. The first finding
    gives file/line/rule; ``context['findings']`` lists them all."""
    first = findings[0]
    only_format = all(f.rule == "format" for f in findings)
    cls = PassLoadError if only_format else PassRejected
    more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
    return cls(
        f"{first.file}:{first.line}: {first.message}{more}",
        pass_dir=pass_dir,
        file=first.file,
        line=first.line,
        rule=first.rule,
        code=first.code or None,
        findings="\n".join(str(f) for f in findings),
    )


def check_pass_dir(pass_dir: str | Path, pass_names: Iterable[str] | None = None) -> None:
    """Raise the :func:`rejection` of ``pass_dir``'s findings, if there are any."""
    findings = inspect_pass_dir(pass_dir, pass_names)
    if findings:
        raise rejection(findings, pass_dir)
