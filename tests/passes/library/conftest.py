"""Helpers for the reference-pass tests: load rule files (kernels interpreted on CPU, compiled on CUDA),
find pattern matches in real sample graphs, capture the real values that feed a match,
and compare a replacement with its pattern at the dtype's baseline tolerance."""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import torch.fx
from torch.fx.passes.utils.matcher_utils import InternalMatch, SubgraphMatcher

from passnet.data import dev_samples_dir
from passnet.passes._loader import _importing, _SourceImporter
from passnet.passes.integrity import PACKAGE
from passnet.passes.library import get_reference_pass
from passnet.record import baseline_tolerance
from passnet.sample import load_sample

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_captured: dict[tuple[str, str, int], list[Any]] = {}


def _is_triton_python_module(name: str) -> bool:
    return (name == "triton" or name.startswith("triton.")) and not name.startswith("triton._C")


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device(request: pytest.FixtureRequest) -> Iterator[str]:
    """Where the kernels run: ``cpu`` (Triton's interpreter) or ``cuda`` (compiled; ``gpu`` tests).

    ``triton.jit`` (and Triton's own jitted ``tl.sum``/``tl.max``) decide at import
    time whether to interpret, so Triton's Python modules are imported afresh with
    ``TRITON_INTERPRET`` set (cpu) or unset (cuda) for the tests of one module, and
    the previous ones are put back afterwards. The compiled extension stays loaded.
    """
    pytest.importorskip("triton")
    saved = {k: m for k, m in sys.modules.items() if _is_triton_python_module(k)}
    for name in saved:
        del sys.modules[name]
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "cpu":
            mp.setenv("TRITON_INTERPRET", "1")
        else:
            mp.delenv("TRITON_INTERPRET", raising=False)
        yield request.param
    for name in [k for k in sys.modules if _is_triton_python_module(k)]:
        del sys.modules[name]
    sys.modules.update(saved)


@pytest.fixture(scope="module")
def load_rule(device: str) -> Callable[[str, str], ModuleType]:
    """Import a rule file of a reference pass for ``device``, once per test module."""
    loaded: dict[tuple[str, str], ModuleType] = {}

    def load(pass_name: str, rule: str) -> ModuleType:
        # As the pass manager imports it: package ``pass_dir``, so that a rule file can
        # import from its siblings (``from pass_dir.Other import helper``).
        if (pass_name, rule) not in loaded:
            folder = get_reference_pass(pass_name).folder
            sources = {f.name: f.read_text() for f in folder.glob("*.py")}
            with _importing(_SourceImporter(PACKAGE, folder, sources)):
                loaded[pass_name, rule] = importlib.import_module(f"{PACKAGE}.{rule}")
        return loaded[pass_name, rule]

    return load


@pytest.fixture
def launches(device: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the Triton kernels launched (``kernel[grid](...)``) during the test, in
    order; the launches are recorded, not run, so that tensors on the ``meta`` device (shapes
    without memory or data, of 2**31 elements as cheaply as of ten) go through a wrapper."""
    import triton.runtime.jit  # the Triton of this test module (see ``device``)

    names: list[str] = []

    def getitem(kernel: Any, grid: Any) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            names.append(kernel.fn.__name__)

        return launch

    monkeypatch.setattr(triton.runtime.jit.KernelInterface, "__getitem__", getitem)
    return names


def meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` on the ``meta`` device: no memory is allocated."""
    return torch.empty(shape, dtype=dtype, device="meta")


def too_large(rule: str, name: str, numel: int = 2**31) -> str:
    """The whole message (a regex) of ``rule`` refusing ``name``, a tensor of ``numel``
    elements, which its kernels' int32 offsets cannot index."""
    message = (
        f"{rule}: tensors of 2**31 or more elements are not supported (int32 offsets); "
        f"got {name} with {numel} elements"
    )
    return f"^{re.escape(message)}$"


def general_path_not_taken(*args: Any, **kwargs: Any) -> None:
    """Stands in for a wrapper's general path where a test requires the fast path."""
    raise AssertionError("the general path was taken")


def on(device: str, values: Sequence[Any]) -> list[Any]:
    """``values`` with every tensor moved to ``device``."""
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def sample_path(relative: str) -> Path:
    return dev_samples_dir() / relative


@functools.cache
def sample_graph(relative: str) -> torch.fx.GraphModule:
    return load_sample(sample_path(relative)).fx_graph()


def find_matches(pattern: Callable[..., Any], gm: torch.fx.GraphModule) -> list[InternalMatch]:
    """Matches of ``pattern`` in ``gm`` the way the pass manager looks for them."""
    matcher = SubgraphMatcher(
        torch.fx.symbolic_trace(pattern).graph,
        match_output=False,
        match_placeholder=False,
        remove_overlapping_matches=True,
        ignore_literals=False,
    )
    return matcher.match(gm.graph)


def captured_inputs(relative: str, pattern: Callable[..., Any], match: int = 0) -> list[Any]:
    """The real values (replayed sample inputs, run eagerly) that feed ``pattern``'s match.

    Cached per (sample, rule file, match): callers must not modify the values.
    """
    key = (relative, pattern.__code__.co_filename, match)
    if key not in _captured:
        _captured[key] = _capture(relative, pattern, match)
    return list(_captured[key])


def _capture(relative: str, pattern: Callable[..., Any], match: int) -> list[Any]:
    gm = sample_graph(relative)
    wanted = find_matches(pattern, gm)[match].placeholder_nodes
    nodes = {n for n in wanted if isinstance(n, torch.fx.Node)}
    values: dict[torch.fx.Node, Any] = {}

    class _Capture(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            result = super().run_node(n)
            if n in nodes:
                values[n] = result
            return result

    with torch.no_grad():
        _Capture(gm).run(*load_sample(sample_path(relative)).replay_inputs("cpu", seed=0))
    return [values[n] if isinstance(n, torch.fx.Node) else n for n in wanted]


def cast_floats(values: Sequence[Any], dtype: torch.dtype) -> list[Any]:
    """Floating tensors and literal dtypes to ``dtype``, as a dtype variant of the sample has them."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            v = v.to(dtype)
        elif isinstance(v, torch.dtype) and v.is_floating_point:
            v = dtype
        out.append(v)
    return out


def like(
    t: torch.Tensor, shape: Sequence[int], dtype: torch.dtype, gen: torch.Generator
) -> torch.Tensor:
    """A tensor of ``shape`` drawn with the mean and std of the real tensor ``t``."""
    ref = t.double()
    return (
        torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * ref.std() + ref.mean()
    ).to(dtype)


def assert_replacement_matches(
    module: ModuleType, inputs: Sequence[Any], reference: Callable[..., Any] | None = None
) -> float:
    """Run pattern (eager) and replacement on ``inputs``; outputs must agree in count, dtype,
    shape, NaN positions and value at the baseline tolerance of their dtype. Returns the max diff.

    ``reference`` replaces ``module.pattern`` as the expected side where a test explains why.
    """
    with torch.no_grad():
        expected = (reference or module.pattern)(*inputs)
        actual = module.replacement_func()(*module.replacement_args(*inputs))
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = tuple(actual) if isinstance(actual, (tuple, list)) else (actual,)
    assert len(actual) == len(expected)
    worst = 0.0
    for exp, act in zip(expected, actual):
        assert act.dtype == exp.dtype
        assert act.shape == exp.shape
        atol, rtol = baseline_tolerance(exp.dtype)
        torch.testing.assert_close(act, exp, atol=atol, rtol=rtol, equal_nan=True)
        finite = exp.isfinite() & act.isfinite()
        if finite.any():
            worst = max(worst, (act[finite].double() - exp[finite].double()).abs().max().item())
    return worst
