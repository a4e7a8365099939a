"""Rewriting edges: matches that interact, inputs given as lists, in-place changes
between a match's operations, bindings kept by earlier sites, constant factories in
patterns, and the report of a rewrite that fails part-way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from passnet.passes import Matcher, PassManager, load_pass_dir, trace_pattern
from passnet.passes import _manager as manager_module
from passnet.passes._opaque import _Recorder
from passnet.record import PassReport
from passnet.sample import trace_graph

from .conftest import BERT, run_eager

RELU_SIGMOID = """
import torch


def relu_sigmoid(a, b):
    t = a * 2
    return torch.relu(t), torch.sigmoid(t + b)


def pattern(in_0, in_1):
    t = in_0 * 2
    return torch.relu(t), torch.sigmoid(t + in_1)


def replacement_args(in_0, in_1):
    return (in_0, in_1)


def replacement_func():
    return relu_sigmoid
"""

CAT_RELU = """
import torch


def cat_relu(tensors):
    return torch.relu(torch.cat(tensors, 1))


def pattern(in_0):
    return torch.relu(torch.cat(in_0, 1))


def replacement_args(in_0):
    return (in_0,)


def replacement_func():
    return cat_relu
"""

MUL_ADD = """
def mul_add(x):
    return x * 2 + 1


def pattern(in_0):
    t = in_0 * 2
    return t + 1


def replacement_args(in_0):
    return (in_0,)


def replacement_func():
    return mul_add
"""


def _manager(folder: Path) -> PassManager:
    return PassManager(load_pass_dir(folder, trusted=True), pass_dir=folder)


def _outputs(value):
    return value if isinstance(value, tuple) else (value,)


def _assert_same(module: torch.nn.Module, gm: torch.fx.GraphModule, *inputs) -> None:
    expected = _outputs(module(*[x.clone() for x in inputs]))
    actual = _outputs(gm(*[x.clone() for x in inputs]))
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e)


class _CrossFed(torch.nn.Module):
    # Each of the two matches is replaceable alone; each feeds the other's second half,
    # so after the first replacement the second would make a cycle.
    def forward(self, x1, x2):
        t1, t2 = x1 * 2, x2 * 2
        a1, a2 = torch.relu(t1), torch.relu(t2)
        b1 = torch.sigmoid(t1 + (a2 + 1))
        b2 = torch.sigmoid(t2 + (a1 + 1))
        return b1, b2


def test_a_match_that_would_close_a_cycle_with_an_earlier_replacement_is_left(
    pass_dir: Callable[..., Path],
) -> None:
    folder = pass_dir({"RelSig.py": RELU_SIGMOID})
    module = _CrossFed()
    result = _manager(folder).apply(trace_graph(module))
    assert result.report.replacements == {"RelSig": 1}
    assert any("would create a cycle" in line for line in result.report.diagnostics)
    x1, x2 = torch.randn(5), torch.randn(5)
    _assert_same(module, result.graph_module, x1, x2)


class _CatChain(torch.nn.Module):
    def forward(self, x, w):
        a = torch.relu(torch.cat([x, w], 1))
        return torch.relu(torch.cat([a, w], 1))


def test_an_input_bound_to_a_list_follows_an_earlier_replacement(
    pass_dir: Callable[..., Path],
) -> None:
    folder = pass_dir({"CatRelu.py": CAT_RELU})
    module = _CatChain()
    result = _manager(folder).apply(trace_graph(module))
    assert result.report.replacements == {"CatRelu": 2}
    calls = [n for n in result.graph_module.graph.nodes if n.op == "call_function"]
    assert len(calls) == 2
    assert calls[1].args[0][0] is calls[0]  # the second cat's list holds the first call
    _assert_same(module, result.graph_module, torch.randn(2, 3), torch.randn(2, 4))


def _cat_own(in_0, in_1):
    r = torch.relu(in_1)
    return torch.cat(in_0, 0) * r


class _CatOwn(torch.nn.Module):
    def forward(self, x, y):
        r = torch.relu(y)
        return torch.cat([x, r], 0) * r


def test_a_listed_input_cannot_be_one_of_the_matchs_own_values() -> None:
    # in_0 = [x, relu]: the relu is also the pattern's own operation r
    assert (
        Matcher(trace_pattern(_cat_own, pass_name="t", file=Path(__file__))).find(
            trace_graph(_CatOwn()).graph
        )
        == []
    )


class _MutatedBetween(torch.nn.Module):
    def forward(self, x, w):
        t = x * 2
        y = torch.nn.functional.relu(x, inplace=True)
        return t + 1, y * w


class _ViewMutatedBetween(torch.nn.Module):
    def forward(self, x):
        t = x * 2
        x.view(-1).add_(1)
        return t + 1


class _MutatedOutside(torch.nn.Module):
    def forward(self, x, w):
        t = x * 2
        w.add_(1)  # another value: the match may be replaced
        return t + 1, w


@pytest.mark.parametrize(
    ("module", "n_inputs"), [(_MutatedBetween(), 2), (_ViewMutatedBetween(), 1)]
)
def test_an_input_changed_in_place_between_the_matchs_operations_refuses_it(
    pass_dir: Callable[..., Path], module: torch.nn.Module, n_inputs: int
) -> None:
    folder = pass_dir({"MulAdd.py": MUL_ADD})
    result = _manager(folder).apply(trace_graph(module))
    assert result.report.replacements == {"MulAdd": 0}
    text = "\n".join(result.report.diagnostics)
    assert "a complete match of 2 pattern operations, refused" in text
    assert "in place between the match's operations" in text
    _assert_same(module, result.graph_module, *[torch.randn(6) for _ in range(n_inputs)])


def test_a_change_in_place_of_another_value_does_not_refuse_the_match(
    pass_dir: Callable[..., Path],
) -> None:
    folder = pass_dir({"MulAdd.py": MUL_ADD})
    module = _MutatedOutside()
    result = _manager(folder).apply(trace_graph(module))
    assert result.report.replacements == {"MulAdd": 1}
    _assert_same(module, result.graph_module, torch.randn(6), torch.randn(6))


def test_earlier_sites_keep_inputs_that_a_later_pass_replaced(pass_dir: Callable[..., Path]):
    # The linear + add + LayerNorm rule runs first and takes the GELU's output as its
    # input; the linear + GELU rule then replaces that GELU. pass_mgr+inductor builds
    # its custom ops from the sites' inputs, which must be the graph's current nodes.
    from passnet.passes.library import install_pass

    folder = pass_dir({})
    install_pass("add_layer_norm", folder)
    install_pass("linear_bias_gelu", folder)
    module, inputs, _ = run_eager(BERT)
    result = PassManager(load_pass_dir(folder), pass_dir=folder).apply(trace_graph(module))
    assert result.report.replacements["FusedLinearBiasGelu"] > 0
    live = set(result.graph_module.graph.nodes)
    for site in result.sites:
        for binding in site.bindings:
            if isinstance(binding, torch.fx.Node):
                assert binding in live, f"{site.rule.name} keeps the erased node {binding}"
    _Recorder(result.graph_module, result.sites).run(*inputs)  # what make_opaque runs first


def _minus_one(in_0):
    t = torch.tensor(1.0, dtype=torch.float32)
    return t - in_0


def test_a_pattern_may_spell_a_constant_factory_as_model_py_does() -> None:
    # bert-tiny's attention mask: `tensor = torch.tensor(1.0, dtype=torch.float32)`,
    # kept as a call in the graph; the pattern keeps it as a call too
    pattern = trace_pattern(_minus_one, pass_name="t", file=Path(__file__))
    assert pattern.describe()[0] == "tensor = torch.tensor(1.0, dtype=torch.float32)"
    module, _, _ = run_eager(BERT)
    assert len(Matcher(pattern).find(trace_graph(module).graph)) == 1


def test_a_rewrite_that_fails_part_way_keeps_its_report(
    pass_dir: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = pass_dir({"CatRelu.py": CAT_RELU})
    calls = {"n": 0}
    real = manager_module.replace_match

    def second_fails(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(manager_module, "replace_match", second_fails)
    report = PassReport()
    with pytest.raises(RuntimeError, match="boom"):
        _manager(folder).apply(trace_graph(_CatChain()), report=report)
    assert report.loaded == ["CatRelu"]
    assert report.diagnostics[0] == "[PassMgrBackend] Loaded 1 passes: ['CatRelu']"
