"""Module-level facts of pass files, gathered before the checks.

For each file: what every import binds (``F`` → ``torch.nn.functional``), the
module-level functions and which are ``@triton.jit`` kernels, constants and
tables — with findings for imports that are not allowed. Knowing all files'
facts lets the checks follow names across the pass directory.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from passnet._parse import parse_python
from passnet.passes.integrity._rules import (
    IMPORTABLE,
    MUTABLE_NODES,
    PACKAGE,
    TRITON_LANGUAGE_MODULES,
    Finding,
    importable,
    is_dunder,
)

__all__ = ["ModuleFacts", "Report", "attr_chain", "collect", "is_jit_decorator", "parse"]


def attr_chain(node: ast.expr) -> tuple[str, list[str]] | None:
    """``a.b.c`` → ("a", ["b", "c"]); None when the chain is not rooted at a name."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, attrs[::-1]
    return None


@dataclass
class ModuleFacts:
    """Module-level facts of one file, gathered before the checks."""

    file: str
    tree: ast.Module
    lines: list[str]
    is_pass: bool
    aliases: dict[str, str] = field(default_factory=dict)
    """Name bound by an import → qualified name (``F`` → ``torch.nn.functional``)."""
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    jit_functions: set[str] = field(default_factory=set)
    containers: set[str] = field(default_factory=set)
    constants: set[str] = field(default_factory=set)


class Report:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(
        self, mod: ModuleFacts | None, file: str, node: ast.AST | None, rule: str, message: str
    ) -> None:
        line = getattr(node, "lineno", 1) if node is not None else 1
        col = getattr(node, "col_offset", 0) + 1 if node is not None else 1
        code = mod.lines[line - 1].strip() if mod is not None and 0 < line <= len(mod.lines) else ""
        self.findings.append(Finding(file, line, col, rule, message, code))


def is_jit_decorator(mod: ModuleFacts, dec: ast.expr) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    chain = attr_chain(target)
    if chain is None or chain[0] not in mod.aliases:
        return False
    qual = ".".join([mod.aliases[chain[0]], *chain[1]])
    return qual == "triton.jit"


def collect(mod: ModuleFacts, files: set[str], report: Report) -> None:
    """Imports (with their own findings), module-level functions and tables of one file."""
    for stmt in mod.tree.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if not importable(alias.name):
                    if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                        _check_package_module(mod, alias.name, stmt, files, report)
                    else:
                        report.add(mod, mod.file, stmt, "import", _import_message(alias.name))
                        continue
                if alias.asname:
                    mod.aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".", 1)[0]
                    mod.aliases[root] = root
        elif isinstance(stmt, ast.ImportFrom):
            source = _import_from_module(stmt)
            if source is None:
                report.add(
                    mod,
                    mod.file,
                    stmt,
                    "import",
                    "only one level of relative import (from . / from .helper) is allowed",
                )
                continue
            if source == PACKAGE or source.startswith(PACKAGE + "."):
                if source != PACKAGE:
                    _check_package_module(mod, source, stmt, files, report)
            elif not importable(source):
                report.add(mod, mod.file, stmt, "import", _import_message(source))
                continue
            for alias in stmt.names:
                if alias.name == "*":
                    report.add(
                        mod, mod.file, stmt, "import", f"'from {source} import *' is not allowed"
                    )
                    continue
                if alias.name == "pattern" or is_dunder(alias.name):
                    report.add(
                        mod,
                        mod.file,
                        stmt,
                        "pattern-ref" if alias.name == "pattern" else "dunder",
                        f"importing {alias.name!r} is not allowed",
                    )
                    continue
                qual = f"{source}.{alias.name}"
                if source == PACKAGE:
                    _check_package_module(mod, qual, stmt, files, report)
                mod.aliases[alias.asname or alias.name] = qual
        elif isinstance(stmt, ast.FunctionDef):
            mod.functions[stmt.name] = stmt
            if any(is_jit_decorator(mod, d) for d in stmt.decorator_list):
                mod.jit_functions.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        if isinstance(stmt.value, MUTABLE_NODES):
                            mod.containers.add(name.id)
                        else:
                            mod.constants.add(name.id)


def _import_message(name: str) -> str:
    allowed = ", ".join(sorted((IMPORTABLE | TRITON_LANGUAGE_MODULES) - {"__future__"}))
    return f"import of {name!r} is not allowed (allowed: {allowed}, {PACKAGE}.<helper>)"


def _import_from_module(stmt: ast.ImportFrom) -> str | None:
    if stmt.level == 0:
        return stmt.module or ""
    if stmt.level == 1:
        return PACKAGE + (f".{stmt.module}" if stmt.module else "")
    return None


def _check_package_module(
    mod: ModuleFacts, qualname: str, stmt: ast.stmt, files: set[str], report: Report
) -> None:
    parts = qualname.split(".")
    if len(parts) < 2:
        return
    if len(parts) > 2 and f"{parts[1]}.py" in files:
        return  # pass_dir.helper.fn: a name inside a helper
    if f"{parts[1]}.py" not in files:
        report.add(
            mod,
            mod.file,
            stmt,
            "import",
            f"{'.'.join(parts[:2])} does not exist: the pass directory has no {parts[1]}.py",
        )


def parse(file: str, source: str, is_pass: bool, report: Report) -> ModuleFacts | None:
    try:
        tree = parse_python(source, file)
    except SyntaxError as exc:
        report.findings.append(
            Finding(
                file,
                exc.lineno or 1,
                (exc.offset or 0) or 1,
                "format",
                f"syntax error: {exc.msg}",
                (exc.text or "").strip(),
            )
        )
        return None
    return ModuleFacts(file, tree, source.splitlines(), is_pass)
