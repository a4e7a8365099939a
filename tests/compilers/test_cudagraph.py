"""Selective CUDA graphs: the choice between launching and replaying, made on measurements.

The choice itself is tested on the CPU with an injected clock and capture; capturing and
replaying for real, and ``inductor-scg`` end to end, need a GPU (marked ``gpu``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import passnet.compilers._builtin as builtin
from passnet.compilers import GraphedCall, create_compiler, mark_module_state, select_cudagraph
from passnet.compilers._cudagraph import MARGIN, MOVES_BEFORE_COPYING, ROUNDS, _in_place
from passnet.errors import CompilerConfigError, DeviceUnavailable
from passnet.evaluate import EvalSettings, evaluate_sample
from passnet.record import CudaGraphDecision, record_from_dict
from passnet.runner import check_device
from passnet.status import Status
from tests.conftest import DEV

BGE = DEV / "transformers-auto-model" / "bge-small-zh"


class Replayed:
    """Stands for a captured graph: calls ``fn`` and counts the replays."""

    def __init__(self, fn: Callable[..., Any], inputs: Sequence[Any]) -> None:
        self.fn = fn
        self.replays = 0
        self.copy_bytes = sum(
            x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)
        )

    def __call__(self, *inputs: Any) -> Any:
        self.replays += 1
        return self.fn(*inputs)


def clock(launch_ms: float, graph_ms: float) -> Callable[..., float]:
    def timer(fn: Callable[..., Any], inputs: Sequence[Any], calls: int) -> float:
        fn(*inputs)
        return graph_ms if isinstance(fn, Replayed) else launch_ms

    return timer


def _fn(x: torch.Tensor) -> torch.Tensor:
    return x * 2


X = [torch.ones(4, 8)]


def test_replay_is_chosen_when_it_measured_faster_by_more_than_the_margin() -> None:
    chosen, d = select_cudagraph(
        _fn, X, name="g0", graphed=Replayed, timer=clock(launch_ms=1.0, graph_ms=0.4)
    )
    assert isinstance(chosen, Replayed)
    assert (d.name, d.chosen, d.launch_ms, d.graph_ms) == ("g0", "cudagraph", 1.0, 0.4)
    assert d.copy_bytes == 4 * 8 * 4
    assert "replay 0.4 ms vs launch 1 ms" in d.reason
    torch.testing.assert_close(chosen(*X), X[0] * 2)


def test_launch_is_kept_when_replay_is_not_faster_by_the_margin() -> None:
    graph_ms = 1.0 * (1 - MARGIN / 2)  # faster, but within noise
    chosen, d = select_cudagraph(_fn, X, graphed=Replayed, timer=clock(1.0, graph_ms))
    assert chosen is _fn
    assert d.chosen == "launch" and d.graph_ms == graph_ms
    assert "not 3% faster" in d.reason
    chosen, d = select_cudagraph(_fn, X, graphed=Replayed, timer=clock(1.0, 2.5))
    assert chosen is _fn and d.chosen == "launch"


def test_the_variants_are_timed_in_turn_and_a_burst_of_noise_does_not_decide() -> None:
    order: list[str] = []

    def bursty(fn: Callable[..., Any], inputs: Sequence[Any], calls: int) -> float:
        variant = "graph" if isinstance(fn, Replayed) else "launch"
        order.append(variant)
        if len(order) in (2, 3):  # the host is busy while the first replays are timed
            return 50.0
        return 0.4 if variant == "graph" else 1.0

    chosen, d = select_cudagraph(_fn, X, graphed=Replayed, timer=bursty)
    assert order == ["launch", "graph"] * ROUNDS
    assert isinstance(chosen, Replayed) and (d.launch_ms, d.graph_ms) == (1.0, 0.4)


def test_a_call_that_cannot_be_captured_is_launched_and_says_why() -> None:
    def uncapturable(fn: Callable[..., Any], inputs: Sequence[Any]) -> Any:
        raise RuntimeError("operation not permitted when stream is capturing")

    chosen, d = select_cudagraph(_fn, X, graphed=uncapturable, timer=clock(1.0, 0.1))
    assert chosen is _fn
    assert d.chosen == "launch" and d.graph_ms is None
    assert d.reason.startswith("cannot be captured: RuntimeError: operation not permitted")


def test_decisions_round_trip_through_the_record() -> None:
    d = CudaGraphDecision(name="graph 0", chosen="cudagraph", launch_ms=1.0, graph_ms=0.5)
    record = record_from_dict(
        {
            "sample": "s",
            "graph": "s",
            "graph_hash": "0" * 64,
            "compiler_config": {},
            "compiler_config_hash": "0" * 16,
            "compiler": "inductor-scg",
            "device": "cuda",
            "status": "ok",
            "cudagraphs": [dataclasses.asdict(d)],
        }
    )
    assert record.cudagraphs == [d]


def test_inductor_scg_chooses_for_every_dynamo_graph(monkeypatch) -> None:
    """Two Dynamo graphs (a graph break between them): one decision each, and the compiled
    program computes what the module does whichever variant was chosen."""

    def fake_select(fn, inputs, *, name, calls):
        # the first graph "replays faster", the second does not
        launch, graph = (1.0, 0.2) if name == "graph 0" else (1.0, 1.5)
        return select_cudagraph(fn, inputs, name=name, graphed=Replayed, timer=clock(launch, graph))

    monkeypatch.setattr(builtin, "select_cudagraph", fake_select)

    class Broken(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(x) + 1
            torch._dynamo.graph_break()
            return torch.tanh(y) * 3

    module, x = Broken(), torch.randn(3, 5)
    compiler = create_compiler("inductor-scg")
    compiled = compiler.compile(module, [x])
    with torch.no_grad():  # as compiled and as the harness calls (grad mode is guarded on)
        torch.testing.assert_close(compiled(x), module(x))
    decisions = compiler.cudagraph_decisions()
    assert [(d.name, d.chosen) for d in decisions] == [
        ("graph 0", "cudagraph"),
        ("graph 1", "launch"),
    ]


def test_cuda_only_settings_are_refused_on_the_cpu_before_anything_runs(tmp_path) -> None:
    with pytest.raises(DeviceUnavailable, match="'inductor-scg' needs a CUDA device"):
        check_device("inductor-scg", "cpu")
    (tmp_path / "manifest.json").write_text("[]")
    with pytest.raises(DeviceUnavailable, match="cudagraphs=auto needs a CUDA device"):
        check_device("pass_mgr", "cpu", {"pass_dir": str(tmp_path), "cudagraphs": "auto"})
    check_device("pass_mgr", "cpu", {"pass_dir": str(tmp_path), "cudagraphs": "off"})
    with pytest.raises(CompilerConfigError, match="cudagraphs must be one of off, auto"):
        create_compiler("pass_mgr+inductor", pass_dir=str(tmp_path), cudagraphs="always")


@pytest.mark.gpu
def test_graphed_call_replays_with_new_inputs_copied_in() -> None:
    x = torch.randn(64, 64, device="cuda")
    call = GraphedCall(lambda a, k: a @ a * k, [x, 2])
    y = torch.randn(64, 64, device="cuda")
    torch.testing.assert_close(call(y, 2), y @ y * 2)
    assert call.copy_bytes == 64 * 64 * 4
    with pytest.raises(ValueError, match="captured with 2"):
        call(y, 3)


@pytest.mark.gpu
def test_many_inputs_of_mixed_dtypes_are_all_copied_in_before_a_replay() -> None:
    # the copies are batched per dtype: every input's new value must still arrive
    floats = [torch.randn(3, i + 1, device="cuda") for i in range(40)]
    halves = [torch.randn(5, device="cuda", dtype=torch.float16) for _ in range(7)]
    index = torch.tensor([2, 0, 1], device="cuda")

    def fn(*xs: torch.Tensor) -> torch.Tensor:
        total = sum(x.sum() for x in xs[:40]) + sum(h.float().sum() for h in xs[40:47])
        return total * xs[47].float()

    call = GraphedCall(fn, [*floats, *halves, index])
    new = [torch.randn_like(x) for x in floats] + [torch.randn_like(h) for h in halves]
    new_index = torch.tensor([5, 6, 7], device="cuda")
    torch.testing.assert_close(call(*new, new_index), fn(*new, new_index))
    with pytest.raises(ValueError, match="got 47 inputs where it was captured with 48"):
        call(*new)


def _state(kind: str) -> torch.Tensor:
    w = torch.randn(32, 32, device="cuda")
    return torch.nn.Parameter(w, requires_grad=False) if kind == "parameter" else w


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["parameter", "marked"])
def test_module_state_is_replayed_in_place_and_a_moved_one_re_records(kind: str) -> None:
    """Parameters, and a GraphNet graph's weights (plain inputs, marked), are not copied."""
    w, x = _state(kind), torch.randn(4, 32, device="cuda")
    example = [x, w]
    mark_module_state(example, [1] if kind == "marked" else [])
    call = GraphedCall(lambda a, b: a @ b, example)
    assert call.copy_bytes == 4 * 32 * 4  # x only
    decision = CudaGraphDecision(name="g", chosen="cudagraph", launch_ms=1.0)
    call.decision = decision
    with torch.no_grad():
        w.mul_(2)  # updated in place: the replay reads it where it lives
    torch.testing.assert_close(call(x.clone(), w), x @ w)
    assert decision.rerecords == 0
    w2 = _state(kind)  # at another address (a plain tensor is unmarked: the place decides)
    torch.testing.assert_close(call(x, w2), x @ w2)
    assert decision.rerecords == 1


@pytest.mark.gpu
def test_marked_state_that_moves_on_every_call_is_copied_in_after_a_few_re_records() -> None:
    x = torch.randn(4, 32, device="cuda")
    w = torch.randn(32, 32, device="cuda")
    example = [x, w]
    mark_module_state(example, [1])
    call = GraphedCall(lambda a, b: a @ b, example)
    for _ in range(3):  # moves now and then (the harness's phases): kept in place
        w = w.clone()
        call(x, w)
        torch.testing.assert_close(call(x, w), x @ w)
    assert call.rerecords == 3 and call.copy_bytes == 4 * 32 * 4
    for _ in range(MOVES_BEFORE_COPYING + 3):
        w = torch.randn(32, 32, device="cuda")  # fresh weights each call, as a mutating
        torch.testing.assert_close(call(x, w), x @ w)  # graph's evaluation hands them
    assert call.rerecords == 3 + MOVES_BEFORE_COPYING
    assert call.copy_bytes == 4 * 32 * 4 + 32 * 32 * 4


@pytest.mark.gpu
def test_inductor_scg_copies_only_the_inputs_of_a_graphnet_graph(tmp_path) -> None:
    """bge-small-zh: 95.8 MB of weights, two small int64 inputs; replays copy the inputs."""
    rec = evaluate_sample(
        BGE, "inductor-scg", device="cuda", settings=EvalSettings(warmup=2, trials=5)
    )
    assert rec.status is Status.OK, rec.error
    copied = [d.copy_bytes for d in rec.cudagraphs if d.graph_ms is not None]
    assert copied and max(copied) < 1 << 20


def test_mark_module_state_marks_only_tensors_at_the_positions() -> None:
    values = [torch.zeros(2), torch.zeros(3), 4]
    mark_module_state(values, [1, 2])
    assert [_in_place(v) for v in values] == [False, True, False]


@pytest.mark.gpu
def test_inductor_scg_on_cuda_decides_from_real_measurements() -> None:
    torch.manual_seed(0)
    module = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(8)]).cuda()
    x = torch.randn(1, 16, device="cuda")
    compiler = create_compiler("inductor-scg", cudagraph_calls=5)
    with torch.no_grad():
        compiled = compiler.compile(module, [x])
        torch.testing.assert_close(compiled(x), module(x))
    (d,) = compiler.cudagraph_decisions()
    assert d.chosen in ("cudagraph", "launch") and d.graph_ms is not None
    assert d.launch_ms > 0 and d.selection_s > 0
