"""Tensor metadata files (``weight_meta.py`` / ``input_meta.py``): parse and write.

The files are data, not code: they are parsed with :mod:`ast` and only literal
values are accepted, so a malformed file gives a precise error (file, class,
field, line) and nothing in it is executed.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from passnet._parse import parse_python
from passnet.errors import SampleError

__all__ = ["TensorMeta", "dtype_from_str", "dtype_to_str", "parse_meta_file", "render_meta_file"]

_DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in (
        "float16 bfloat16 float32 float64 complex32 complex64 complex128 "
        "int8 int16 int32 int64 uint8 bool float8_e4m3fn float8_e5m2"
    ).split()
    if hasattr(torch, name)
}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}

CLASS_PREFIX = "Program_weight_tensor_meta_"


def dtype_from_str(text: str) -> torch.dtype:
    """``"torch.float32"`` (or ``"float32"``) → ``torch.float32``; KeyError if unknown."""
    return _DTYPES[text.removeprefix("torch.")]


def dtype_to_str(dtype: torch.dtype) -> str:
    return f"torch.{_DTYPE_NAMES[dtype]}"


@dataclass
class TensorMeta:
    """Metadata of one graph parameter (weight, buffer, input, lifted scalar or SymInt)."""

    name: str
    shape: list[int]
    dtype: torch.dtype
    device: str = "cpu"
    mean: float | None = None
    std: float | None = None
    data: list[Any] | None = None
    min_val: float | None = None
    max_val: float | None = None
    original_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class _FloatCalls(ast.NodeTransformer):
    """Turn ``float("<number>")`` calls into constants: GraphNet writes NaN and infinities so
    in torch samples, and every float so in Paddle samples (``min_val = float("-0.48")``)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "float"
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            try:
                value = float(node.args[0].value)
            except ValueError:  # not a number: literal_eval reports the call
                return self.generic_visit(node)
            return ast.copy_location(ast.Constant(value), node)
        return self.generic_visit(node)


def _literal(node: ast.expr, where: dict[str, Any]) -> Any:
    try:
        return ast.literal_eval(_FloatCalls().visit(node))
    except (ValueError, SyntaxError, TypeError) as exc:
        raise SampleError("value is not a literal", **where) from exc


def parse_meta_file(path: Path, sample: Path | None = None) -> list[TensorMeta]:
    """Parse every ``class Program_weight_tensor_meta_*`` of a metadata file, in file order.

    Missing optional attributes are None. ``name``, ``shape`` and ``dtype`` are required.
    """
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SampleError(
            f"cannot read metadata: {exc.strerror}", sample=sample, file=path.name
        ) from exc
    except UnicodeDecodeError as exc:
        raise SampleError(
            f"metadata is not UTF-8 text ({exc.reason} at byte {exc.start})",
            sample=sample,
            file=path.name,
        ) from exc
    try:
        tree = parse_python(source, str(path))
    except SyntaxError as exc:
        raise SampleError(
            f"syntax error: {exc.msg}", sample=sample, file=path.name, line=exc.lineno
        ) from exc
    metas: list[TensorMeta] = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        attrs: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    where = dict(sample=sample, file=path.name, line=stmt.lineno)
                    where["field"] = f"{node.name}.{target.id}"
                    attrs[target.id] = _literal(stmt.value, where)
                    lines[target.id] = stmt.lineno
        metas.append(_meta_from_attrs(attrs, lines, node, path, sample))
    return metas


def _meta_from_attrs(
    attrs: dict[str, Any],
    lines: dict[str, int],
    node: ast.ClassDef,
    path: Path,
    sample: Path | None,
) -> TensorMeta:
    def err(msg: str, fld: str) -> SampleError:
        # the field's own line; the class's where the field is missing
        line = lines.get(fld, node.lineno)
        return SampleError(
            msg, sample=sample, file=path.name, line=line, field=f"{node.name}.{fld}"
        )

    for required in ("shape", "dtype"):
        if required not in attrs:
            raise err(f"meta class has no '{required}'", required)
    name = attrs.get("name", node.name.removeprefix(CLASS_PREFIX))
    shape = attrs["shape"]
    if not isinstance(shape, (list, tuple)) or not all(
        isinstance(d, int) and d >= 0 for d in shape
    ):
        raise err(f"shape must be a list of non-negative ints, got {shape!r}", "shape")
    try:
        dtype = dtype_from_str(str(attrs["dtype"]))
    except KeyError:
        raise err(f"unknown dtype {attrs['dtype']!r}", "dtype") from None
    data = attrs.get("data")
    if data is not None:
        if not isinstance(data, (list, tuple)):
            data = [data]
        if len(data) != math.prod(shape):
            raise err(
                f"data has {len(data)} values, shape {list(shape)} needs {math.prod(shape)}", "data"
            )
    known = {
        "name",
        "shape",
        "dtype",
        "device",
        "mean",
        "std",
        "data",
        "min_val",
        "max_val",
        "original_name",
    }
    return TensorMeta(
        name=str(name),
        shape=list(shape),
        dtype=dtype,
        device=str(attrs.get("device", "cpu")),
        mean=attrs.get("mean"),
        std=attrs.get("std"),
        data=list(data) if data is not None else None,
        min_val=attrs.get("min_val"),
        max_val=attrs.get("max_val"),
        original_name=attrs.get("original_name"),
        extra={k: v for k, v in attrs.items() if k not in known},
    )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
    return repr(value)


def render_meta_file(metas: list[TensorMeta]) -> str:
    """GraphNet-style metadata source. Floats keep full precision (repr)."""
    blocks = []
    for m in metas:
        lines = [
            f"class {CLASS_PREFIX}{m.name}:",
            f"    name = {m.name!r}",
            f"    shape = {list(m.shape)!r}",
            f'    dtype = "{dtype_to_str(m.dtype)}"',
            f"    device = {m.device!r}",
            f"    mean = {_fmt(m.mean)}",
            f"    std = {_fmt(m.std)}",
            f"    data = {'None' if m.data is None else '[' + ', '.join(_fmt(v) for v in m.data) + ']'}",
        ]
        for key in ("min_val", "max_val", "original_name"):
            value = getattr(m, key)
            if value is not None:
                lines.append(f"    {key} = {_fmt(value)}")
        for key, value in m.extra.items():
            lines.append(f"    {key} = {_fmt(value)}")
        blocks.append("\n".join(lines))
    return ("\n\n\n".join(blocks) + "\n") if blocks else ""
