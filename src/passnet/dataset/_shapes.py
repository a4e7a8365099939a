"""Literal sizes of an FX graph re-derived for new input shapes, in a lockstep run.

The graph runs node by node on inputs of new shapes. Before a node runs, its
literal sizes are recomputed from the old and new shapes of its input tensor:

* ``view``/``reshape``: input and output dimensions are paired into groups with
  equal products; a group whose product changed gets the new product, a group
  that splits one changed dimension scales the literal equal to the symbol's old
  value (or keeps its ``-1``), anything else cannot be tied and fails;
* ``expand``: aligned from the right, a non-broadcast size follows its input;
* slicing: a slice that covered a whole dimension covers the new one;
* in ``zeros``/``ones``/``full``/``arange``/``new_*``/``narrow``/``interpolate``
  and slices, a literal equal to a symbol's old value (≥ 2: 0 and 1 are used for
  too many other things) takes the new value.

A node that still fails to run raises :class:`GeneralizeError` naming it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import torch
import torch.fx

from passnet.dataset._subgraph import op_name
from passnet.errors import DatasetError

__all__ = ["GeneralizeError", "run_graph", "shapes_of", "value_rule"]


class GeneralizeError(DatasetError):
    """A variant cannot be made consistent or does not run. Context: ``sample``, ``variant``, ``node``."""


def value_rule(x: Any, scale: dict[int, int]) -> Any:
    """A literal equal to a symbol's old value (≥ 2, so 0/1 flags and dims stay) follows the symbol."""
    if isinstance(x, int) and not isinstance(x, bool) and x >= 2 and x in scale:
        return scale[x]
    return x


def _resolve(sizes: list[int], numel: int) -> list[int]:
    if -1 not in sizes:
        return list(sizes)
    known = math.prod(s for s in sizes if s != -1)
    return [numel // known if s == -1 and known else s for s in sizes]


def _view_groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Pair dimensions of a view's input and output into groups with equal products."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        if i < len(src) and j < len(dst) and src[i] == dst[j]:
            groups.append(([i], [j]))
            i, j = i + 1, j + 1
        elif i < len(src) and src[i] == 1:
            groups.append(([i], []))
            i += 1
        elif j < len(dst) and dst[j] == 1:
            groups.append(([], [j]))
            j += 1
        elif i < len(src) and j < len(dst):
            gi, gj, pi, pj = [i], [j], src[i], dst[j]
            i, j = i + 1, j + 1
            while pi != pj:
                if pi < pj and i < len(src):
                    gi.append(i)
                    pi *= src[i]
                    i += 1
                elif pj < pi and j < len(dst):
                    gj.append(j)
                    pj *= dst[j]
                    j += 1
                else:
                    raise GeneralizeError(
                        f"view {list(src)} -> {list(dst)} has no dimension grouping"
                    )
            groups.append((gi, gj))
        else:
            raise GeneralizeError(f"view {list(src)} -> {list(dst)} has no dimension grouping")
    return groups


def _new_view_sizes(
    sizes: list[int], old_in: Sequence[int], new_in: Sequence[int], scale: dict[int, int]
) -> list[int]:
    resolved = _resolve(sizes, math.prod(old_in))
    out = list(sizes)
    for gi, gj in _view_groups(list(old_in), resolved):
        old_p = math.prod(old_in[k] for k in gi)
        new_p = math.prod(new_in[k] for k in gi)
        if old_p == new_p:
            continue
        if not gj:
            raise GeneralizeError(f"dimension(s) {gi} change but the view drops them")
        if len(gj) == 1:
            out[gj[0]] = -1 if sizes[gj[0]] == -1 else new_p
            continue
        if any(sizes[k] == -1 for k in gj):
            continue  # the -1 absorbs the change
        follow = _sizes_that_follow([sizes[k] for k in gj], Fraction(new_p, old_p), scale)
        if follow is None:
            raise GeneralizeError(
                f"cannot tell which of the sizes {[sizes[k] for k in gj]} follows the change"
            )
        for k, size in follow.items():
            out[gj[k]] = size
    return out


def _sizes_that_follow(
    sizes: Sequence[int], ratio: Fraction, scale: dict[int, int]
) -> dict[int, int] | None:
    """Which literal sizes of a view group change, and to what, so that the group's product
    changes by ``ratio``; None when that cannot be told.

    First, sizes equal to a symbol's old value take its new value: the fewest such sizes,
    the first ones among equals. One symbol can stand for several sizes: a square
    ``S×S`` grid flattened into ``S*S`` tokens and viewed back is ``view(..., 224, 224)``,
    both following ``S``. Failing that, a square grid whose side is derived from the
    symbol (``56 = 224 / 4`` after a stride-4 patch embedding): ``k`` equal sizes that,
    each scaled by the symbol's factor, change the product by ``ratio`` (the factor to the
    ``k``-th power) all scale.
    """
    candidates = [k for k, s in enumerate(sizes) if s in scale]
    for count in range(1, len(candidates) + 1):
        for chosen in itertools.combinations(candidates, count):
            if math.prod(Fraction(scale[sizes[k]], sizes[k]) for k in chosen) == ratio:
                return {k: scale[sizes[k]] for k in chosen}
    factors = {Fraction(new, old) for old, new in scale.items()}
    if len(factors) != 1:
        return None
    (factor,) = factors
    for value in dict.fromkeys(s for s in sizes if s > 1):
        positions = [k for k, s in enumerate(sizes) if s == value]
        if len(positions) > 1 and factor ** len(positions) == ratio:
            new = value * factor
            if new.denominator == 1:
                return {k: int(new) for k in positions}
    return None


def _new_expand_sizes(
    sizes: list[int], old_in: Sequence[int], new_in: Sequence[int], scale: dict[int, int]
) -> list[int]:
    out = list(sizes)
    offset = len(sizes) - len(old_in)
    for k, s in enumerate(sizes):
        d = k - offset
        if d < 0:
            out[k] = value_rule(s, scale)
        elif s == -1:
            continue
        elif old_in[d] != 1 or new_in[d] != 1:
            out[k] = new_in[d] if (old_in[d] != 1 or s == 1) else s
        else:
            out[k] = value_rule(s, scale)
    return out


def _new_index(
    index: Any, old_in: Sequence[int], new_in: Sequence[int], scale: dict[int, int]
) -> Any:
    items = list(index) if isinstance(index, tuple) else [index]
    consuming = sum(1 for it in items if it is not None and it is not Ellipsis)
    out, dim = [], 0
    for it in items:
        if it is Ellipsis:
            dim += len(old_in) - consuming
            out.append(it)
            continue
        if it is None:
            out.append(it)
            continue
        if isinstance(it, slice) and dim < len(old_in):
            stop = it.stop
            if isinstance(stop, int) and stop >= old_in[dim] and new_in[dim] != old_in[dim]:
                stop = new_in[dim] if stop == old_in[dim] else stop
            elif isinstance(stop, int) and stop > 0:
                stop = value_rule(stop, scale)
            it = slice(it.start, stop, it.step)
        out.append(it)
        dim += 1
    return tuple(out) if isinstance(index, tuple) else out[0]


def _sizes_from_args(args: tuple[Any, ...]) -> tuple[list[Any], bool]:
    """Sizes given as varargs ``(2, 3)`` or as one sequence ``((2, 3),)``; second value: packed."""
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        return list(args[0]), True
    return list(args), False


def _pack(sizes: list[Any], packed: bool) -> tuple[Any, ...]:
    return (tuple(sizes),) if packed else tuple(sizes)


_CREATION = {"zeros", "ones", "empty", "full", "rand", "randn"}
_NEW_CREATION = {"new_zeros", "new_ones", "new_empty", "new_full"}


def _rewrite_shape_args(
    node: torch.fx.Node,
    env: dict[torch.fx.Node, Any],
    old_shapes: dict[str, Any],
    scale: dict[int, int],
) -> bool:
    """Re-derive literal sizes of one node for the new input shapes. True if the node changed."""
    name = op_name(node)
    first = node.args[0] if node.args else None
    old_in = old_shapes.get(first.name) if isinstance(first, torch.fx.Node) else None
    if not (isinstance(old_in, list) and all(isinstance(d, int) for d in old_in)):
        old_in = None  # not a tensor (a tuple being unpacked, a size, ...)
    new_val = env.get(first) if isinstance(first, torch.fx.Node) else None
    new_in = list(new_val.shape) if isinstance(new_val, torch.Tensor) else None
    args, kwargs = list(node.args), dict(node.kwargs)
    if name in ("view", "reshape") and old_in is not None and new_in is not None:
        sizes, packed = _sizes_from_args(tuple(args[1:]) or (kwargs.get("shape"),))
        if all(isinstance(s, int) for s in sizes):
            new_sizes = _new_view_sizes(sizes, old_in, new_in, scale)
            if "shape" in kwargs:
                kwargs["shape"] = tuple(new_sizes)
            else:
                args = [first, *_pack(new_sizes, packed)]
    elif name == "expand" and old_in is not None and new_in is not None:
        sizes, packed = _sizes_from_args(tuple(args[1:]))
        if all(isinstance(s, int) for s in sizes):
            args = [first, *_pack(_new_expand_sizes(sizes, old_in, new_in, scale), packed)]
    elif name == "getitem" and old_in is not None and new_in is not None and len(args) == 2:
        args[1] = _new_index(args[1], old_in, new_in, scale)
    elif name in _NEW_CREATION and len(args) >= 2:
        args[1] = (
            type(args[1])(value_rule(s, scale) for s in args[1])
            if isinstance(args[1], (list, tuple))
            else value_rule(args[1], scale)
        )
    elif name in _CREATION and node.op == "call_function":
        if args and isinstance(args[0], (list, tuple, torch.Size)):
            args[0] = tuple(value_rule(s, scale) for s in args[0])
        elif name != "full":  # zeros(2, 3): every positional argument is a size
            args = [value_rule(a, scale) for a in args]
        if isinstance(kwargs.get("size"), (list, tuple)):
            kwargs["size"] = tuple(value_rule(s, scale) for s in kwargs["size"])
    elif name == "arange" and node.op == "call_function":
        args = [value_rule(a, scale) for a in args]
        for k in ("start", "end"):
            if k in kwargs:
                kwargs[k] = value_rule(kwargs[k], scale)
    elif name == "narrow" and old_in is not None and new_in is not None and len(args) == 4:
        dim, length = args[1], args[3]
        if isinstance(dim, int) and isinstance(length, int):
            args[3] = new_in[dim] if length == old_in[dim] else value_rule(length, scale)
    elif name == "interpolate" and isinstance(kwargs.get("size"), (int, list, tuple)):
        size = kwargs["size"]
        kwargs["size"] = (
            value_rule(size, scale)
            if isinstance(size, int)
            else type(size)(value_rule(s, scale) for s in size)
        )
    else:
        return False
    new_args, new_kwargs = tuple(args), kwargs
    if new_args == node.args and new_kwargs == dict(node.kwargs):
        return False
    node.args, node.kwargs = new_args, new_kwargs
    return True


def shapes_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return list(value.shape)
    if isinstance(value, (tuple, list)):
        return [shapes_of(v) for v in value]
    return None


def run_graph(
    graph: torch.fx.Graph,
    inputs: Sequence[Any],
    *,
    old_shapes: dict[str, Any] | None = None,
    scale: dict[int, int] | None = None,
    shapes_out: dict[str, Any] | None = None,
    keep_outputs: bool = True,
) -> tuple[dict[str, Any], int, Any]:
    """Run a graph node by node; with ``old_shapes`` and ``scale``, rewrite literal sizes first.

    Returns node name → shape(s), the number of rewritten nodes, and the outputs.
    ``shapes_out`` (a dict) receives the shapes as they are found, so a caller still has
    those of the nodes that ran before a :class:`GeneralizeError`. Values are dropped after
    their last use; with ``keep_outputs=False`` the outputs too (the result is None).
    Inside a ``FakeTensorMode`` (fake inputs) nothing is computed: only shapes.
    """
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    interp = torch.fx.Interpreter(gm)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    env: dict[torch.fx.Node, Any] = dict(zip(placeholders, inputs, strict=True))
    interp.env = env
    shapes: dict[str, Any] = shapes_out if shapes_out is not None else {}
    rewritten = 0
    result = None
    last_reader: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        for a in node.all_input_nodes:
            last_reader[a] = node
    dead_after: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for value, reader in last_reader.items():
        if reader.op != "output" or not keep_outputs:
            dead_after.setdefault(reader, []).append(value)
    with torch.no_grad():
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                shapes[node.name] = shapes_of(env[node])
                continue
            if node.op == "output":
                if keep_outputs:
                    result = interp.fetch_args_kwargs_from_env(node)[0][0]
                break
            if old_shapes is not None and scale is not None:
                try:
                    rewritten += _rewrite_shape_args(node, env, old_shapes, scale)
                except GeneralizeError as exc:
                    exc.context["node"] = node.name
                    raise
            try:
                env[node] = interp.run_node(node)
            except Exception as exc:  # noqa: BLE001 - the variant breaks here; say where
                raise GeneralizeError(
                    f"fails at node {node.name} ({op_name(node)}): {type(exc).__name__}: {exc}",
                    node=node.name,
                ) from exc
            shapes[node.name] = shapes_of(env[node])
            for dead in dead_after.get(node, ()):
                env.pop(dead, None)
            if not node.users:
                env.pop(node, None)
    env.clear()
    return shapes, rewritten, result
