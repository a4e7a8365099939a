"""The canonical form of a Paddle sample's graph, read from ``model.py``'s syntax tree.

A Paddle sample's ``forward`` is straight-line code, one Paddle operator call per
statement (``conv2d_0 = paddle._C_ops.conv2d(data_0, parameter_3, [1, 1], ...)``), with
``del`` statements between. Its canonical form is the torch one's
(:class:`CanonicalGraph`): inputs numbered by first use with their shapes and dtypes, each
call with its dotted operator name and its arguments (variables replaced by those numbers
and by node references, constants by value), and the returned values. Variable names do not
enter it, nor does anything Paddle computes: the parent reads it without Paddle.
"""

from __future__ import annotations

import ast
from typing import Any

from passnet._parse import parse_python
from passnet.errors import DatasetError
from passnet.sample import Sample

__all__ = ["paddle_canonical_graph"]


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _forward(sample: Sample) -> ast.FunctionDef:
    tree = parse_python(sample.model_source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "GraphModule":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return item
    raise DatasetError("model.py has no GraphModule.forward", sample=sample.path)


def paddle_canonical_graph(sample: Sample) -> Any:
    """The :class:`~passnet.dataset.CanonicalGraph` of a Paddle sample. Raises
    :class:`~passnet.errors.DatasetError` (with the line) for a statement that is not an
    assignment, a ``del`` or the ``return``."""
    from passnet.dataset._hash import CanonicalGraph, _input_spec

    forward = _forward(sample)
    params = [a.arg for a in forward.args.args[1:]]
    refs: dict[str, Any] = {}
    inputs: list[Any] = []
    nodes: list[list[Any]] = []
    ops: list[str] = []
    outputs: Any = []

    def where(node: ast.AST) -> DatasetError:
        return DatasetError(
            f"cannot read this statement of forward(): {ast.unparse(node)[:120]}",
            sample=sample.path,
            file="model.py",
            line=getattr(node, "lineno", None),
        )

    def encode(node: ast.expr) -> Any:
        if isinstance(node, ast.Name):
            if node.id in refs:
                return refs[node.id]
            if node.id in params:
                refs[node.id] = f"in{len(inputs)}"
                inputs.append(_input_spec(sample.metas.get(node.id), node.id, sample))
                return refs[node.id]
            return {"name": node.id}  # a global (``paddle``): by name
        if isinstance(node, ast.Constant):
            value = node.value
            return {"f": repr(value)} if isinstance(value, float) else value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [encode(e) for e in node.elts]
        if isinstance(node, ast.Attribute):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and (root.id in refs or root.id in params):
                # an attribute of a value (``reshape_1.dtype``): of its reference, not its name
                return {"of": encode(node.value), "attr": node.attr}
            if (name := _dotted(node)) is not None:
                return {"attr": name}  # a global's (``paddle.float32``)
        if isinstance(node, ast.Call):
            return {
                "call": _dotted(node.func) or encode(node.func),
                "args": [encode(a) for a in node.args],
                "kwargs": [[k.arg, encode(k.value)] for k in node.keywords],
            }
        if isinstance(node, ast.UnaryOp):
            return {"unary": type(node.op).__name__, "x": encode(node.operand)}
        if isinstance(node, ast.BinOp):  # ``reshape_1 % paddle.cast(full_9, reshape_1.dtype)``
            return {
                "binop": type(node.op).__name__,
                "x": encode(node.left),
                "y": encode(node.right),
            }
        if isinstance(node, ast.Compare):
            return {
                "compare": [type(o).__name__ for o in node.ops],
                "x": [encode(node.left), *(encode(c) for c in node.comparators)],
            }
        if isinstance(node, ast.Lambda):  # its parameters are its own: by its text
            return {"lambda": ast.unparse(node)}
        if isinstance(node, ast.Subscript):
            return {"item": [encode(node.value), encode(node.slice)]}
        if isinstance(node, ast.Slice):
            return {
                "slice": [
                    encode(e) if e is not None else None
                    for e in (node.lower, node.upper, node.step)
                ]
            }
        raise where(node)

    for stmt in forward.body:
        if isinstance(stmt, ast.Delete) or (
            isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        ):
            continue
        if isinstance(stmt, ast.Return):
            outputs = encode(stmt.value) if stmt.value is not None else None
            continue
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            raise where(stmt)
        target, value = stmt.targets[0], stmt.value
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Lambda)
            and value.args
            and isinstance(value.args[0], ast.Call)
        ):
            # ``(lambda x, f: f(x))(paddle._C_ops.dropout(...), <as a tuple>)``: the
            # generator's way to unpack an operator's outputs; the operator is the node
            value = value.args[0]
        if isinstance(value, ast.Call) and (op := _dotted(value.func)) is not None:
            ref = f"%{len(nodes)}"
            nodes.append(
                [
                    op,
                    [encode(a) for a in value.args],
                    {k.arg: encode(k.value) for k in value.keywords if k.arg is not None},
                ]
            )
            ops.append(op)
            produced: Any = ref
        else:  # a literal or an alias (``full_int_array_0 = [0]``): stands for its value
            produced = encode(value)
        if isinstance(target, ast.Name):
            refs[target.id] = produced
        elif isinstance(target, (ast.Tuple, ast.List)) and all(
            isinstance(e, ast.Name) for e in target.elts
        ):
            for i, e in enumerate(target.elts):
                refs[e.id] = {"item": [produced, i]}  # type: ignore[attr-defined]
        else:
            raise where(stmt)
    return CanonicalGraph(inputs, nodes, outputs, ops)
