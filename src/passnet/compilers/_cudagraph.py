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

A Dynamo graph that also computes on the CPU (or with values known only when it runs)
cannot be captured whole. Inductor splits such a graph into partitions at that work
(``graph_partition``); :class:`PartitionChoices` makes the same choice for each partition,
and the work between them is launched as it is.

A graphed call returns the graph's static output buffers, as CUDA graph trees do: the
next call overwrites them (the harness compares a call's outputs before the next call).

A model's weights are its module's state, which CUDA graph trees read where they live
(``nn.Parameter``): a GraphNet graph takes them as plain tensor inputs, so the harness
marks them (:func:`mark_module_state`, from the sample's parameter names) and a graphed
call treats the marked inputs as it treats parameters, in place, never copied.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from passnet.errors import PassRejected
from passnet.record import CudaGraphDecision

__all__ = [
    "MAX_SHAPES",
    "GraphedCall",
    "PartitionChoices",
    "PerShape",
    "capture_graph",
    "has_symbolic_sizes",
    "is_module_state",
    "mark_module_state",
    "select_cudagraph",
    "split_reason",
]

MARGIN = 0.03
"""A graph is replayed only when replaying is at least this much faster (noise aside)."""


_STATE_MARK = "_passnet_module_state"


def mark_module_state(values: Sequence[Any], positions: Sequence[int]) -> None:
    """Mark the tensors at ``positions`` of ``values`` (a graph's example inputs) as its
    module's state (weights, buffers): a CUDA-graphed call reads them in place, as it reads
    ``nn.Parameter`` inputs, instead of copying them in on every replay."""
    for i in positions:
        if isinstance(values[i], torch.Tensor):
            setattr(values[i], _STATE_MARK, True)


def is_module_state(x: Any) -> bool:
    """Whether :func:`mark_module_state` marked ``x``."""
    return isinstance(x, torch.Tensor) and bool(getattr(x, _STATE_MARK, False))


def _in_place(x: Any) -> bool:
    """A graph input captured where it lives: a parameter, or marked module state."""
    return isinstance(x, torch.nn.Parameter) or is_module_state(x)


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


MOVES_BEFORE_COPYING = 4
"""Calls in a row that each found marked module state at a new address, after which it
is copied in like an input."""


class GraphedCall:
    """``fn`` captured once and replayed. Module state (``nn.Parameter`` inputs, as Dynamo
    passes a module's weights, and inputs :func:`mark_module_state` marked) is captured in
    place and never copied, as CUDA graph trees treat parameters: a replay reads it where
    it lives. Every other tensor input is captured on a private copy, and each call copies
    its value in. Module state given at a new address re-records the graph (counted in the
    decision's ``rerecords``); marked state that moves on every call (a graph that mutates
    its weights is handed fresh ones each time) is copied in like an input once it moved
    on :data:`MOVES_BEFORE_COPYING` calls in a row. Non-tensor inputs must equal the
    example's (they are baked into the graph)."""

    def __init__(self, fn: Callable[..., Any], example_inputs: Sequence[Any]) -> None:
        self.fn = fn
        self.decision: CudaGraphDecision | None = None
        """Set by :func:`select_cudagraph`: re-records are counted in it."""
        self.rerecords = 0
        self.moves_in_a_row = 0
        self.in_place = [_in_place(x) for x in example_inputs]
        self._capture([x if keep else _copy(x) for x, keep in zip(example_inputs, self.in_place)])

    def _capture(self, static: list[Any]) -> None:
        self.static = static
        self.graph, self.outputs = capture_graph(self.fn, static)
        copied = [
            (i, x)
            for i, x in enumerate(static)
            if isinstance(x, torch.Tensor) and not self.in_place[i]
        ]
        self.copy_bytes = sum(x.numel() * x.element_size() for _, x in copied)
        # The copies are batched per (dtype, device): one foreach copy launches a few
        # kernels for hundreds of tensors, where one copy_ each costs a launch per weight
        # (mobilenet_v3_small: ~250 copies, 2.7 ms of host time per replay).
        groups: dict[tuple[torch.dtype, torch.device], list[int]] = {}
        for i, x in copied:
            groups.setdefault((x.dtype, x.device), []).append(i)
        self._copy_groups = [
            (positions, [static[i] for i in positions]) for positions in groups.values()
        ]

    def __call__(self, *inputs: Any) -> Any:
        if len(inputs) != len(self.static):
            raise ValueError(
                f"a CUDA-graphed call got {len(inputs)} inputs where it was captured with "
                f"{len(self.static)}"
            )
        moved = False
        for buffer, value, keep in zip(self.static, inputs, self.in_place):
            if keep:
                moved |= value.data_ptr() != buffer.data_ptr()
            elif not isinstance(buffer, torch.Tensor) and buffer != value:
                raise ValueError(
                    f"a CUDA-graphed call got {value!r} where it was captured with {buffer!r}"
                )
        self.moves_in_a_row = self.moves_in_a_row + 1 if moved else 0
        if moved:
            self._rerecord(inputs)
        for positions, buffers in self._copy_groups:
            torch._foreach_copy_(buffers, [inputs[i] for i in positions])
        self.graph.replay()
        return self.outputs

    def _rerecord(self, inputs: Sequence[Any]) -> None:
        """Capture again on the module state where it now lives (the copied inputs on
        their buffers; inputs that stop being kept in place get buffers of their own)."""
        self.rerecords += 1
        if self.decision is not None:
            self.decision.rerecords += 1
        was_in_place = self.in_place
        if self.moves_in_a_row >= MOVES_BEFORE_COPYING:
            self.in_place = [isinstance(x, torch.nn.Parameter) for x in inputs]
        static = []
        for buffer, value, before, keep in zip(self.static, inputs, was_in_place, self.in_place):
            if keep:
                static.append(value)
            elif before:
                static.append(_copy(value))  # demoted: a buffer of its own from now on
            else:
                static.append(buffer)
        self._capture(static)


def _copy(x: Any) -> Any:
    """The private buffer a copied input is captured on (non-tensors as they are)."""
    return x.clone() if isinstance(x, torch.Tensor) else x


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


ROUNDS = 5
"""Rounds of the selection: each times both variants in turn, so a burst of host noise
(another process, a clock change) falls on both alike, and the median round decides."""


def _alternating(
    first: Callable[..., Any],
    second: Callable[..., Any],
    inputs: Sequence[Any],
    calls: int,
    timer: Callable[[Callable[..., Any], Sequence[Any], int], float],
) -> tuple[float, float]:
    """The median round of each of two callables, timed in turn over :data:`ROUNDS` rounds
    (``calls`` calls each in all)."""
    per_round = max(3, calls // ROUNDS)
    a, b = [], []
    for _ in range(ROUNDS):
        a.append(timer(first, inputs, per_round))
        b.append(timer(second, inputs, per_round))
    return statistics.median(a), statistics.median(b)


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
    clock around synchronized calls; :data:`ROUNDS` rounds that each time both variants in
    turn, ``calls`` calls per variant in all; each variant's median over the rounds'
    medians), and why."""
    started = time.perf_counter()
    try:
        replayed = graphed(fn, example_inputs)
        replayed(*example_inputs)  # a warm-up replay: the first one pays for its setup
    except PassRejected:
        raise  # a pass that misbehaves while captured is caught, never timed the other way
    except Exception as exc:  # noqa: BLE001 - a call that cannot be captured is the answer
        torch.cuda.synchronize() if torch.cuda.is_available() else None
        decision = CudaGraphDecision(
            name=name,
            chosen="launch",
            launch_ms=timer(fn, example_inputs, calls),
            reason=f"cannot be captured: {type(exc).__name__}: {exc}"[:300],
            selection_s=time.perf_counter() - started,
        )
        return fn, decision
    launch_ms, graph_ms = _alternating(fn, replayed, example_inputs, calls, timer)
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


def _example_value(node: torch.fx.Node) -> Any:
    """What Dynamo recorded a node computes (a fake tensor, a symbolic size, ...)."""
    return node.meta.get("example_value", node.meta.get("val"))


def _values(meta: Any) -> list[Any]:
    if isinstance(meta, (list, tuple)):
        return [v for m in meta for v in _values(m)]
    return [meta]


def split_reason(gm: torch.fx.GraphModule) -> str:
    """Why one CUDA graph cannot hold the whole of ``gm`` ("" where it can): tensors on the
    CPU beside its CUDA tensors (a captured CPU op would not run again on replay), or
    values known only when it runs (a data-dependent size). Read from the example values
    Dynamo recorded on the nodes."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    off_gpu, data_dependent, on_gpu = [], [], False
    for node in gm.graph.nodes:
        for value in _values(_example_value(node)):
            if isinstance(value, torch.Tensor):
                if value.device.type == "cuda":
                    on_gpu = True
                else:
                    off_gpu.append(f"{node.name} ({value.device.type})")
            elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                if free_unbacked_symbols(value):
                    data_dependent.append(node.name)
    reasons = []
    if on_gpu and off_gpu:
        reasons.append(f"tensors off the GPU: {', '.join(off_gpu[:3])}")
    if data_dependent:
        reasons.append(f"values known only when it runs: {', '.join(data_dependent[:3])}")
    return "; ".join(reasons)


class _Partition:
    """One partition function of an Inductor graph (called with its inputs as a list, which
    it empties), launched, or replayed once :class:`PartitionChoices` chose that."""

    def __init__(self, owner: PartitionChoices, fn: Callable[[list[Any]], Any], index: int):
        self.owner, self.fn, self.index = owner, fn, index
        self.replayed: Callable[..., Any] | None = None
        self.decision: CudaGraphDecision | None = None

    def _launch(self, *inputs: Any) -> Any:
        return self.fn(list(inputs))

    def __call__(self, args: list[Any]) -> Any:
        selecting = self.decision is None and self.owner.selecting
        if self.owner.launch_all or (self.replayed is None and not selecting):
            return self.fn(args)
        inputs = list(args)
        args.clear()  # as the partition function would: the caller's list is consumed
        if selecting:
            chosen, self.decision = self.owner.select(
                self._launch, inputs, name=f"{self.owner.name} partition {self.index}"
            )
            self.owner.decisions.append(self.decision)
            if self.decision.chosen == "cudagraph":
                self.replayed = chosen
            return chosen(*inputs)
        return self.replayed(*inputs)


class PartitionChoices:
    """The launch-or-replay choice for each partition of one Dynamo graph that Inductor
    split (``graph_partition``) at work a CUDA graph cannot hold: installed as Inductor's
    partition wrapper while the graph compiles (:meth:`installed`), it wraps each partition
    function; :meth:`choose` then runs the graph once, each partition choosing on its own
    inputs (:func:`select_cudagraph`) as the call reaches it, and measures the graph with
    the choices against the graph with every partition launched. The work between the
    partitions is launched either way."""

    def __init__(
        self,
        name: str,
        *,
        calls: int = 20,
        graphed: Callable[[Callable[..., Any], Sequence[Any]], Any] = GraphedCall,
        timer: Callable[[Callable[..., Any], Sequence[Any], int], float] = _median_ms,
    ) -> None:
        self.name, self.calls, self.graphed, self.timer = name, calls, graphed, timer
        self.partitions: list[_Partition] = []
        self.decisions: list[CudaGraphDecision] = []
        self.selecting = False
        self.launch_all = False

    def select(
        self, fn: Callable[..., Any], inputs: Sequence[Any], *, name: str
    ) -> tuple[Callable[..., Any], CudaGraphDecision]:
        return select_cudagraph(
            fn, inputs, name=name, calls=self.calls, graphed=self.graphed, timer=self.timer
        )

    def wrap(self, fn: Callable[[list[Any]], Any], metadata: Any = None) -> _Partition:
        """Inductor's partition wrapper: ``fn`` is one partition function."""
        partition = _Partition(self, fn, len(self.partitions))
        self.partitions.append(partition)
        return partition

    @staticmethod
    def available() -> bool:
        """Whether this torch lets a wrapper be installed on Inductor's partitions."""
        from torch._inductor import utils

        return hasattr(utils, "set_customized_partition_wrappers")

    @staticmethod
    def cache_options() -> dict[str, Any]:
        """Inductor options that key a partitioned compile apart in Inductor's caches.

        Whether the graph is partitioned is decided while it compiles (the wrapper is
        installed or not) and is not part of the caches' key: a program compiled without
        partitions, found for a compile that needs them, would never be wrapped. A post-grad
        pass that changes nothing but names itself (its ``uuid`` enters the key) keeps the
        two apart, so a partitioned program is cached (a prepare worker's compile serves
        the timed one) and found only by a partitioned compile."""
        return {"post_grad_custom_post_pass": _partitioned_key()}

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Inductor partitions what compiles inside (at work a CUDA graph cannot hold) and
        wraps each partition with :meth:`wrap`; nothing, on a torch without partition
        wrappers (:meth:`available`): then there is no partition to choose for."""
        from torch._inductor import utils

        if not self.available():
            yield
            return
        holder = utils._unstable_customized_partition_wrapper
        before = holder.wrapper
        utils.set_customized_partition_wrappers(self.wrap)
        try:
            yield
        finally:
            holder.wrapper = before

    def choose(
        self, compiled: Callable[..., Any], example_inputs: Sequence[Any], reason: str
    ) -> CudaGraphDecision:
        """Choose for every partition on one call of ``compiled`` on ``example_inputs``,
        and the decision for the whole graph: ``chosen`` is ``partitions`` (each decided on
        its own, :attr:`decisions`) or ``launch`` where Inductor made no partition;
        ``launch_ms`` with every partition launched, ``graph_ms`` with the choices."""
        started = time.perf_counter()
        self.selecting = True
        try:
            compiled(*example_inputs)
        finally:
            self.selecting = False
        replayed = sum(d.chosen == "cudagraph" for d in self.decisions)
        if not self.partitions:
            return CudaGraphDecision(
                name=self.name,
                chosen="launch",
                launch_ms=self.timer(compiled, example_inputs, self.calls),
                reason=f"cannot be captured ({reason}) and Inductor made no partition",
                selection_s=time.perf_counter() - started,
            )

        def every_partition_launched(*inputs: Any) -> Any:
            self.launch_all = True
            try:
                return compiled(*inputs)
            finally:
                self.launch_all = False

        launch_ms, graph_ms = _alternating(
            every_partition_launched, compiled, example_inputs, self.calls, self.timer
        )
        return CudaGraphDecision(
            name=self.name,
            chosen="partitions",
            launch_ms=launch_ms,
            graph_ms=graph_ms,
            copy_bytes=sum(d.copy_bytes for d in self.decisions if d.chosen == "cudagraph"),
            reason=(
                f"cannot be captured whole ({reason}): {len(self.partitions)} partitions, "
                f"{replayed} replayed"
            ),
            selection_s=time.perf_counter() - started,
        )


@functools.cache
def _partitioned_key() -> Any:
    """The no-op post-grad pass of :meth:`PartitionChoices.cache_options` (made on first
    use: Inductor is imported only by those who compile)."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class PartitionedKey(CustomGraphPass):
        def __call__(self, graph: torch.fx.Graph) -> None:
            return None

        def uuid(self) -> str:
            return "passnet.PartitionChoices.v1"

    return PartitionedKey()


MAX_SHAPES = 8
"""Distinct call signatures a graph with symbolic sizes gets a choice (and a capture) for;
calls of further signatures are launched."""


def has_symbolic_sizes(gm: torch.fx.GraphModule) -> bool:
    """Whether ``gm`` (a Dynamo graph) takes sizes that may change from call to call: a
    symbolic size as an input, or an input tensor of symbolic shape."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = _example_value(node)
        if isinstance(value, torch.SymInt):
            return True
        if isinstance(value, torch.Tensor) and any(
            isinstance(d, torch.SymInt) for d in value.shape
        ):
            return True
    return False


class PerShape:
    """A graph with symbolic sizes, chosen for per call signature: the shapes of its
    copied tensor inputs and its non-tensor inputs (the sizes themselves). A capture holds
    one set of shapes, and whether replaying pays depends on them (PyGraph), so each new
    signature is selected for on its first call (:func:`select_cudagraph`, its decision
    named ``… shapes K`` and kept in ``decisions``), up to :data:`MAX_SHAPES` of them;
    calls of further signatures are launched. Module state is left out of the signature
    (its shapes do not change between calls; reading hundreds of them would cost a
    launch-bound call more than it saves)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        example_inputs: Sequence[Any],
        first: tuple[Callable[..., Any], CudaGraphDecision],
        select: Callable[..., tuple[Callable[..., Any], CudaGraphDecision]],
        decisions: list[CudaGraphDecision],
    ) -> None:
        self.fn, self.select, self.decisions = fn, select, decisions
        self.name = first[1].name
        self.keyed = [i for i, x in enumerate(example_inputs) if not _in_place(x)]
        self.chosen = {self._signature(example_inputs): first[0]}

    def _signature(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(
            tuple(inputs[i].shape) if isinstance(inputs[i], torch.Tensor) else inputs[i]
            for i in self.keyed
        )

    def __call__(self, *inputs: Any) -> Any:
        key = self._signature(inputs)
        chosen = self.chosen.get(key)
        if chosen is not None:
            return chosen(*inputs)
        if len(self.chosen) >= MAX_SHAPES:
            return self._launch_beyond(key, inputs)
        name = f"{self.name} shapes {len(self.chosen)}"
        chosen, decision = self.select(self.fn, inputs, name=name)
        self.decisions.append(decision)
        self.chosen[key] = chosen
        return chosen(*inputs)

    def _launch_beyond(self, key: tuple[Any, ...], inputs: Sequence[Any]) -> Any:
        """A signature beyond :data:`MAX_SHAPES`: launched; the first one is recorded,
        with the time of that call."""
        self.chosen[key] = self.fn
        started = time.perf_counter()
        out = self.fn(*inputs)
        if any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs):
            torch.cuda.synchronize()
        if len(self.chosen) == MAX_SHAPES + 1:
            self.decisions.append(
                CudaGraphDecision(
                    name=f"{self.name} shapes {MAX_SHAPES}+",
                    chosen="launch",
                    launch_ms=(time.perf_counter() - started) * 1e3,
                    reason=f"more than {MAX_SHAPES} shapes: the rest are launched (the time "
                    "is of its first call)",
                )
            )
        return out
