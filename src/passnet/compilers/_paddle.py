"""Compilers of Paddle samples (docs/paddle.md): Paddle's static graph, with and without CINN.

Paddle is imported when a graph is compiled, in the evaluation child only: registering
these compilers needs no Paddle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from passnet.compilers._base import Compiler, register_compiler

__all__ = ["PaddleCinn", "PaddleStatic"]


class _PaddleToStatic(Compiler):
    """``paddle.jit.to_static(layer, input_spec, full_graph=True)``: the whole ``forward``
    as one static program (what GraphNet's Paddle harness calls its ``cinn`` backend),
    input specs from the example inputs' shapes and dtypes."""

    config_keys = frozenset()
    frameworks = frozenset({"paddle"})
    backend: str | None = None

    def compile(self, module: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        import paddle

        spec = [paddle.static.InputSpec(t.shape, t.dtype) for t in example_inputs]
        build_strategy = paddle.static.BuildStrategy()
        if self.backend == "CINN":
            build_strategy.build_cinn_pass = True
        static = paddle.jit.to_static(
            module,
            input_spec=spec,
            build_strategy=build_strategy,
            backend=self.backend,
            full_graph=True,
        )
        static.eval()
        return static


@register_compiler("paddle-static")
class PaddleStatic(_PaddleToStatic):
    """Paddle's static graph, without CINN. Takes no config."""


@register_compiler("paddle-cinn")
class PaddleCinn(_PaddleToStatic):
    """Paddle's static graph compiled by CINN (``backend="CINN"``): needs a Paddle built
    with CINN (``paddle.device.is_compiled_with_cinn()``), a run is refused before any graph
    runs where it is not. Takes no config."""

    backend = "CINN"
    needs_cinn = True
