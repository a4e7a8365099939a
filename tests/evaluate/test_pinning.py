"""CPU pinning of the timing child on CUDA: which core each GPU worker gets."""

from __future__ import annotations

import os

import pytest
import torch

from passnet.evaluate import _child


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    state = {"n": 16}
    monkeypatch.setattr(torch, "get_num_threads", lambda: state["n"])
    monkeypatch.setattr(torch, "set_num_threads", lambda n: state.update(n=n))
    return state


@pytest.fixture
def affinity(monkeypatch: pytest.MonkeyPatch, threads: dict[str, int]) -> dict[str, object]:
    # Pinning also resizes torch's thread pool: ``threads`` stands in for it.
    state: dict[str, object] = {"allowed": set(range(8)), "set": None}
    monkeypatch.setattr(
        os, "sched_getaffinity", lambda pid: state["set"] or state["allowed"], raising=False
    )
    monkeypatch.setattr(
        os, "sched_setaffinity", lambda pid, cores: state.update(set=cores), raising=False
    )
    return state


def test_gpu_workers_get_distinct_cores_from_the_end_avoiding_core0_siblings(
    affinity, monkeypatch
) -> None:
    monkeypatch.setattr(_child, "_siblings", lambda core: {0, 4})
    picked = []
    for gpu in range(3):
        _child._pin_to_one_core(f"cuda:{gpu}")
        picked.append(affinity["set"])
        affinity["set"] = None  # each GPU's worker is a process of its own
    assert picked == [{7}, {5}, {2}]


def test_cpu_device_and_a_single_core_are_left_alone(affinity) -> None:
    _child._pin_to_one_core("cpu")
    assert affinity["set"] is None
    affinity["allowed"] = {3}
    _child._pin_to_one_core("cuda")
    assert affinity["set"] is None


def test_siblings_of_a_core() -> None:
    assert 0 in _child._siblings(0)  # this machine's topology, or {0} where unknown
    assert _child._siblings(10_000) == {10_000}  # no such core: just itself


def test_pinning_shrinks_the_thread_pool_and_remembers_what_it_changed(affinity, threads) -> None:
    pin = _child._pin_to_one_core("cuda")
    assert pin == _child._Pin(frozenset(range(8)), 16)
    assert threads["n"] == 1
    assert _child._pin_to_one_core("cpu") is None


def test_compile_runs_on_all_allowed_cores_and_threads_then_the_pin_comes_back(
    affinity, threads
) -> None:
    pin = _child._pin_to_one_core("cuda")
    pinned = affinity["set"]
    seen = []
    with _child._all_cores(pin):
        seen.append((set(affinity["set"]), threads["n"]))
    assert seen == [(set(range(8)), 16)]
    assert (affinity["set"], threads["n"]) == (pinned, 1)


def test_the_pin_comes_back_when_compiling_fails(affinity, threads) -> None:
    pin = _child._pin_to_one_core("cuda")
    pinned = affinity["set"]
    with pytest.raises(RuntimeError), _child._all_cores(pin):
        raise RuntimeError("compile failed")
    assert (affinity["set"], threads["n"]) == (pinned, 1)


def test_nothing_pinned_means_nothing_changes(affinity, threads) -> None:
    with _child._all_cores(None):
        pass
    assert (affinity["set"], threads["n"]) == (None, 16)
