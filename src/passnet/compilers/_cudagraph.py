"""CUDA graphs where they pay, decided per graph from measurements (PyGraph's lesson).

Replaying a CUDA graph removes the launch cost of every kernel of a call, but it costs
something too: each call copies its inputs into the graph's static buffers (a GraphNet
graph takes its weights as inputs, so that is every weight, every call), and a call
that cannot be captured (CPU work, data-dependent control flow, unsupported ops) cannot
be replayed at all. :func:`select_cudagraph` measures a compiled callable both ways on
the graph's own inputs — launched as it is, and captured once and replayed with its
inputs copied in (one batched copy per dtype) — and keeps the faster, recording the decision and its numbers
(:class:`~passnet.record.CudaGraphDecision`). It is what ``inductor-scg`` does for every
Dynamo graph, and what the pass compilers do with ``cudagraphs=auto``.

A graphed call returns the graph's static output buffers, as CUDA graph trees do: the
next call overwrites them (the harness compares a call's outputs before the next call).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from passnet.errors import PassRejected
from passnet.record import CudaGraphDecision

__all__ = ["GraphedCall", "capture_graph", "select_cudagraph"]

MARGIN = 0.03
"""A graph is replayed only when replaying is at least this much faster (noise aside)."""


def capture_graph(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Any, Any]:
    """One call of ``fn(*args)`` captured as a CUDA graph, after three calls on a side
    stream (lazy initialisation must not happen while capturing): ``(graph, outputs)``, the
    outputs being the graph's static buffers."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = fn(*args)
    torch.cuda.synchronize()
    return graph, outputs


class GraphedCall:
    """``fn`` captured once and replayed. Parameters (``nn.Parameter`` inputs, as Dynamo
    passes a module's weights) are captured in place and never copied, as CUDA graph trees
    treat them: a replay reads them where they live. Every other tensor input is captured
    on a private copy, and each call copies its value in. A parameter given at a new
    address re-records the graph (counted in the decision's ``rerecords``). Non-tensor inputs must equal
    the example's (they are baked into the graph)."""

    def __init__(self, fn: Callable[..., Any], example_inputs: Sequence[Any]) -> None:
        self.fn = fn
        self.decision: CudaGraphDecision | None = None
        """Set by :func:`select_cudagraph`: re-records are counted in it."""
        self.static = [_static(x) for x in example_inputs]
        self.graph, self.outputs = capture_graph(fn, self.static)
        copied = [
            (i, x)
            for i, x in enumerate(self.static)
            if isinstance(x, torch.Tensor) and not isinstance(x, torch.nn.Parameter)
        ]
        self.copy_bytes = sum(x.numel() * x.element_size() for _, x in copied)
        # The copies are batched per (dtype, device): one foreach copy launches a few
        # kernels for hundreds of tensors, where one copy_ each costs a launch per weight
        # (mobilenet_v3_small: ~250 copies, 2.7 ms of host time per replay).
        groups: dict[tuple[torch.dtype, torch.device], list[int]] = {}
        for i, x in copied:
            groups.setdefault((x.dtype, x.device), []).append(i)
        self._copy_groups = [
            (positions, [self.static[i] for i in positions]) for positions in groups.values()
        ]

    def __call__(self, *inputs: Any) -> Any:
        if len(inputs) != len(self.static):
            raise ValueError(
                f"a CUDA-graphed call got {len(inputs)} inputs where it was captured with "
                f"{len(self.static)}"
            )
        moved = False
        for buffer, value in zip(self.static, inputs):
            if isinstance(buffer, torch.nn.Parameter):
                moved |= value.data_ptr() != buffer.data_ptr()
            elif not isinstance(buffer, torch.Tensor) and buffer != value:
                raise ValueError(
                    f"a CUDA-graphed call got {value!r} where it was captured with {buffer!r}"
                )
        for positions, buffers in self._copy_groups:
            torch._foreach_copy_(buffers, [inputs[i] for i in positions])
        if moved:
            if self.decision is not None:
                self.decision.rerecords += 1
            self.static = [
                _static(v) if isinstance(b, torch.nn.Parameter) else b
                for b, v in zip(self.static, inputs)
            ]
            self.graph, self.outputs = capture_graph(self.fn, self.static)
        self.graph.replay()
        return self.outputs


def _static(x: Any) -> Any:
    """The buffer a graph is captured on: a parameter itself, a copy of any other tensor."""
    if isinstance(x, torch.nn.Parameter) or not isinstance(x, torch.Tensor):
        return x
    return x.clone()


def _median_ms(fn: Callable[..., Any], inputs: Sequence[Any], calls: int) -> float:
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*inputs)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def select_cudagraph(
    fn: Callable[..., Any],
    example_inputs: Sequence[Any],
    *,
    name: str = "",
    calls: int = 20,
    graphed: Callable[[Callable[..., Any], Sequence[Any]], Any] = GraphedCall,
    timer: Callable[[Callable[..., Any], Sequence[Any], int], float] = _median_ms,
) -> tuple[Callable[..., Any], CudaGraphDecision]:
    """``fn`` or its CUDA-graphed form, whichever ran faster on ``example_inputs`` (host
    clock around synchronized calls, median of ``calls`` after a warm-up), and why."""
    started = time.perf_counter()
    launch_ms = timer(fn, example_inputs, calls)
    try:
        replayed = graphed(fn, example_inputs)
        replayed(*example_inputs)  # a warm-up replay: the first one pays for its setup
        graph_ms = timer(replayed, example_inputs, calls)
    except PassRejected:
        raise  # a pass that misbehaves while captured is caught, never timed the other way
    except Exception as exc:  # noqa: BLE001 - a call that cannot be captured is the answer
        torch.cuda.synchronize() if torch.cuda.is_available() else None
        decision = CudaGraphDecision(
            name=name,
            chosen="launch",
            launch_ms=launch_ms,
            reason=f"cannot be captured: {type(exc).__name__}: {exc}"[:300],
            selection_s=time.perf_counter() - started,
        )
        return fn, decision
    pays = graph_ms < launch_ms * (1 - MARGIN)
    decision = CudaGraphDecision(
        name=name,
        chosen="cudagraph" if pays else "launch",
        launch_ms=launch_ms,
        graph_ms=graph_ms,
        copy_bytes=int(getattr(replayed, "copy_bytes", 0)),
        reason=(
            f"replay {graph_ms:.4g} ms vs launch {launch_ms:.4g} ms"
            + ("" if pays else f" (not {MARGIN:.0%} faster)")
        ),
        selection_s=time.perf_counter() - started,
    )
    if pays and hasattr(replayed, "decision"):
        replayed.decision = decision
    return (replayed if pays else fn), decision
