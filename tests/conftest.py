"""Shared fixtures: the shipped real GraphNet samples and fast evaluation settings."""

from __future__ import annotations

import os
import sys
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


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the test process without interpreter teardown once Triton's extension is loaded:
    at teardown its nanobind bindings print dozens of "leaked instances" lines after the
    pytest summary (Triton's own reference cycles, not passnet's), which read as a crash.
    Everything pytest reports has been written by now."""
    if "triton._C.libtriton" in sys.modules and _EXIT_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
