"""The local executor: one evaluation per device slot at a time, records as they finish."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from passnet.evaluate import EvalSettings
from passnet.record import EvalRecord
from passnet.runner import (
    DevicePool,
    EvalJob,
    LocalExecutor,
    groups,
    local_devices,
    plan_items,
    read_records,
    run_evaluations,
)
from passnet.status import Status
from tests.conftest import DEV


def _ok(
    label: str, compiler: str, config: dict[str, Any], device: str, settings: Any, **more: Any
) -> EvalRecord:
    """The record of a fake evaluation that went well."""
    return EvalRecord(
        graph=label,
        graph_hash="0" * 64,
        compiler=compiler,
        compiler_config=config,
        compiler_config_hash="h",
        device=device,
        status=Status.OK,
        settings=settings.to_dict(),
        **more,
    )


class FakeEvaluations:
    """Stands in for evaluate_sample: sleeps a per-graph time 'on' the device it is handed
    and records when each device was busy."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self.intervals: list[tuple[str, float, float, str]] = []
        self._lock = threading.Lock()

    def __call__(
        self,
        path: Path,
        compiler: str,
        config: dict[str, Any],
        device: str,
        settings: Any,
        *,
        graph_label: str,
        on_stage: Any = None,
        should_stop: Any = None,
    ) -> EvalRecord:
        start = time.perf_counter()
        for stage in ("load", "compile", "measure") if on_stage else ():
            on_stage(stage)
        time.sleep(self.seconds.get(graph_label, 0.01))
        end = time.perf_counter()
        with self._lock:
            self.intervals.append((device, start, end, graph_label))
        return _ok(graph_label, compiler, config, device, settings)

    def overlaps(self) -> list[tuple[str, str, str]]:
        """Pairs of evaluations that held one device at the same time."""
        found = []
        for i, (dev_a, start_a, end_a, a) in enumerate(self.intervals):
            for dev_b, start_b, end_b, b in self.intervals[i + 1 :]:
                if dev_a == dev_b and start_a < end_b and start_b < end_a:
                    found.append((dev_a, a, b))
        return found


def _items(n: int) -> list[Any]:
    return plan_items([DEV])[:n]


def test_two_jobs_on_two_devices_never_time_two_graphs_on_one_device(tmp_path: Path) -> None:
    # The first graph is slow: a scheduler that picks the device by job index starts the
    # third graph on the first device while the first graph still holds it.
    items = _items(6)
    fake = FakeEvaluations({items[0].label: 0.6, items[3].label: 0.3})
    summary = run_evaluations(
        items,
        compiler="eager",
        device="cpu",
        out_dir=tmp_path,
        executor=LocalExecutor(["fake:0", "fake:1"], evaluate=fake),
        echo_logs=False,
    )
    assert fake.overlaps() == []
    assert {d for d, *_ in fake.intervals} == {"fake:0", "fake:1"}  # both were used
    assert sorted(r.graph for r in summary.records) == sorted(i.label for i in items)
    # stored under the device asked for, each graph once
    stored = read_records(tmp_path / "results.jsonl")
    assert sorted(r.graph for r in stored) == sorted(i.label for i in items)
    assert {r.device for r in stored} == {"cpu"}


def test_records_come_back_as_they_finish_not_in_job_order() -> None:
    items = _items(3)
    fake = FakeEvaluations({items[0].label: 0.4})
    jobs = [EvalJob(item, "eager") for item in items]
    with LocalExecutor(["a", "b"], evaluate=fake) as executor:
        order = [r.graph for r in executor.run(jobs)]
    assert order[-1] == items[0].label
    assert sorted(order) == sorted(i.label for i in items)


def test_a_device_listed_twice_runs_two_evaluations_at_once() -> None:
    pool = DevicePool(["cpu", "cpu"])
    with pool.acquire() as first, pool.acquire() as second:
        assert (first, second) == ("cpu", "cpu")


def test_closing_the_results_early_cancels_jobs_not_yet_started() -> None:
    items = _items(5)
    fake = FakeEvaluations({})
    results = LocalExecutor(["only"], evaluate=fake).run([EvalJob(i, "eager") for i in items])
    next(results)
    results.close()
    assert len(fake.intervals) < len(items)


@pytest.mark.parametrize(
    ("device", "jobs", "gpus", "slots"),
    [
        ("cpu", 1, 0, ["cpu"]),
        ("cpu", 3, 2, ["cpu", "cpu", "cpu"]),
        ("cuda", 1, 2, ["cuda:0"]),
        ("cuda", 2, 2, ["cuda:0", "cuda:1"]),
        ("cuda", 8, 2, ["cuda:0", "cuda:1"]),  # one timing per GPU, whatever --jobs says
        ("cuda:1", 4, 2, ["cuda:1"]),
    ],
)
def test_local_slots_are_one_per_gpu_and_jobs_per_cpu(
    device: str, jobs: int, gpus: int, slots: list[str]
) -> None:
    assert local_devices(device, jobs, gpus) == slots


def test_a_log_file_gets_a_line_when_a_graph_starts_each_stage_ends_and_it_is_done(
    tmp_path: Path,
) -> None:
    items = _items(2)
    out = io.StringIO()
    console = Console(file=out, width=80)  # not a terminal: a log file
    run_evaluations(
        items,
        compiler="eager",
        device="cpu",
        out_dir=tmp_path,
        executor=LocalExecutor(["only"], evaluate=FakeEvaluations({})),
        console=console,
        echo_logs=False,
    )
    text = out.getvalue()
    for item in items:
        assert f"{item.label}: started" in text
        assert f"    {item.label}: load took " in text and ", now compile" in text
        assert f"    {item.label}: compile took " in text and ", now measure" in text
    assert f"[2/2] {items[1].label}: ok" in text or f"[2/2] {items[0].label}: ok" in text
    # long graph names are not cut to the console's width
    assert all(len(line) <= 80 or "..." not in line for line in text.splitlines())


class FakePreparations:
    """Stands in for prepare_sample: sleeps and records (device, start, end, graph)."""

    def __init__(self, seconds: float = 0.05, failing: set[str] = frozenset()) -> None:
        self.seconds = seconds
        self.failing = failing
        self.intervals: list[tuple[str, float, float, str]] = []
        self._lock = threading.Lock()

    def __call__(
        self, path: Path, compiler: str, config: dict, device: str, settings: Any, *, cores=()
    ) -> Any:
        from passnet.evaluate import PrepareOutcome

        start = time.perf_counter()
        time.sleep(self.seconds)
        with self._lock:
            self.intervals.append((device, start, time.perf_counter(), path.name))
        failed = path.name in self.failing
        return PrepareOutcome(not failed, self.seconds, "boom" if failed else "")


class PreparedEvaluations(FakeEvaluations):
    """FakeEvaluations that also remember whether each graph came prepared."""

    def __init__(self, seconds: dict[str, float]) -> None:
        super().__init__(seconds)
        self.prepared: dict[str, float | None] = {}

    def __call__(self, *args: Any, prepared: float | None = None, **kwargs: Any) -> EvalRecord:
        self.prepared[kwargs["graph_label"]] = prepared
        return super().__call__(*args, **kwargs)


def test_prepare_workers_compile_ahead_on_the_device_that_then_evaluates(tmp_path: Path) -> None:
    items = _items(8)
    evaluations = PreparedEvaluations({i.label: 0.08 for i in items})
    preparations = FakePreparations(seconds=0.05, failing={items[2].path.name})
    executor = LocalExecutor(
        ["fake:0", "fake:1"], evaluate=evaluations, prepare=preparations, prepare_workers=3
    )
    summary = run_evaluations(
        items, compiler="eager", device="cpu", out_dir=tmp_path, executor=executor, echo_logs=False
    )
    labels = sorted(i.label for i in items)
    assert sorted(r.graph for r in summary.records) == labels  # each evaluated once
    assert sorted(p for *_, p in preparations.intervals) == sorted(i.path.name for i in items)
    assert evaluations.overlaps() == []  # still one evaluation per device at a time
    # each graph is evaluated on the device it was prepared for
    prepared_on = {p: d for d, _, _, p in preparations.intervals}
    evaluated_on = {Path(g).name: d for d, _, _, g in evaluations.intervals}
    assert prepared_on == evaluated_on
    # a failed preparation is evaluated all the same, as not prepared
    assert evaluations.prepared[items[2].label] is None
    assert all(evaluations.prepared[i.label] == 0.05 for i in items if i is not items[2])
    # compiling overlapped timing: some preparation ran while an evaluation ran
    assert any(
        ps < ee and es < pe
        for _, ps, pe, _ in preparations.intervals
        for _, es, ee, _ in evaluations.intervals
    )


def test_closing_a_pipelined_run_early_ends_its_threads(tmp_path: Path) -> None:
    items = _items(10)
    executor = LocalExecutor(
        ["a"], evaluate=PreparedEvaluations({}), prepare=FakePreparations(0.01), prepare_workers=2
    )
    before = threading.active_count()
    results = executor.run([EvalJob(i, "eager") for i in items])
    next(results)
    results.close()
    assert threading.active_count() == before


def test_a_pipelined_run_with_more_preparers_than_room_ends(tmp_path: Path) -> None:
    # Six preparers, one slot with room for two graphs: at the end, preparers wait for
    # room that no evaluation will free; ending the run must wake them all (a run of the
    # 29 dev graphs with --prepare-workers 6 on one GPU once hung here after its last
    # record).
    items = _items(5)
    executor = LocalExecutor(
        ["a"], evaluate=PreparedEvaluations({}), prepare=FakePreparations(0.01), prepare_workers=6
    )
    before = threading.active_count()
    done: list[EvalRecord] = []
    runner = threading.Thread(
        target=lambda: done.extend(executor.run([EvalJob(i, "eager") for i in items])),
        daemon=True,
    )
    runner.start()
    runner.join(timeout=30)
    assert not runner.is_alive(), "the pipelined run did not end after its last record"
    assert sorted(r.graph for r in done) == sorted(i.label for i in items)
    assert threading.active_count() == before


def _shared(n: int) -> EvalSettings:
    return EvalSettings(graphs_per_child=n)


@pytest.mark.parametrize(
    ("count", "per_child", "slots", "sizes"),
    [
        (5, 1, 2, [1, 1, 1, 1, 1]),  # the default: a child each
        (9, 32, 1, [9]),  # one GPU: a call's graphs in one child
        (9, 32, 4, [3, 3, 3]),  # spread so that every slot has work
        (10, 4, 1, [4, 4, 2]),  # at most graphs_per_child a child
        (2, 8, 4, [1, 1]),
    ],
)
def test_jobs_are_grouped_by_graphs_per_child_and_spread_over_slots(
    count: int, per_child: int, slots: int, sizes: list[int]
) -> None:
    jobs = [EvalJob(item, "eager", settings=_shared(per_child)) for item in _items(count)]
    found = groups(jobs, slots)
    assert [len(g) for g in found] == sizes
    assert [j for g in found for j in g] == jobs  # every job once, in order


def test_only_jobs_alike_but_for_their_graph_share_a_child() -> None:
    items = _items(4)
    jobs = [
        EvalJob(items[0], "eager", settings=_shared(8)),
        EvalJob(items[1], "eager", settings=_shared(8)),
        EvalJob(items[2], "inductor", settings=_shared(8)),
        EvalJob(items[3], "inductor", {"mode": "max-autotune"}, settings=_shared(8)),
    ]
    assert [len(g) for g in groups(jobs, 1)] == [2, 1, 1]


class FakeGroups:
    """Stands in for evaluate_samples: one call per group, records through on_record, a
    pause before each graph, and a stop between graphs when asked."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.calls: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()

    def __call__(
        self,
        paths,
        compiler,
        config,
        device,
        settings,
        *,
        graph_labels,
        on_stage,
        on_record,
        should_stop,
    ) -> list[EvalRecord]:
        with self._lock:
            self.calls.append((device, list(graph_labels)))
        records = []
        for i, label in enumerate(graph_labels):
            if should_stop():
                break
            time.sleep(self.seconds)
            if on_stage:
                on_stage(i, "measure")
            rec = _ok(label, compiler, config, device, settings, child_position=i)
            on_record(i, rec)
            records.append(rec)
        return records


def test_a_run_with_graphs_per_child_evaluates_groups_in_shared_children(tmp_path: Path) -> None:
    items = _items(6)
    fake_groups = FakeGroups()
    summary = run_evaluations(
        items,
        compiler="eager",
        device="cpu",
        settings=_shared(4),
        out_dir=tmp_path,
        executor=LocalExecutor(
            ["fake:0", "fake:1"], evaluate=FakeEvaluations({}), evaluate_many=fake_groups
        ),
        echo_logs=False,
    )
    assert sorted(len(labels) for _, labels in fake_groups.calls) == [3, 3]
    assert {device for device, _ in fake_groups.calls} <= {"fake:0", "fake:1"}
    assert sorted(r.graph for r in summary.records) == sorted(i.label for i in items)
    stored = read_records(tmp_path / "results.jsonl")
    assert {r.device for r in stored} == {"cpu"}  # the device asked for: the resume key
    assert sorted(r.child_position for r in stored) == [0, 0, 1, 1, 2, 2]


def test_a_failing_group_raises_in_the_consumer() -> None:
    def broken(*args: Any, **kwargs: Any) -> list[EvalRecord]:
        raise RuntimeError("the harness broke")

    jobs = [EvalJob(item, "eager", settings=_shared(4)) for item in _items(3)]
    with (
        LocalExecutor(["only"], evaluate_many=broken) as executor,
        pytest.raises(RuntimeError, match="the harness broke"),
    ):
        list(executor.run(jobs))


def test_closing_the_results_early_stops_the_group_in_its_child() -> None:
    fake_groups = FakeGroups(seconds=0.2)
    jobs = [EvalJob(item, "eager", settings=_shared(32)) for item in _items(20)]
    results = LocalExecutor(["only"], evaluate_many=fake_groups).run(jobs)
    next(results)
    started = time.perf_counter()
    results.close()
    assert time.perf_counter() - started < 1.0  # not the group's 19 other graphs (3.8 s)
    assert [len(labels) for _, labels in fake_groups.calls] == [20]


def test_overlap_runs_k_evaluations_per_device_each_on_cores_of_its_own(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    def evaluate(path: Path, compiler: str, config: dict, device: str, settings: Any, **kw: Any):  # type: ignore[no-untyped-def]
        with lock:
            seen.append({"device": device, "cores": kw["cores"], "turns": kw["turns"]})
        time.sleep(0.05)
        return _ok(kw["graph_label"], compiler, config, device, settings)

    executor = LocalExecutor(["fake:0", "fake:1"], evaluate=evaluate, overlap=2)
    assert executor.pool.slots == ["fake:0", "fake:0", "fake:1", "fake:1"]
    shares = [set(c) for c in executor.slot_cores]
    if all(shares):  # a machine with at least as many cores as slots
        assert all(not (a & b) for i, a in enumerate(shares) for b in shares[i + 1 :])
    summary = run_evaluations(
        _items(6), compiler="eager", out_dir=tmp_path, executor=executor, echo_logs=False
    )
    assert len(summary.records) == 6 and len(seen) == 6
    assert len({id(s["turns"]) for s in seen}) == 1  # one run, one set of turns
    assert seen[0]["turns"].slots == 2 and seen[0]["turns"].scope == "host"
    assert not Path(seen[0]["turns"].folder).exists()  # removed when the run ended


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"overlap": 0}, "overlap must be 1 or more"),
        ({"overlap": 2, "prepare_workers": 1}, "two ways to compile beside timing"),
        ({"overlap": 2, "scope": "gpu"}, "scope must be one of host, device"),
    ],
)
def test_overlap_options_that_cannot_work_are_refused(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LocalExecutor(["fake:0"], **options)


def test_closing_the_results_early_ends_an_evaluation_in_flight() -> None:
    """A graph with a child of its own: when the consumer stops, its child is ended
    within about a second (it would have timed for many seconds more) and it gets no
    record."""
    from tests.conftest import MLP

    item = plan_items([MLP])[0]
    quick = EvalSettings(warmup=2, trials=5, adaptive=False, min_warmup_s=0.0)
    slow = EvalSettings(warmup=2, trials=2_000_000, adaptive=False, min_warmup_s=0.0)
    jobs = [EvalJob(item, "eager", settings=quick), EvalJob(item, "eager", settings=slow)]
    stages: list[tuple[str, str]] = []
    results = LocalExecutor(["cpu", "cpu"]).run(
        jobs, on_stage=lambda job, stage: stages.append((job.settings.trials, stage))
    )
    first = next(results)
    assert first.status is Status.OK and first.settings["trials"] == 5
    deadline = time.perf_counter() + 60
    while (2_000_000, "measure") not in stages and time.perf_counter() < deadline:
        time.sleep(0.1)  # the slow one is timing now
    started = time.perf_counter()
    results.close()
    assert time.perf_counter() - started < 5.0
