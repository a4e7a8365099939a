"""Symbolic tracing of a sample's ``GraphModule`` into a torch.fx graph: the one tracer.

``model.py`` is the code Dynamo generated, so :func:`torch.fx.symbolic_trace`
reproduces the calls Dynamo recorded — except for two kinds of calls that it
cannot keep as they stand:

* **factory calls with constant arguments** (``torch.arange(0, 12)``,
  ``torch.zeros(...)``, ``torch.full(...)``): FX runs them at trace time and keeps
  only the resulting tensor, as a constant of the graph module. Everything
  computed from such a tensor alone (T5's relative-position buckets, Swin's
  shifted-window mask) is then folded too, and a graph that runs the trace does
  less work than ``model.py`` does. With ``keep_factories`` (the default) they are
  recorded as ``call_function`` nodes, and item assignments into their results
  (``mask[:, 0:3] = 1``, as Dynamo writes it) as ``operator.setitem`` nodes, so the
  traced graph has one node per call in ``model.py`` and runs all of them.
* ``torch._check`` and its relatives demand a real ``bool``; they are kept as leaf
  calls (they run, as checks, when the graph runs).

Only the sample's own module namespace sees the substitutions (its global
``torch`` is replaced by a view during the trace): torch itself is never patched,
so nothing else in the process (Dynamo's tables included) can observe a trace.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx

__all__ = ["CHECKS", "FACTORIES", "SampleTracer", "trace_module"]

FACTORIES: tuple[str, ...] = tuple(
    "arange as_tensor empty empty_strided eye full linspace logspace ones rand randint "
    "randn randperm scalar_tensor tensor tril_indices triu_indices zeros".split()
)
"""Tensor factories: with constant arguments FX would run them and keep only the result."""

CHECKS: tuple[str, ...] = tuple(
    "_check _check_index _check_is_size _check_not_implemented _check_type _check_value "
    "_check_with _check_tensor_all _check_tensor_all_with".split()
)
"""Assertions that call ``bool()`` on their argument and so fail on proxies."""


def _has_proxy(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    found = False

    def visit(value: Any) -> Any:
        nonlocal found
        found = found or isinstance(value, torch.fx.Proxy)
        return value

    torch.fx.node.map_aggregate((args, kwargs), visit)
    return found


class _SampleProxy(torch.fx.Proxy):
    """A proxy that also records item assignment (``mask[...] = value``), as Dynamo writes it."""

    def __setitem__(self, key: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, key, value), {})


class _TorchView(types.ModuleType):
    """What ``torch`` means inside ``model.py`` while it is traced: torch itself, except for
    the factories and checks that must become nodes."""

    def __init__(self, overrides: dict[str, Callable[..., Any]]) -> None:
        super().__init__("torch")
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


class SampleTracer(torch.fx.Tracer):
    """An FX tracer for ``model.py``: checks as leaf calls and, with ``keep_factories``,
    constant factories (and item assignments into them) as nodes."""

    def __init__(self, *, keep_factories: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.keep_factories = keep_factories

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return _SampleProxy(node, self)

    def _leaf(self, fn: Callable[..., Any], always: bool) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if always or _has_proxy(args, kwargs):
                return self.create_proxy("call_function", fn, args, kwargs)
            return fn(*args, **kwargs)

        return call

    @contextlib.contextmanager
    def _torch_view(self, root: Any) -> Iterator[None]:
        # a module's forward, or a plain function (a pass's pattern)
        code = (
            root if isinstance(root, types.FunctionType) else getattr(type(root), "forward", None)
        )
        namespace = getattr(code, "__globals__", None)
        if (
            not isinstance(namespace, dict)
            or namespace.get("torch") is not torch
            or str(namespace.get("__name__", "")).startswith("torch.")
        ):
            yield
            return
        groups = [(CHECKS, False)]
        if self.keep_factories:
            groups.append((FACTORIES, True))
        overrides = {
            name: self._leaf(getattr(torch, name), always)
            for names, always in groups
            for name in names
            if hasattr(torch, name)
        }
        namespace["torch"] = _TorchView(overrides)
        try:
            yield
        finally:
            namespace["torch"] = torch

    def trace(self, root: Any, concrete_args: dict[str, Any] | None = None) -> torch.fx.Graph:
        with self._torch_view(root):
            return super().trace(root, concrete_args)


def trace_module(
    module: torch.nn.Module, tracer: SampleTracer | None = None
) -> torch.fx.GraphModule:
    """A fresh FX ``GraphModule`` of ``module`` traced with ``tracer`` (default: :class:`SampleTracer`)."""
    tracer = tracer or SampleTracer()
    graph = tracer.trace(module)
    return torch.fx.GraphModule(tracer.root, graph, type(module).__name__)
