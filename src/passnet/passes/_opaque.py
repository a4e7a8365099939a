"""Keeping replacements opaque to Inductor: one ``torch.library`` custom op per replacement site.

For ``pass_mgr+inductor`` the rewritten graph is compiled by Inductor, which
must neither trace into a replacement (it would see the kernel wrapper's
Python) nor fuse across it. Each replacement site becomes a custom op in the
``passnet_pass`` namespace:

* its inputs are the pattern's inputs that are graph values (tensors, ints,
  floats, bools); literals are closed over;
* its real implementation applies ``replacement_args`` and calls the same
  guarded replacement as ``pass_mgr`` (so the dispatch guard still applies);
* its fake (meta) implementation runs the traced *pattern* on the fake inputs,
  which gives exactly the shapes and dtypes the replaced subgraph produced.
  Outputs are declared contiguous; a replacement returning another layout is
  made contiguous (a copy, charged to the pass), and one returning another
  shape or dtype is a :class:`~passnet.passes.ReplacementError`.

Only ``torch.library.Library`` / ``define`` / ``impl`` and
``torch.library.register_fake`` are used: available from torch 2.4 on.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from passnet.errors import CompileError
from passnet.passes._loader import PassRule
from passnet.passes._manager import ReplacementError, ReplacementSite

__all__ = ["NAMESPACE", "make_opaque"]

log = logging.getLogger(__name__)

NAMESPACE = "passnet_pass"
_counter = itertools.count()


def _schema_type(value: Any) -> str | None:
    if isinstance(value, torch.Tensor):
        return "Tensor"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, torch.SymInt)):
        return "SymInt"
    if isinstance(value, (float, torch.SymFloat)):
        return "float"
    return None


class _Recorder(torch.fx.Interpreter):
    """Runs the rewritten graph with every replacement computed by its *pattern*, recording values."""

    def __init__(self, gm: torch.fx.GraphModule, sites: Sequence[ReplacementSite]) -> None:
        super().__init__(gm)
        self.by_call = {site.call: site for site in sites}
        self.wanted = {b for site in sites for b in site.bindings if isinstance(b, torch.fx.Node)}
        self.wanted |= set(self.by_call)
        self.values: dict[torch.fx.Node, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        site = self.by_call.get(n)
        if site is not None:
            bindings = [self.env[b] if isinstance(b, torch.fx.Node) else b for b in site.bindings]
            out = site.rule.pattern.graph_module(*bindings)
            value = tuple(out) if site.rule.pattern.multi_output else out
        else:
            value = super().run_node(n)
        if n in self.wanted:
            self.values[n] = value
        return value


def _op_name(site: ReplacementSite) -> str:
    base = re.sub(r"\W", "_", site.rule.name).strip("_").lower() or "pass"
    return f"{base}_{next(_counter)}"


def make_opaque(
    gm: torch.fx.GraphModule,
    sites: Sequence[ReplacementSite],
    target_of: Callable[[PassRule], Callable[..., Any]],
    example_inputs: Sequence[Any],
) -> torch.library.Library:
    """Turn every replacement call of ``gm`` into a custom op; return the library that owns them.

    Keep the returned library alive as long as the compiled graph: dropping it
    unregisters the ops. ``target_of(rule)`` is the guarded callable of a pass.
    """
    recorder = _Recorder(gm, sites)
    with torch.no_grad():
        recorder.run(*[v.clone() if isinstance(v, torch.Tensor) else v for v in example_inputs])
    lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    for site in sites:
        _define_site(lib, site, recorder.values, target_of(site.rule))
    gm.graph.lint()
    gm.recompile()
    return lib


def _define_site(
    lib: torch.library.Library,
    site: ReplacementSite,
    values: dict[torch.fx.Node, Any],
    target: Callable[..., Any],
) -> None:
    rule = site.rule
    pattern = rule.pattern
    node_slots: list[int] = []
    types: list[str] = []
    for i, binding in enumerate(site.bindings):
        if not isinstance(binding, torch.fx.Node):
            continue
        kind = _schema_type(values[binding])
        if kind is None:
            raise CompileError(
                f"pass {rule.name}: pattern input {pattern.placeholders[i].name} is a "
                f"{type(values[binding]).__name__} in this graph; pass_mgr+inductor supports tensor, int, "
                "float and bool inputs",
                pass_name=rule.name,
                file=rule.file.name,
            )
        node_slots.append(i)
        types.append(kind)
    produced = values[site.call]
    outputs = list(produced) if pattern.multi_output else [produced]
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        raise CompileError(
            f"pass {rule.name}: pass_mgr+inductor needs the pattern to return tensors only",
            pass_name=rule.name,
            file=rule.file.name,
        )
    expected = [(o.shape, o.dtype) for o in outputs]
    name = _op_name(site)
    ret = "Tensor" if not pattern.multi_output else "(" + ", ".join("Tensor" for _ in outputs) + ")"
    lib.define(f"{name}({', '.join(f'{t} a{j}' for j, t in enumerate(types))}) -> {ret}")
    literal_bindings = list(site.bindings)

    def bindings_of(args: Sequence[Any]) -> list[Any]:
        full = list(literal_bindings)
        for slot, value in zip(node_slots, args):
            full[slot] = value
        return full

    def real(*args: Any) -> Any:
        out = target(*rule.arg_spec.apply(bindings_of(args)))
        results = list(out) if pattern.multi_output else [out]
        fixed = []
        for k, (value, (shape, dtype)) in enumerate(zip(results, expected)):
            if not isinstance(value, torch.Tensor) or value.shape != shape or value.dtype != dtype:
                got = (
                    f"{tuple(value.shape)} {value.dtype}"
                    if isinstance(value, torch.Tensor)
                    else type(value).__name__
                )
                raise ReplacementError(
                    f"pass {rule.name}: output {k} is {got}, the pattern produces {tuple(shape)} {dtype}",
                    pass_name=rule.name,
                    file=rule.file.name,
                )
            fixed.append(value if value.is_contiguous() else value.contiguous())
        return tuple(fixed) if pattern.multi_output else fixed[0]

    def fake(*args: Any) -> Any:
        out = pattern.graph_module(*bindings_of(args))
        results = list(out) if pattern.multi_output else [out]
        made = [torch.empty(r.shape, dtype=r.dtype, device=r.device) for r in results]
        return tuple(made) if pattern.multi_output else made[0]

    lib.impl(name, real, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=lib)
    op = getattr(getattr(torch.ops, NAMESPACE), name).default
    call = site.call
    call.target = op
    call.args = tuple(site.bindings[i] for i in node_slots)
    call.kwargs = {}
    log.debug("pass %s: site %s is custom op %s::%s", rule.name, call.name, NAMESPACE, name)
