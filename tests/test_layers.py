"""The package's layering (docs/architecture.md): each concept has one home, dependencies run
one way. Every import in ``src/passnet`` counts, also those inside functions.

* a module imports another package's private module (``passnet.x._y``) only from inside
  that package (or a package below it);
* no import cycle between top-level packages;
* a package imports only packages of its own or a lower layer (:data:`LAYERS`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import passnet

ROOT = Path(passnet.__file__).parent

LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "errors status registry data _parse",  # the ground floor
        "record",  # the record schema, tolerances, JSON Lines, log format
        "sample",  # GraphNet samples, the tracer, the comparator
        "task",  # the PassBench task layout
        "compilers",  # the compiler interface and built-ins
        "passes",  # pass files, integrity, the reference library
        "isolate",  # child processes: forkserver, time and memory bounds, how a child ended
        "evaluate",  # one graph x one compiler, isolated
        "runner",  # many evaluations: plan, store, executors
        "score",  # S_t, ES_t, AS from records
        "report",  # tables, plots, the HTML report
        "dataset",  # extract ... benchmark assembly
        "agent",  # PassAgent, the RL environment, the reward server
        "cli",  # the command line
    )
)
"""Top-level packages (and ground-floor modules) from the lowest layer to the highest."""


def _layer_of(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise AssertionError(f"passnet.{package} is in no layer of tests/test_layers.py: add it")


def _is_private(segment: str) -> bool:
    return segment.startswith("_") and not segment.startswith("__")


def _sources(root: Path) -> list[Path]:
    """passnet's modules: not the shipped samples, not the reference pass files (data)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "data" and len(rel.parts) > 2:
            continue
        if rel.parts[:2] == ("passes", "library") and len(rel.parts) > 3:
            continue
        out.append(path)
    return out


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((root.name, *parts))


def _imports(tree: ast.AST, me: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, imported module) of every import, with ``from x import y`` also giving x.y
    (y may be a submodule), and literal ``importlib.import_module("...")`` calls."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{a.name}") for a in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def layering_problems(root: Path) -> list[str]:
    """Every layering violation in the package at ``root``, as ``file:line: what``."""
    top = root.name
    problems: list[str] = []
    edges: dict[str, set[str]] = {}
    for path in _sources(root):
        me = _module_name(root, path)
        parts = me.split(".")
        if len(parts) < 2:
            continue  # the package's own __init__: a facade over everything
        mine = parts[1]
        where = f"{path.relative_to(root.parent)}"
        for line, target in _imports(ast.parse(path.read_text()), me, path.name == "__init__.py"):
            tparts = target.split(".")
            if tparts[0] != top or len(tparts) < 2:
                continue
            private = next((i for i, s in enumerate(tparts) if _is_private(s)), None)
            if private is not None:
                owner = ".".join(tparts[:private])
                if me != owner and not me.startswith(owner + "."):
                    problems.append(f"{where}:{line}: imports {target}, private to {owner}")
            theirs = tparts[1]
            if theirs == mine:
                continue
            edges.setdefault(mine, set()).add(theirs)
            if _layer_of(theirs) > _layer_of(mine):
                problems.append(
                    f"{where}:{line}: {mine} (layer {_layer_of(mine)}) imports {target} "
                    f"(layer {_layer_of(theirs)}, higher)"
                )
    problems += [f"import cycle: {' -> '.join(c)}" for c in _cycles(edges)]
    return problems


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []

    def visit(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                cycles.append([*path, start])
            elif nxt not in path and nxt > start:  # each cycle once, from its smallest member
                visit(start, nxt, [*path, nxt])

    for start in sorted(edges):
        visit(start, start, [start])
    return cycles


def test_passnet_has_no_layering_violation() -> None:
    assert layering_problems(ROOT) == []


def test_every_top_level_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in ROOT.glob("*.py") if p.stem != "__init__"}
    for name in packages | modules:
        _layer_of(name)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "passnet"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (  # a lower layer importing a higher one, inside a function
            {
                "record/__init__.py": "",
                "score/__init__.py": "",
                "record/_schema.py": "def f():\n    from passnet.score import x\n",
            },
            "record (layer 1) imports passnet.score.x (layer 9, higher)",
        ),
        (  # another package's private module
            {
                "sample/__init__.py": "",
                "sample/_replay.py": "",
                "dataset/__init__.py": "",
                "dataset/_a.py": "from passnet.sample._replay import replay_value\n",
            },
            "imports passnet.sample._replay, private to passnet.sample",
        ),
        (  # a sibling subpackage's private module, by a relative import
            {
                "passes/__init__.py": "",
                "passes/integrity/__init__.py": "",
                "passes/integrity/_guard.py": "",
                "passes/_backend.py": "from .integrity._guard import DispatchGuard\n",
            },
            "imports passnet.passes.integrity._guard, private to passnet.passes.integrity",
        ),
        (  # a cycle within one layer
            {
                "errors.py": "from passnet.registry import Registry\n",
                "registry.py": "from passnet.errors import RegistryError\n",
            },
            "import cycle: errors -> registry -> errors",
        ),
    ],
)
def test_the_check_finds_each_kind_of_violation(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    problems = layering_problems(_tree(tmp_path, files))
    assert any(expected in p for p in problems), problems
