"""The pass manager: order, every replacement applied, PassNet log lines, report, mismatch."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from passnet.errors import PassMismatch
from passnet.passes import PASS_MGR_LOGGER, PassManager, ReplacementError, load_pass_dir
from passnet.sample import trace_graph
from passnet.status import Status

from .conftest import BERT, MLP, SWIN, run_eager

# Replacements written with torch ops: fine for trusted (const) passes, which is how these
# tests load them; the integrity layers are tested elsewhere.
ROLL_ADD_LN = """
import torch


def roll_add_ln(in_3, in_2, in_1, in_0, eps):
    x = torch.roll(in_3.view(-1, 8, 8, 32), shifts=(1, 1), dims=(1, 2)).view(1, 64, 32)
    a = in_2 + x
    return a, torch.nn.functional.layer_norm(a, (32,), in_1, in_0, eps)


def pattern(in_0, in_1, in_2, in_3):
    tmp_1 = in_3.view(-1, 8, 8, 32)
    tmp_2 = torch.roll(tmp_1, shifts=(1, 1), dims=(1, 2))
    tmp_3 = tmp_2.view(1, 64, 32)
    tmp_4 = in_2 + tmp_3
    tmp_5 = torch.nn.functional.layer_norm(tmp_4, (32,), in_1, in_0, 1e-05)
    return (tmp_4, tmp_5)


def replacement_args(in_0, in_1, in_2, in_3):
    return (in_3, in_2, in_1, in_0, 1e-05)


def replacement_func():
    return roll_add_ln
"""

ADD_LN = """
import torch


def add_ln_{n}(a, b, shape, w, bias, eps):
    return torch.nn.functional.layer_norm(a + b, shape, w, bias, eps)


def pattern(in_0, in_1, in_2, in_3, in_4, in_5):
    return torch.nn.functional.layer_norm(in_0 + in_1, in_2, in_3, in_4, in_5)


def replacement_args(in_0, in_1, in_2, in_3, in_4, in_5):
    return (in_0, in_1, in_2, in_3, in_4, in_5)


def replacement_func():
    return add_ln_{n}
"""

GELU = """
import torch


def linear_gelu(x, w, b):
    return torch._C._nn.gelu(torch._C._nn.linear(x, w, b))


def pattern(in_0, in_1, in_2):
    return torch._C._nn.gelu(torch._C._nn.linear(in_0, in_1, in_2))


def replacement_args(in_0, in_1, in_2):
    return (in_0, in_1, in_2)


def replacement_func():
    return linear_gelu
"""

SOFTMAX = """
import torch


def never(x):
    return x


def pattern(in_0):
    return torch.nn.functional.softmax(in_0, dim=-1)


def replacement_args(in_0):
    return (in_0,)


def replacement_func():
    return never
"""


def _apply(relative: str, folder: Path, const: Path | None = None):
    module, inputs, expected = run_eager(relative)
    manager = PassManager(
        load_pass_dir(folder, trusted=True),
        load_pass_dir(const, package="const_pass_dir", trusted=True) if const else (),
    )
    result = manager.apply(trace_graph(module))
    with torch.no_grad():
        actual = result.graph_module(*inputs)
    return result, expected, actual


def _close(expected, actual) -> None:
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)


def test_multi_output_pass_rewrites_a_real_graph_correctly(
    pass_dir: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    folder = pass_dir({"RollAddLN.py": ROLL_ADD_LN})
    with caplog.at_level(logging.INFO, logger=PASS_MGR_LOGGER):
        result, expected, actual = _apply(SWIN, folder)
    _close(expected, actual)
    assert result.report.replacements == {"RollAddLN": 1}
    assert result.report.matched
    lines = [
        "[PassMgrBackend] Loaded 1 passes: ['RollAddLN']",
        "[PassMgrBackend] Applied 1 replacements with RollAddLN.",
        "Has Any pass matched? [True]",
    ]
    assert result.report.diagnostics == lines
    assert [r.getMessage() for r in caplog.records if r.name == PASS_MGR_LOGGER] == lines
    (call,) = [s.call for s in result.sites]
    assert call.target.__name__ == "RollAddLN__roll_add_ln"
    assert len(call.users) == 2  # one call, a getitem per output


def test_every_pass_and_every_replacement_function_is_applied(
    pass_dir: Callable[..., Path],
) -> None:
    folder = pass_dir(
        {"Gelu.py": GELU, "AddLN.py": ADD_LN.replace("{n}", "x"), "Softmax.py": SOFTMAX},
        ["Softmax", "Gelu", "AddLN"],
    )
    result, expected, actual = _apply(BERT, folder)
    _close(expected, actual)
    assert result.report.replacements == {"Softmax": 0, "Gelu": 2, "AddLN": 5}
    assert [s.rule.name for s in result.sites] == ["Gelu"] * 2 + ["AddLN"] * 5
    assert "[PassMgrBackend] Pass Softmax failed to match." in result.report.diagnostics
    assert any(
        "the graph never calls torch.nn.functional.softmax" in d for d in result.report.diagnostics
    )


def test_a_match_consuming_an_earlier_matchs_result_follows_the_replacement(
    pass_dir: Callable[..., Path],
) -> None:
    # In bert, the output of one add+layer_norm feeds the next add+layer_norm (residuals).
    result, expected, actual = _apply(BERT, pass_dir({"AddLN.py": ADD_LN.replace("{n}", "y")}))
    _close(expected, actual)
    assert result.report.replacements == {"AddLN": 5}


def test_no_match_reports_and_raises_pass_mismatch(pass_dir: Callable[..., Path]) -> None:
    result, _, _ = _apply(MLP, pass_dir({"Softmax.py": SOFTMAX}))
    assert not result.report.matched
    assert result.report.diagnostics[-2:] == [
        "Has Any pass matched? [False]",
        "Pass testing early exits on pass mismatch.",
    ]
    with pytest.raises(PassMismatch) as info:
        result.raise_if_unmatched()
    assert info.value.status is Status.PASS_MISMATCH
    assert "Pass Softmax failed to match" in info.value.context["diagnostics"]


def test_const_passes_run_first_and_do_not_count_as_a_match(pass_dir: Callable[..., Path]) -> None:
    const = pass_dir({"Gelu.py": GELU}, name="const_pass_dir")
    folder = pass_dir({"Gelu.py": GELU.replace("linear_gelu", "other_gelu")})
    result, expected, actual = _apply(BERT, folder, const)
    _close(expected, actual)
    # The fixed pass took both sites; the pass directory's identical pass found nothing left.
    assert result.report.replacements == {"const:Gelu": 2, "Gelu": 0}
    assert not result.report.matched
    assert result.report.loaded == ["Gelu"]
    assert result.report.diagnostics[0] == "[PassMgrBackend] Loaded 1 const passes: ['Gelu']"


def test_a_replacement_returning_the_wrong_arity_is_a_runtime_error(
    pass_dir: Callable[..., Path],
) -> None:
    wrong = ROLL_ADD_LN.replace(
        "    return a, torch.nn.functional.layer_norm(a, (32,), in_1, in_0, eps)", "    return a"
    )
    module, inputs, _ = run_eager(SWIN)
    manager = PassManager(load_pass_dir(pass_dir({"RollAddLN.py": wrong}), trusted=True))
    result = manager.apply(trace_graph(module))
    with pytest.raises(
        ReplacementError, match="returned a Tensor, but the pattern returns a tuple of 2"
    ) as err:
        result.graph_module(*inputs)
    # file and line of the replacement function that returned it
    fn = result.sites[0].rule.replacement
    assert err.value.context["file"] == "RollAddLN.py"
    assert err.value.context["line"] == str(fn.__code__.co_firstlineno)
