"""CPU pinning of the timing child on CUDA: which core each GPU worker gets."""

from __future__ import annotations

import os

import pytest
import torch

from passnet.evaluate import _child, _host


@pytest.fixture
def affinity(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    state: dict[str, object] = {"allowed": set(range(8)), "set": None}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: state["allowed"], raising=False)
    monkeypatch.setattr(
        os, "sched_setaffinity", lambda pid, cores: state.update(set=cores), raising=False
    )
    return state


def test_gpu_workers_get_distinct_cores_from_the_end_avoiding_core0_siblings(
    affinity, monkeypatch
) -> None:
    monkeypatch.setattr(_host, "siblings", lambda core: {0, 4})
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    picked = []
    for gpu in range(3):
        _child.pin_to_one_core(f"cuda:{gpu}")
        picked.append(affinity["set"])
    assert picked == [{7}, {5}, {2}]


def test_cpu_device_and_a_single_core_are_left_alone(affinity) -> None:
    _child.pin_to_one_core("cpu")
    assert affinity["set"] is None
    affinity["allowed"] = {3}
    _child.pin_to_one_core("cuda")
    assert affinity["set"] is None


def test_siblings_of_a_core() -> None:
    assert 0 in _host.siblings(0)  # this machine's topology, or {0} where unknown
    assert _host.siblings(10_000) == {10_000}  # no such core: just itself
