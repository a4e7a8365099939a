"""Selective CUDA graphs: the choice between launching and replaying, made on measurements.

The choice itself is tested on the CPU with an injected clock and capture; capturing and
replaying for real, and ``inductor-scg`` end to end, need a GPU (marked ``gpu``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import passnet.compilers._builtin as builtin
from passnet.compilers import (
    GraphedCall,
    PartitionChoices,
    PerShape,
    create_compiler,
    has_symbolic_sizes,
    mark_module_state,
    select_cudagraph,
    split_reason,
)
from passnet.compilers._cudagraph import MARGIN, MOVES_BEFORE_COPYING, ROUNDS, _in_place
from passnet.errors import CompilerConfigError, DeviceUnavailable
from passnet.evaluate import EvalSettings, evaluate_sample
from passnet.record import CudaGraphDecision, record_from_dict
from passnet.runner import check_device
from passnet.status import Status
from tests.conftest import BERT


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


def _traced_with(values: dict[str, Any]) -> torch.fx.GraphModule:
    """A traced ``x * 2 + y`` whose nodes carry ``values`` as Dynamo's example values."""
    gm = torch.fx.symbolic_trace(lambda x, y: x * 2 + y)
    for node in gm.graph.nodes:
        if node.name in values:
            node.meta["example_value"] = values[node.name]
    return gm


def test_split_reason_names_cpu_tensors_beside_cuda_ones_and_data_dependent_values() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        gpu, cpu = torch.empty(2, device="cuda"), torch.empty(2)
    assert split_reason(_traced_with({"x": gpu, "y": gpu})) == ""
    assert split_reason(_traced_with({"x": cpu, "y": cpu})) == ""  # a CPU graph is whole
    assert split_reason(_traced_with({"x": gpu, "y": cpu})) == "tensors off the GPU: y (cpu)"
    unbacked = mode.shape_env.create_unbacked_symint()
    reason = split_reason(_traced_with({"x": gpu, "mul": (gpu, unbacked)}))
    assert reason == "values known only when it runs: mul"


class FakeInductorGraph:
    """Calls its partition functions as Inductor's generated ``call`` does: each gets its
    inputs as a list (and empties it), and work between them runs outside any partition."""

    def __init__(self, choices: PartitionChoices) -> None:
        def partition_0(args: list[Any]) -> tuple[torch.Tensor]:
            (x,) = args
            args.clear()
            return (x * 2,)

        def partition_1(args: list[Any]) -> tuple[torch.Tensor]:
            (h, s) = args
            args.clear()
            return (h + s,)

        self.partitions = [choices.wrap(partition_0), choices.wrap(partition_1)]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        (h,) = self.partitions[0]([x])
        s = h.sum()  # "CPU work" between the partitions
        (out,) = self.partitions[1]([h, s])
        return out


def test_partition_choices_choose_for_each_partition_on_its_own_inputs() -> None:
    """Partition 0 measured faster replayed, partition 1 not: the graph then replays the
    first and launches the second, computes what it did before, and its own decision
    compares it with every partition launched."""

    def timer(fn: Callable[..., Any], inputs: Sequence[Any], calls: int) -> float:
        out = fn(*inputs)
        if isinstance(fn, Replayed):  # replay pays for partition 0 (one input), not 1
            return 0.2 if len(inputs) == 1 else 1.5
        if getattr(fn, "__name__", "") == "every_partition_launched":
            return 2.0
        return 1.0 if isinstance(out, tuple) else 1.4  # a partition, or the whole graph

    choices = PartitionChoices("graph 3", graphed=Replayed, timer=timer)
    graph = FakeInductorGraph(choices)
    x = torch.arange(6.0)
    decision = choices.choose(graph, [x], "tensors off the GPU: y (cpu)")
    assert [(d.name, d.chosen) for d in choices.decisions] == [
        ("graph 3 partition 0", "cudagraph"),
        ("graph 3 partition 1", "launch"),
    ]
    assert decision.name == "graph 3" and decision.chosen == "partitions"
    assert (decision.launch_ms, decision.graph_ms) == (2.0, 1.4)
    assert decision.reason == (
        "cannot be captured whole (tensors off the GPU: y (cpu)): 2 partitions, 1 replayed"
    )
    assert decision.copy_bytes == choices.decisions[0].copy_bytes == 6 * 4
    replayed = graph.partitions[0].replayed
    before = replayed.replays
    torch.testing.assert_close(graph(x), x * 2 + (x * 2).sum())
    assert replayed.replays == before + 1 and graph.partitions[1].replayed is None


def test_a_graph_inductor_made_no_partition_of_is_launched_and_says_why() -> None:
    choices = PartitionChoices("graph 0", timer=lambda fn, inputs, calls: 0.5)
    decision = choices.choose(
        lambda x: x + 1, [torch.ones(2)], "values known only when it runs: u0"
    )
    assert (decision.chosen, decision.launch_ms, decision.graph_ms) == ("launch", 0.5, None)
    assert decision.reason == (
        "cannot be captured (values known only when it runs: u0) and Inductor made no partition"
    )
    assert choices.decisions == []


def test_without_partition_wrappers_in_torch_such_a_graph_is_launched(monkeypatch) -> None:
    from torch._inductor import utils

    monkeypatch.delattr(utils, "set_customized_partition_wrappers")
    monkeypatch.setattr(builtin, "split_reason", lambda gm: "tensors off the GPU: y (cpu)")
    monkeypatch.setattr(builtin, "PartitionChoices", _cpu_partition_choices())
    module, x = torch.nn.Tanh(), torch.randn(4)
    compiler = create_compiler("inductor-scg", cudagraph_calls=3)
    compiled = compiler.compile(module, [x])
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x))
    (decision,) = compiler.cudagraph_decisions()
    assert decision.chosen == "launch" and "Inductor made no partition" in decision.reason


def _cpu_partition_choices() -> Any:
    """PartitionChoices on a CPU clock (the real one synchronizes CUDA)."""
    return functools.partial(PartitionChoices, timer=clock(launch_ms=0.5, graph_ms=0.1))


def test_inductor_scg_hands_a_graph_that_cannot_be_captured_whole_to_its_partitions(
    monkeypatch,
) -> None:
    """The route, for real through Inductor (on the CPU Inductor makes no partition): the
    graph compiles with the partition wrapper installed, and the wrapper is gone after."""
    from torch._inductor import utils

    monkeypatch.setattr(builtin, "split_reason", lambda gm: "tensors off the GPU: y (cpu)")
    monkeypatch.setattr(builtin, "PartitionChoices", _cpu_partition_choices())

    class Scaled(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) * 3

    module, x = Scaled(), torch.randn(3, 5)
    compiler = create_compiler("inductor-scg", cudagraph_calls=3)
    compiled = compiler.compile(module, [x])
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x))
    (decision,) = compiler.cudagraph_decisions()
    assert (decision.name, decision.chosen) == ("graph 0", "launch")
    assert "Inductor made no partition" in decision.reason
    assert utils._unstable_customized_partition_wrapper.wrapper is None


def test_partitioned_programs_are_cached_apart_from_plain_ones(tmp_path, monkeypatch) -> None:
    """A partitioned compile is cached (a prepare worker's compile serves the timed one)
    and found only by another partitioned compile: a plain program found for it would
    never be wrapped, and the other way round."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setattr(builtin, "PartitionChoices", _cpu_partition_choices())
    module, x = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.GELU()), torch.randn(2, 6)

    def compiles(reason: str, compiler: str = "inductor-scg") -> tuple[int, int]:
        monkeypatch.setattr(builtin, "split_reason", lambda gm: reason)
        torch._dynamo.reset()
        counters.clear()
        config = {"cudagraph_calls": 3} if compiler == "inductor-scg" else {"warm": False}
        compiled = create_compiler(compiler, **config).compile(module, [x])
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), module(x))
        return counters["inductor"]["fxgraph_cache_miss"], counters["inductor"]["fxgraph_cache_hit"]

    cpu_work = "tensors off the GPU: y (cpu)"
    assert compiles(cpu_work) == (1, 0)  # partitioned, cold: compiled and stored
    assert compiles(cpu_work) == (0, 1)  # partitioned again: from the cache
    assert compiles("", "inductor") == (1, 0)  # plain: not the partitioned program
    assert compiles(cpu_work) == (0, 1)


def test_a_graph_with_symbolic_sizes_is_chosen_for_per_shape(monkeypatch) -> None:
    """One program serves every batch size: each new signature is measured on its first
    call (replay pays at 3 and 7 rows, not at 5), its capture kept, and beyond
    MAX_SHAPES signatures the calls are launched."""
    import passnet.compilers._cudagraph as cg

    def timer(fn: Callable[..., Any], inputs: Sequence[Any], calls: int) -> float:
        fn(*inputs)
        rows = inputs[0].shape[0]
        return (0.2 if rows != 5 else 1.5) if isinstance(fn, Replayed) else 1.0

    decisions: list[CudaGraphDecision] = []

    def select(fn, inputs, *, name):
        return select_cudagraph(fn, inputs, name=name, graphed=Replayed, timer=timer)

    w = torch.ones(4, 2)
    first = select(_matmul, [torch.ones(3, 4), w], name="graph 0")
    decisions.append(first[1])
    mark_module_state([torch.ones(1), w], [1])  # the weight: left out of the signature
    call = PerShape(_matmul, [torch.ones(3, 4), w], first, select, decisions)
    monkeypatch.setattr(cg, "MAX_SHAPES", 3)
    for rows in (3, 5, 3, 7, 5, 9, 11):
        x = torch.full((rows, 4), float(rows))
        torch.testing.assert_close(call(x, w), x @ w)
    assert [(d.name, d.chosen) for d in decisions] == [
        ("graph 0", "cudagraph"),
        ("graph 0 shapes 1", "launch"),
        ("graph 0 shapes 2", "cudagraph"),
        ("graph 0 shapes 3+", "launch"),  # 9 rows: beyond the limit; 11 rows: not recorded
    ]
    assert "more than 3 shapes" in decisions[-1].reason and decisions[-1].launch_ms > 0
    assert call.chosen[((3, 4),)].replays == 1 + ROUNDS + 2  # selection, then two calls


def _matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x @ w


def test_inductor_scg_with_dynamic_shapes_chooses_per_shape(monkeypatch) -> None:
    """``dynamic``: one Dynamo graph for every batch size, a decision per size it meets."""

    def fake_select(fn, inputs, *, name, calls):
        return select_cudagraph(fn, inputs, name=name, graphed=Replayed, timer=clock(1.0, 0.2))

    monkeypatch.setattr(builtin, "select_cudagraph", fake_select)
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    compiler = create_compiler("inductor-scg", dynamic=True)
    with torch.no_grad():
        compiled = compiler.compile(module, [torch.randn(3, 8)])
        for rows in (3, 5, 7, 5):
            x = torch.randn(rows, 8)
            torch.testing.assert_close(compiled(x), module(x))
    names = [d.name for d in compiler.cudagraph_decisions()]
    assert names == ["graph 0", "graph 0 shapes 1", "graph 0 shapes 2"]


def test_has_symbolic_sizes_reads_the_placeholders() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        static = torch.empty(2, 3)
    assert not has_symbolic_sizes(_traced_with({"x": static, "y": static}))
    size = mode.shape_env.create_unbacked_symint()
    assert has_symbolic_sizes(_traced_with({"x": static, "y": size}))


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
    """bert-tiny: 17.5 MB of weights, three small int64 inputs; replays copy the inputs."""
    rec = evaluate_sample(
        BERT, "inductor-scg", device="cuda", settings=EvalSettings(warmup=2, trials=5)
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


@pytest.mark.gpu
def test_inductor_scg_chooses_for_the_partitions_of_a_graph_with_cpu_work() -> None:
    """A graph whose middle runs on the CPU cannot be captured whole; Inductor splits it
    there, each partition is chosen for, and the program computes what the module does on
    inputs it was not selected on.

    The CPU work is a matrix product, which Inductor runs as ATen's kernel: a pointwise op
    there makes Inductor build a C++ kernel, and the first one in a process pays for its
    C++ toolchain's setup (vector-ISA probes, each a compile and a child Python loading it;
    cold, 30 s against 5 s for a product on a 2-core host with torch 2.13). With a multiply
    there this test took 55 s on an H200; the C++ toolchain is not what it tests."""

    class Mixed(torch.nn.Module):
        def forward(self, x: torch.Tensor, w: torch.Tensor, mix: torch.Tensor):
            h = torch.relu(x @ w)
            s = h.cpu() @ mix  # on the CPU, from the GPU's result
            return torch.tanh(h * s.to(x.device))

    torch.manual_seed(0)
    module = Mixed()
    w, mix = torch.randn(32, 32, device="cuda") / 32, torch.randn(32, 32) / 32
    compiler = create_compiler("inductor-scg", cudagraph_calls=5)
    with torch.no_grad():
        compiled = compiler.compile(module, [torch.randn(8, 32, device="cuda"), w, mix])
        for _ in range(3):
            x = torch.randn(8, 32, device="cuda")
            torch.testing.assert_close(compiled(x, w, mix), module(x, w, mix))
    whole, *parts = compiler.cudagraph_decisions()
    assert whole.chosen == "partitions" and "tensors off the GPU" in whole.reason
    assert parts and all(d.name.startswith("graph 0 partition ") for d in parts)
    assert all(d.graph_ms is not None for d in parts)  # every partition could be captured
    assert whole.launch_ms > 0 and whole.graph_ms is not None


@pytest.mark.gpu
def test_inductor_scg_with_dynamic_shapes_replays_each_shape_it_captured() -> None:
    torch.manual_seed(0)
    module = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(6)]).cuda()
    compiler = create_compiler("inductor-scg", dynamic=True, cudagraph_calls=5)
    with torch.no_grad():
        compiled = compiler.compile(module, [torch.randn(3, 16, device="cuda")])
        for rows in (3, 5, 7, 5, 3):
            x = torch.randn(rows, 16, device="cuda")
            torch.testing.assert_close(compiled(x), module(x))
    decisions = compiler.cudagraph_decisions()
    assert [d.name for d in decisions] == ["graph 0", "graph 0 shapes 1", "graph 0 shapes 2"]
    assert all(d.graph_ms is not None for d in decisions)  # each shape captured
