"""benchmarks/ uses passnet's public API only (each package's ``__init__``), so that a package
can move its insides without breaking a benchmark unnoticed.

Every ``.py`` under ``benchmarks/`` is parsed with :mod:`ast`, nothing is imported. A script
may not import a private module (``passnet.<pkg>._<mod>``, or anything with a private part
after ``passnet``), reach one by attribute (``passnet.evaluate._child.x``, also through a
name bound by an import), or name one in a string that is a module path (what
``importlib.import_module``, a forkserver preload or ``mock.patch`` would take). Prose
in docstrings is not checked. One-off scripts do not live under ``benchmarks/results/``:
that folder holds result data, and its READMEs name the commit to read such a script from.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"

_MODULE_PATH = re.compile(r"passnet(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _is_private(segment: str) -> bool:
    return segment.startswith("_") and not segment.startswith("__")


def _private(dotted: str) -> bool:
    """A passnet path with a private part after ``passnet`` (dunders such as
    ``passnet.__version__`` are public)."""
    parts = dotted.split(".")
    return parts[0] == "passnet" and any(_is_private(p) for p in parts[1:])


def _dotted(node: ast.expr) -> tuple[str, str] | None:
    """``a.b.c`` as (``a``, ``a.b.c``) where the chain starts at a plain name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return node.id, ".".join([node.id, *reversed(parts)])


def private_references(source: str) -> list[tuple[int, str]]:
    """(line, private passnet path) of every import of, attribute access to, and module
    path string naming a private passnet module in ``source``."""
    tree = ast.parse(source)
    found: set[tuple[int, str]] = set()
    bound: dict[str, str] = {}  # a name an import binds -> the passnet path it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "passnet":
                    continue
                if _private(alias.name):
                    found.add((node.lineno, alias.name))
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound["passnet"] = "passnet"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "passnet":
                continue
            if _private(node.module):
                found.add((node.lineno, node.module))
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _private(full):  # from passnet.passes import _launch
                    found.add((node.lineno, full))
                bound[alias.asname or alias.name] = full
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _dotted(node)
            if chain is None or chain[0] not in bound:
                continue
            full = bound[chain[0]] + chain[1][len(chain[0]) :]
            if _private(full):
                found.add((node.lineno, full))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _MODULE_PATH.fullmatch(node.value) and _private(node.value):
                found.add((node.lineno, node.value))
    return sorted(found)


def scan(root: Path) -> list[str]:
    """``path:line: name`` for every private passnet reference in the scripts under ``root``."""
    return [
        f"{path.relative_to(root)}:{line}: {name}"
        for path in sorted(root.rglob("*.py"))
        for line, name in private_references(path.read_text(encoding="utf-8"))
    ]


def test_benchmarks_use_only_the_public_api() -> None:
    scripts = sorted(BENCHMARKS.rglob("*.py"))
    assert len(scripts) > 10, f"found only {len(scripts)} scripts under {BENCHMARKS}"
    offenders = scan(BENCHMARKS)
    assert not offenders, (
        "benchmarks/ reaches into private passnet modules; export what a benchmark needs "
        "from the package's __init__ (or use what it exports):\n  " + "\n  ".join(offenders)
    )


def test_results_hold_no_scripts() -> None:
    scripts = [str(p.relative_to(BENCHMARKS)) for p in sorted(RESULTS.rglob("*.py"))]
    assert not scripts, (
        "benchmarks/results/ holds result data only: make a one-off script a maintained "
        "benchmark, or remove it and name its commit in the folder's README: " + ", ".join(scripts)
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from passnet.evaluate._child import run_child\n", "passnet.evaluate._child"),
        ("import passnet.isolate._process as isolate\n", "passnet.isolate._process"),
        ("from passnet.passes import _launch\n", "passnet.passes._launch"),
        (
            "import passnet.evaluate\nx = passnet.evaluate._host.CoreGuard\n",
            "passnet.evaluate._host.CoreGuard",
        ),
        (
            "from passnet import evaluate\nevaluate._child.run_child()\n",
            "passnet.evaluate._child.run_child",
        ),
        ("import passnet.evaluate as ev\nev._PRELOAD = []\n", "passnet.evaluate._PRELOAD"),
        (
            "import importlib\nimportlib.import_module('passnet.dataset._fusible')\n",
            "passnet.dataset._fusible",
        ),
        ("PRELOAD = ['torch', 'passnet.evaluate._child']\n", "passnet.evaluate._child"),
    ],
)
def test_the_scanner_finds_a_planted_violation(tmp_path: Path, source: str, expected: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bench_planted.py").write_text(source)
    found = scan(tmp_path)
    assert found and any(line.endswith(f": {expected}") for line in found), found


def test_the_scanner_leaves_public_names_and_prose_alone() -> None:
    source = '''"""Times what passnet.evaluate._child does, with passnet.evaluate.CoreGuard."""
import passnet
from passnet.evaluate import CoreGuard, cuda_timer
from passnet.passes import FastRun

entry = FastRun.__doc__
version = passnet.__version__
guard = CoreGuard([0])
guard.report().__dict__
names = "see passnet.evaluate._child for details"
other = module._private.thing
'''
    assert private_references(source) == []
