"""``input_tensor_constraints.py``: symbolic dynamic dimensions of a sample."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy

from passnet.errors import SampleError

__all__ = ["Constraints", "parse_constraints_file", "render_constraints_file"]


@dataclass
class Constraints:
    """Dynamic-dimension symbols, their example values, and each parameter's symbolic shape."""

    symbols: list[str] = field(default_factory=list)
    example_values: dict[str, int] = field(default_factory=dict)
    relations: list[str] = field(default_factory=list)
    input_shapes: dict[str, list[int | str]] = field(default_factory=dict)
    """Parameter name → shape whose entries are ints or sympy expressions as strings."""


def _sympy_only_import(name: str, *args: Any, **kwargs: Any) -> Any:
    if name != "sympy" and not name.startswith("sympy."):
        raise ImportError(f"constraints files may import only sympy, not {name!r}")
    return builtins.__import__(name, *args, **kwargs)


def parse_constraints_file(path: Path, sample: Path | None = None) -> Constraints:
    """Evaluate a constraints file in a namespace that only offers sympy."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SampleError(f"cannot read: {exc.strerror}", sample=sample, file=path.name) from exc
    except UnicodeDecodeError as exc:
        raise SampleError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})", sample=sample, file=path.name
        ) from exc
    safe_builtins = {"__import__": _sympy_only_import, "int": int, "list": list, "tuple": tuple}
    namespace: dict[str, Any] = {"__builtins__": safe_builtins}
    try:
        exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 - sympy-only namespace
    except SyntaxError as exc:
        raise SampleError(
            f"syntax error: {exc.msg}", sample=sample, file=path.name, line=exc.lineno
        ) from exc
    except Exception as exc:  # noqa: BLE001 - any failure of a data file is a sample error
        raise SampleError(
            f"cannot evaluate: {type(exc).__name__}: {exc}", sample=sample, file=path.name
        ) from exc

    def get(name: str, default: Any) -> Any:
        return namespace.get(name, default)

    try:
        symbols = [str(s) for s in get("dynamic_dim_constraint_symbols", [])]
        examples = {
            str(k): int(v)
            for k, v in get("dynamic_dim_constraint_symbol2example_value", {}).items()
        }
        relations = [str(r) for r in get("dynamic_dim_constraint_relations", [])]
        shapes: dict[str, list[int | str]] = {}
        for shape, name in get("dynamic_dim_constraint_input_shapes", []):
            shapes[str(name)] = [
                int(d) if isinstance(d, (int, sympy.Integer)) else str(d) for d in shape
            ]
    except (TypeError, ValueError) as exc:
        raise SampleError(f"malformed constraints: {exc}", sample=sample, file=path.name) from exc
    return Constraints(symbols, examples, relations, shapes)


def render_constraints_file(c: Constraints) -> str:
    """Source of a constraints file in GraphNet's layout."""
    lines = ["from sympy import Symbol, Expr, Rel, Eq", ""]
    for s in c.symbols:
        lines.append(f'{s} = Symbol("{s}")')
    lines += [
        "",
        f"dynamic_dim_constraint_symbols = [{', '.join(c.symbols)}]",
        "",
        "dynamic_dim_constraint_symbol2example_value = {"
        + ", ".join(f"{s}: {c.example_values[s]}" for s in c.symbols if s in c.example_values)
        + "}",
        "",
        f"dynamic_dim_constraint_relations = [{', '.join(c.relations)}]",
        "",
        "dynamic_dim_constraint_input_shapes = [",
    ]
    for name, shape in c.input_shapes.items():
        dims = ", ".join(str(d) for d in shape)
        lines.append(f'    ([{dims}], "{name}"),')
    lines.append("]")
    return "\n".join(lines) + "\n"
