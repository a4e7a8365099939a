"""Loading: package ``pass_dir``, manifest order, the three functions, precise errors."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from passnet.errors import PassLoadError, PassRejected
from passnet.passes import Literal, load_pass_dir

from .conftest import RELU_PASS

RULE = """
import torch
from pass_dir.helper import {fn}


def pattern(in_0, in_1):
    return torch.relu(in_0 + in_1)


def replacement_args(in_0, in_1):
    return (in_1, in_0, "tag", 1e-05, torch.float16)


def replacement_func():
    return {fn}
"""

HELPER = """
def fused_a(x, y, tag, eps, dtype):
    return x


def fused_b(x, y, tag, eps, dtype):
    return y
"""


def test_passes_load_in_manifest_order_and_import_helpers_as_pass_dir(
    pass_dir: Callable[..., Path],
) -> None:
    folder = pass_dir(
        {"B.py": RULE.format(fn="fused_b"), "A.py": RULE.format(fn="fused_a"), "helper.py": HELPER},
        ["B", "A"],
    )
    rules = load_pass_dir(folder)
    assert [r.name for r in rules] == ["B", "A"]
    assert [r.replacement.__name__ for r in rules] == ["fused_b", "fused_a"]
    assert rules[0].replacement.__module__ == "pass_dir.helper"
    assert rules[0].arg_spec.sources == (
        1,
        0,
        Literal("tag"),
        Literal(1e-05),
        Literal(torch.float16),
    )
    assert rules[0].pattern.describe() == [
        "add = operator.add(in_0, in_1)",
        "relu = torch.relu(add)",
        "return relu",
    ]
    # The package name is released after loading: another directory can be loaded next.
    assert not any(m == "pass_dir" or m.startswith("pass_dir.") for m in sys.modules)


def test_many_passes_with_distinct_replacements_are_all_kept(pass_dir: Callable[..., Path]) -> None:
    files = {
        f"P{i}.py": RELU_PASS.replace("def fused(", f"def fused_{i}(").replace(
            "return fused\n", f"return fused_{i}\n"
        )
        for i in range(12)
    }
    rules = load_pass_dir(pass_dir(files, [f"P{i}" for i in range(12)]))
    assert [r.replacement.__name__ for r in rules] == [f"fused_{i}" for i in range(12)]


def test_a_second_directory_does_not_see_the_first(
    tmp_path: Path, pass_dir: Callable[..., Path]
) -> None:
    first = pass_dir({"A.py": RULE.format(fn="fused_a"), "helper.py": HELPER}, ["A"], name="one")
    second = pass_dir(
        {"A.py": RULE.format(fn="fused_a"), "helper.py": HELPER.replace("return x", "return y")},
        ["A"],
        name="two",
    )
    a, b = load_pass_dir(first)[0], load_pass_dir(second)[0]
    x, y = torch.zeros(1), torch.ones(1)
    assert a.replacement(x, y, "t", 0.0, None) is x
    assert b.replacement(x, y, "t", 0.0, None) is y


def test_static_rejection_happens_before_any_code_runs(
    pass_dir: Callable[..., Path], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    source = f"import os\nos.makedirs({str(marker)!r})\n" + RELU_PASS
    with pytest.raises(PassRejected) as info:
        load_pass_dir(pass_dir({"Relu.py": source}))
    assert info.value.context["rule"] == "import"
    assert not marker.exists()


def test_compiled_files_cannot_stand_in_for_sources(pass_dir: Callable[..., Path]) -> None:
    rule = RULE.format(fn="fused_a")
    folder = pass_dir({"A.py": rule}, ["A"])
    (folder / "helper.cpython-311.pyc").write_bytes(b"\x00" * 16)
    # Even when inspection is skipped (trusted), only helper.py could provide pass_dir.helper.
    with pytest.raises(PassLoadError) as info:
        load_pass_dir(folder, trusted=True)
    assert "pass_dir.helper" in info.value.message
    assert info.value.context["file"] == "A.py"
    assert info.value.context["line"] == "2"


def test_import_error_points_at_the_helper_line(pass_dir: Callable[..., Path]) -> None:
    helper = HELPER + "\nvalue = 1 / 0\n"
    folder = pass_dir({"A.py": RULE.format(fn="fused_a"), "helper.py": helper}, ["A"])
    with pytest.raises(PassLoadError) as info:
        load_pass_dir(folder, trusted=True)
    assert info.value.context["file"] == "helper.py"
    lines = (folder / "helper.py").read_text().splitlines()
    assert info.value.context["line"] == str(lines.index("value = 1 / 0") + 1)
    assert "ZeroDivisionError" in info.value.message


@pytest.mark.parametrize(
    ("replacement_func", "message"),
    [
        ("return lambda x: x", "module-level function, not a lambda"),
        ("def inner(x):\n        return x\n    return inner", "not a lambda or a nested def"),
        ("return torch.relu", "must return a Python function"),
        ("return [fused][0] if True else None", None),
    ],
)
def test_replacement_func_is_checked_when_loaded(
    pass_dir: Callable[..., Path], replacement_func: str, message: str | None
) -> None:
    source = RELU_PASS.replace(
        "def replacement_func():\n    return fused",
        f"def replacement_func():\n    {replacement_func}",
    )
    folder = pass_dir({"Relu.py": source})
    if message is None:
        assert load_pass_dir(folder, trusted=True)[0].replacement.__name__ == "fused"
        return
    with pytest.raises(PassLoadError) as info:
        load_pass_dir(folder, trusted=True)
    assert message in info.value.message
    assert info.value.context["file"] == "Relu.py"


def test_replacement_func_must_be_stable(pass_dir: Callable[..., Path]) -> None:
    source = RELU_PASS.replace(
        "def replacement_func():\n    return fused",
        "def other(x):\n    return x\n\n\n_ORDER = [fused, other]\n\n\n"
        "def replacement_func():\n    _ORDER.reverse()\n    return _ORDER[0]",
    )
    with pytest.raises(PassLoadError, match="same module-level function on every call"):
        load_pass_dir(pass_dir({"Relu.py": source}), trusted=True)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("def pattern(in_0, in_1):\n    return torch.relu(in_0)", "input 'in_1' is not used"),
        (
            "def pattern(in_0):\n    t = in_0 * 2\n    return torch.relu(in_0)",
            "neither uses nor returns",
        ),
        ("def pattern(in_0):\n    return in_0", "returns its input 'in_0' unchanged"),
        ("def pattern(in_0):\n    return (torch.relu(in_0), 3)", "not a value computed"),
        (
            "def pattern(in_0):\n    if in_0.sum() > 0:\n        return in_0\n    return in_0",
            "cannot trace pattern()",
        ),
    ],
)
def test_unusable_patterns_are_load_errors(
    pass_dir: Callable[..., Path], pattern: str, message: str
) -> None:
    source = RELU_PASS.replace("def pattern(in_0):\n    return torch.relu(in_0)", pattern)
    if "in_1" in pattern:
        source = source.replace("def replacement_args(in_0):", "def replacement_args(in_0, in_1):")
    with pytest.raises(PassLoadError) as info:
        load_pass_dir(pass_dir({"Relu.py": source}), trusted=True)
    assert message in info.value.message
    assert info.value.context["file"] == "Relu.py"
    assert int(info.value.context["line"]) >= 4


def test_computing_in_replacement_args_fails_at_load_even_when_trusted(
    pass_dir: Callable[..., Path],
) -> None:
    source = RELU_PASS.replace("return (in_0,)", "return (in_0 * 2,)")
    with pytest.raises(PassLoadError, match="may only select/reorder") as info:
        load_pass_dir(pass_dir({"Relu.py": source}), trusted=True)
    assert info.value.context["line"] == "9"  # the return statement that computes


def test_multi_output_pattern_keeps_its_output_order(pass_dir: Callable[..., Path]) -> None:
    source = RELU_PASS.replace(
        "def pattern(in_0):\n    return torch.relu(in_0)",
        "def pattern(in_0):\n    a = in_0 + 1\n    b = torch.relu(a)\n    return (b, a)",
    )
    (rule,) = load_pass_dir(pass_dir({"Relu.py": source}))
    assert rule.pattern.multi_output
    assert [n.name for n in rule.pattern.returning] == ["relu", "add"]
    assert [n.name for n in rule.pattern.anchors] == ["relu"]
