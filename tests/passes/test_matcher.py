"""Matching semantics (those of torch.fx's SubgraphMatcher) and mismatch diagnostics."""

from __future__ import annotations

import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.fx
from torch.fx.passes.utils.matcher_utils import SubgraphMatcher

from passnet.passes import Matcher, trace_pattern
from passnet.sample import load_sample, trace_graph

from .conftest import BERT, GAE, MLP, SPLADE, SWIN, sample_path

_HERE = Path(__file__)


def _pattern(fn: Callable[..., Any]):
    return trace_pattern(fn, pass_name=fn.__name__, file=_HERE)


def _graph_of(fn: Callable[..., Any]) -> torch.fx.Graph:
    return torch.fx.symbolic_trace(fn).graph


def _sample_graph(relative: str) -> torch.fx.GraphModule:
    return trace_graph(load_sample(sample_path(relative)).build_module("cpu"))


# Patterns copied from real model.py code (the way a pass author writes them).
def relu_pattern(in_0):
    return torch.relu(in_0)


def roll_add_ln(in_0, in_1, in_2, in_3):
    tmp_1 = in_3.view(-1, 8, 8, 32)
    tmp_2 = torch.roll(tmp_1, shifts=(1, 1), dims=(1, 2))
    tmp_3 = tmp_2.view(1, 64, 32)
    tmp_4 = in_2 + tmp_3
    tmp_5 = torch.nn.functional.layer_norm(tmp_4, (32,), in_1, in_0, 1e-05)
    return (tmp_4, tmp_5)


def masked_mean(in_0, in_1):
    tmp_0 = in_0.to(torch.float32)
    tmp_1 = in_1 * tmp_0
    tmp_2 = torch.sum(tmp_1, 1)
    tmp_3 = tmp_0.sum(1)
    tmp_4 = torch.clamp(tmp_3, min=1e-09)
    tmp_5 = tmp_2 / tmp_4
    return torch.cat([tmp_5], 1)


def add_layer_norm(in_0, in_1, in_2, in_3, in_4):
    tmp = in_0 + in_1
    return torch.nn.functional.layer_norm(tmp, (128,), in_2, in_3, in_4)


def linear_gelu(in_0, in_1, in_2):
    return torch._C._nn.gelu(torch._C._nn.linear(in_0, in_1, in_2))


def scatter_mul(in_0, in_1):
    return in_0 * in_1


CASES = [
    (MLP, relu_pattern, 1),
    (SWIN, roll_add_ln, 1),
    (SPLADE, masked_mean, 1),
    (BERT, add_layer_norm, 5),
    (BERT, linear_gelu, 2),
    (GAE, scatter_mul, 3),
]


@pytest.mark.parametrize(("sample", "fn", "count"), CASES, ids=[c[1].__name__ for c in CASES])
def test_matches_agree_with_torch_subgraph_matcher_on_real_graphs(
    sample: str, fn: Callable[..., Any], count: int
) -> None:
    gm = _sample_graph(sample)
    ours = Matcher(_pattern(fn)).find(gm.graph)
    theirs = SubgraphMatcher(_graph_of(fn)).match(gm.graph)
    assert len(ours) == count
    as_sets = {frozenset(n.name for n in m.nodes.values()) for m in ours}
    theirs_sets = {
        frozenset(
            gn.name for pn, gn in m.nodes_map.items() if pn.op not in ("placeholder", "output")
        )
        for m in theirs
    }
    assert as_sets == theirs_sets


def test_multi_output_match_returns_values_in_pattern_order() -> None:
    gm = _sample_graph(SWIN)
    (match,) = Matcher(_pattern(roll_add_ln)).find(gm.graph)
    add, norm = match.returning
    assert add.target is operator.add
    assert norm.target is torch.nn.functional.layer_norm
    residual = match.bindings[2]
    assert residual.target is operator.add and residual in add.args


def _chain(x):
    a = torch.relu(x)
    b = torch.relu(a)
    return torch.relu(b)


def _relu2(in_0):
    return torch.relu(torch.relu(in_0))


def test_overlapping_matches_keep_the_first_in_graph_order() -> None:
    graph = _graph_of(_chain)
    (match,) = Matcher(_pattern(_relu2)).find(graph)
    assert sorted(n.name for n in match.nodes.values()) == ["relu", "relu_1"]


def _literals(x):
    return torch.clamp(x, min=0), torch.clamp(x, min=1), torch.clamp(x, min=0.0)


def _clamp0(in_0):
    return torch.clamp(in_0, min=0)


def test_literals_must_be_equal_and_of_the_same_type() -> None:
    matches = Matcher(_pattern(_clamp0)).find(_graph_of(_literals))
    assert [m.returning[0].name for m in matches] == ["clamp"]


def _free(x, y):
    return x * x, x * y, torch.sum(x, 3)


def _square(in_0):
    return in_0 * in_0


def _product(in_0, in_1):
    return in_0 * in_1


def _sum_any(in_0, in_1):
    return torch.sum(in_0, in_1)


def test_placeholders_bind_consistently_and_injectively_and_to_literals() -> None:
    graph = _graph_of(_free)
    assert [m.returning[0].name for m in Matcher(_pattern(_square)).find(graph)] == ["mul"]
    # a * b: two pattern inputs never share one graph node, so x * x is not a match
    assert [m.returning[0].name for m in Matcher(_pattern(_product)).find(graph)] == ["mul_1"]
    (match,) = Matcher(_pattern(_sum_any)).find(graph)
    assert match.bindings[1] == 3


def _leaky(x):
    a = x + 1
    b = torch.relu(a)
    return b, a * 2


def _add_relu(in_0):
    return torch.relu(in_0 + 1)


def test_intermediate_used_outside_prevents_a_match_and_is_explained() -> None:
    graph = _graph_of(_leaky)
    matcher = Matcher(_pattern(_add_relu))
    assert matcher.find(graph) == []
    why = matcher.explain(graph)
    assert (why.matched, why.total) == (2, 2)
    assert "intermediate value add" in why.reason and "used outside the match by mul" in why.reason


def _cyclic(x, y):
    a = x + y
    c = torch.sin(a)
    b = a * c
    return b


def _two_out(in_0, in_1, in_2):
    a = in_0 + in_1
    b = a * in_2
    return (a, b)


def test_a_match_whose_replacement_would_form_a_cycle_is_dropped() -> None:
    graph = _graph_of(_cyclic)
    matcher = Matcher(_pattern(_two_out))
    assert matcher.find(graph) == []
    assert "cycle" in matcher.explain(graph).reason


def test_explain_reports_the_first_literal_difference_with_locations() -> None:
    def shifted(in_0, in_1, in_2, in_3):
        tmp_1 = in_3.view(-1, 8, 8, 32)
        tmp_2 = torch.roll(tmp_1, shifts=(3, 3), dims=(1, 2))
        tmp_3 = tmp_2.view(1, 64, 32)
        tmp_4 = in_2 + tmp_3
        tmp_5 = torch.nn.functional.layer_norm(tmp_4, (32,), in_1, in_0, 1e-05)
        return (tmp_4, tmp_5)

    gm = _sample_graph(SWIN)
    matcher = Matcher(_pattern(shifted))
    assert matcher.find(gm.graph) == []
    why = matcher.explain(gm.graph)
    # the walk goes on past the roll's literal: the four other operations agree,
    # literals included, and the roll's shift is the one difference
    assert (why.matched, why.total) == (4, 5)
    assert why.reason == "keyword shifts[0]: the pattern has 3, the graph has 1"
    lines = why.lines()
    assert lines[0] == "best partial match: 4 of 5 pattern operations"
    assert lines[1].startswith("  pattern: roll = torch.roll(view, shifts=(3, 3), dims=(1, 2))")
    assert lines[1].endswith(f"({_HERE.name}:{shifted.__code__.co_firstlineno + 2})")
    assert "shifts=(1, 1)" in lines[2] and lines[2].endswith("(model.py:810)")


def test_explain_counts_no_operation_whose_own_literal_differs() -> None:
    # An operation counts as agreeing only after its own literals were compared: the
    # embeddings' layer_norm (eps 1e-12, like every LayerNorm of this graph) must not
    # tie with the encoder's, and the reason is the eps that differs.
    def eps_miss(in_0, in_1, in_2, in_3):
        d = torch.nn.functional.dropout(in_0, 0.1, False, False)
        s = d + in_1
        return torch.nn.functional.layer_norm(s, (128,), in_2, in_3, 1e-05)

    why = Matcher(_pattern(eps_miss)).explain(_sample_graph(BERT).graph)
    assert (why.matched, why.total) == (2, 3)
    assert why.reason == "keyword eps: the pattern has 1e-05, the graph has 1e-12"


def test_explain_names_operations_the_graph_never_calls() -> None:
    def softmax_pattern(in_0):
        return torch.nn.functional.softmax(in_0 / 8.0, dim=-1)

    gm = _sample_graph(MLP)
    why = Matcher(_pattern(softmax_pattern)).explain(gm.graph)
    assert why.lines()[0] == "the graph never calls operator.truediv, torch.nn.functional.softmax"
    assert why.matched == 0


def test_explain_says_where_the_graph_leaves_the_pattern() -> None:
    def linear_then_gelu(in_0, in_1, in_2):
        return torch._C._nn.gelu(torch._C._nn.linear(in_0, in_1, in_2))

    gm = _sample_graph(MLP)  # linear is followed by relu here
    why = Matcher(_pattern(linear_then_gelu)).explain(gm.graph)
    assert why.matched == 1
    assert (
        "the pattern continues with 'gelu = torch._C._nn.gelu(linear)' consuming linear"
        in why.reason
    )
    assert "linear is used by relu (torch.relu)" in why.reason


def test_explain_reports_a_different_operation_and_keyword_names() -> None:
    def clamp_min(in_0):
        return torch.clamp(in_0.sum(1), max=1.0)

    gm = _sample_graph(SPLADE)
    why = Matcher(_pattern(clamp_min)).explain(gm.graph)
    assert (
        why.reason
        == "torch.clamp: keyword arguments differ: the pattern passes ['max'], the graph passes ['min']"
    )


def _add_ln_eps(in_0, in_1, in_2, in_3):
    return torch.nn.functional.layer_norm(in_0 + in_1, (128,), in_2, in_3, 1e-05)


def test_explain_walks_past_a_differing_literal_to_where_the_pattern_is() -> None:
    # Every add + LayerNorm of bert-tiny has eps 1e-12. A walk that stopped at the first
    # differing literal covered nothing from the layer_norm and lost to one-operation walks
    # from unrelated adds; the structure reached decides now.
    why = Matcher(_pattern(_add_ln_eps)).explain(_sample_graph(BERT).graph)
    assert why.reason == "keyword eps: the pattern has 1e-05, the graph has 1e-12"
    assert why.graph_node is not None and why.graph_node.name.startswith("layer_norm")
    assert (why.matched, why.total) == (1, 2)
