"""A pass's template: its ``pattern`` traced to an FX graph, and the ``replacement_args`` selection.

The pattern function is traced symbolically, the same way the sample graph is
(:mod:`passnet.sample._graph`), so both are torch-level graphs of the same calls.
``replacement_args`` is not traced: it is called once with one opaque token per
pattern input, and what it returns must be those tokens (selected, reordered)
and literals — any computation on a token fails right there.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.fx

from passnet.errors import PassLoadError
from passnet.sample import SampleTracer, format_node, node_location

__all__ = ["ArgSpec", "Literal", "Pattern", "derive_arg_spec", "trace_pattern"]


@dataclass(frozen=True)
class Pattern:
    """The traced ``pattern``: a small FX graph with its inputs, outputs and match anchors."""

    graph_module: torch.fx.GraphModule
    placeholders: tuple[torch.fx.Node, ...]
    returning: tuple[torch.fx.Node, ...]
    """The returned values, in order."""
    multi_output: bool
    """The pattern returns a tuple (even of one value): the replacement must too."""
    anchors: tuple[torch.fx.Node, ...]
    """Returned nodes used by nothing else in the pattern: where a backward match starts."""

    @property
    def graph(self) -> torch.fx.Graph:
        return self.graph_module.graph

    @property
    def compute_nodes(self) -> list[torch.fx.Node]:
        return [n for n in self.graph.nodes if n.op not in ("placeholder", "output")]

    @property
    def num_outputs(self) -> int:
        return len(self.returning)

    def describe(self) -> list[str]:
        """The pattern as Python-like lines (one per node)."""
        return [format_node(n) for n in self.graph.nodes if n.op != "placeholder"]


def _line_in(exc: BaseException, file: Path) -> int | None:
    """Line of the innermost frame of ``exc``'s traceback that lies in ``file``."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename) == file:
            line = frame.lineno
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename) == file:
        line = exc.lineno
    return line


def trace_pattern(fn: Callable[..., Any], *, pass_name: str, file: Path) -> Pattern:
    """Trace ``fn`` (a pass's ``pattern``) and check that it can serve as a template.

    Every problem is a :class:`~passnet.errors.PassLoadError` naming the pass file
    and line: tracing fails, an input is unused, a value is computed but neither
    used nor returned, an input is returned unchanged, the result is not a value or
    a tuple of values, or the pattern embeds a tensor constant.
    """
    where = {"pass_name": pass_name, "file": file.name}
    first_line = getattr(getattr(fn, "__code__", None), "co_firstlineno", None)
    try:
        # the sample graph's tracer: constant factories (torch.tensor(1.0), torch.arange(n))
        # stay calls in both, so a pattern can spell them as model.py does
        tracer = SampleTracer(locations=True)
        graph = tracer.trace(fn)
        gm = torch.fx.GraphModule(tracer.root, graph, f"{pass_name}_pattern")
    except Exception as exc:  # noqa: BLE001 - any tracing failure is the pattern's fault
        raise PassLoadError(
            f"cannot trace pattern(): {type(exc).__name__}: {exc}",
            line=_line_in(exc, file) or first_line,
            **where,
        ) from exc

    def fail(message: str, node: torch.fx.Node | None = None) -> PassLoadError:
        line = first_line
        loc = node_location(node) if node is not None else None
        if loc is not None:
            line = int(loc.rsplit(":", 1)[1])
        return PassLoadError(f"pattern(): {message}", line=line, **where)

    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    output = nodes[-1]
    result = output.args[0]
    multi = isinstance(result, (tuple, list))
    returned = list(result) if multi else [result]
    if not returned:
        raise fail("returns an empty tuple")
    for value in returned:
        if not isinstance(value, torch.fx.Node):
            raise fail(f"returns {value!r}, which is not a value computed from the inputs")
        if value.op == "placeholder":
            raise fail(
                f"returns its input {value.name!r} unchanged; a pattern must compute what it returns"
            )
    if len(set(returned)) != len(returned):
        raise fail("returns the same value twice")
    for node in nodes:
        if node.op == "get_attr":
            raise fail(
                f"embeds a tensor constant ({node.target}); pass it in as an input instead", node
            )
        if node.op == "placeholder" and not node.users:
            raise fail(
                f"input {node.name!r} is not used; every pattern input must take part in the match"
            )
        if node.op not in ("placeholder", "output") and not node.users:
            raise fail(f"computes {format_node(node)!r} but neither uses nor returns it", node)
    if not any(n.op not in ("placeholder", "output") for n in nodes):
        raise fail("has no operations to match")
    anchors = [n for n in returned if set(n.users) == {output}]
    return Pattern(gm, tuple(placeholders), tuple(returned), multi, tuple(anchors))


@dataclass(frozen=True)
class Literal:
    """A constant argument that ``replacement_args`` adds (e.g. ``"D96"``, ``1e-5``)."""

    value: Any


@dataclass(frozen=True)
class ArgSpec:
    """What the replacement function receives: pattern input indices and literals, in order."""

    sources: tuple[int | Literal, ...]

    def apply(self, inputs: Sequence[Any]) -> list[Any]:
        """The replacement's arguments for the matched ``inputs`` (one per pattern input)."""
        return [inputs[s] if isinstance(s, int) else s.value for s in self.sources]


class _Slot:
    """Opaque stand-in for one matched pattern input while ``replacement_args`` runs."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<pattern input {self.index}>"


_LITERAL_TYPES = (type(None), bool, int, float, str, torch.dtype, torch.memory_format, torch.device)


def _is_literal(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_literal(v) for v in value)
    return isinstance(value, _LITERAL_TYPES)


def derive_arg_spec(
    fn: Callable[..., Any], num_inputs: int, *, pass_name: str, file: Path
) -> ArgSpec:
    """Run ``replacement_args`` on opaque tokens and read off the selection it makes."""
    where = {"pass_name": pass_name, "file": file.name}
    line = getattr(getattr(fn, "__code__", None), "co_firstlineno", None)
    try:
        result = fn(*(_Slot(i) for i in range(num_inputs)))
    except Exception as exc:  # noqa: BLE001 - computing on a token fails here, by design
        raise PassLoadError(
            "replacement_args() may only select/reorder the pattern's inputs and add literals; "
            f"calling it with the {num_inputs} matched inputs failed: {type(exc).__name__}: {exc}",
            line=_line_in(exc, file) or line,
            **where,
        ) from exc
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    sources: list[int | Literal] = []
    for position, item in enumerate(items):
        if isinstance(item, _Slot):
            sources.append(item.index)
        elif _is_literal(item):
            sources.append(Literal(item))
        else:
            raise PassLoadError(
                f"replacement_args() returned {item!r} at position {position}: only the pattern's "
                "inputs and literals (numbers, strings, None, dtypes) may be passed on",
                line=line,
                **where,
            )
    return ArgSpec(tuple(sources))
