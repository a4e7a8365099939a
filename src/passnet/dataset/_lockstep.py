"""Lockstep runs: a parent and its subgraphs side by side, to check that subgraphs are faithful.

:func:`run_lockstep` runs the parent unit by unit and, where a range ends, runs
that range's rendered ``model.py`` — either on clones of the parent's values at
the cut (validation: each subgraph must reproduce the parent's values, and the
metadata of its new inputs is taken there) or on the outputs of the previous
subgraphs (composition: a chain of subgraphs covering the graph must reproduce
the parent's outputs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.fx

from passnet.dataset._subgraph import (
    NodeRunner,
    OpRange,
    ParentGraph,
    Subgraph,
    one_torch_thread,
    tensor_meta_from_value,
)
from passnet.sample import TensorMeta, compile_model_source, functorch_levels_kept

__all__ = ["RangeCheck", "load_module", "run_lockstep"]


def load_module(source: str, device: str, filename: str = "model.py") -> torch.nn.Module:
    """Instantiate the ``GraphModule`` of a rendered source on ``device``."""
    return compile_model_source(source, device, filename)().eval()


@dataclass
class RangeCheck:
    """How one range's subgraph compared with the parent."""

    range: OpRange
    ok: bool
    reason: str = ""
    input_metas: dict[str, TensorMeta] = field(default_factory=dict, repr=False)
    """Metadata of the range's intermediate inputs, taken from the parent's values when the range starts."""
    outputs_finite: bool = True
    subgraph: Subgraph | None = field(default=None, repr=False)


def _batched(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and bool(torch._C._functorch.is_batchedtensor(value))


def _same(a: Any, b: Any) -> tuple[bool, str]:
    if _batched(a) or _batched(b):
        # A functorch batched tensor means something only inside its vmap region (and
        # torch.equal has no batching rule): a range that returns one is not a sample.
        return False, "a vmap-batched tensor (only meaningful inside its vmap region)"
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape:
            return False, f"shape {list(a.shape)} != {list(b.shape)}"
        if a.dtype != b.dtype:
            return False, f"dtype {a.dtype} != {b.dtype}"
        if torch.equal(a, b):
            return True, ""
        if a.dtype.is_floating_point or a.dtype.is_complex:
            if torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True):
                return True, ""
            diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
            diff = diff[torch.isfinite(diff)]
            return False, f"max diff {float(diff.max()) if diff.numel() else float('nan'):.3g}"
        return (bool(torch.equal(a, b)), "" if torch.equal(a, b) else "values differ")
    return (a == b, "" if a == b else f"{a!r} != {b!r}")


_DEFERRED = object()
"""A range's input copied from the parent's run when the range runs (see ``deferred``)."""


def _clone(v: Any) -> Any:
    return v.clone() if isinstance(v, torch.Tensor) else v


def _release_plan(
    parent: ParentGraph,
    subgraphs: Sequence[Subgraph],
    *,
    keep_all: bool,
    deferred: Callable[[torch.fx.Node], bool] = lambda _n: False,
) -> dict[int, list[torch.fx.Node]]:
    """Unit index → the values that nothing needs after that unit: no later unit reads them
    (directly or through a floating node, which is computed when a unit needs it) and no
    range still has to compare them. Floating values (sizes, constants) and the parent's
    outputs stay; with ``keep_all`` nothing goes."""
    if keep_all:
        return {}
    need: dict[torch.fx.Node, int] = {}
    for unit in parent.units:
        for n in unit.nodes:
            need.setdefault(n, unit.index)
            for dep in parent.direct_deps(n):
                need[dep] = max(need.get(dep, -1), unit.index)
    for sub in subgraphs:
        for n in sub.outputs:
            need[n] = max(need.get(n, -1), sub.range.stop - 1)
        for n in sub.inputs:  # copied only when the range runs: kept until then
            if deferred(n):
                need[n] = max(need.get(n, -1), sub.range.stop - 1)
    returned = parent._returned
    plan: dict[int, list[torch.fx.Node]] = {}
    for n, last in need.items():
        if n in parent.floating or n in returned:
            continue
        plan.setdefault(last, []).append(n)
    return plan


def run_lockstep(
    parent: ParentGraph,
    subgraphs: Sequence[Subgraph],
    *,
    feed_forward: bool,
    collect_metas: bool = False,
    inputs: Sequence[Any] | None = None,
    module_factory: Callable[[Subgraph], Callable[..., Any]] | None = None,
) -> tuple[list[RangeCheck], tuple[bool, str]]:
    """Run the parent unit by unit and each subgraph at its range; compare.

    ``feed_forward=False``: each subgraph gets clones of the parent's values at its
    cut and must reproduce the parent's values of its outputs (ranges may leave gaps).
    ``feed_forward=True``: the subgraphs form a chain — each gets the outputs of the
    earlier subgraphs (the ranges must cover every unit) — and the chain's values
    of the parent's outputs must equal the parent's. ``collect_metas`` records the
    metadata of each range's intermediate inputs and whether its outputs are
    finite. Returns the per-range checks and
    ``(composition_ok, reason)`` (always ``(True, "")`` when not feeding forward).

    A run that collects metadata runs with one torch thread: the statistics are
    written, and with several threads the parent's values (a convolution's, a
    matmul's) follow the threads' reduction order.

    A subgraph that fails, or whose outputs cannot be compared, is a failed check with
    the reason; the others are still checked.
    """
    with (
        one_torch_thread() if collect_metas else contextlib.nullcontext(),
        functorch_levels_kept(),
    ):
        return _run_lockstep(
            parent,
            subgraphs,
            feed_forward=feed_forward,
            collect_metas=collect_metas,
            inputs=inputs,
            module_factory=module_factory,
        )


def _run_lockstep(
    parent: ParentGraph,
    subgraphs: Sequence[Subgraph],
    *,
    feed_forward: bool,
    collect_metas: bool,
    inputs: Sequence[Any] | None,
    module_factory: Callable[[Subgraph], Callable[..., Any]] | None,
) -> tuple[list[RangeCheck], tuple[bool, str]]:
    ordered = sorted(subgraphs, key=lambda s: s.range)
    if feed_forward:
        covered = [u for s in ordered for u in range(s.range.start, s.range.stop)]
        if covered != list(range(len(parent.units))):
            raise ValueError(
                "feed_forward needs ranges that cover every unit exactly once, in order"
            )
    make = module_factory or (
        lambda s: load_module(s.model_source, parent.device, f"<subgraph {s.range}>")
    )
    values = list(inputs) if inputs is not None else parent.replay_inputs()
    chain: dict[torch.fx.Node, Any] = (
        dict(zip(parent.placeholders, [_clone(v) for v in values], strict=True))
        if feed_forward
        else {}
    )
    # Inputs replayed here belong to nobody else: the parent's run takes them as they are
    # (a model's weights are most of them: a copy more would double the run's peak).
    owned = values if inputs is None else [_clone(v) for v in values]
    runner = NodeRunner(parent.gm, parent.placeholders, owned)
    del values, owned

    def deferred(a: torch.fx.Node) -> bool:
        """An input copied when its range runs, not where it starts: a placeholder the
        parent's run never changes (a model's weights), so one copy at a time, not one per
        range open over it."""
        return not feed_forward and a.op == "placeholder" and a not in parent.mutated_inputs

    release_after = _release_plan(parent, ordered, keep_all=feed_forward, deferred=deferred)
    checks: list[RangeCheck] = []
    starts: dict[int, list[Subgraph]] = {}
    for s in ordered:
        starts.setdefault(s.range.start, []).append(s)
    by_stop: dict[int, list[tuple[Subgraph, dict[torch.fx.Node, Any], RangeCheck]]] = {}
    metas: dict[tuple[torch.fx.Node, int, int], TensorMeta] = {}
    with torch.no_grad():
        for unit in parent.units:
            for sub in starts.get(unit.index, ()):
                check = RangeCheck(sub.range, ok=True)
                fed: dict[torch.fx.Node, Any] = {}
                for a, name in zip(sub.inputs, sub.input_names, strict=True):
                    if a.op == "get_attr":
                        fed[a] = runner.ensure(a)
                    elif deferred(a):
                        fed[a] = _DEFERRED
                    elif feed_forward and a in chain:
                        fed[a] = chain[a]
                    else:
                        fed[a] = _clone(runner.ensure(a))
                    current = runner.env.get(a)
                    if (
                        collect_metas
                        and a.op != "placeholder"
                        and isinstance(current, torch.Tensor)
                    ):
                        # Ranges starting where a value is the same share its statistics
                        # (the version counter tells an in-place write apart).
                        key = (a, id(current), current._version)
                        if key not in metas:
                            metas[key] = tensor_meta_from_value(a.name, current, parent.meta_device)
                        check.input_metas[name] = replace(metas[key], name=name)
                by_stop.setdefault(sub.range.stop, []).append((sub, fed, check))
            for n in unit.nodes:
                runner.ensure(n)
            for sub, fed, check in by_stop.pop(unit.index + 1, []):
                check.subgraph = sub
                checks.append(check)
                try:
                    module = make(sub)
                    # a subgraph failing inside a vmap region must not leave its level raised
                    with functorch_levels_kept():
                        got = module(
                            *[
                                _clone(runner.env[a]) if fed[a] is _DEFERRED else fed[a]
                                for a in sub.inputs
                            ]
                        )
                except Exception as exc:  # noqa: BLE001 - a subgraph that fails is reported, not raised
                    check.ok, check.reason = False, f"subgraph fails: {type(exc).__name__}: {exc}"
                    continue
                if not isinstance(got, tuple) or len(got) != len(sub.outputs):
                    check.ok, check.reason = (
                        False,
                        f"expected a tuple of {len(sub.outputs)} outputs",
                    )
                    continue
                for node, value in zip(sub.outputs, got, strict=True):
                    try:
                        same, why = _same(value, runner.env[node])
                        if (
                            collect_metas
                            and isinstance(value, torch.Tensor)
                            and value.is_floating_point()
                        ):
                            check.outputs_finite &= bool(torch.isfinite(value).all())
                    except Exception as exc:  # noqa: BLE001 - one value that cannot be compared fails its range only
                        same, why = False, f"cannot be compared: {type(exc).__name__}: {exc}"
                    if not same and check.ok:
                        check.ok, check.reason = False, f"output {node.name}: {why}"
                    if feed_forward:
                        chain[node] = value
                del fed
            runner.release(release_after.get(unit.index, ()))
        if not feed_forward:
            return checks, (True, "")
        failed = next((c for c in checks if not c.ok), None)
        if failed is not None:
            return checks, (False, f"range {failed.range} breaks the chain: {failed.reason}")
        output_node = next(n for n in parent.gm.graph.nodes if n.op == "output")
        expected = runner.interp.fetch_args_kwargs_from_env(output_node)[0][0]
        chained = torch.fx.node.map_arg(
            output_node.args[0], lambda n: chain[n] if n in chain else runner.env[n]
        )
    exp_flat = expected if isinstance(expected, (tuple, list)) else (expected,)
    got_flat = chained if isinstance(chained, (tuple, list)) else (chained,)
    for i, (e, g) in enumerate(zip(exp_flat, got_flat, strict=True)):
        same, why = _same(g, e)
        if not same:
            return checks, (False, f"parent output {i}: {why}")
    return checks, (True, "")
