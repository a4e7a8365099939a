"""Fixtures for the pass-manager tests: writing pass directories, real samples, Triton's interpreter."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from passnet.data import dev_samples_dir
from passnet.sample import load_sample
from passnet.task import MANIFEST_FILE

MLP = "transformers-auto-model/sadhaklal_mlp-iris"
SWIN = "transformers-auto-model/vuiseng9_tiny-random-SwinModel"
SPLADE = "transformers-auto-model/splade-mini"
BERT = "transformers-auto-model/prajjwal1_bert-tiny"
GAE = "torchgeometric/GAE"
REDTEAM = Path(__file__).parent / "integrity" / "redteam"


def sample_path(relative: str) -> Path:
    return dev_samples_dir() / relative


def write_pass_dir(folder: Path, files: dict[str, str], order: list[str] | None = None) -> Path:
    """Write ``files`` (name → source, dedented) and a manifest listing ``order``.

    ``order`` defaults to every file except names starting with ``helper``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in files.items():
        (folder / name).write_text(textwrap.dedent(source).lstrip("\n"))
    if order is None:
        order = [Path(n).stem for n in files if n.endswith(".py") and not n.startswith("helper")]
    (folder / MANIFEST_FILE).write_text(json.dumps(order))
    return folder


@pytest.fixture
def pass_dir(tmp_path: Path) -> Callable[..., Path]:
    """``pass_dir(files, order=None, name="pass_dir")`` writes a pass directory under tmp_path."""

    def make(files: dict[str, str], order: list[str] | None = None, name: str = "pass_dir") -> Path:
        return write_pass_dir(tmp_path / name, files, order)

    return make


def run_eager(relative: str, seed: int = 0) -> tuple[torch.nn.Module, list, tuple]:
    sample = load_sample(sample_path(relative))
    module = sample.build_module("cpu")
    inputs = sample.replay_inputs("cpu", seed=seed)
    with torch.no_grad():
        expected = module(*inputs)
    return module, inputs, expected


def _is_triton_python_module(name: str) -> bool:
    return (name == "triton" or name.startswith("triton.")) and not name.startswith("triton._C")


@pytest.fixture(scope="module")
def triton_interpreter() -> Iterator[None]:
    """Run Triton kernels on the CPU: Triton decides at import whether to interpret
    (also for its own jitted ``tl.sum``), so its Python modules are imported afresh
    with ``TRITON_INTERPRET=1`` for the module's tests and put back afterwards."""
    pytest.importorskip("triton")
    saved = {k: m for k, m in sys.modules.items() if _is_triton_python_module(k)}
    for name in saved:
        del sys.modules[name]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        yield
    for name in [k for k in sys.modules if _is_triton_python_module(k)]:
        del sys.modules[name]
    sys.modules.update(saved)


RELU_PASS = """
import torch


def pattern(in_0):
    return torch.relu(in_0)


def replacement_args(in_0):
    return (in_0,)


def fused(x):
    return x


def replacement_func():
    return fused
"""
"""A structurally valid pass matching ``torch.relu`` (its replacement is not correct)."""
