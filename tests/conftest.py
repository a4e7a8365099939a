"""Shared fixtures: the shipped real GraphNet samples and fast evaluation settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from passnet.data import dev_samples_dir
from passnet.evaluate import EvalSettings

DEV = dev_samples_dir()
MLP = DEV / "transformers-auto-model" / "sadhaklal_mlp-iris"
SYMINT_HEAD = DEV / "timm" / "sequencer2d_l.in1k"
BERT = DEV / "transformers-auto-model" / "prajjwal1_bert-tiny"
FAULTY = Path(__file__).parent / "evaluate" / "faulty_compilers.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fast() -> EvalSettings:
    """Few timed calls: tests check behaviour, not performance."""
    return EvalSettings(
        warmup=2,
        trials=6,
        rounds=2,
        timeout_s=120,
        num_threads=1,
        min_warmup_s=0.0,
        max_extra_s=0.0,
    )


def faulty(name: str) -> str:
    """Compiler spec of a deliberately broken compiler, loaded by file path in the child."""
    return f"{FAULTY}:{name}"
