"""Deterministic, seeded replay of tensors from metadata (docs/formats.md, "Replay").

Rules, in order of precedence:

* literal ``data`` is used as stored;
* a parameter the graph uses as an *epsilon* or a *variance* (found by tracing the
  graph: ``batch_norm``'s ``running_var``/``eps``, ``layer_norm``/``group_norm``/
  ``instance_norm``/``rms_norm`` ``eps``; or named ``*eps``/``*running_var``) is
  kept strictly positive;
* integers are drawn uniformly in ``[min_val, max_val]``; without a stored range an
  integer used as ``embedding`` indices is drawn in ``[0, num_embeddings)``, and any
  other integer in ``[0, 1]`` (valid as a mask and as an index into any dimension);
* a part of a floating tensor that the graph converts to integers and uses as
  ``embedding`` indices (Pix2Struct packs row and column indices into the first two
  channels of its patches: ``patches[:, :, 0].long()``) is drawn as such indices, the
  rest of the tensor as a float;
* bools are fair coin flips;
* floats are ``normal(mean, std)`` clamped to ``[min_val, max_val]``. GraphNet prints
  mean/std with three decimals, so a ``std`` of ``0.000`` on a tensor of more than one
  element means "below 5e-4", not "constant": it is drawn with std 5e-4 so the
  tensor does not collapse to a constant;
* a SymInt takes its stored value.

Each tensor gets its own generator seeded from ``(seed, name)``, so values do not
depend on parameter order; draws happen on the CPU and are then moved to the
target device, so CPU and CUDA runs see the same inputs.

Replay is a pure function of the metadata, the usage and the seed. Inside
:func:`replay_cache` each tensor drawn is kept (up to a byte budget) and a later
draw of the same metadata, usage and seed is a copy of it: a decomposition replays
the parent's weights again for every subgraph that reads them.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import operator
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from passnet.sample._meta import TensorMeta

__all__ = ["ParamUsage", "analyze_usage", "replay_cache", "replay_tensor", "replay_value"]

log = logging.getLogger(__name__)

ROUNDED_ZERO_STD = 5e-4
DEFAULT_EPS = 1e-5
MIN_VARIANCE = 1e-3

_POSITIVE_ARGS: dict[str, tuple[tuple[int, str], ...]] = {
    "batch_norm": ((2, "running_var"), (7, "eps")),
    "layer_norm": ((4, "eps"),),
    "group_norm": ((4, "eps"),),
    "instance_norm": ((7, "eps"), (3, "running_var")),
    "rms_norm": ((3, "eps"),),
}
_TRANSPARENT_METHODS = {
    "item",
    "to",
    "long",
    "int",
    "float",
    "double",
    "half",
    "bfloat16",
    "contiguous",
    "clone",
    "detach",
}


@dataclass
class ParamUsage:
    """What the graph needs of one parameter's values."""

    positive: bool = False
    index_bound: int | None = None
    """Exclusive upper bound for integer values used as indices."""
    index_parts: tuple[tuple[Any, int], ...] = ()
    """``(key, bound)``: ``tensor[key]`` is converted to integers and used as indices below
    ``bound`` (a floating tensor that packs indices in some of its channels)."""


def _fn_name(node: torch.fx.Node) -> str:
    target = node.target
    return getattr(target, "__name__", str(target)).split(".")[-1]


def _arg(node: torch.fx.Node, pos: int, kw: str) -> Any:
    if len(node.args) > pos:
        return node.args[pos]
    return node.kwargs.get(kw)


def _aliases(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The node and everything that merely converts it (``.item()``, ``.to()``, ...)."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        for user in n.users:
            if (
                user.op == "call_method"
                and user.target in _TRANSPARENT_METHODS
                and user.args[0] is n
            ):
                stack.append(user)
            elif (
                user.op == "call_function"
                and _fn_name(user) in ("float", "int")
                and user.args[0] is n
            ):
                stack.append(user)
    return out


def analyze_usage(gm: torch.fx.GraphModule, metas: dict[str, TensorMeta]) -> dict[str, ParamUsage]:
    """Find value constraints of the parameters from how the traced graph uses them."""
    usage: dict[str, ParamUsage] = {}
    for ph in gm.graph.nodes:
        if ph.op != "placeholder":
            continue
        u = ParamUsage()
        aliases = _aliases(ph)
        alias_set = set(aliases)
        for alias in aliases:
            for user in alias.users:
                if user.op != "call_function":
                    continue
                name = _fn_name(user)
                for pos, kw in _POSITIVE_ARGS.get(name, ()):
                    if _arg(user, pos, kw) in alias_set:
                        u.positive = True
                bound = _embedding_bound(user, alias_set, metas)
                if bound is not None:
                    u.index_bound = bound
        parts = []
        for user in ph.users:  # tensor[key] ... used as embedding indices
            if user.op != "call_function" or user.target is not operator.getitem:
                continue
            key = user.args[1]
            if _has_node(key):
                continue
            part = set(_aliases(user))
            for alias in part:
                for consumer in alias.users:
                    bound = _embedding_bound(consumer, part, metas)
                    if bound is not None:
                        parts.append((key, bound))
        u.index_parts = tuple(parts)
        usage[ph.target] = u
    return usage


def _embedding_bound(
    node: torch.fx.Node, inputs: set[torch.fx.Node], metas: dict[str, TensorMeta]
) -> int | None:
    """``num_embeddings`` when ``node`` is an ``embedding`` whose indices are one of ``inputs``."""
    if node.op != "call_function" or _fn_name(node) != "embedding":
        return None
    if _arg(node, 0, "input") not in inputs:
        return None
    weight = _arg(node, 1, "weight")
    wmeta = (
        metas.get(getattr(weight, "target", None)) if isinstance(weight, torch.fx.Node) else None
    )
    return wmeta.shape[0] if wmeta is not None and wmeta.shape else None


def _has_node(value: Any) -> bool:
    found = False

    def visit(v: Any) -> Any:
        nonlocal found
        found = found or isinstance(v, torch.fx.Node)
        return v

    torch.fx.node.map_aggregate(value, visit)
    return found


def name_heuristics(name: str) -> ParamUsage:
    """Fallback when the graph cannot be traced: judge by the parameter's name."""
    lowered = name.lower()
    return ParamUsage(positive=lowered.rstrip("_").endswith("eps") or "running_var" in lowered)


def _generator(seed: int, name: str) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63))
    return g


def replay_tensor(meta: TensorMeta, usage: ParamUsage, seed: int) -> torch.Tensor:
    """Build one tensor on the CPU from its metadata."""
    dtype, shape = meta.dtype, meta.shape
    if meta.data is not None:
        t = torch.tensor(meta.data, dtype=torch.float64 if dtype.is_floating_point else None)
        t = t.to(dtype).reshape(shape)
        if usage.positive and dtype.is_floating_point and meta.numel == 1 and t.item() <= 0:
            t = torch.full(shape, DEFAULT_EPS, dtype=dtype)
        return t
    g = _generator(seed, meta.name)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).to(torch.bool)
    if not (dtype.is_floating_point or dtype.is_complex):
        lo = int(meta.min_val) if meta.min_val is not None else 0
        if meta.max_val is not None:
            hi = int(meta.max_val) + 1
        elif usage.index_bound is not None:
            hi = usage.index_bound
        else:
            hi = max(lo + 2, 2) if meta.min_val is None else lo + 2
        hi = max(hi, lo + 1)
        return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)
    mean = float(meta.mean) if meta.mean is not None else 0.0
    std = float(meta.std) if meta.std is not None else 1.0
    if std != std or mean != mean:  # NaN statistics: fall back to a standard normal
        mean, std = 0.0, 1.0
    if usage.positive and meta.numel == 1:
        value = mean if mean > 0 else DEFAULT_EPS
        return torch.full(shape, value, dtype=torch.float64).to(dtype)
    if std == 0.0 and meta.numel > 1:
        std = ROUNDED_ZERO_STD
    base_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    if dtype.is_complex:
        t = torch.randn(shape, generator=g, dtype=dtype) * std + mean
        return t
    t = torch.randn(shape, generator=g, dtype=base_dtype) * std + mean
    lo = meta.min_val if meta.min_val is not None else None
    hi = meta.max_val if meta.max_val is not None else None
    if usage.positive:
        t = t.abs()
        lo = max(float(lo) if lo is not None else 0.0, MIN_VARIANCE)
    if lo is not None or hi is not None:
        t = t.clamp(min=lo, max=hi)
    for key, bound in usage.index_parts:
        part = t[key]
        t[key] = torch.randint(0, bound, part.shape, generator=g).to(t.dtype)
    return t.to(dtype)


class _ReplayCache:
    """Tensors drawn so far, least recently used first, within ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.tensors: OrderedDict[tuple[Any, ...], torch.Tensor] = OrderedDict()
        self.hits = 0

    def get(self, key: tuple[Any, ...]) -> torch.Tensor | None:
        t = self.tensors.get(key)
        if t is None:
            return None
        self.tensors.move_to_end(key)
        self.hits += 1
        return t.clone()

    def put(self, key: tuple[Any, ...], t: torch.Tensor) -> None:
        size = t.numel() * t.element_size()
        if size > self.max_bytes:
            return
        while self.tensors and self.bytes + size > self.max_bytes:
            _, old = self.tensors.popitem(last=False)
            self.bytes -= old.numel() * old.element_size()
        self.tensors[key] = t.clone()
        self.bytes += size


_CACHE: contextvars.ContextVar[_ReplayCache | None] = contextvars.ContextVar(
    "passnet_replay_cache", default=None
)


@contextlib.contextmanager
def replay_cache(max_bytes: int) -> Iterator[_ReplayCache]:
    """Within the block, replayed tensors are kept (at most ``max_bytes``, least recently
    used dropped first) and replaying the same metadata, usage and seed again copies the
    kept tensor instead of drawing it: the same values, without the draw. Each replay
    gets its own copy, so a graph that writes into its inputs cannot change the kept one."""
    cache = _ReplayCache(max_bytes)
    token = _CACHE.set(cache)
    try:
        yield cache
    finally:
        _CACHE.reset(token)


def _cache_key(meta: TensorMeta, usage: ParamUsage, seed: int) -> tuple[Any, ...]:
    # repr keeps -0.0 apart from 0.0 and names every field replay_tensor reads.
    return (
        seed,
        meta.name,
        tuple(meta.shape),
        meta.dtype,
        repr(meta.mean),
        repr(meta.std),
        repr(meta.min_val),
        repr(meta.max_val),
        repr(usage),
    )


def _cached_replay_tensor(meta: TensorMeta, usage: ParamUsage, seed: int) -> torch.Tensor:
    cache = _CACHE.get()
    # Literal data is cheap to rebuild; under a dispatch mode (fake tensors) nothing real
    # may be handed out or kept.
    if cache is None or meta.data is not None or _dispatch_mode_active():
        return replay_tensor(meta, usage, seed)
    key = _cache_key(meta, usage, seed)
    t = cache.get(key)
    if t is None:
        t = replay_tensor(meta, usage, seed)
        cache.put(key, t)
    return t


def _dispatch_mode_active() -> bool:
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return _get_current_dispatch_mode() is not None


def replay_value(meta: TensorMeta, usage: ParamUsage, seed: int, is_symint: bool) -> Any:
    """A tensor, or a Python int for SymInt parameters."""
    if is_symint:
        if meta.data is not None and len(meta.data) == 1:
            return int(meta.data[0])
        if meta.mean is not None:
            return int(round(float(meta.mean)))
        raise ValueError(f"SymInt parameter {meta.name!r} has neither data nor mean")
    return _cached_replay_tensor(meta, usage, seed)
