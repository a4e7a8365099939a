"""The pass_mgr and pass_mgr+inductor compilers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

import passnet.passes._backend as backend
from passnet.compilers import create_compiler, select_cudagraph
from passnet.errors import (
    CompileError,
    CompilerConfigError,
    PassMismatch,
    PassRejected,
)
from passnet.passes import ReplacementError
from passnet.passes._opaque import NAMESPACE

from ..compilers.test_cudagraph import Replayed, clock
from .conftest import MLP, REDTEAM, RELU_PASS, run_eager

HONEST_RELU = REDTEAM / "honest" / "triton_relu"

WRONG_DTYPE = RELU_PASS.replace(
    "def fused(x):\n    return x",
    "def fused(x):\n    return torch.empty(x.shape, dtype=torch.float16, device=x.device)",
)
TRANSPOSED = RELU_PASS.replace(
    "def fused(x):\n    return x",
    "def fused(x):\n    return torch.zeros((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device).t()",
)


def test_config_needs_a_pass_dir_and_nothing_unknown() -> None:
    with pytest.raises(CompilerConfigError, match="needs config pass_dir"):
        create_compiler("pass_mgr")
    with pytest.raises(CompilerConfigError, match="does not take config key mode; the keys"):
        create_compiler("pass_mgr", pass_dir="x", mode="fast")
    with pytest.raises(CompilerConfigError, match='lean_launch must be a boolean, got "no"'):
        create_compiler("pass_mgr", pass_dir="x", lean_launch="no")


def test_pass_mgr_runs_the_rewritten_graph(triton_interpreter: None) -> None:
    module, inputs, expected = run_eager(MLP)
    c = create_compiler("pass_mgr", pass_dir=str(HONEST_RELU))
    compiled = c.compile(module, inputs)
    assert isinstance(compiled, torch.fx.GraphModule)
    assert "Relu__triton_relu(" in compiled.code
    with c.checked_call(), torch.no_grad():
        actual = compiled(*inputs)
    torch.testing.assert_close(actual[0], expected[0])
    report = c.pass_report()
    assert (report.loaded, report.replacements, report.matched) == (["Relu"], {"Relu": 1}, True)


def test_no_match_fails_compile_with_the_report_kept(pass_dir: Callable[..., Path]) -> None:
    folder = pass_dir({"Relu.py": RELU_PASS.replace("torch.relu(in_0)", "torch.sigmoid(in_0)")})
    module, inputs, _ = run_eager(MLP)
    c = create_compiler("pass_mgr", pass_dir=str(folder))
    with pytest.raises(PassMismatch) as info:
        c.compile(module, inputs)
    assert "the graph never calls torch.sigmoid" in info.value.context["diagnostics"]
    assert c.pass_report().matched is False
    assert c.pass_report().diagnostics[-1] == "Pass testing early exits on pass mismatch."


def test_a_rejected_pass_directory_fails_compile(pass_dir: Callable[..., Path]) -> None:
    folder = pass_dir({"Relu.py": RELU_PASS.replace("    return x", "    return torch.relu(x)")})
    module, inputs, _ = run_eager(MLP)
    c = create_compiler("pass_mgr", pass_dir=str(folder))
    with pytest.raises(PassRejected):
        c.compile(module, inputs)
    assert (
        c.pass_report().diagnostics[0].startswith("[PassMgrBackend] cannot load passes: Relu.py:")
    )


class _DataDependent(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        if x.sum() > 0:
            return (torch.relu(x),)
        return (x,)


def test_an_untraceable_graph_is_a_compile_error(pass_dir: Callable[..., Path]) -> None:
    c = create_compiler("pass_mgr", pass_dir=str(pass_dir({"Relu.py": RELU_PASS})))
    with pytest.raises(CompileError, match="cannot trace the graph"):
        c.compile(_DataDependent(), [torch.ones(2)])


def test_pass_mgr_inductor_keeps_replacements_opaque(triton_interpreter: None) -> None:
    module, inputs, expected = run_eager(MLP)
    c = create_compiler("pass_mgr+inductor", pass_dir=str(HONEST_RELU))
    compiled = c.compile(module, [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs])
    graph_code = compiled._orig_mod.code
    assert f"torch.ops.{NAMESPACE}.relu_" in graph_code
    with c.checked_call(), torch.no_grad():
        actual = compiled(*inputs)
    torch.testing.assert_close(actual[0], expected[0])
    # the rewritten graph compiled as the plain inductor compiler compiles, and said so
    said = c.compiled_with
    assert said["torch_compile"] == {"backend": "inductor", "dynamic": None} and said["warm"]


def test_pass_mgr_inductor_rejects_outputs_unlike_the_pattern(
    pass_dir: Callable[..., Path],
) -> None:
    module, inputs, _ = run_eager(MLP)
    c = create_compiler("pass_mgr+inductor", pass_dir=str(pass_dir({"Relu.py": WRONG_DTYPE})))
    with pytest.raises(
        ReplacementError,
        match=r"output 0 is \(2, 5\) torch.float16, the pattern produces \(2, 5\) torch.float32",
    ):
        c.compile(module, inputs)


def test_pass_mgr_inductor_makes_other_layouts_contiguous(pass_dir: Callable[..., Path]) -> None:
    # Inductor checks custom-op output strides against the (contiguous) fake outputs.
    module, inputs, _ = run_eager(MLP)
    c = create_compiler("pass_mgr+inductor", pass_dir=str(pass_dir({"Relu.py": TRANSPOSED})))
    compiled = c.compile(module, inputs)
    with c.checked_call(), torch.no_grad():
        (out,) = compiled(*inputs)
    bias = inputs[-1]
    torch.testing.assert_close(out, bias.expand_as(out))  # zeros @ W.T + b


def test_a_replacement_that_raises_names_its_pass_file_and_line(tmp_path) -> None:
    from passnet.passes import PassCodeError

    pass_dir = tmp_path / "pass_dir"
    pass_dir.mkdir()
    (pass_dir / "Boom.py").write_text(
        "import torch\n\n\n@torch.fx.wrap\ndef boom(x):\n    n = x.shape[7]\n"
        "    return torch.empty_like(x)\n\n\ndef pattern(in_0):\n    return torch.relu(in_0)\n\n\n"
        "def replacement_args(in_0):\n    return (in_0,)\n\n\n"
        "def replacement_func():\n    return boom\n"
    )
    (pass_dir / "sorted_output_pass_rule_names.json").write_text('["Boom"]')
    module, inputs, _ = run_eager(MLP)
    with pytest.raises(PassCodeError, match="boom raised IndexError") as info:
        create_compiler("pass_mgr", pass_dir=str(pass_dir)).compile(module, inputs)
    assert (info.value.context["file"], info.value.context["line"]) == ("Boom.py", "6")


def test_pass_compilers_capture_under_the_dispatch_guard(monkeypatch, triton_interpreter) -> None:
    """``cudagraphs=auto`` on a pass compiler: the capture runs the replacements under the
    guard (a replay dispatches nothing, so the capture is where they are checked), the
    decision is reported, and a pass that misbehaves only while captured is rejected."""
    guarded: list[bool] = []

    def capture(fn: Callable[..., Any], inputs: Sequence[Any]) -> Replayed:
        guarded.append(compiler.guard.flag.on)
        return Replayed(fn, inputs)

    monkeypatch.setattr(backend, "GraphedCall", capture)
    monkeypatch.setattr(
        backend, "select_cudagraph", functools.partial(select_cudagraph, timer=clock(1.0, 0.3))
    )
    module, inputs, expected = run_eager(MLP)
    compiler = create_compiler(
        "pass_mgr", pass_dir=str(REDTEAM / "honest" / "triton_relu"), cudagraphs="auto"
    )
    compiled = compiler.compile(module, inputs)
    assert guarded == [True] and isinstance(compiled, Replayed)
    (d,) = compiler.cudagraph_decisions()
    assert (d.name, d.chosen) == ("rewritten graph", "cudagraph")
    with torch.no_grad():
        torch.testing.assert_close(compiled(*inputs)[0], expected[0])

    def cheating_capture(fn: Callable[..., Any], inputs: Sequence[Any]) -> Replayed:
        raise PassRejected("pass Relu delegated computation to torch")

    monkeypatch.setattr(backend, "GraphedCall", cheating_capture)
    compiler = create_compiler(
        "pass_mgr", pass_dir=str(REDTEAM / "honest" / "triton_relu"), cudagraphs="auto"
    )
    with pytest.raises(PassRejected):
        compiler.compile(module, inputs)
