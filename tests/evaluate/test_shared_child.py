"""Several graphs in one evaluation child (``graphs_per_child``): the same records as one
child each, a crash costs only its graph, and a child unfit for another graph is replaced."""

from __future__ import annotations

import dataclasses

import pytest

from passnet.evaluate import EvalSettings, evaluate_sample, evaluate_samples
from passnet.status import Status
from tests.conftest import BERT, MLP, faulty


@pytest.fixture
def shared(fast: EvalSettings) -> EvalSettings:
    return dataclasses.replace(fast, graphs_per_child=8)


def test_graphs_share_a_child_and_are_recorded_in_order(shared: EvalSettings) -> None:
    heard: list[tuple[int, str]] = []
    stages: set[int] = set()
    records = evaluate_samples(
        [MLP, BERT, MLP],
        "eager",
        settings=shared,
        graph_labels=["mlp", "bert", "mlp-again"],
        on_stage=lambda i, _stage: stages.add(i),
        on_record=lambda i, rec: heard.append((i, rec.graph)),
    )
    assert [r.graph for r in records] == ["mlp", "bert", "mlp-again"]
    assert heard == [(0, "mlp"), (1, "bert"), (2, "mlp-again")]
    assert stages == {0, 1, 2}
    assert [r.status for r in records] == [Status.OK] * 3
    assert [r.child_position for r in records] == [0, 1, 2]
    assert all(r.speedup_e2e is not None and r.phases_s["total"] > 0 for r in records)
    assert records[0].settings["graphs_per_child"] == 8
    # a graph's record is the one a child of its own gives, but for its place
    alone = evaluate_sample(BERT, "eager", settings=shared, graph_label="bert")
    assert alone.child_position == 0
    assert alone.correctness.equal and records[1].correctness.equal
    assert alone.graph_hash == records[1].graph_hash


def test_a_crash_costs_only_its_graph(shared: EvalSettings) -> None:
    """The compiler reads address 0 on the second compile of its process: the second
    graph is lost to it, the third goes on in a fresh child (where it is the first)."""
    records = evaluate_samples(
        [MLP, MLP, MLP],
        faulty("SegfaultOnSecondCompile"),
        settings=shared,
        graph_labels=["a", "b", "c"],
    )
    assert [r.status for r in records] == [Status.OK, Status.COMPILE_ERROR, Status.OK]
    assert "SIGSEGV" in records[1].error.message
    assert [r.child_position for r in records] == [0, 1, 0]


def test_a_child_that_cannot_clear_up_hands_the_next_graph_to_a_fresh_one(
    shared: EvalSettings,
) -> None:
    records = evaluate_samples(
        [MLP, MLP], faulty("SpoilsTheProcess"), settings=shared, graph_labels=["a", "b"]
    )
    assert [r.status for r in records] == [Status.OK, Status.OK]
    assert [r.child_position for r in records] == [0, 0]  # b was not blamed, nor shared


def test_a_broken_sample_is_recorded_without_a_child(shared: EvalSettings, tmp_path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.py").write_text("this is not python\n")
    records = evaluate_samples([broken, MLP], "eager", settings=shared)
    assert [r.status for r in records] == [Status.SAMPLE_ERROR, Status.OK]
    assert records[1].child_position == 0


def test_labels_must_match_the_samples(shared: EvalSettings) -> None:
    with pytest.raises(ValueError, match="2 graph labels for 1 samples"):
        evaluate_samples([MLP], "eager", settings=shared, graph_labels=["a", "b"])


def test_graphs_per_child_must_be_positive() -> None:
    with pytest.raises(ValueError, match="graphs_per_child must be an integer >= 1"):
        EvalSettings(graphs_per_child=0)


@pytest.mark.gpu
def test_graphs_share_a_cuda_child(shared: EvalSettings) -> None:
    records = evaluate_samples([MLP, BERT], "inductor", device="cuda", settings=shared)
    assert [r.status for r in records] == [Status.OK, Status.OK], [r.error for r in records]
    assert [r.child_position for r in records] == [0, 1]
    assert all(r.compiled is not None and r.eager is not None for r in records)


def test_a_child_of_a_numbered_gpu_makes_it_current_before_anything_runs(
    fast: EvalSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """synchronize(), CUDA events and mem_get_info() are the current device's: a child of
    cuda:1 left on cuda:0 would time an idle cuda:0."""
    import torch

    from passnet.evaluate._child import ChildRequest, run_child

    made_current: list[int] = []

    def set_device(index: int) -> None:
        made_current.append(index)
        raise RuntimeError("no CUDA here")  # nothing after it runs on this CPU machine

    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    messages: list[tuple[str, object]] = []
    run_child(ChildRequest(str(MLP), "eager", {}, "cuda:1", fast), messages.append)
    (result,) = [payload for kind, payload in messages if kind == "result"]
    assert made_current == [1]
    assert result["error"]["message"] == "no CUDA here"  # before the module was built
    made_current.clear()
    run_child(ChildRequest(str(MLP), "eager", {}, "cpu", fast), messages.append)
    assert made_current == []


@pytest.mark.gpu
def test_a_graph_on_the_second_gpu_is_timed_on_it(fast: EvalSettings) -> None:
    """The same graph timed on cuda:0 and cuda:1 takes alike device times (left on cuda:0,
    a cuda:1 child's CUDA events timed an idle cuda:0: a few microseconds)."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    settings = dataclasses.replace(fast, trials=50, rounds=5, num_threads=None)
    first, second = (evaluate_sample(BERT, "eager", {}, f"cuda:{i}", settings) for i in (0, 1))
    assert first.status is Status.OK and second.status is Status.OK
    assert first.eager and second.eager and first.eager.device and second.eager.device
    ratio = second.eager.device.median_ms / first.eager.device.median_ms
    assert 0.5 < ratio < 2.0, (first.eager.device, second.eager.device)


def test_a_prepare_worker_of_a_numbered_gpu_makes_it_current_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from passnet.evaluate._prepare import _prepare_child

    made_current: list[int] = []

    def set_device(index: int) -> None:
        made_current.append(index)
        raise RuntimeError("no CUDA here")

    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    messages: list[tuple[str, object]] = []
    _prepare_child(str(MLP), "eager", {}, "cuda:1", 0, None, (), messages.append)
    assert made_current == [1]
    assert messages == [("result", {"ok": False, "error": "RuntimeError: no CUDA here"})]
