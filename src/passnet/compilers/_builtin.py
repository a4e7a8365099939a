"""Built-in compilers: eager, TorchInductor (default and max-autotune), CUDA graphs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from passnet.compilers._base import Compiler, register_compiler

__all__ = ["CudaGraphs", "Eager", "Inductor", "InductorMaxAutotune", "stop_compile_workers"]


@register_compiler("eager")
class Eager(Compiler):
    """The module itself: the A/A baseline."""

    def compile(self, module: torch.nn.Module, example_inputs: list[Any]) -> Callable[..., Any]:
        return module


@register_compiler("inductor")
class Inductor(Compiler):
    """``torch.compile`` with its defaults (TorchInductor)."""

    mode: str | None = None

    def compile(self, module: torch.nn.Module, example_inputs: list[Any]) -> Callable[..., Any]:
        # A fresh Dynamo state per graph: evaluations never share compiled code.
        torch._dynamo.reset()
        options = {k: v for k, v in self.config.items() if k != "dynamic"}
        kwargs: dict[str, Any] = {
            "backend": "inductor",
            "dynamic": self.config.get("dynamic", False),
        }
        if self.mode:
            kwargs["mode"] = self.mode
        elif options:
            kwargs["options"] = options
        compiled = torch.compile(module, **kwargs)
        # torch.compile is lazy: compile now, so that compiler failures surface in
        # the compile stage (compile_error) and not in the first checked call.
        with torch.no_grad():
            compiled(*example_inputs)
        stop_compile_workers()
        return compiled


def stop_compile_workers() -> None:
    """Stop Inductor's pool of compile worker processes once compilation is done.

    The pool outlives compilation; its processes start and idle on the same CPUs
    that launch kernels, which slows launch-bound graphs during timing.
    """
    try:
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:  # older torch: nothing to stop
        return
    shutdown_compile_workers()


@register_compiler("inductor-max-autotune")
class InductorMaxAutotune(Inductor):
    """``torch.compile(mode="max-autotune")``."""

    mode = "max-autotune"


@register_compiler("cudagraphs")
class CudaGraphs(Inductor):
    """``torch.compile(mode="reduce-overhead")``: Inductor plus CUDA-graph replay (CUDA only)."""

    mode = "reduce-overhead"
    requires_cuda = True
