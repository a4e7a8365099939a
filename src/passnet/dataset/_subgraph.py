"""Op-range subgraphs of a sample: units, cuts, extraction, ``model.py`` rendering, lockstep runs.

A sample's FX graph (:func:`~passnet.dataset.trace_sample`) is split into **units**, one per
operator that produces a tensor (or a tuple of tensors, or mutates a tensor in
place). Everything else is attached:

* ``getitem`` on a tuple-producing op (``chunk``, ``split``, multi-output
  attention) belongs to its producer's unit, so tuples never cross a cut;
* metadata nodes (``size()``, ``x.shape[0]``, integer arithmetic, ``.item()``) and
  constants (``get_attr``) are *floating*: they are recomputed inside every
  subgraph that needs them, so shape relations such as ``view(x.size(0), -1)``
  stay symbolic instead of turning into baked-in integers;
* nodes without a value and without an effect on values (``_set_grad_enabled``)
  are dropped;
* ``torch._functorch.predispatch`` (or ``torch._C._functorch``) calls (a ``vmap``'s
  nesting, ``_add_batch_dim``, ``_remove_batch_dim``, as Dynamo writes transformers'
  mask construction) are units whatever they return: they change functorch's state,
  which the units after them need.

An :class:`OpRange` is a half-open range of units. Its subgraph takes as inputs
every value defined before the range and used inside it (parent placeholders,
or earlier units' tensors, which become new placeholders), and returns every
value defined inside and used after it or returned by the parent. A cut is
*forbidden* where a non-tensor value (a tuple, an int computed by a unit) would
cross it, and inside a functorch region (from a ``vmap``'s ``_vmap_increment_nesting``,
and the ``lazy_load_decompositions`` just before it, to its ``_vmap_decrement_nesting``;
likewise a ``jvp``'s): the values there are functorch's batched tensors, meaningful only
inside the region, so the region is atomic. Ranges only start and stop at allowed cuts.

:mod:`~passnet.dataset._lockstep` checks subgraphs against their parent.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import logging
import math
import operator
import re
import textwrap
import types
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from passnet.dataset._hash import graph_hash
from passnet.errors import DatasetError, SampleError
from passnet.sample import (
    FUNCTORCH_CLOSERS,
    FUNCTORCH_OPENERS,
    Sample,
    TensorMeta,
    canonical_op_name,
    compute_nodes,
    forward_parameters,
    functorch_call,
    functorch_levels_kept,
    load_sample,
    trace_sample,
)

__all__ = [
    "NodeRunner",
    "OpRange",
    "ParentGraph",
    "canonical_hash",
    "Subgraph",
    "SubgraphError",
    "Unit",
    "copy_parent_graph",
    "extract_subgraph",
    "iter_partition",
    "last_uses",
    "one_torch_thread",
    "op_name",
    "render_model_source",
    "round_statistic",
    "tensor_meta_from_value",
    "trace_parent",
    "unit_ranges",
]

log = logging.getLogger(__name__)

INLINE_CONSTANT_MAX_NUMEL = 4096
"""Constants up to this size are written into model.py as ``torch.tensor(<literal>)``."""
INT_DATA_MAX_NUMEL = 1024
"""Integer/bool intermediate inputs up to this size keep their literal values in the metadata."""
FLOAT_DATA_MAX_NUMEL = 16
"""Float intermediate inputs up to this size (scalars, eps) keep their literal values."""
STATISTIC_SIGNIFICANT_DIGITS = 4
"""Significant digits of the statistics written for intermediate inputs (mean, std, min,
max of float tensors; mean, std of integer ones). Replay only draws values from them, so
four digits lose nothing; the rounding hides the last-bit differences that another CPU's
kernels (AVX2 or AVX-512 blocking, FMA or not) leave in the parent's values, except where a
value lies within that noise of a rounding boundary."""

_INPLACE_OPERATORS = {
    operator.iadd,
    operator.isub,
    operator.imul,
    operator.itruediv,
    operator.ifloordiv,
    operator.imod,
    operator.ipow,
    operator.iand,
    operator.ior,
    operator.ixor,
    operator.ilshift,
    operator.irshift,
    operator.imatmul,
    operator.setitem,
}


class SubgraphError(DatasetError):
    """A range cannot become a subgraph. Context: ``sample``, ``range``, ``node``."""


def op_name(node: torch.fx.Node) -> str:
    """Short operator name: the last part of the canonical name (``linear``, ``view``, ``setitem``)."""
    canonical = canonical_op_name(node) or (
        "constant" if node.op == "get_attr" else str(node.target)
    )
    short = canonical.rsplit(".", 1)[-1]
    return short.strip("_") or short


def is_mutation(node: torch.fx.Node) -> bool:
    """True for nodes that write into their first argument (``x.add_()``, ``x += y``, ``x[i] = v``, ``inplace=True``)."""
    if node.op == "call_method":
        name = str(node.target)
        return name == "__setitem__" or (name.endswith("_") and not name.startswith("_"))
    if node.op == "call_function":
        if node.target in _INPLACE_OPERATORS:
            return True
        if node.kwargs.get("inplace") is True:
            return True
        name = getattr(node.target, "__name__", "")
        return name.endswith("_") and not name.startswith("_")
    return False


@dataclass(frozen=True)
class Unit:
    """One operator of the parent (plus the ``getitem`` nodes that unpack its tuple output)."""

    index: int
    nodes: tuple[torch.fx.Node, ...]
    """The head node first, then attached nodes, in parent order."""
    op: str
    """Canonical operator name of the head (``F.linear``, ``Tensor.view``, ``operator.add``)."""

    @property
    def head(self) -> torch.fx.Node:
        return self.nodes[0]


@dataclass(frozen=True, order=True)
class OpRange:
    """Half-open range ``[start, stop)`` of unit indices."""

    start: int
    stop: int

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.stop:
            raise ValueError(f"invalid op range [{self.start}, {self.stop})")

    def __len__(self) -> int:
        return self.stop - self.start

    def __str__(self) -> str:
        return f"[{self.start},{self.stop})"


@dataclass
class ParentGraph:
    """A sample traced to FX and split into units (see the module docstring)."""

    sample: Sample
    gm: torch.fx.GraphModule
    units: list[Unit]
    placeholders: list[torch.fx.Node]
    floating: set[torch.fx.Node]
    dropped: set[torch.fx.Node]
    value_kinds: dict[torch.fx.Node, str]
    """Node → ``tensor`` | ``multi`` (tuple with tensors) | ``none`` | ``other`` (ints, floats, sizes...)."""
    unit_of: dict[torch.fx.Node, int]
    forbidden_cuts: set[int]
    """Cut ``c`` (between units c-1 and c) where a non-tensor value would cross, or inside a
    functorch region (see :meth:`cut_reason`)."""
    device: str = "cpu"
    seed: int = 0
    tensor_specs: dict[torch.fx.Node, tuple[list[int], torch.dtype]] = field(
        default_factory=dict, repr=False
    )
    """Shape and dtype of every tensor value of the run (no values are kept)."""
    mutated_inputs: set[torch.fx.Node] = field(default_factory=set, repr=False)
    """Placeholders the run changed in place (directly or through a view of them): a check
    of a range must copy such an input where the range starts; the others stay as they are
    until the range is run."""
    _cut_reasons: dict[int, str] = field(default_factory=dict, repr=False)
    _consumers: dict[torch.fx.Node, set[int]] = field(default_factory=dict, repr=False)
    _returned: set[torch.fx.Node] = field(default_factory=set, repr=False)
    _closure_cache: dict[torch.fx.Node, frozenset[torch.fx.Node]] = field(
        default_factory=dict, repr=False
    )

    @property
    def path(self) -> Path:
        return self.sample.path

    @property
    def op_sequence(self) -> list[str]:
        return [u.op for u in self.units]

    @property
    def meta_device(self) -> str:
        """Device string the parent's metadata uses (kept for new metadata, rewritten on load)."""
        return next((m.device for m in self.sample.weight_metas if m.device), "cpu")

    def cut_allowed(self, cut: int) -> bool:
        return cut not in self.forbidden_cuts

    def cut_reason(self, cut: int) -> str:
        """Why cut ``cut`` is forbidden (``"a non-tensor value crosses the cut"``, ...);
        ``""`` where it is allowed."""
        if cut not in self.forbidden_cuts:
            return ""
        return self._cut_reasons.get(cut, _CROSSING)

    def range_cut_reason(self, rng: OpRange) -> str:
        """Why ``rng`` cannot be a subgraph because of where it starts or stops; ``""``
        if both its cuts are allowed."""
        for cut in (rng.start, rng.stop):
            why = self.cut_reason(cut)
            if why:
                return f"{why} before unit {cut}"
        return ""

    def replay_inputs(self) -> list[Any]:
        return self.sample.replay_inputs(self.device, self.seed)

    def floating_closure(self, node: torch.fx.Node) -> frozenset[torch.fx.Node]:
        """Non-floating nodes (units' nodes, placeholders) that ``node`` reads, looking
        transitively through floating nodes (cached)."""
        cached = self._closure_cache.get(node)
        if cached is not None:
            return cached
        out: set[torch.fx.Node] = set()
        for a in node.all_input_nodes:
            if a in self.floating:
                out |= self.floating_closure(a)
            else:
                out.add(a)
        result = frozenset(out)
        self._closure_cache[node] = result
        return result

    def direct_deps(self, node: torch.fx.Node) -> set[torch.fx.Node]:
        """Non-floating nodes a node reads, looking through floating nodes."""
        return set(self.floating_closure(node))


_CROSSING = "a non-tensor value crosses the cut"
_IN_FUNCTORCH_REGION = (
    "a functorch vmap/jvp region (whose values are batched tensors) spans the cut"
)


def _value_kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
        return "multi"
    if value is None:
        return "none"
    return "other"


class NodeRunner:
    """Runs parent nodes in any topological order (units first, floating nodes on demand).

    :meth:`release` drops values nobody will read again, so a run holds the live values
    of the graph, not all of them (a segmentation network's activations are gigabytes).
    """

    def __init__(
        self, gm: torch.fx.GraphModule, placeholders: list[torch.fx.Node], inputs: Sequence[Any]
    ) -> None:
        self.gm = gm
        self.interp = torch.fx.Interpreter(gm)
        self.env: dict[torch.fx.Node, Any] = dict(zip(placeholders, inputs, strict=True))
        self.interp.env = self.env

    def release(self, nodes: Iterable[torch.fx.Node]) -> None:
        """Forget the values of ``nodes`` (computed again by :meth:`ensure` if asked for)."""
        for n in nodes:
            self.env.pop(n, None)

    def ensure(self, node: torch.fx.Node) -> Any:
        if node in self.env:
            return self.env[node]
        for a in node.all_input_nodes:
            self.ensure(a)
        if node.op == "get_attr":
            # A fresh copy: graphs that mutate their constants (setitem on a traced mask)
            # must not change the module for the next run.
            value = self.interp.fetch_attr(str(node.target))
            value = value.clone() if isinstance(value, torch.Tensor) else value
        else:
            value = self.interp.run_node(node)
        self.env[node] = value
        return value


def trace_parent(sample: str | Path | Sample, device: str = "cpu", seed: int = 0) -> ParentGraph:
    """Trace a sample, run it once on replayed inputs and split its body into units.

    Raises :class:`SampleError` when the sample cannot be loaded, traced or run.
    """
    s = sample if isinstance(sample, Sample) else load_sample(sample)
    gm = trace_sample(s)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = s.replay_inputs(device, seed)
    if len(inputs) != len(placeholders):
        raise SampleError(
            f"traced graph has {len(placeholders)} placeholders, forward() has {len(inputs)} parameters",
            sample=s.path,
            file="model.py",
        )
    if device != "cpu":
        _retarget_devices(gm, device)
    runner = NodeRunner(gm, placeholders, inputs)
    del inputs
    watch = _InputWatch(runner, placeholders)
    kinds: dict[torch.fx.Node, str] = {}
    specs: dict[torch.fx.Node, tuple[list[int], torch.dtype]] = {}
    dead_after = last_uses(gm.graph)
    with torch.no_grad(), functorch_levels_kept():
        for node in gm.graph.nodes:
            if node.op == "output":
                continue
            if node.op == "placeholder":
                value = runner.env[node]
            else:
                try:
                    value = runner.ensure(node)
                except Exception as exc:  # noqa: BLE001 - any eager failure means the sample is broken
                    raise SampleError(
                        f"eager run fails at node {node.name} ({op_name(node)}): {type(exc).__name__}: {exc}",
                        sample=s.path,
                        file="model.py",
                        node=node.name,
                    ) from exc
            kinds[node] = _value_kind(value)
            if isinstance(value, torch.Tensor):
                specs[node] = (list(value.shape), value.dtype)
            del value
            watch.after(node)
            runner.release(dead_after.get(node, ()))
            if not node.users:
                runner.release((node,))
    runner.env.clear()
    parent = _split_units(s, gm, placeholders, kinds, device, seed)
    parent.tensor_specs = specs
    parent.mutated_inputs = watch.mutated
    return parent


class _InputWatch:
    """Which placeholders a run changes in place: after each node, the version counter of
    each tensor input's base (a view shares its base's counter) that is a placeholder's
    value. A placeholder freed and its identity reused can only add false alarms, which
    cost a copy, never a wrong check."""

    def __init__(self, runner: NodeRunner, placeholders: list[torch.fx.Node]) -> None:
        self.runner = runner
        self.node_of = {
            id(v): p for p in placeholders if isinstance(v := runner.env[p], torch.Tensor)
        }
        self.version = {p: runner.env[p]._version for p in self.node_of.values()}
        self.mutated: set[torch.fx.Node] = set()

    def after(self, node: torch.fx.Node) -> None:
        for a in node.all_input_nodes:
            value = self.runner.env.get(a)
            if not isinstance(value, torch.Tensor):
                continue
            base = value._base if value._base is not None else value
            p = self.node_of.get(id(base))
            if p is not None and base._version != self.version[p]:
                self.mutated.add(p)


def last_uses(graph: torch.fx.Graph) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """Node → the nodes whose last reader it is (their values can go once it has run).
    Values the output returns, and values nobody reads, are never listed."""
    last: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in graph.nodes:
        for a in node.all_input_nodes:
            last[a] = node
    out: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for value, reader in last.items():
        if reader.op != "output":
            out.setdefault(reader, []).append(value)
    return out


def _retarget_devices(gm: torch.fx.GraphModule, device: str) -> None:
    """Point the device arguments of the CPU-traced graph (``device=``, ``.to("cpu")``) at ``device``."""
    target = torch.device(device)

    def move(value: Any) -> Any:
        if isinstance(value, torch.device):
            return target
        if isinstance(value, str) and (value in ("cpu", "cuda") or value.startswith("cuda:")):
            return device
        return value

    for node in gm.graph.nodes:
        if "device" in node.kwargs:
            node.kwargs = {**node.kwargs, "device": move(node.kwargs["device"])}
        if node.op == "call_method" and node.target == "to":
            node.args = tuple(move(a) for a in node.args)
        else:
            node.args = tuple(target if isinstance(a, torch.device) else a for a in node.args)
    gm.to(device)
    gm.recompile()


def _split_units(
    sample: Sample,
    gm: torch.fx.GraphModule,
    placeholders: list[torch.fx.Node],
    kinds: dict[torch.fx.Node, str],
    device: str,
    seed: int,
) -> ParentGraph:
    heads: list[torch.fx.Node] = []
    attached: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    floating: set[torch.fx.Node] = set()
    dropped: set[torch.fx.Node] = set()
    output_node = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            output_node = node
            continue
        kind = kinds[node]
        producer = node.args[0] if node.args else None
        if (
            node.op == "call_function"
            and node.target is operator.getitem
            and isinstance(producer, torch.fx.Node)
            and kinds.get(producer) == "multi"
        ):
            attached.setdefault(producer, []).append(node)
        elif node.op == "get_attr":
            floating.add(node)
        elif kind in ("tensor", "multi") or functorch_call(node):
            heads.append(node)
        elif kind == "none":
            if is_mutation(node):
                heads.append(node)
            else:
                dropped.add(node)
        else:
            floating.add(node)
    units = [
        Unit(i, (h, *attached.get(h, [])), canonical_op_name(h) or op_name(h))
        for i, h in enumerate(heads)
    ]
    unit_of = {n: u.index for u in units for n in u.nodes}
    parent = ParentGraph(
        sample=sample,
        gm=gm,
        units=units,
        placeholders=placeholders,
        floating=floating,
        dropped=dropped,
        value_kinds=kinds,
        unit_of=unit_of,
        forbidden_cuts=set(),
        device=device,
        seed=seed,
    )
    _forbid_functorch_regions(parent)
    consumers: dict[torch.fx.Node, set[int]] = {}
    for u in units:
        for n in u.nodes:
            for dep in parent.direct_deps(n):
                if dep in unit_of and unit_of[dep] != u.index:
                    consumers.setdefault(dep, set()).add(u.index)
                    if kinds.get(dep) != "tensor":
                        # A tuple or an int computed by a unit cannot be a subgraph input.
                        for cut in range(unit_of[dep] + 1, u.index + 1):
                            parent.forbidden_cuts.add(cut)
                            parent._cut_reasons.setdefault(cut, _CROSSING)
    returned: set[torch.fx.Node] = set()
    if output_node is not None:
        for dep in parent.direct_deps(output_node):
            if dep in unit_of:
                returned.add(dep)
    parent._consumers = consumers
    parent._returned = returned
    return parent


def _forbid_functorch_regions(parent: ParentGraph) -> None:
    """Forbid the cuts inside functorch regions (nested ones count as their outermost),
    and the cut after a ``lazy_load_decompositions``, which prepares the region after it."""
    depth = 0
    for u in parent.units:
        call = functorch_call(u.head)
        if call in FUNCTORCH_OPENERS:
            depth += 1
        elif call in FUNCTORCH_CLOSERS:
            depth = max(depth - 1, 0)
        if depth > 0 or call == "lazy_load_decompositions":
            parent.forbidden_cuts.add(u.index + 1)
            parent._cut_reasons[u.index + 1] = _IN_FUNCTORCH_REGION


@dataclass
class Subgraph:
    """The FX graph of one op range and its interface to the parent."""

    parent: ParentGraph
    range: OpRange
    graph: torch.fx.Graph
    inputs: list[torch.fx.Node]
    """Parent nodes that become the subgraph's forward parameters, in order."""
    input_names: list[str]
    outputs: list[torch.fx.Node]
    """Parent nodes the subgraph returns, in order."""
    nodes: list[torch.fx.Node]
    """Parent nodes computed inside (units' nodes and floating nodes), in execution order."""
    constants_as_inputs: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def units(self) -> list[Unit]:
        return self.parent.units[self.range.start : self.range.stop]

    @property
    def op_sequence(self) -> list[str]:
        return [u.op for u in self.units]

    @property
    def call_range(self) -> tuple[int, int]:
        """``[start, stop)`` over the parent's call nodes (``compute_nodes`` order) spanned by the range."""
        index = {n: i for i, n in enumerate(compute_nodes(self.parent.gm))}
        positions = [index[n] for u in self.units for n in u.nodes if n in index]
        return min(positions), max(positions) + 1

    @functools.cached_property
    def model_source(self) -> str:
        return render_model_source(self.graph, self.input_names, self._annotations())

    def _annotations(self) -> list[str]:
        out = []
        for n in self.inputs:
            if n.op == "placeholder" and self.parent.value_kinds.get(n) != "tensor":
                out.append("torch.SymInt")
            elif n.op == "placeholder" and n.type is torch.nn.parameter.Parameter:
                out.append("torch.nn.parameter.Parameter")
            else:
                out.append("torch.Tensor")
        return out


def _range_nodes(
    parent: ParentGraph, rng: OpRange
) -> tuple[list[torch.fx.Node], set[torch.fx.Node]]:
    """Nodes to compute inside the range (execution order) and the set of its units' nodes."""
    own = [n for u in parent.units[rng.start : rng.stop] for n in u.nodes]
    own_set = set(own)
    ordered: list[torch.fx.Node] = []
    seen: set[torch.fx.Node] = set()

    def visit_floating(n: torch.fx.Node) -> None:
        if n in seen:
            return
        for a in n.all_input_nodes:
            if a in parent.floating:
                visit_floating(a)
        seen.add(n)
        ordered.append(n)

    for n in own:
        for a in n.all_input_nodes:
            if a in parent.floating:
                visit_floating(a)
        seen.add(n)
        ordered.append(n)
    return ordered, own_set


def extract_subgraph(parent: ParentGraph, rng: OpRange) -> Subgraph:
    """Build the FX graph of a range: inputs at the cut become placeholders, live values are returned.

    Raises :class:`SubgraphError` when the range starts or stops at a forbidden cut.
    """
    where = dict(sample=parent.path, range=str(rng))
    if rng.stop > len(parent.units):
        raise SubgraphError(f"range ends after the last unit ({len(parent.units)})", **where)
    why = parent.range_cut_reason(rng)
    if why:
        raise SubgraphError(why, **where)
    ordered, own = _range_nodes(parent, rng)
    inside = set(ordered)
    external: set[torch.fx.Node] = set()
    for n in ordered:
        for a in n.all_input_nodes:
            if a not in inside:
                external.add(a)
    graph_order = {n: i for i, n in enumerate(parent.gm.graph.nodes)}
    inputs = sorted(external, key=graph_order.__getitem__)
    for a in inputs:
        if a.op != "placeholder" and parent.value_kinds.get(a) != "tensor":
            raise SubgraphError(
                f"input {a.name} is a {parent.value_kinds.get(a)} value, not a tensor",
                node=a.name,
                **where,
            )
    outputs = [
        n
        for n in ordered
        if n in own
        and parent.value_kinds.get(n) == "tensor"
        and (
            n in parent._returned
            or any(not rng.start <= c < rng.stop for c in parent._consumers.get(n, ()))
        )
    ]
    if not outputs:
        # A range whose values nobody uses (dead code in the parent) returns them anyway:
        # otherwise the subgraph would be empty after dead-code elimination.
        outputs = [
            n
            for n in ordered
            if n in own
            and parent.value_kinds.get(n) == "tensor"
            and not parent._consumers.get(n)
            and n not in parent._returned
            and not n.users
        ]
    if not outputs:
        # A range that only writes into its inputs returns what it wrote, so it has a result.
        outputs = [
            n.args[0]
            for n in ordered
            if n in own
            and is_mutation(n)
            and isinstance(n.args[0], torch.fx.Node)
            and parent.value_kinds.get(n.args[0]) == "tensor"
        ]
        outputs = list(dict.fromkeys(outputs))
    if not outputs:
        raise SubgraphError("range has no tensor output", **where)

    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    input_names: list[str] = []
    constants: dict[str, torch.Tensor] = {}
    for a in inputs:
        name = str(a.target) if a.op == "placeholder" else a.name
        ph = graph.placeholder(name)
        input_names.append(name)
        env[a] = ph
    for n in ordered:
        if n.op == "get_attr":
            value = _fetch_attr(parent.gm, str(n.target))
            if isinstance(value, torch.Tensor) and value.numel() > INLINE_CONSTANT_MAX_NUMEL:
                ph = graph.placeholder(n.name)
                inputs.append(n)
                input_names.append(n.name)
                constants[n.name] = value
                env[n] = ph
                continue
            env[n] = _constant_node(graph, value, n.name)
            continue
        env[n] = graph.node_copy(n, lambda x: env[x])
    graph.output(tuple(env[o] for o in outputs) if outputs else ())
    graph.lint()
    return Subgraph(parent, rng, graph, inputs, input_names, outputs, ordered, constants)


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _constant_node(graph: torch.fx.Graph, value: Any, name: str) -> torch.fx.Node:
    """A call that rebuilds a traced constant, so the subgraph needs no module attribute."""
    if not isinstance(value, torch.Tensor):
        raise SubgraphError(f"constant {name} is a {type(value).__name__}, not a tensor", node=name)
    literal = value.detach().cpu().tolist()
    # device="cpu" is rewritten to the target device when the sample is loaded.
    return graph.create_node(
        "call_function",
        torch.tensor,
        (literal,),
        {"dtype": value.dtype, "device": "cpu"},
        name=name,
    )


def copy_parent_graph(
    parent: ParentGraph,
) -> tuple[torch.fx.Graph, dict[torch.fx.Node, torch.fx.Node]]:
    """The whole parent graph with constants written as ``torch.tensor`` calls; same signature and outputs."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in parent.gm.graph.nodes:
        if n.op == "get_attr":
            env[n] = _constant_node(graph, _fetch_attr(parent.gm, str(n.target)), n.name)
        else:
            env[n] = graph.node_copy(n, lambda x: env[x])
    graph.lint()
    return graph, env


def canonical_hash(model_source: str, metas: Sequence[TensorMeta]) -> str:
    """Part 1's canonical graph hash of a sample that is not written yet (``model.py`` + metadata)."""
    sample = Sample(
        Path("<unwritten>"), model_source, forward_parameters(model_source), list(metas)
    )
    return graph_hash(sample)


# --- model.py rendering -------------------------------------------------------------------------

_ALLOWED_GLOBALS = {"torch", "device", "inf", "nan", "NoneType", "fx_pytree", "pytree"}
_DEF_RE = re.compile(r"^def forward\(self(?:, )?(.*)\):$")


def render_model_source(
    graph: torch.fx.Graph, param_names: list[str], annotations: list[str]
) -> str:
    """GraphNet-layout ``model.py`` for an FX graph: ``class GraphModule`` whose forward returns a tuple."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    saved = [(n, n.type) for n in placeholders]
    for n in placeholders:
        n.type = None  # annotations are written below, in GraphNet's spelling
    try:
        code = graph.python_code(root_module="self")
    finally:
        for n, t in saved:
            n.type = t
    imports = []
    for name, obj in sorted(code.globals.items()):
        if name in _ALLOWED_GLOBALS or getattr(builtins, name, None) is obj:
            continue
        if isinstance(obj, types.ModuleType):
            imports.append(
                f"import {obj.__name__}"
                if obj.__name__ == name
                else f"import {obj.__name__} as {name}"
            )
        else:
            raise DatasetError(
                f"generated code needs the global {name!r} ({obj!r}), which cannot be imported"
            )
    lines = code.src.strip("\n").splitlines()
    def_index = next(i for i, line in enumerate(lines) if line.startswith("def forward("))
    if not _DEF_RE.match(lines[def_index]):
        raise DatasetError(f"unexpected FX signature line: {lines[def_index][:120]}")
    body = "\n".join(lines[def_index + 1 :])
    params = "".join(f"        {p}: {a},\n" for p, a in zip(param_names, annotations, strict=True))
    header = ["import torch", "from torch import device", "from math import inf, nan", *imports]
    return (
        "\n".join(header)
        + "\n\n\nclass GraphModule(torch.nn.Module):\n"
        + f"    def forward(\n        self,\n{params}    ):\n"
        + textwrap.indent(textwrap.dedent(body), "        ").rstrip()
        + "\n"
    )


# --- metadata of intermediate values ------------------------------------------------------------


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block with one torch thread (restored after).

    For runs whose results are written: oneDNN, MKL and ATen's parallel reductions split
    their work by the thread count, so values (and Inductor's decisions, which read it)
    would otherwise depend on the number of jobs and cores.
    """
    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def round_statistic(value: float, digits: int | None = None) -> float:
    """``value`` rounded to ``digits`` (default :data:`STATISTIC_SIGNIFICANT_DIGITS`)
    significant decimal digits; 0, inf and NaN as they are.

    Decimal formatting rounds exactly, so the result is the same on every machine.
    """
    if value == 0 or not math.isfinite(value):
        return value
    digits = STATISTIC_SIGNIFICANT_DIGITS if digits is None else digits
    return float(f"{value:.{digits - 1}e}")


def tensor_meta_from_value(name: str, value: torch.Tensor, device: str = "cpu") -> TensorMeta:
    """Metadata of an intermediate tensor: shape, dtype, statistics; literal data when small.

    Statistics are taken over finite values, so a mask holding ``-inf`` still gets
    a usable mean/std; ``min_val``/``max_val`` bound the replayed values. Float
    statistics are rounded with :func:`round_statistic`; literal ``data`` is exact.
    """
    t = value.detach()
    shape = list(t.shape)
    dtype = t.dtype
    numel = t.numel()
    meta = TensorMeta(name=name, shape=shape, dtype=dtype, device=device)
    if numel == 0:
        return meta
    if dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex):
        as_f = t.to(torch.float64)
        meta.mean = round_statistic(float(as_f.mean()))
        meta.std = round_statistic(float(as_f.std())) if numel > 1 else 0.0
        if dtype != torch.bool:
            meta.min_val = int(t.min())
            meta.max_val = int(t.max())
        if numel <= INT_DATA_MAX_NUMEL:
            meta.data = [bool(v) if dtype == torch.bool else int(v) for v in t.flatten().tolist()]
        return meta
    if dtype.is_complex:
        meta.mean, meta.std = 0.0, 1.0
        return meta
    flat = (t if t.dtype in (torch.float32, torch.float64) else t.float()).flatten()
    # One pass when every value is finite (the usual case): a NaN or inf would make the
    # mean or std non-finite, and only then are the finite values picked out.
    std, mean = torch.std_mean(flat) if flat.numel() > 1 else (None, None)
    if std is None or not (math.isfinite(float(std)) and math.isfinite(float(mean))):
        finite = torch.isfinite(flat)
        if not bool(finite.all()):
            flat = flat[finite]
        std, mean = torch.std_mean(flat) if flat.numel() > 1 else (None, None)
    if flat.numel():
        # Rounding can carry a value past the dtype's largest finite one (a mask filled with
        # finfo(float32).min, -3.4028e38, rounds to -3.403e38), which replay cannot draw.
        info = torch.finfo(dtype)

        def rounded(value: float) -> float:
            return min(max(round_statistic(value), info.min), info.max)

        if flat.numel() > 1:
            meta.mean, meta.std = rounded(float(mean)), round_statistic(float(std))
        else:
            meta.mean, meta.std = rounded(float(flat[0])), 0.0
        lo, hi = torch.aminmax(flat)
        meta.min_val, meta.max_val = rounded(float(lo)), rounded(float(hi))
    if numel <= FLOAT_DATA_MAX_NUMEL:
        meta.data = [float(v) for v in t.double().flatten().tolist()]
    return meta


def unit_ranges(parent: ParentGraph) -> list[OpRange]:
    """One range per unit, except that units a non-tensor value flows between stay together."""
    ranges: list[OpRange] = []
    for i in range(len(parent.units)):
        if ranges and not parent.cut_allowed(i):
            ranges[-1] = OpRange(ranges[-1].start, i + 1)
        else:
            ranges.append(OpRange(i, i + 1))
    return ranges


def iter_partition(parent: ParentGraph, ranges: Sequence[OpRange]) -> Iterator[OpRange]:
    """``ranges`` plus filler ranges for the gaps, so that every unit is covered once."""
    pos = 0
    for r in sorted(ranges):
        if r.start > pos:
            yield OpRange(pos, r.start)
        yield r
        pos = r.stop
    if pos < len(parent.units):
        yield OpRange(pos, len(parent.units))
