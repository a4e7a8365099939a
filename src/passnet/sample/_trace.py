"""Symbolic tracing of a sample's ``GraphModule`` into a torch.fx graph.

``model.py`` is the code Dynamo generated, so :func:`torch.fx.symbolic_trace`
reproduces the calls Dynamo recorded. Two calls in Dynamo output cannot be traced
as they stand: ``torch._check`` and ``torch._check_is_size`` demand a real
``bool``. :class:`SampleTracer` keeps them as leaf calls in the graph (they run,
as checks, when the graph runs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx

__all__ = ["SampleTracer", "trace_module"]

_LEAF_CHECKS = ("_check", "_check_is_size")


class SampleTracer(torch.fx.Tracer):
    """``symbolic_trace`` that keeps ``torch._check*`` calls as graph nodes."""

    def _leaf(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def leaf(*args: Any, **kwargs: Any) -> Any:
            if any(isinstance(a, torch.fx.Proxy) for a in (*args, *kwargs.values())):
                return self.create_proxy("call_function", original, args, kwargs)
            return original(*args, **kwargs)

        return leaf

    @contextlib.contextmanager
    def _leaf_checks(self) -> Iterator[None]:
        # fx's own tracer patches torch the same way (Module.__call__, wrapped
        # functions) for the duration of a trace; the originals are restored after.
        originals = {name: getattr(torch, name) for name in _LEAF_CHECKS if hasattr(torch, name)}
        try:
            for name, fn in originals.items():
                setattr(torch, name, self._leaf(fn))
            yield
        finally:
            for name, fn in originals.items():
                setattr(torch, name, fn)

    def trace(self, root: Any, concrete_args: dict[str, Any] | None = None) -> torch.fx.Graph:
        with self._leaf_checks():
            return super().trace(root, concrete_args)


def trace_module(
    module: torch.nn.Module, tracer: SampleTracer | None = None
) -> torch.fx.GraphModule:
    """A fresh FX ``GraphModule`` of ``module`` traced with ``tracer`` (default: :class:`SampleTracer`)."""
    tracer = tracer or SampleTracer()
    graph = tracer.trace(module)
    return torch.fx.GraphModule(tracer.root, graph, type(module).__name__)
