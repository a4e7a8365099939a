"""Fixtures of the agent tests: small real tasks, fast settings, the subprocess environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from passnet.evaluate import EvalSettings
from passnet.sample import TensorMeta, write_sample
from passnet.task import Task, create_task
from tests.conftest import MLP

REPO = Path(__file__).resolve().parents[2]
REDTEAM = REPO / "tests" / "passes" / "integrity" / "redteam"
EXPLOITS = REDTEAM / "exploits"
HONEST_RELU = REDTEAM / "honest" / "triton_relu"


def fast_settings() -> EvalSettings:
    """Few calls, exactly: tests check behaviour, not performance."""
    return EvalSettings(
        warmup=1,
        trials=3,
        rounds=1,
        timeout_s=300,
        num_threads=1,
        min_warmup_s=0.0,
        max_extra_s=0.0,
        adaptive=False,
    )


def subprocess_env() -> dict[str, str]:
    """The environment of a ``passnet`` subprocess: this checkout, Triton interpreted on the
    CPU from the first import (also in the evaluation children)."""
    return {**os.environ, "PYTHONPATH": str(REPO / "src"), "TRITON_INTERPRET": "1"}


def relu_sample(folder: Path) -> Path:
    """The red-team suite's graph: ``relu(x) * w`` with ``x`` a graph input (so writing into
    relu's input mutates an input, and returning it aliases one)."""
    source = (
        "import torch\n\n\nclass GraphModule(torch.nn.Module):\n"
        "    def forward(self, L_x_: torch.Tensor, L_w_: torch.nn.parameter.Parameter):\n"
        "        l_x_ = L_x_\n        l_w_ = L_w_\n"
        "        act = torch.relu(l_x_)\n        l_x_ = None\n"
        "        out = act * l_w_\n        act = l_w_ = None\n"
        "        return (out,)\n"
    )
    metas = [
        TensorMeta("L_x_", [64, 64], torch.float32, mean=0.0, std=1.0),
        TensorMeta("L_w_", [64], torch.float32, mean=1.0, std=0.5),
    ]
    return write_sample(folder, source, metas)


@pytest.fixture
def mlp_task(tmp_path: Path) -> Task:
    """A one-graph task over the shipped tiny MLP (linear, relu, linear)."""
    return create_task(tmp_path / "mlp_task", [MLP], name="mlp")
