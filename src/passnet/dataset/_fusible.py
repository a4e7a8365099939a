"""Fusible ranges: spans of operators that TorchInductor fuses, found with one compilation.

PassNet's *prefix analysis* compiles the first P operators for every P and
starts a new fusible span wherever the kernel count K(P) grows. That costs one
compilation per operator. :func:`analyze_fusible` with ``method="one-compile"``
compiles the whole graph once and maps every kernel back to the FX nodes it
computes; ``method="every-prefix"`` is the reference (slow, for benchmarks and
for checking that both agree).

What counts as a kernel: the scheduler nodes Inductor generates code for, after
fusion — a fused loop nest (a Triton kernel) or an extern call (mm, conv,
attention). Inductor's layout optimization is switched off: its channels-last
conversion kernels are not fusion. Nothing is compiled to machine code, and not even
source code is written: Inductor lowers and fuses the graph
(``torch._inductor.utils.get_code``), a hook on ``Scheduler.codegen`` reads the fused
scheduler nodes and stops the compilation there.

The kernels are those of Inductor's Triton backend, the one the benchmark is evaluated
with on GPUs, whatever the device of the analysis: on CPU, Inductor schedules the CPU
tensors for Triton (``cpu_backend="triton"``; the scheduling decisions are Triton's,
and nothing is compiled since code generation is stopped before it starts), with the
device properties its heuristics read (SM count, threads per SM, warp size) taken from
an NVIDIA H200 rather than from the CPU's core count, and with one thread (Inductor's
CPU lowering reads the thread count: ``scatter_reduce`` sum falls back to ATen with
more than one). The spans are then a function of the graph alone, not of the machine,
the thread count or the number of jobs. What still differs from a CUDA compilation
(lowerings that test the device type) is listed in docs/dataset_decompose.md.

Mapping kernels to FX nodes uses Inductor's provenance: each IR node's
``origins`` are post-grad ATen nodes, whose ``meta["from_node"]`` names the
source FX node (the same data behind the ``# Source Nodes:`` comments in
generated code). Origins are generous — an extern kernel also lists the ops
that produced its inputs, a copy made for an extern input lists the extern —
so they are filtered: an extern kernel computes only origins whose ATen op is
the extern's own op; a generated kernel computes origins that are neither view
ops nor ops that this compilation ran as externs.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch
import torch.fx

from passnet.dataset._subgraph import (
    OpRange,
    ParentGraph,
    extract_subgraph,
    one_torch_thread,
    op_name,
)
from passnet.errors import DatasetError, exception_chain

__all__ = [
    "FusibleAnalysis",
    "Kernel",
    "KernelListingError",
    "analyze_fusible",
    "fusible_ranges",
    "list_kernels",
]

log = logging.getLogger(__name__)

# ATen ops that never compute values: they only reinterpret or move metadata.
_VIEW_OPS = frozenset(
    "view reshape _unsafe_view _reshape_alias permute transpose t expand unsqueeze squeeze slice select "
    "as_strided alias detach split split_with_sizes unbind chunk narrow diagonal unfold view_as_real "
    "view_as_complex getitem lift_fresh_copy expand_as view_as flatten unflatten movedim "
    "squeeze_copy unsqueeze_copy".split()
)


class KernelListingError(DatasetError):
    """Inductor could not generate code for a graph, or its provenance is unusable."""


@dataclass(frozen=True)
class Kernel:
    """One kernel of a compiled graph and the parent FX nodes it computes."""

    index: int
    name: str
    extern: bool
    sources: frozenset[str]

    @property
    def fuses(self) -> bool:
        """Generated code, or an extern call that replaced several operators (attention)."""
        return not self.extern or len(self.sources) >= 2


@dataclass
class FusibleAnalysis:
    """Segmentation of a parent's units into fusible spans."""

    method: str
    segments: list[OpRange]
    """A partition of all units: each span starts where a new kernel starts."""
    fused: list[bool]
    """Per segment: whether a kernel in it fuses (Inductor-generated code, or an extern call that
    replaced several operators); every-prefix: whether a generated kernel was added."""
    compilations: int
    elapsed_s: float
    complete: bool = True
    """False when the every-prefix run stopped at its deadline (segments then cover a prefix only)."""
    kernels: list[Kernel] = field(default_factory=list)
    unit_kernels: list[frozenset[int]] = field(default_factory=list)
    curve: list[int] = field(default_factory=list)
    """every-prefix: K(P) for P = 1..N (kernels of the first P units)."""


def _op_base(target: Any) -> str:
    """``aten.addmm.out`` / ``aten.addmm.default`` / ``extern_kernels.addmm`` → ``addmm``."""
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return str(getattr(packet, "__name__", packet)).split(".")[-1]
    name = getattr(target, "__name__", None)
    if isinstance(name, str) and not str(target).startswith(("aten.", "prims.")):
        return name.split(".")[-1]
    parts = str(target).split(".")
    if parts[0] in ("aten", "prims", "torch", "ops") and len(parts) >= 2:
        parts = [p for p in parts if p not in ("torch", "ops")]
        return parts[1] if len(parts) > 1 else parts[0]
    return parts[-1]


def _source_name(origin: torch.fx.Node, graph_id: int) -> str | None:
    """The parent FX node an Inductor origin came from (``from_node``), or None."""
    chain = origin.meta.get("from_node")
    if not chain:
        return None
    first = chain[0]
    if isinstance(first, tuple):  # torch <= 2.6: [(name, target), ...]
        return str(first[0])
    gid = getattr(first, "graph_id", None)
    if gid is not None and gid != graph_id:
        # A node of another graph (a pass-created graph): walk to the source of that graph.
        cur = first
        while getattr(cur, "from_node", None):
            cur = cur.from_node[0]
            if getattr(cur, "graph_id", None) == graph_id:
                return str(cur.name)
        return None
    return str(getattr(first, "name", None) or "") or None


class _Scheduled(Exception):  # noqa: N818 - a signal, not an error
    """Raised from the code-generation hook once the fused nodes are read: what follows
    (writing C++ or Triton source) is not needed and takes about half the compilation."""


def _scheduled(exc: BaseException | None) -> bool:
    """True when ``exc`` is, or was raised because of, the hook's :class:`_Scheduled`."""
    return any(isinstance(e, _Scheduled) for e in exception_chain(exc))


@contextlib.contextmanager
def _capture_scheduler_nodes() -> Iterator[list[list[Any]]]:
    from torch._inductor import scheduler as inductor_scheduler

    captured: list[list[Any]] = []

    def codegen(self: Any, *args: Any, **kwargs: Any) -> Any:
        captured.append(list(self.nodes))
        raise _Scheduled

    with mock.patch.object(inductor_scheduler.Scheduler, "codegen", codegen):
        yield captured


# The GPU whose Triton scheduling a CPU analysis follows: an NVIDIA H200 (compute capability
# 9.0), as torch.cuda.get_device_properties reports it. Inductor reads these in its split-
# reduction and mix-order-reduction heuristics; for a CPU device it would read the core count.
_GPU_PROPERTIES = {
    "multi_processor_count": 132,
    "max_threads_per_multi_processor": 2048,
    "regs_per_multiprocessor": 65536,
    "max_threads_per_block": 1024,
    "warp_size": 32,
    "major": 9,
    "cc": 90,
}


@contextlib.contextmanager
def _gpu_device_properties() -> Iterator[None]:
    """Inductor's ``DeviceProperties`` of a CPU device are those of :data:`_GPU_PROPERTIES`."""
    from torch._inductor.runtime.hints import DeviceProperties

    original = DeviceProperties.create

    def create(cls: type, device: torch.device) -> Any:
        if device.type != "cpu":
            return original(device)
        # Only the fields this torch's DeviceProperties has (a NamedTuple; fields vary by version).
        known = {k: v for k, v in _GPU_PROPERTIES.items() if k in DeviceProperties._fields}
        return DeviceProperties(type="cpu", index=device.index, **known)

    with mock.patch.object(DeviceProperties, "create", classmethod(create)):
        yield


@contextlib.contextmanager
def _cuda_pattern_choices() -> Iterator[None]:
    """Two of Inductor's graph passes decide for CPU tensors as they do for CUDA ones.

    * A bias ``addmm`` whose users are all pointwise is split into ``mm`` and a bias add
      that fuses with them (``should_prefer_unfused_addmm``: GPUs only, through the
      module's ``is_gpu``): a linear layer and its activation share a kernel on the GPU.
    * Attention patterns on float32 become one SDPA call only with TF32 matrix products
      on CUDA (``_sfdp_params_check``); the benchmark's evaluations leave TF32 off, so
      float32 attention stays matmul, softmax, matmul as it does there.

    Each patch applies only where this torch has the function it replaces.
    """
    from torch._inductor.fx_passes import fuse_attention, post_grad

    with contextlib.ExitStack() as stack:
        is_gpu = getattr(post_grad, "is_gpu", None)
        if is_gpu is not None:
            stack.enter_context(
                mock.patch.object(
                    post_grad,
                    "is_gpu",
                    lambda device_type: device_type == "cpu" or is_gpu(device_type),
                )
            )
        params_check = getattr(fuse_attention, "_sfdp_params_check", None)
        if params_check is not None:

            def check(match: Any) -> bool:
                query = match.kwargs["query"].meta["val"]
                if query.device.type == "cpu" and query.dtype == torch.float32:
                    return False
                return bool(params_check(match))

            stack.enter_context(mock.patch.object(fuse_attention, "_sfdp_params_check", check))
        yield


def _specialize_scalars(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> torch.fx.GraphModule:
    """Replace ``x.item()`` of scalar inputs (lifted eps, momentum, dropout p) by its value.

    Without Dynamo, Inductor cannot compile data-dependent scalars; the value does not
    change which kernels are generated. Returns a copy (node names kept) or ``gm``.
    """
    values = dict(
        zip((n for n in gm.graph.nodes if n.op == "placeholder"), example_inputs, strict=False)
    )
    items = [
        n
        for n in gm.graph.nodes
        if n.op == "call_method"
        and n.target == "item"
        and n.args
        and n.args[0] in values
        and isinstance(values[n.args[0]], torch.Tensor)
        and values[n.args[0]].numel() == 1
    ]
    if not items:
        return gm
    gm = copy.deepcopy(gm)
    by_name = {n.name: n for n in gm.graph.nodes}
    for old in items:
        node = by_name[old.name]
        value = values[old.args[0]].item()
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(
                user.args, lambda n, node=node, value=value: value if n is node else n
            )
            user.kwargs = torch.fx.node.map_arg(
                user.kwargs, lambda n, node=node, value=value: value if n is node else n
            )
        gm.graph.erase_node(node)
    gm.recompile()
    return gm


def list_kernels(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[Kernel]:
    """Run Inductor's code generation for ``gm`` once and list its kernels with their source nodes.

    Only scheduling runs: no C++ or Triton compiler is invoked and nothing executes. The
    kernels are Triton's on every device, and do not depend on the thread count.
    """
    from torch._inductor import config as inductor_config
    from torch._inductor import ir
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.scheduler import NopKernelSchedulerNode
    from torch._inductor.utils import get_code
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    gm = _specialize_scalars(gm, example_inputs)
    # Fake inputs with a shape environment let Inductor handle data-dependent output
    # shapes (nonzero, boolean masks) with unbacked sizes; other sizes stay static.
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    fake_inputs = [
        fake_mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) else x
        for x in example_inputs
    ]
    graph_id = id(gm.graph)
    names = {n.name for n in gm.graph.nodes}
    # The FX graph cache would skip code generation (and the hook) on a hit. Layout
    # optimization adds channels-last conversion kernels around convolutions; they are
    # not fusion, and in every-prefix runs they come and go with the cut, so it is off.
    # Triton's scheduling on every device, one thread: see the module's docstring.
    patches = {
        "fx_graph_cache": False,
        "layout_optimization": False,
        "cpu_backend": "triton",
        "cpp.threads": 1,
    }
    with (
        inductor_config.patch(patches),
        one_torch_thread(),
        _gpu_device_properties(),
        _cuda_pattern_choices(),
        _capture_scheduler_nodes() as captured,
    ):
        try:
            get_code(lambda: compile_fx(gm, fake_inputs))
        except Exception as exc:  # noqa: BLE001 - Inductor's failures are translated here
            if not _scheduled(exc):  # (a wrapper Inductor raised around the hook's signal)
                first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise KernelListingError(
                    f"Inductor cannot generate code: {type(exc).__name__}: {first_line}"
                ) from exc
    raw: list[tuple[str, bool, list[Any], Any]] = []
    # No scheduler ran when there is nothing to compute (only views, constants): no kernel.
    for snode in (n for nodes in captured for n in nodes):
        if isinstance(snode, NopKernelSchedulerNode):
            continue
        parts = [sn for sn in snode.get_nodes() if getattr(sn, "node", None) is not None]
        if not parts or all(isinstance(sn.node, ir.MultiOutput) for sn in parts):
            continue  # unpacking a multi-output extern launches nothing
        extern = bool(snode.is_extern())
        op = getattr(parts[0].node, "op_overload", None) or getattr(
            parts[0].node, "python_kernel_name", None
        )
        raw.append((snode.get_name(), extern, parts, op))
    extern_bases = {_op_base(op) for _, extern, _, op in raw if extern and op is not None}
    chosen_per_kernel = []
    for _, extern, parts, op in raw:
        origins = [o for sn in parts for o in sn.node.origins if o.op == "call_function"]
        if extern:
            base = _op_base(op) if op is not None else None
            chosen = [o for o in origins if base is not None and _op_base(o.target) == base]
            if not chosen:
                origin_node = getattr(parts[0].node, "origin_node", None)
                chosen = [origin_node] if origin_node is not None else origins
        else:
            chosen = [o for o in origins if _op_base(o.target) not in _VIEW_OPS | extern_bases]
        chosen_per_kernel.append(chosen)
    mapped = [{_source_name(o, graph_id) for o in chosen} & names for chosen in chosen_per_kernel]
    claimed = set().union(*mapped) if mapped else set()
    resolver = _OrphanResolver(gm, graph_id, names, claimed)
    kernels = []
    for (name, extern, _, _), chosen, sources in zip(raw, chosen_per_kernel, mapped, strict=True):
        for o in chosen:
            if _source_name(o, graph_id) is None:
                sources |= resolver.sources(o)
        kernels.append(Kernel(len(kernels), name, extern, frozenset(sources)))
    return kernels


class _OrphanResolver:
    """Sources of post-grad nodes that lost their provenance.

    Some Inductor passes create nodes without ``from_node`` (the attention pattern
    that turns matmul → softmax → matmul into one SDPA call; the ``slice_scatter``
    of functionalized ``x[i] = v``). Such a node computes the parent nodes that lie
    between the sources of its inputs and the sources of its users (looking through
    views on both sides), that are not views, and that no other kernel computes.
    """

    def __init__(
        self, gm: torch.fx.GraphModule, graph_id: int, names: set[str], claimed: set[str]
    ) -> None:
        self.graph_id = graph_id
        self.names = names
        self.claimed = claimed
        self.parent = {n.name: n for n in gm.graph.nodes}
        self.placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]

    def _neighbour_sources(self, node: torch.fx.Node, upward: bool) -> set[str]:
        found: set[str] = set()
        stack, seen = [node], {node}
        while stack:
            cur = stack.pop()
            for nxt in cur.all_input_nodes if upward else cur.users:
                if nxt in seen:
                    continue
                seen.add(nxt)
                if nxt.op == "placeholder":
                    index = [n for n in nxt.graph.nodes if n.op == "placeholder"].index(nxt)
                    if index < len(self.placeholders):
                        found.add(self.placeholders[index])
                    continue
                src = _source_name(nxt, self.graph_id)
                see_through = src not in self.names or _op_base(nxt.target) in _VIEW_OPS
                if nxt.op == "call_function" and see_through:
                    stack.append(
                        nxt
                    )  # look through views and other orphans to computing neighbours
                elif src in self.names:
                    found.add(src)
        return found

    def _reach(self, starts: set[str], upward: bool) -> set[str]:
        out: set[str] = set()
        stack = [self.parent[s] for s in starts]
        while stack:
            cur = stack.pop()
            for nxt in cur.all_input_nodes if upward else cur.users:
                if nxt.name not in out:
                    out.add(nxt.name)
                    stack.append(nxt)
        return out

    def sources(self, orphan: torch.fx.Node) -> set[str]:
        before = self._neighbour_sources(orphan, upward=True)
        after = self._neighbour_sources(orphan, upward=False)
        between = self._reach(before, upward=False) & self._reach(after, upward=True)
        return {
            n
            for n in between - before - after - self.claimed
            if self.parent[n].op in ("call_function", "call_method")
            and op_name(self.parent[n]) not in _VIEW_OPS
        }


def _segment(
    parent: ParentGraph, unit_kernels: list[frozenset[int]], kernels: list[Kernel]
) -> tuple[list[OpRange], list[bool]]:
    """Start a new span at each unit that brings a kernel the current span does not have."""
    segments: list[OpRange] = []
    fused: list[bool] = []
    start, current = 0, set()
    for i, ks in enumerate(unit_kernels):
        new_kernel = bool(ks) and not ks <= current
        if i > 0 and new_kernel and parent.cut_allowed(i):
            segments.append(OpRange(start, i))
            fused.append(any(kernels[k].fuses for k in current))
            start, current = i, set()
        current |= ks
    if parent.units:
        segments.append(OpRange(start, len(parent.units)))
        fused.append(any(kernels[k].fuses for k in current))
    return segments, fused


def _one_compile(parent: ParentGraph) -> FusibleAnalysis:
    t0 = time.perf_counter()
    kernels = list_kernels(parent.gm, parent.replay_inputs())
    by_name: dict[str, set[int]] = {}
    for k in kernels:
        for src in k.sources:
            by_name.setdefault(src, set()).add(k.index)
    unit_kernels = [
        frozenset(k for n in unit.nodes for k in by_name.get(n.name, ())) for unit in parent.units
    ]
    segments, fused = _segment(parent, unit_kernels, kernels)
    return FusibleAnalysis(
        "one-compile",
        segments,
        fused,
        compilations=1,
        elapsed_s=time.perf_counter() - t0,
        kernels=kernels,
        unit_kernels=unit_kernels,
    )


def _every_prefix(parent: ParentGraph, deadline_s: float | None) -> FusibleAnalysis:
    t0 = time.perf_counter()
    inputs = dict(zip(parent.placeholders, parent.replay_inputs(), strict=True))
    curve: list[int] = []
    segments: list[OpRange] = []
    fused: list[bool] = []
    start, last_total, last_generated, seg_generated = 0, 0, 0, False
    compilations = 0
    complete = True
    for p in range(1, len(parent.units) + 1):
        if not parent.cut_allowed(p) and p < len(parent.units):
            curve.append(last_total)
            continue
        if deadline_s is not None and time.perf_counter() - t0 > deadline_s:
            complete = False
            break
        sub = extract_subgraph(parent, OpRange(0, p))
        gm = torch.fx.GraphModule(torch.nn.Module(), sub.graph)
        example = [
            inputs[a] if a in inputs else sub.constants_as_inputs[n]
            for a, n in zip(sub.inputs, sub.input_names, strict=True)
        ]
        kernels = list_kernels(gm, example)
        compilations += 1
        total = len(kernels)
        generated = sum(not k.extern for k in kernels)
        curve.append(total)
        if total > last_total and p > 1 and parent.cut_allowed(p - 1):
            segments.append(OpRange(start, p - 1))
            fused.append(seg_generated)
            start, seg_generated = p - 1, False
        seg_generated |= generated > last_generated
        last_total, last_generated = total, generated
    if complete and parent.units:
        segments.append(OpRange(start, len(parent.units)))
        fused.append(seg_generated)
    return FusibleAnalysis(
        "every-prefix",
        segments,
        fused,
        compilations=compilations,
        elapsed_s=time.perf_counter() - t0,
        complete=complete,
        curve=curve,
    )


def analyze_fusible(
    parent: ParentGraph, method: str = "one-compile", *, deadline_s: float | None = None
) -> FusibleAnalysis:
    """Split a parent's units into fusible spans with ``method`` ``one-compile`` or ``every-prefix``.

    ``deadline_s`` bounds the every-prefix run (checked between compilations); a run
    that hits it returns ``complete=False``. Raises :class:`KernelListingError` when
    Inductor cannot handle the graph.
    """
    if method == "one-compile":
        return _one_compile(parent)
    if method == "every-prefix":
        return _every_prefix(parent, deadline_s)
    raise ValueError(f"unknown fusible method {method!r}; use 'one-compile' or 'every-prefix'")


def fusible_ranges(analysis: FusibleAnalysis, min_ops: int = 2, max_ops: int = 35) -> list[OpRange]:
    """Spans worth a subgraph: ``min_ops``..``max_ops`` operators and a kernel that fuses."""
    return [
        seg
        for seg, gen in zip(analysis.segments, analysis.fused, strict=True)
        if gen and min_ops <= len(seg) <= max_ops
    ]
