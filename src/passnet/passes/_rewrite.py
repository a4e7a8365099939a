"""Replacing matches: one call node per match, ``getitem`` per output of a multi-output pattern."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch.fx
from torch.fx import Node

from passnet.passes._matcher import Match
from passnet.sample import stable_toposort

__all__ = ["replace_match"]


def replace_match(
    graph: torch.fx.Graph,
    match: Match,
    target: Callable[..., Any],
    args: Sequence[Any],
    num_outputs: int,
    multi_output: bool,
) -> tuple[Node, dict[Node, Node]]:
    """Replace ``match`` in ``graph`` by ``target(*args)``.

    Returns the new call node and, for each returned value of the match, the
    node that now stands for it (so later matches whose inputs were those values
    can be redirected).

    ``args`` holds graph nodes (matched inputs) and literals. A multi-output
    pattern's values are read from the call's result with ``operator.getitem``,
    in the order the pattern returns them; its matched operations are erased.
    """
    order = {n: i for i, n in enumerate(graph.nodes)}
    matched = sorted(match.graph_nodes, key=order.__getitem__)
    # After the last matched node every input of the match exists; users of the
    # returned values that come earlier are moved after it by the re-sort below.
    with graph.inserting_after(matched[-1]):
        call = graph.call_function(target, tuple(args))
    values: list[Node] = []
    if multi_output:
        anchor = call
        for i in range(num_outputs):
            with graph.inserting_after(anchor):
                anchor = graph.call_function(operator.getitem, (call, i))
            values.append(anchor)
    else:
        values.append(call)
    for old, new in zip(match.returning, values):
        old.replace_all_uses_with(new)
    for node in reversed(matched):
        graph.erase_node(node)
    stable_toposort(graph)
    return call, dict(zip(match.returning, values))
