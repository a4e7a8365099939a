"""``model.py``: device-rewritten loading of the Dynamo-generated ``GraphModule``.

Real samples spell devices many ways (``device(type="cuda", index=0)``,
``device="cuda:0"``, ``device=0``, ``torch.device("cuda")``, ``.to("cpu")``, ``.to(0)``,
``.cuda()``, ``.cuda(1)``); an AST
transform rewrites all of them to the target device, so the source keeps its
line numbers for tracebacks.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any

import torch

from passnet._parse import parse_python
from passnet.errors import SampleError

__all__ = ["compile_model_source", "forward_parameters", "rewrite_devices"]

_DEVICE_STR = re.compile(r"^(cuda|cpu)(:\d+)?$")


class _DeviceRewriter(ast.NodeTransformer):
    def __init__(self, target: str) -> None:
        self.target = target

    def _is_device_call(self, func: ast.expr) -> bool:
        return (isinstance(func, ast.Name) and func.id == "device") or (
            isinstance(func, ast.Attribute)
            and func.attr == "device"
            and isinstance(func.value, ast.Name)
            and func.value.id == "torch"
        )

    def _target(self, node: ast.AST) -> ast.Constant:
        return ast.copy_location(ast.Constant(self.target), node)

    def _maybe_device_value(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Constant) and (
            (isinstance(node.value, str) and _DEVICE_STR.match(node.value))
            # an ordinal: device=0, .to(0) (never a bool, which is an int too)
            or (isinstance(node.value, int) and not isinstance(node.value, bool))
        ):
            return self._target(node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if self._is_device_call(node.func):
            # device(type="cuda", index=0) / torch.device("cuda:0") -> device("<target>")
            node.args = [self._target(node)]
            node.keywords = []
            return node
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "cuda"
            and len(node.args) <= 1
        ):
            # .cuda(), .cuda(0), .cuda(device=1, non_blocking=True) -> .to("<target>", ...)
            node.func.attr = "to"
            node.args = [self._target(node)]
            node.keywords = [k for k in node.keywords if k.arg != "device"]
            return node
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to" and node.args:
            node.args[0] = self._maybe_device_value(node.args[0])
        for kw in node.keywords:
            if kw.arg == "device":
                kw.value = self._maybe_device_value(kw.value)
        return node


def rewrite_devices(source: str, target: str, filename: str = "model.py") -> ast.Module:
    """Parse ``source`` and rewrite every device spelling to ``target``."""
    tree = parse_python(source, filename)
    tree = _DeviceRewriter(target).visit(tree)
    return ast.fix_missing_locations(tree)


def _namespace() -> dict[str, Any]:
    # Names Dynamo-generated code uses without importing them.
    return {
        "__name__": "passnet_sample_model",
        "torch": torch,
        "device": torch.device,
        "inf": math.inf,
        "nan": math.nan,
    }


def compile_model_source(
    source: str, target: str, filename: str, sample: Path | None = None
) -> type[torch.nn.Module]:
    """Execute ``model.py`` (devices rewritten to ``target``) and return its ``GraphModule`` class."""
    try:
        tree = rewrite_devices(source, target, filename)
    except SyntaxError as exc:
        raise SampleError(
            f"syntax error: {exc.msg}", sample=sample, file="model.py", line=exc.lineno
        ) from exc
    namespace = _namespace()
    try:
        exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - sample code runs by design
    except Exception as exc:  # noqa: BLE001 - module-level failure of a sample is a sample error
        raise SampleError(
            f"model.py fails at import: {type(exc).__name__}: {exc}", sample=sample, file="model.py"
        ) from exc
    cls = namespace.get("GraphModule")
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise SampleError(
            "model.py defines no 'class GraphModule(torch.nn.Module)'",
            sample=sample,
            file="model.py",
        )
    return cls


def forward_parameters(source: str, sample: Path | None = None) -> list[tuple[str, str]]:
    """``(name, annotation)`` of ``GraphModule.forward``'s parameters, in order, read from the AST."""
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        raise SampleError(
            f"syntax error: {exc.msg}", sample=sample, file="model.py", line=exc.lineno
        ) from exc
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "GraphModule":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    args = item.args.args[1:]  # drop self
                    return [
                        (a.arg, ast.unparse(a.annotation) if a.annotation else "") for a in args
                    ]
            raise SampleError(
                "GraphModule has no forward()", sample=sample, file="model.py", line=node.lineno
            )
    raise SampleError("model.py defines no class GraphModule", sample=sample, file="model.py")
