"""Finding a pattern in a graph, and explaining why it is not there.

Semantics (those of :class:`torch.fx.passes.utils.matcher_utils.SubgraphMatcher`,
which PassNet's pass manager uses, so passes written for it match the same
subgraphs here):

* A match starts at the pattern's anchors (returned values that nothing else
  in the pattern uses) and walks backwards along arguments, so given where an
  anchor lands the whole match is determined.
* Nodes correspond when they are the same kind of call (``call_function`` /
  ``call_method``) of the same target, with the same number of positional
  arguments and the same keyword names. ``torch.sum(x, 1)`` and ``x.sum(1)``
  are different calls; write the pattern as ``model.py`` writes the graph.
* Literal arguments must be equal and of the same type (``1`` is not ``1.0``);
  lists and tuples compare element-wise; slices field by field.
* Pattern inputs are free: each binds to any graph value (or literal), the same
  input always to the same value, and two inputs never to the same graph node.
* Only the pattern's returned values may be used outside the match; every
  other matched value must be consumed inside it. Replacing the match must not
  create a cycle. Overlapping matches: the first one (in graph order) wins.

:meth:`Matcher.explain` runs its own search for the best partial match: from
every pattern operation and every graph node calling the same target, it
walks backwards as far as the correspondence holds and keeps the deepest walk,
with the first difference it met (op, target, literal argument, or a value
used outside the match).
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import torch.fx
from torch.fx import Node

from passnet.passes._pattern import Pattern
from passnet.sample import describe_op, format_node, node_location

__all__ = ["Match", "Matcher", "Mismatch"]


@dataclass(frozen=True)
class Match:
    """One occurrence of a pattern in a graph."""

    nodes: dict[Node, Node]
    """Pattern operation → graph node."""
    bindings: tuple[Any, ...]
    """Per pattern input, the graph node (or literal) it stands for."""
    returning: tuple[Node, ...]
    """Graph nodes standing for the pattern's returned values, in order."""

    @property
    def graph_nodes(self) -> set[Node]:
        return set(self.nodes.values())


@dataclass
class Mismatch:
    """Why a pattern does not match a graph: the best partial match and its first difference."""

    matched: int
    total: int
    reason: str
    pattern_node: Node | None = None
    graph_node: Node | None = None
    partial: dict[Node, Node] = field(default_factory=dict)
    absent: list[str] = field(default_factory=list)
    """Operations of the pattern that the graph never calls (the pattern cannot match then)."""
    refused: bool = False
    """The pattern matched completely, but replacing that match is not allowed (``reason``)."""

    def lines(self) -> list[str]:
        """Human-readable diagnostic lines."""
        out = []
        if self.absent:
            out.append(f"the graph never calls {', '.join(self.absent)}")
        if self.refused:
            out.append(f"a complete match of {self.total} pattern operations, refused")
        elif self.partial:
            out.append(f"best partial match: {self.matched} of {self.total} pattern operations")
        else:
            out.append(f"no partial match: 0 of {self.total} pattern operations")
        if self.pattern_node is not None:
            out.append(f"  pattern: {_located(self.pattern_node)}")
        if self.graph_node is not None:
            out.append(f"  graph:   {_located(self.graph_node)}")
        out.append(f"  {self.reason}")
        return out


def _located(node: Node) -> str:
    loc = node_location(node)
    return f"{format_node(node)}" + (f"   ({loc})" if loc else "")


def _key(node: Node) -> tuple[str, Hashable] | None:
    if node.op in ("call_function", "call_method", "call_module", "get_attr"):
        try:
            hash(node.target)
        except TypeError:
            return (node.op, id(node.target))
        return (node.op, node.target)
    return None


def _show(value: Any) -> str:
    if isinstance(value, Node):
        return f"{value.name} ({describe_op(value)})"
    return repr(value)


class _State:
    __slots__ = ("differ", "failure", "lenient", "p2g", "used")

    def __init__(self, lenient: bool = False) -> None:
        self.p2g: dict[Node, Any] = {}
        self.used: dict[Node, Node] = {}
        self.failure: tuple[Node | None, Node | None, str] | None = None
        self.lenient = lenient
        """Explaining only: a literal that differs is noted (``differ``), not a stop."""
        self.differ: set[Node] = set()

    def copy(self) -> _State:
        new = _State(self.lenient)
        new.p2g = dict(self.p2g)
        new.used = dict(self.used)
        new.differ = set(self.differ)
        return new

    def fail(self, pn: Node | None, gn: Node | None, reason: str) -> bool:
        if self.failure is None:
            self.failure = (pn, gn, reason)
        return False


def _literal_equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - exotic literals without a usable __eq__ never match
        return False


class Matcher:
    """Matches one traced pattern against graphs."""

    def __init__(self, pattern: Pattern) -> None:
        self.pattern = pattern
        self._compute = pattern.compute_nodes
        self._placeholders = list(pattern.placeholders)
        self._returning = set(pattern.returning)

    # -- node correspondence -------------------------------------------------
    def _match_node(self, pn: Node, gn: Node, st: _State) -> bool:
        if pn in st.p2g:
            prev = st.p2g[pn]
            if prev is gn:
                return True
            return st.fail(
                pn,
                gn,
                f"the pattern uses {pn.name} here again, but the graph uses {_show(gn)} "
                f"instead of {_show(prev)}",
            )
        if pn.op == "placeholder":
            if gn in st.used:
                return st.fail(
                    pn,
                    gn,
                    f"pattern input {pn.name} would be {gn.name}, which already stands for "
                    f"pattern value {st.used[gn].name} (two pattern values cannot share a graph node)",
                )
            st.p2g[pn] = gn
            st.used[gn] = pn
            return True
        if gn in st.used:
            return st.fail(
                pn,
                gn,
                f"graph node {gn.name} is already matched to pattern value {st.used[gn].name}",
            )
        if pn.op != gn.op or _key(pn) != _key(gn):
            return st.fail(pn, gn, f"expected {describe_op(pn)}, the graph has {describe_op(gn)}")
        if len(pn.args) != len(gn.args):
            return st.fail(
                pn,
                gn,
                f"{describe_op(pn)}: the pattern passes {len(pn.args)} positional arguments, "
                f"the graph passes {len(gn.args)}",
            )
        if set(pn.kwargs) != set(gn.kwargs):
            return st.fail(
                pn,
                gn,
                f"{describe_op(pn)}: keyword arguments differ: the pattern passes "
                f"{sorted(pn.kwargs) or 'none'}, the graph passes {sorted(gn.kwargs) or 'none'}",
            )
        st.p2g[pn] = gn
        st.used[gn] = pn
        pairs = [(pa, ga, f"argument {i}") for i, (pa, ga) in enumerate(zip(pn.args, gn.args))]
        pairs += [(pa, gn.kwargs[name], f"keyword {name}") for name, pa in pn.kwargs.items()]
        # This operation's own literals first, then its inputs: an operation counted as
        # agreeing in a partial match has had its literals compared (eps, shifts, ...).
        for pa, ga, where in sorted(pairs, key=lambda pair: _has_node(pair[0])):
            if not self._match_arg(pa, ga, st, pn, gn, where):
                return False
        return True

    def _match_arg(self, pa: Any, ga: Any, st: _State, pn: Node, gn: Node, where: str) -> bool:
        if isinstance(pa, Node):
            if isinstance(ga, Node):
                return self._match_node(pa, ga, st)
            if pa.op == "placeholder":
                if pa in st.p2g:
                    prev = st.p2g[pa]
                    if isinstance(prev, Node) or not _literal_equal(prev, ga):
                        return st.fail(
                            pn,
                            gn,
                            f"{where}: pattern input {pa.name} is {_show(prev)} elsewhere, "
                            f"here the graph has {ga!r}",
                        )
                    return True
                for node in _nodes_in(ga):
                    # a list of graph values (torch.cat's tensors): each node in it stands
                    # for this input, and for nothing else of the pattern
                    if node in st.used:
                        return st.fail(
                            pn,
                            gn,
                            f"{where}: pattern input {pa.name} would include {node.name}, which "
                            f"already stands for pattern value {st.used[node].name}",
                        )
                    st.used[node] = pa
                st.p2g[pa] = ga
                return True
            return st.fail(
                pn,
                gn,
                f"{where}: the pattern passes {_show(pa)}, the graph passes the literal {ga!r}",
            )
        if isinstance(ga, Node):
            return st.fail(
                pn, gn, f"{where}: the pattern has the literal {pa!r}, the graph passes {_show(ga)}"
            )
        if isinstance(pa, (list, tuple)) and isinstance(ga, (list, tuple)):
            if len(pa) != len(ga):
                st.fail(pn, gn, f"{where}: the pattern has {len(pa)} elements, the graph {len(ga)}")
                if st.lenient and not _has_node(pa) and not _has_node(ga):
                    st.differ.add(pn)
                    return True
                return False
            return all(
                self._match_arg(a, b, st, pn, gn, f"{where}[{j}]")
                for j, (a, b) in enumerate(zip(pa, ga))
            )
        if isinstance(pa, slice) and isinstance(ga, slice):
            return all(
                self._match_arg(getattr(pa, f), getattr(ga, f), st, pn, gn, f"{where}.{f}")
                for f in ("start", "stop", "step")
            )
        if isinstance(pa, dict) and isinstance(ga, dict):
            if set(pa) != set(ga):
                return st.fail(
                    pn,
                    gn,
                    f"{where}: dict keys differ: {sorted(map(str, pa))} vs {sorted(map(str, ga))}",
                )
            return all(self._match_arg(pa[k], ga[k], st, pn, gn, f"{where}[{k!r}]") for k in pa)
        if not _literal_equal(pa, ga):
            st.fail(pn, gn, f"{where}: the pattern has {pa!r}, the graph has {ga!r}")
            if st.lenient:  # explaining: note the difference, keep walking the structure
                st.differ.add(pn)
                return True
            return False
        return True

    # -- whole matches -------------------------------------------------------
    def _containment_problem(self, st: _State) -> tuple[Node, Node, str] | None:
        matched = {st.p2g[pn] for pn in self._compute}
        for pn in self._compute:
            if pn in self._returning:
                continue
            gn = st.p2g[pn]
            for user in gn.users:
                if user not in matched:
                    return (
                        pn,
                        gn,
                        f"intermediate value {gn.name} (pattern {pn.name}) is also used outside the "
                        f"match by {user.name} ({describe_op(user)}); only the pattern's returned values may be",
                    )
        return None

    @staticmethod
    def creates_cycle(graph: torch.fx.Graph, match: Match) -> bool:
        """Whether replacing ``match`` in ``graph`` as it is now would create a cycle."""
        position = {n: i for i, n in enumerate(graph.nodes)}
        return Matcher._creates_cycle(match.graph_nodes, position)

    @staticmethod
    def _creates_cycle(nodes: set[Node], position: dict[Node, int]) -> bool:
        last = max(position[n] for n in nodes)
        frontier = [u for n in nodes for u in n.users if u not in nodes and position[u] < last]
        seen: set[Node] = set()
        while frontier:
            node = frontier.pop()
            if node in seen:
                continue
            seen.add(node)
            for user in node.users:
                if user in nodes:
                    return True
                if position[user] < last:
                    frontier.append(user)
        return False

    def _complete(self, st: _State) -> Match:
        return Match(
            nodes={pn: st.p2g[pn] for pn in self._compute},
            bindings=tuple(st.p2g[p] for p in self._placeholders),
            returning=tuple(st.p2g[r] for r in self.pattern.returning),
        )

    def _assignments(self, graph: torch.fx.Graph, index: dict[Any, list[Node]]) -> list[_State]:
        anchors = list(self.pattern.anchors)
        results: list[_State] = []

        def backtrack(i: int, st: _State) -> None:
            if i == len(anchors):
                if all(pn in st.p2g for pn in self._compute) and all(
                    p in st.p2g for p in self._placeholders
                ):
                    results.append(st)
                return
            for gn in index.get(_key(anchors[i]), []):
                trial = st.copy()
                if self._match_node(anchors[i], gn, trial):
                    backtrack(i + 1, trial)

        backtrack(0, _State())
        return results

    def find(self, graph: torch.fx.Graph) -> list[Match]:
        """Every non-overlapping occurrence of the pattern, in graph order.

        Each is replaceable by itself; replacing one can make a later one create a
        cycle (see :func:`creates_cycle`, which the pass manager checks again).
        """
        index = _index(graph)
        order = list(graph.nodes)
        position = {n: i for i, n in enumerate(order)}
        taken: set[Node] = set()
        matches = []
        for st in self._assignments(graph, index):
            match = self._complete(st)
            if match.graph_nodes & taken or self._refusal(st, match, order, position):
                continue
            taken |= match.graph_nodes
            matches.append(match)
        return matches

    def _refusal(
        self, st: _State, match: Match, order: list[Node], position: dict[Node, int]
    ) -> tuple[Node, Node, str] | None:
        """Why a complete match may not be replaced: (pattern node, graph node, reason) for a
        value used outside it, a cycle or an in-place change in between; else None."""
        problem = self._containment_problem(st)
        if problem is not None:
            return problem
        anchor = self.pattern.anchors[0]
        if self._creates_cycle(match.graph_nodes, position):
            reason = (
                "replacing this match would create a cycle: a value computed from the match "
                "feeds back into it"
            )
            return anchor, st.p2g[anchor], reason
        mutation = _mutation_problem(match, order, position)
        if mutation is not None:
            node, reason = mutation
            return anchor, node, reason
        return None

    def explain(self, graph: torch.fx.Graph) -> Mismatch:
        """The best partial match of the pattern in ``graph`` and the first difference it met."""
        mismatch = self._explain(graph)
        mismatch.absent = sorted(
            {describe_op(n) for n in self._compute if _key(n) not in _index(graph)}
        )
        return mismatch

    def _explain(self, graph: torch.fx.Graph) -> Mismatch:
        index = _index(graph)
        order = list(graph.nodes)
        position = {n: i for i, n in enumerate(order)}
        total = len(self._compute)
        # Complete matches that were filtered out explain themselves best.
        for st in self._assignments(graph, index):
            match = self._complete(st)
            refusal = self._refusal(st, match, order, position)
            if refusal is not None:
                pn, gn, reason = refusal
                return Mismatch(total, total, reason, pn, gn, dict(match.nodes), refused=True)
        best: tuple[tuple[int, ...], _State, Node, Node] | None = None
        for pn in reversed(self._compute):
            for gn in index.get(_key(pn), []):
                st = _State(lenient=True)
                self._match_node(pn, gn, st)
                # The walk goes on past literals that differ (eps, shifts): the structure
                # it covers says where the pattern is, the first difference says why it
                # does not match there. Deepest structure first; then the most operations
                # that agree literals included; then one that failed at an operation the
                # graph does call there (a literal differs: closer than another operation),
                # one that starts at an output, one that met no difference (it shows where
                # the graph leaves the pattern).
                score = (
                    len(_reached(st)),
                    len(_agreeing(st)),
                    int(_same_operation_failed(st)),
                    int(pn in self.pattern.anchors),
                    int(st.failure is None),
                    -position[gn],
                )
                if best is None or score > best[0]:
                    best = (score, st, pn, gn)
        if best is None:
            ops = sorted({describe_op(n) for n in self._compute})
            return Mismatch(
                0, total, f"the graph calls none of the pattern's operations ({', '.join(ops)})"
            )
        _, st, start_pn, start_gn = best
        partial = _agreeing(st)
        count = len(partial)
        if st.failure is not None:
            pn, gn, reason = st.failure
            # an input bound twice inconsistently fails at a placeholder: the operation
            # using it does not agree either, so a failed match is never "n of n"
            return Mismatch(min(count, total - 1), total, reason, pn, gn, partial)
        # The walk from start_pn succeeded: what follows start_pn in the pattern is not in the graph.
        consumers = [u for u in start_pn.users if u.op != "output" and u not in partial]
        if consumers:
            want = consumers[0]
            # A graph user calling the same operation: its first difference says most.
            for user in start_gn.users:
                if _key(user) == _key(want):
                    trial = st.copy()
                    trial.lenient = False
                    if not self._match_node(want, user, trial) and trial.failure is not None:
                        pn, gn, reason = trial.failure
                        return Mismatch(count, total, reason, pn, gn, partial)
            users = ", ".join(f"{u.name} ({describe_op(u)})" for u in start_gn.users) or "nothing"
            reason = (
                f"the pattern continues with {format_node(want)!r} consuming {start_pn.name}; "
                f"in the graph {start_gn.name} is used by {users}"
            )
            return Mismatch(count, total, reason, want, start_gn, partial)
        missing = [n.name for n in self._compute if n not in partial]
        return Mismatch(
            count,
            total,
            f"matched the part of the pattern ending at {start_pn.name}; the rest "
            f"({', '.join(missing)}) has no consistent match around it",
            start_pn,
            start_gn,
            partial,
        )


def _reached(st: _State) -> dict[Node, Node]:
    """Pattern operations the walk reached with the graph's structure (op, target and
    arguments agree, literals aside)."""
    failing = st.failure[0] if st.failure is not None else None
    return {
        p: g
        for p, g in st.p2g.items()
        if p.op != "placeholder" and (p is not failing or p in st.differ)
    }


def _agreeing(st: _State) -> dict[Node, Node]:
    """Pattern operations that correspond to their graph node, literals included."""
    return {p: g for p, g in _reached(st).items() if p not in st.differ}


_VIEWS = frozenset(
    (
        "view", "reshape", "view_as", "reshape_as", "transpose", "permute", "t", "T", "mT",
        "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten", "narrow",
        "select", "split", "chunk", "unbind", "as_strided", "contiguous", "detach", "movedim",
        "swapaxes", "swapdims", "diagonal", "unfold", "real", "imag", "getitem", "__getitem__",
        "split_with_sizes", "tensor_split", "alias",
    )
)  # fmt: skip
_INPLACE_OPERATORS = frozenset(
    (
        operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
        operator.imod, operator.ipow, operator.imatmul, operator.iand, operator.ior,
        operator.ixor, operator.ilshift, operator.irshift, operator.setitem,
    )
)  # fmt: skip


def _op_name(node: Node) -> str:
    target = node.target
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    return str(name).split(".")[0]


@functools.cache
def _inplace_position(target: Any) -> int | None:
    """Where ``inplace`` stands in the signature of a torch.nn.functional function, if anywhere."""
    try:
        names = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return None
    return names.index("inplace") if "inplace" in names else None


def _positional_inplace(node: Node) -> bool:
    """``F.relu(x, True)``: a torch.nn.functional call whose ``inplace`` is given by position."""
    target = node.target
    if node.op != "call_function" or getattr(target, "__module__", "") != "torch.nn.functional":
        return False
    at = _inplace_position(target)
    return at is not None and at < len(node.args) and node.args[at] is True


def _mutated(node: Node) -> Any:
    """The graph value ``node`` may change in place (``x.add_(y)``, ``x += y``,
    ``F.relu(x, inplace=True)``, ``x[i] = v``, ``out=x``), else None."""
    if node.op not in ("call_function", "call_method"):
        return None
    if isinstance(node.kwargs.get("out"), Node):
        return node.kwargs["out"]
    name = _op_name(node)
    inplace = (
        node.kwargs.get("inplace") is True
        or node.target in _INPLACE_OPERATORS
        or (
            name.endswith("_")
            and not name.startswith("_")
            and getattr(node.target, "__module__", None) not in ("operator", "_operator")
        )
        or name in ("__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__")
        or _positional_inplace(node)
    )
    return node.args[0] if inplace and node.args else None


def _base(value: Any) -> Any:
    """The value ``value`` is a view of (through view-like calls), or ``value`` itself."""
    while (
        isinstance(value, Node)
        and value.op in ("call_function", "call_method")
        and _op_name(value) in _VIEWS
        and value.args
        and isinstance(value.args[0], Node)
    ):
        value = value.args[0]
    return value


def _nodes_in(value: Any) -> list[Node]:
    if isinstance(value, Node):
        return [value]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _nodes_in(v)]
    return []


def _mutation_problem(
    match: Match, order: list[Node], position: dict[Node, int]
) -> tuple[Node, str] | None:
    """A graph operation between the match's first and last node that changes, in place, a
    value the match reads (an input, a view of one, one of its own values) or that uses the
    match's values: replacing the match by one call at its end would read the value after
    the change, or move the change. None when there is none."""
    nodes = match.graph_nodes
    first = min(position[n] for n in nodes)
    last = max(position[n] for n in nodes)
    read = {_base(n) for n in [*_nodes_in(match.bindings), *nodes]}
    downstream = set(nodes)
    for node in order[first + 1 : last]:
        if node in nodes:
            continue
        uses_match = any(a in downstream for a in node.all_input_nodes)
        if uses_match:
            downstream.add(node)
        target = _mutated(node)
        if target is None:
            continue
        if _base(target) in read or uses_match:
            return node, (
                f"{node.name} ({describe_op(node)}) changes {_show(target)} in place between "
                "the match's operations; the replacement, called where the match ends, would "
                "see the changed value"
            )
    return None


def _same_operation_failed(st: _State) -> bool:
    if st.failure is None:
        return False
    pn, gn = st.failure[0], st.failure[1]
    return (
        isinstance(pn, Node)
        and isinstance(gn, Node)
        and pn.op != "placeholder"
        and _key(pn) == _key(gn)
    )


def _has_node(value: Any) -> bool:
    if isinstance(value, Node):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_node(v) for v in value)
    if isinstance(value, dict):
        return any(_has_node(v) for v in value.values())
    return False


def _index(graph: torch.fx.Graph) -> dict[Any, list[Node]]:
    index: dict[Any, list[Node]] = {}
    for node in graph.nodes:
        key = _key(node)
        if key is not None:
            index.setdefault(key, []).append(node)
    return index
