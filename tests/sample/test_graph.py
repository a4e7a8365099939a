"""The graph passes match against: symbolic trace of real samples, locations, ordering."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx

from passnet.data import dev_samples_dir
from passnet.sample import (
    find_samples,
    format_node,
    load_sample,
    node_location,
    stable_toposort,
    trace_graph,
)
from tests.passes.conftest import GAE, MLP, sample_path


def _same_outputs(relative_or_path) -> None:
    sample = load_sample(relative_or_path)
    module = sample.build_module("cpu")
    inputs = sample.replay_inputs("cpu", seed=0)
    gm = trace_graph(module)
    with torch.no_grad():
        expected, actual = module(*inputs), gm(*inputs)
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert torch.equal(e.nan_to_num(), a.nan_to_num())


@pytest.mark.parametrize("relative", [GAE, "torchgeometric/GCN", MLP])
def test_trace_keeps_dynamo_runtime_checks_as_nodes(relative: str) -> None:
    # torch._check_is_size rejects proxies; plain symbolic_trace fails on these graphs.
    _same_outputs(sample_path(relative))
    gm = trace_graph(load_sample(sample_path(relative)).build_module("cpu"))
    if relative != MLP:
        assert any(n.target is torch._check_is_size for n in gm.graph.nodes)
    assert torch._check_is_size.__module__ == "torch"  # the patch is undone after tracing


@pytest.mark.slow
@pytest.mark.parametrize("path", find_samples([dev_samples_dir()]), ids=lambda p: p.name)
def test_traced_graph_computes_what_the_sample_computes(path) -> None:
    _same_outputs(path)


_T5 = "transformers-auto-model/google/t5-efficient-large-el2"
_SWIN = "transformers-auto-model/vuiseng9_tiny-random-SwinModel"


@pytest.mark.parametrize(("relative", "factory"), [(_T5, torch.arange), (_SWIN, torch.zeros)])
def test_constant_factories_stay_nodes_so_nothing_is_folded(relative: str, factory) -> None:
    # Plain symbolic_trace runs torch.arange(...)/torch.zeros(...) with constant arguments
    # at trace time and keeps the result (and everything computed from it alone) as a
    # tensor constant: T5's relative-position buckets, Swin's shifted-window mask. A
    # rewritten graph would then skip work that eager does, and any pass that matched
    # anything would be credited with it.
    gm = trace_graph(load_sample(sample_path(relative)).build_module("cpu"))
    assert not [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert any(n.target is factory for n in gm.graph.nodes)
    if relative == _SWIN:  # img_mask[:, h, w, :] = cnt, as Dynamo wrote it
        assert any(n.target is operator.setitem for n in gm.graph.nodes)
    assert factory.__module__ == "torch"  # torch itself is never patched
    _same_outputs(sample_path(relative))


def test_nodes_know_their_model_py_line() -> None:
    gm = trace_graph(load_sample(sample_path(MLP)).build_module("cpu"))
    relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
    assert node_location(relu) == "model.py:27"  # act = torch.relu(linear)
    assert format_node(relu) == "relu = torch.relu(linear)"


def _f(x):
    a = x + 1
    b = a * 2
    return b


def test_stable_toposort_moves_only_what_must_move() -> None:
    gm = torch.fx.symbolic_trace(_f)
    graph = gm.graph
    add = next(n for n in graph.nodes if n.target is operator.add)
    mul = next(n for n in graph.nodes if n.target is operator.mul)
    mul.append(add)  # now add comes after its user
    assert [n.name for n in graph.nodes] == ["x", "mul", "add", "output"]
    stable_toposort(graph)
    assert [n.name for n in graph.nodes] == ["x", "add", "mul", "output"]
    graph.lint()
