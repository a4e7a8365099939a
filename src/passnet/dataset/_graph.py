"""The static graph of a sample: an FX trace of ``model.py`` and canonical operator names.

``torch.fx.symbolic_trace`` alone loses two kinds of calls that Dynamo-generated
code contains: factory calls whose arguments are all constants (``torch.arange(0,
1000)``, ``torch.full(...)``) run eagerly and turn into tensor constants, and the
``torch._check*`` assertions raise on proxies (GraphNet's torch_geometric samples
cannot be traced at all). :func:`trace_module` records both as ``call_function``
nodes (with :class:`passnet.sample._trace.SampleTracer`, the tracer the pass manager uses
too), so the traced graph has one node per call in ``model.py``.

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
import importlib
import importlib.util
import operator
import re
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from passnet.errors import DatasetError
from passnet.sample import Sample
from passnet.sample._trace import SampleTracer

__all__ = [
    "canonical_op_name",
    "compute_nodes",
    "declared_custom_ops",
    "load_custom_op",
    "op_resolves",
    "is_builtin_op_namespace",
    "model_line",
    "node_line",
    "op_sequence",
    "qualified_name",
    "trace_module",
    "trace_sample",
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


_MODEL_LINE = re.compile(r'File "[^"]*model\.py", line (\d+)')


def trace_module(module: torch.nn.Module, *, stack_traces: bool = False) -> torch.fx.GraphModule:
    """Trace ``module`` into an FX graph with one node per call (see the module doc).

    With ``stack_traces`` every node's ``stack_trace`` names its line in ``model.py``.
    """
    tracer = SampleTracer()
    tracer.record_stack_traces = stack_traces
    graph = tracer.trace(module)
    return torch.fx.GraphModule(tracer.root, graph, module.__class__.__name__)


def node_line(node: torch.fx.Node) -> int | None:
    """The ``model.py`` line a traced node comes from (needs ``stack_traces=True``)."""
    found = _MODEL_LINE.findall(node.stack_trace or "")
    return int(found[-1]) if found else None


def model_line(exc: BaseException) -> int | None:
    """The innermost ``model.py`` line in the traceback of ``exc``."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith("model.py"):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def declared_custom_ops(sample: Sample) -> dict[str, dict[str, Any]]:
    """``graph_net.json`` ``custom_ops`` entries by operator (``"ns::op"``)."""
    entries = sample.graph_net.get("custom_ops", [])
    return (
        {str(e.get("op")): e for e in entries if isinstance(e, dict)}
        if isinstance(entries, list)
        else {}
    )


def op_resolves(qualname: str) -> bool:
    """True when ``torch.ops.<ns>.<op>`` exists in this process."""
    namespace, _, op = qualname.partition("::")
    try:
        getattr(getattr(torch.ops, namespace), op)
    except (AttributeError, RuntimeError):
        return False
    return True


def load_custom_op(sample: Sample, entry: dict[str, Any]) -> None:
    """Make a declared custom operator available: run the sample's copy of its source
    (``custom_ops/...``) or import its module. Code already registered is not run again;
    a declared source that is missing is an error either way."""
    source = entry.get("source")
    path = sample.path / str(source) if source else None
    if path is not None and not path.is_file():
        raise FileNotFoundError(f"{source} is declared but missing from the sample")
    if op_resolves(str(entry.get("op"))):
        return
    if path is not None:
        spec = importlib.util.spec_from_file_location(f"passnet_custom_ops_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {source}")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    elif entry.get("module"):
        importlib.import_module(str(entry["module"]))


def trace_sample(sample: Sample, *, stack_traces: bool = False) -> torch.fx.GraphModule:
    """The FX graph of a sample's ``model.py`` (built on CPU; nothing is computed).

    Custom operators declared in ``graph_net.json`` are loaded first. Raises
    :class:`DatasetError` naming the sample, the file and the failing line.
    """
    for qualname, entry in declared_custom_ops(sample).items():
        try:
            load_custom_op(sample, entry)
        except Exception as exc:  # noqa: BLE001 - user code: reported with the operator
            raise DatasetError(
                f"cannot load custom operator {qualname}: {type(exc).__name__}: {exc}",
                sample=sample.path,
                file="graph_net.json",
                constraint="custom_op_accessible",
            ) from exc
    module = sample.build_module("cpu")
    try:
        return trace_module(module, stack_traces=stack_traces)
    except Exception as exc:  # noqa: BLE001 - any tracing failure is reported with its line
        raise DatasetError(
            f"cannot trace model.py: {type(exc).__name__}: {exc}",
            sample=sample.path,
            file="model.py",
            line=model_line(exc),
            constraint="statically_analyzable",
        ) from exc
