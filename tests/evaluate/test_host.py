"""The core guard (docs/evaluation.md): which cores a GPU worker's timing thread may use, how it
finds a slowed-down core, and how the timing loop measures a round again.

Core speeds are scripted (a fake probe reads them from a table the test changes), and
affinity calls are recorded instead of made, except in the one test that probes this
machine's real cores.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from typing import Any

import pytest

from passnet.evaluate import _host
from passnet.evaluate._host import CoreGuard, HostReference, core_share
from passnet.record import EvalRecord, record_from_json
from passnet.status import Status

from .test_timing import Script, steady


@pytest.fixture
def cores(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Scripted cores: ``speed[c]`` is the probe's ns per loop on core ``c``; ``pinned`` is
    where the thread is; ``probes`` counts probes per core."""
    state: dict[str, Any] = {"speed": {}, "pinned": None, "probes": {}}

    def setaffinity(pid: int, which: set[int]) -> None:
        assert pid == 0 and len(which) == 1
        state["pinned"] = next(iter(which))

    def probe(self: CoreGuard) -> float:
        core = state["pinned"]
        state["probes"][core] = state["probes"].get(core, 0) + 1
        return state["speed"][core]

    monkeypatch.setattr(os, "sched_setaffinity", setaffinity, raising=False)
    monkeypatch.setattr(CoreGuard, "probe", probe)
    return state


def test_one_gpu_gets_every_other_core_from_the_end_without_core0() -> None:
    assert core_share(range(16), 0, 1) == [15, 13, 11, 9, 7, 5, 3, 1]


def test_gpus_get_disjoint_shares(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host, "siblings", lambda core: {0, 4})  # core 0's sibling is 4
    shares = [core_share(range(16), gpu, 3) for gpu in range(3)]
    # candidates 15, 14, ..., 5, 3, 2, 1; every other one: 15, 13, 11, 9, 7, 5, 2
    assert shares == [[15, 9, 2], [13, 7], [11, 5]]
    assert all(4 not in share and 0 not in share for share in shares)
    flat = [c for share in shares for c in share]
    assert len(flat) == len(set(flat))


def test_too_few_cores_fall_back_to_the_single_core_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host, "siblings", lambda core: {0, 4})
    # 8 cores, 3 GPUs: 7, 6, 5, 3, 2, 1 are candidates, every other one is 7, 5, 2
    assert [core_share(range(8), gpu, 3) for gpu in range(3)] == [[7], [5], [2]]
    assert [core_share(range(8), gpu, 4) for gpu in range(4)] == [[7], [5], [2], [7]]
    assert core_share([3], 0, 1) == [3]


def test_settle_stays_on_the_fastest_core(cores: dict[str, Any]) -> None:
    cores["speed"] = {15: 50.0, 13: 31.0, 11: 33.0}
    guard = CoreGuard([15, 13, 11])
    assert guard.settle() is False  # the first settle is not a move
    assert cores["pinned"] == 13 and guard.core == 13
    assert guard.best_ns == 31.0 and guard.moves == 0


def test_a_core_that_slows_down_is_left_for_the_fastest(cores: dict[str, Any]) -> None:
    cores["speed"] = {15: 30.0, 13: 31.0}
    guard = CoreGuard([15, 13], slow_factor=1.35)
    guard.ensure_fast()  # settles: 15
    assert cores["pinned"] == 15
    assert guard.ensure_fast() is False  # still fast: stays
    cores["speed"][15] = 40.0  # 33 % slower: within the factor (the probe's own spread)
    assert guard.ensure_fast() is False and cores["pinned"] == 15
    cores["speed"][15] = 52.0  # its hardware thread's sibling got busy
    assert guard.ensure_fast() is True
    assert cores["pinned"] == 13 and guard.moves == 1
    report = guard.report()
    assert (report.core, report.moves, report.slow_checks, report.all_slow) == (13, 1, 1, 0)
    assert report.probe_ns == 30.0 and report.cores == [15, 13]


def test_every_core_slow_is_counted_and_the_fastest_kept(cores: dict[str, Any]) -> None:
    cores["speed"] = {15: 30.0, 13: 31.0}
    guard = CoreGuard([15, 13])
    guard.settle()
    cores["speed"] = {15: 60.0, 13: 55.0}
    assert guard.ensure_fast() is True
    assert cores["pinned"] == 13 and guard.all_slow == 1
    assert guard.best_ns == 55.0  # the reference is now the fastest core's probe
    assert guard.ensure_fast() is False  # and 13 at 55 ns counts as fast: no more moves
    cores["speed"] = {15: 30.0, 13: 31.0}  # the host recovers: the reference follows
    assert guard.still_fast() is True and guard.best_ns == 31.0


def test_a_probe_right_after_a_fast_round_is_not_repeated(cores: dict[str, Any]) -> None:
    cores["speed"] = {15: 30.0}
    guard = CoreGuard([15])
    guard.settle()
    before = cores["probes"][15]
    assert guard.still_fast() is True
    assert guard.ensure_fast() is False  # uses the probe just made
    assert cores["probes"][15] == before + 1
    guard.ensure_fast()  # the next one probes again
    assert cores["probes"][15] == before + 2


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one core"):
        CoreGuard([])
    with pytest.raises(ValueError, match="slow_factor must be above 1"):
        CoreGuard([1], slow_factor=1.0)


class SlowingCore(CoreGuard):
    """A guard whose core slows down once, after a given number of timed calls."""

    def __init__(self, script: Script, slow_after: int, slow_for: int) -> None:
        super().__init__([0])
        self.script, self.slow_after, self.slow_for = script, slow_after, slow_for

    def probe(self) -> float:
        calls = len(self.script.calls)
        return 50.0 if self.slow_after <= calls < self.slow_after + self.slow_for else 30.0

    def settle(self) -> bool:  # one core: nowhere to move
        self.core = 0
        self.last_ns = self.probe()
        self.best_ns = min(self.best_ns, self.last_ns)
        return False


def test_a_round_that_ends_on_a_slowed_core_is_measured_again() -> None:
    script = Script({"compiled": steady(1.0), "eager": steady(2.0)})
    # rounds of 4 + 4 calls; the core is slow from the 3rd to the 9th call: round 1 is
    # taken again once, and its repeat (calls 9-16) ends on a fast core
    guard = SlowingCore(script, slow_after=3, slow_for=6)
    timings = script.measure(trials=8, rounds=2, guard=guard)
    assert timings["eager"].e2e.n == timings["compiled"].e2e.n == 8  # the repeat replaced it
    assert len(script.calls) == 24  # 8 + 8 (round 1 twice) + 8 (round 2)
    assert guard.report().remeasured_rounds == 1


def test_a_round_is_measured_at_most_three_times() -> None:
    script = Script({"compiled": steady(1.0), "eager": steady(2.0)})
    guard = SlowingCore(script, slow_after=0, slow_for=10**9)  # never fast again
    guard.best_ns = 30.0
    timings = script.measure(trials=4, rounds=2, guard=guard)
    assert timings["eager"].e2e.n == 4
    assert guard.report().remeasured_rounds == 2 * 2  # each round: two repeats, last kept
    assert len(script.calls) == 3 * 8


def test_a_move_warms_the_new_core_up_outside_the_timed_calls(cores: dict[str, Any]) -> None:
    script = Script({"compiled": steady(1.0), "eager": steady(2.0)})
    cores["speed"] = {1: 30.0, 2: 31.0}
    guard = CoreGuard([1, 2])

    real_ensure: Callable[[], bool] = guard.ensure_fast
    rounds = {"n": 0}

    def ensure() -> bool:
        rounds["n"] += 1
        if rounds["n"] == 2:
            cores["speed"][1] = 60.0  # core 1 slows down right after the first round
        return real_ensure()

    guard.ensure_fast = ensure  # type: ignore[method-assign]
    timings = script.measure(trials=4, rounds=2, guard=guard)
    assert guard.moves == 1 and cores["pinned"] == 2
    assert timings["eager"].e2e.n == 4
    # round 1; round 2 on the slowed core (the probe after round 1 found it fast), found
    # slow after it; two untimed calls per side on the new core; round 2 again
    assert len(script.calls) == 4 + 4 + 4 + 4
    assert guard.remeasured_rounds == 1


def test_the_real_probe_times_a_loop_on_this_machine() -> None:
    guard = CoreGuard(sorted(os.sched_getaffinity(0)))
    before = os.sched_getaffinity(0)
    try:
        ns = guard.probe()
        assert 0 < ns < 10_000 and math.isfinite(ns)
        guard.settle()
        assert os.sched_getaffinity(0) == {guard.core}
    finally:
        os.sched_setaffinity(0, before)


def test_the_host_report_round_trips_through_a_record() -> None:
    rec = EvalRecord("g", "h" * 64, "inductor", {}, "cfg", "cuda", Status.OK)
    assert record_from_json(rec.to_json()).host is None  # records without it load
    guard = CoreGuard([3])
    guard.core, guard.best_ns, guard.moves = 3, 31.5, 2
    rec.host = guard.report()
    back = record_from_json(rec.to_json())
    assert back.host == rec.host and back.host.moves == 2


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, cores: dict[str, Any]) -> dict[str, Any]:
    """``time.sleep`` of the guard, scripted: after ``recover_after`` sleeps every core
    runs at ``recovered`` ns."""
    state: dict[str, Any] = {"sleeps": [], "recover_after": None, "recovered": 30.0}

    def sleep(seconds: float) -> None:
        state["sleeps"].append(seconds)
        if state["recover_after"] is not None and len(state["sleeps"]) >= state["recover_after"]:
            cores["speed"] = dict.fromkeys(cores["speed"], state["recovered"])

    monkeypatch.setattr(_host.time, "sleep", sleep)
    return state


def test_a_host_slowed_down_as_a_whole_is_waited_for(cores, clock) -> None:
    cores["speed"] = {15: 52.0, 13: 50.0}  # earlier children saw 31 ns: every core is slow
    clock["recover_after"] = 3
    guard = CoreGuard([15, 13], reference_ns=31.0, max_wait_s=2.0)
    guard.settle()
    assert clock["sleeps"] == [_host.WAIT_STEP_S] * 3
    assert guard.waited_s == pytest.approx(3 * _host.WAIT_STEP_S)
    assert guard.all_slow == 0 and guard.best_ns == 30.0
    report = guard.report()
    assert report.reference_ns == 31.0 and report.waited_s == pytest.approx(0.15)


def test_the_report_gives_the_childs_own_fastest_probe_not_the_reference(cores) -> None:
    cores["speed"] = {15: 34.0, 13: 35.0}  # within 1.35x of the reference: no wait
    guard = CoreGuard([15, 13], reference_ns=31.0, max_wait_s=2.0)
    guard.settle()
    assert guard.best_ns == 31.0  # the yardstick stays the reference
    assert guard.still_fast() and guard.report().probe_ns == 34.0
    assert guard.report().reference_ns == 31.0


def test_the_wait_is_bounded_then_the_slowed_host_is_the_reference(cores, clock) -> None:
    cores["speed"] = {15: 52.0, 13: 50.0}  # never recovers
    guard = CoreGuard([15, 13], reference_ns=31.0, max_wait_s=0.12)
    guard.settle()
    assert sum(clock["sleeps"]) == pytest.approx(0.12)  # 0.05 + 0.05 + 0.02
    assert guard.all_slow == 1 and guard.best_ns == 50.0 and cores["pinned"] == 13
    cores["speed"] = {15: 80.0, 13: 75.0}  # slower still: the wait is spent, no more sleeps
    guard.settle()
    assert sum(clock["sleeps"]) == pytest.approx(0.12) and guard.all_slow == 2


def test_without_a_reference_the_first_settle_never_waits(cores, clock) -> None:
    cores["speed"] = {15: 52.0, 13: 50.0}
    guard = CoreGuard([15, 13], max_wait_s=2.0)
    guard.settle()
    assert clock["sleeps"] == [] and guard.best_ns == 50.0 and guard.all_slow == 0


def test_a_reference_must_be_a_positive_number() -> None:
    with pytest.raises(ValueError, match="reference_ns must be a positive number"):
        CoreGuard([1], reference_ns=0.0)


def test_the_host_reference_is_the_median_of_recent_children_per_device() -> None:
    ref = HostReference(keep=3)
    assert ref.get("cuda:0") is None
    for ns in (30.0, 31.0, 52.0):  # one child ran on a slowed host: the median ignores it
        ref.note("cuda:0", ns)
    ref.note("cuda:0", None)  # a record without a probe
    ref.note("cuda:0", math.nan)
    assert ref.get("cuda:0") == 31.0
    assert ref.get("cuda:1") is None  # another GPU's worker keeps its own
    for ns in (50.0, 51.0):  # the host stays slow: the reference follows it
        ref.note("cuda:0", ns)
    assert ref.get("cuda:0") == 51.0


def test_an_evaluation_hands_the_reference_to_its_child_and_notes_its_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from passnet.evaluate import _evaluate
    from passnet.isolate import ChildOutcome
    from tests.conftest import MLP

    sent = []

    def fake_run_isolated_items(
        target: Any, args: tuple[Any, ...], items: int, timeout_s: float, **kw: Any
    ) -> list[ChildOutcome]:
        sent.append(args[0].host_reference_ns)
        host = CoreGuard([5], reference_ns=args[0].host_reference_ns).report()
        host.probe_ns = 30.0 + len(sent)
        result = {"status": "ok", "host": dataclasses.asdict(host), "phases_s": {}}
        outcome = ChildOutcome(result, "done", 0, False, 0.01)
        kw["on_outcome"](outcome)
        return [outcome]

    monkeypatch.setattr(_evaluate, "run_isolated_items", fake_run_isolated_items)
    monkeypatch.setattr(_evaluate, "HOST_REFERENCE", HostReference())
    first = _evaluate.evaluate_sample(MLP, "eager", device="cuda:0")
    second = _evaluate.evaluate_sample(MLP, "eager", device="cuda:0")
    assert sent == [None, 31.0]  # the first child has no reference, the second the first's probe
    assert first.host.probe_ns == 31.0 and second.host.reference_ns == 31.0


def test_a_single_slow_probe_is_a_blip_two_in_a_row_a_slowdown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readings = iter([30.0, 30.0, 55.0, 31.0, 55.0, 56.0])
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, which: None, raising=False)
    monkeypatch.setattr(CoreGuard, "probe", lambda self: next(readings))
    guard = CoreGuard([7])
    guard.settle()  # 30
    assert guard.still_fast() is True  # 30
    assert guard.still_fast() is True  # 55, then 31: a blip
    assert guard.still_fast() is False  # 55, then 56: slowed down
    assert (guard.checks, guard.slow_checks) == (3, 1)


@pytest.mark.gpu
def test_a_cuda_evaluation_reports_its_timing_core_and_the_next_gets_a_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from passnet.evaluate import EvalSettings, _evaluate, evaluate_sample
    from tests.conftest import MLP

    monkeypatch.setattr(_evaluate, "HOST_REFERENCE", HostReference())
    fast = EvalSettings(warmup=2, trials=20, max_extra_s=0.0)
    first = evaluate_sample(MLP, "eager", device="cuda", settings=fast)
    second = evaluate_sample(MLP, "eager", device="cuda", settings=fast)
    assert first.status is Status.OK and first.host is not None
    assert first.host.core in first.host.cores and first.host.checks > 0
    assert first.host.probe_ns and 0 < first.host.probe_ns < 1000
    assert first.host.reference_ns is None
    assert second.host is not None and second.host.reference_ns == first.host.probe_ns
    unguarded = evaluate_sample(
        MLP, "eager", device="cuda", settings=dataclasses.replace(fast, core_guard=False)
    )
    assert unguarded.status is Status.OK and unguarded.host is None


def test_the_report_gives_the_median_of_the_round_probes(cores: dict[str, Any]) -> None:
    cores["speed"] = {15: 30.0}
    guard = CoreGuard([15])
    guard.settle()  # the settle's probe is not a round's
    for ns in (32.0, 34.0, 31.0):
        cores["speed"][15] = ns
        guard.still_fast()
    assert guard.report().probe_median_ns == 32.0
    assert guard.report().probe_ns == 30.0  # the fastest stays the settle's
    assert CoreGuard([15]).report().probe_median_ns is None
