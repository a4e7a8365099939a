"""Operator names and node rendering for traced graphs (:mod:`passnet.sample._graph`).

Canonical names make one operator one name whatever its spelling or the torch
version that wrote the file: ``torch._C._nn.linear`` and
``torch.nn.functional.linear`` are both ``F.linear``, ``torch._C._VariableFunctions.relu``
is ``torch.relu``, ``x.view(...)`` is ``Tensor.view``, ``a + b`` is ``operator.add``.
The mapping is by name, never by object identity, because which functions are
aliases of which differs between torch versions.
"""

from __future__ import annotations

import builtins
import functools
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.node import _get_qualified_name

__all__ = [
    "canonical_op_name",
    "compute_nodes",
    "describe_op",
    "format_node",
    "is_builtin_op_namespace",
    "op_sequence",
    "qualified_name",
]

# Private namespace -> (public namespace, prefix the private name carries).
_NAMESPACES: tuple[tuple[str, str, str], ...] = (
    ("torch._C._nn", "F", ""),
    ("torch.nn.functional", "F", ""),
    ("torch._C._VariableFunctions", "torch", ""),
    ("torch.functional", "torch", ""),
    ("torch._C._linalg", "torch.linalg", "linalg_"),
    ("torch._C._fft", "torch.fft", "fft_"),
    ("torch._C._special", "torch.special", "special_"),
    ("torch._C._nested", "torch.nested", "nested_"),
    ("_operator", "operator", ""),
    ("operator", "operator", ""),
    ("math", "math", ""),
)
# ``torch.X`` that are the same operator as ``F.X`` (one object in torch 2.13); fixed by
# name so the canonical name does not depend on the running version.
_TORCH_IS_F = frozenset(
    "adaptive_avg_pool1d avg_pool1d bilinear celu_ channel_shuffle conv1d conv2d conv3d "
    "conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d cosine_similarity hardshrink "
    "native_channel_shuffle pairwise_distance pdist pixel_shuffle pixel_unshuffle prelu relu_ "
    "rrelu_ selu_ threshold_".split()
)
_RENAMES = {"torch._sym_sqrt": "torch.sym_sqrt", "operator.__setitem__": "operator.setitem"}
_INPLACE_OPERATORS = frozenset(
    "iadd iand ifloordiv ilshift imatmul imod imul ior ipow irshift isub itruediv ixor".split()
)
_BUILTIN_NAMESPACES = frozenset(
    "aten prims _prims quantized _quantized quantized_decomposed rngprims higher_order "
    "profiler inductor debugprims _c10d_functional c10d _dtensor".split()
)


def is_builtin_op_namespace(namespace: str) -> bool:
    """True for ``torch.ops`` namespaces that ship with torch (``aten``, ``prims``, ...)."""
    return namespace in _BUILTIN_NAMESPACES


def _module_of(target: Callable[..., Any]) -> str | None:
    module = getattr(target, "__module__", None)
    if module is not None:
        return module
    # Builtin methods of torch's C namespaces carry no __module__: find where they live.
    name = getattr(target, "__name__", "")
    for candidate in (torch.nn.functional, torch, torch.linalg, torch.fft, torch.special):
        if getattr(candidate, name, None) is target:
            return candidate.__name__
    return None


def qualified_name(target: Any) -> str:
    """``module.name`` of a ``call_function`` target, as far as it can be named.

    ``torch.ops`` overloads are ``torch.ops.<ns>.<op>.<overload>``; builtins are bare
    (``getattr``); anything nameless is ``<unnamed:TYPE>``.
    """
    if isinstance(target, torch._ops.OpOverload):
        ns, _, rest = target.name().partition("::")
        return f"torch.ops.{ns}.{rest}" if "." in rest else f"torch.ops.{ns}.{rest}.default"
    if isinstance(target, torch._ops.OpOverloadPacket):
        ns, _, rest = target._qualified_op_name.partition("::")
        return f"torch.ops.{ns}.{rest}"
    name = getattr(target, "__name__", None)
    if name is None:
        return f"<unnamed:{type(target).__name__}>"
    if getattr(builtins, name, None) is target:
        return name
    module = _module_of(target)
    return f"{module}.{name}" if module else name


@functools.lru_cache(maxsize=4096)
def _canonical_from_qualified(qualified: str) -> str:
    if qualified in _RENAMES:
        return _RENAMES[qualified]
    module, _, name = qualified.rpartition(".")
    for private, public, prefix in _NAMESPACES:
        if module == private:
            name = name.removeprefix(prefix)
            if public == "operator":
                if name in _INPLACE_OPERATORS:
                    name = name[1:]
                return _RENAMES.get(f"operator.{name}", f"operator.{name}")
            if public == "torch" and name in _TORCH_IS_F:
                return f"F.{name}"
            return f"{public}.{name}"
    if module == "torch" and name in _TORCH_IS_F:
        return f"F.{name}"
    return qualified


@functools.lru_cache(maxsize=1024)
def _canonical_method(name: str) -> str:
    # ``x.__eq__(y)`` (how some Dynamo versions write ``x == y``) is ``operator.eq``;
    # reflected (``__radd__``) and in-place (``__iadd__``) dunders name the same operator.
    if name.startswith("__") and name.endswith("__"):
        bare = name[2:-2]
        for candidate in (bare, f"{bare}_", bare[1:], f"{bare[1:]}_"):
            if candidate and hasattr(operator, candidate) and not candidate.startswith("_"):
                return _canonical_from_qualified(f"operator.{candidate}")
    return f"Tensor.{name}"


def canonical_op_name(node: torch.fx.Node) -> str | None:
    """One name per operator, independent of spelling and torch version; None for
    placeholders, outputs and attribute reads."""
    if node.op == "call_method":
        return _canonical_method(str(node.target))
    if node.op == "call_function":
        return _canonical_from_qualified(qualified_name(node.target))
    if node.op == "call_module":
        return f"module.{node.target}"
    return None


def compute_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The call nodes of ``gm`` in graph order (what a decomposition cuts into ranges)."""
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def op_sequence(gm: torch.fx.GraphModule) -> list[str]:
    """Canonical operator names of the call nodes, in graph order."""
    return [name for n in compute_nodes(gm) if (name := canonical_op_name(n)) is not None]


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    try:
        name = _get_qualified_name(target)
    except Exception:  # noqa: BLE001 - any callable renders, importable or not
        name = (
            getattr(target, "__qualname__", None)
            or getattr(target, "__name__", None)
            or repr(target)
        )
    return name.replace("_operator.", "operator.")


def _fmt_arg(arg: Any) -> str:
    if isinstance(arg, torch.fx.Node):
        return arg.name
    if isinstance(arg, tuple):
        inner = ", ".join(_fmt_arg(a) for a in arg)
        return f"({inner},)" if len(arg) == 1 else f"({inner})"
    if isinstance(arg, list):
        return "[" + ", ".join(_fmt_arg(a) for a in arg) + "]"
    if isinstance(arg, slice):
        return f"slice({_fmt_arg(arg.start)}, {_fmt_arg(arg.stop)}, {_fmt_arg(arg.step)})"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k!r}: {_fmt_arg(v)}" for k, v in arg.items()) + "}"
    return repr(arg)


def format_node(node: torch.fx.Node) -> str:
    """One node as the Python line it stands for, e.g. ``sum_1 = torch.sum(mul, 1)``."""
    if node.op == "placeholder":
        return f"{node.name} (input)"
    if node.op == "output":
        return f"return {_fmt_arg(node.args[0])}"
    if node.op == "get_attr":
        return f"{node.name} = self.{node.target}"
    args = [_fmt_arg(a) for a in node.args]
    kwargs = [f"{k}={_fmt_arg(v)}" for k, v in node.kwargs.items()]
    if node.op == "call_method":
        receiver, rest = (args[0], args[1:]) if args else ("?", [])
        return f"{node.name} = {receiver}.{node.target}({', '.join([*rest, *kwargs])})"
    if node.op == "call_module":
        return f"{node.name} = self.{node.target}({', '.join([*args, *kwargs])})"
    if node.target is operator.getitem and len(node.args) == 2:
        return f"{node.name} = {args[0]}[{args[1]}]"
    return f"{node.name} = {_target_name(node.target)}({', '.join([*args, *kwargs])})"


def describe_op(node: torch.fx.Node) -> str:
    """The operation of a node without its operands: ``torch.sum``, ``.sum``, ``input``."""
    if node.op == "placeholder":
        return "an input"
    if node.op == "call_method":
        return f"method .{node.target}()"
    if node.op == "call_function":
        return _target_name(node.target)
    return f"{node.op} {node.target}"
