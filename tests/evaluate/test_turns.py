"""Timing turns (``--overlap``): a turn stops the members it covers and continues them
after; a member killed in its turn stops nobody for good."""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from passnet.evaluate import EvalSettings, Turns
from passnet.runner import LocalExecutor, run_evaluations
from passnet.status import Status
from tests.conftest import MLP

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

FORK = multiprocessing.get_context("fork")


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]


def _member(turns: Turns, device: int, joined: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    turns.join(device)
    joined.set()
    while True:
        time.sleep(0.01)


def _timer(turns: Turns, device: int, inside: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    turns.join(device)
    with turns.turn():
        inside.set()
        while True:  # killed here, in its turn
            time.sleep(0.01)


@pytest.fixture
def turns() -> Iterator[Turns]:
    made = Turns.create("host", 2)
    yield made
    made.remove()


def _start(target, *args) -> tuple[multiprocessing.Process, multiprocessing.Event]:  # type: ignore[no-untyped-def,valid-type]
    event = FORK.Event()
    process = FORK.Process(target=target, args=(*args, event), daemon=True)
    process.start()
    assert event.wait(10)
    return process, event


def _wait_state(pid: int, wanted: str) -> str:
    deadline = time.monotonic() + 5
    while _state(pid) != wanted and time.monotonic() < deadline:
        time.sleep(0.01)
    return _state(pid)


def test_a_turn_stops_the_other_members_and_continues_them_after(turns: Turns) -> None:
    member, _ = _start(_member, turns, 0)
    try:
        with turns.turn() as report:
            assert _wait_state(member.pid, "T") == "T"
            assert report.paused == 1 and report.scope == "host" and report.slots == 2
        assert _wait_state(member.pid, "S") != "T"
        assert report.began <= report.ended
    finally:
        member.kill()


def test_a_device_turn_leaves_the_members_of_other_gpus_running() -> None:
    turns = Turns.create("device", 2)
    same, _ = _start(_member, turns, 0)
    other, _ = _start(_member, turns, 1)
    try:
        turns.join(0)
        with turns.turn() as report:
            assert _wait_state(same.pid, "T") == "T"
            assert _state(other.pid) != "T" and report.paused == 1
        assert _wait_state(same.pid, "S") != "T"
    finally:
        same.kill()
        other.kill()
        turns.remove()


def test_a_member_killed_in_its_turn_stops_nobody_for_good(turns: Turns) -> None:
    member, _ = _start(_member, turns, 0)
    timer, _ = _start(_timer, turns, 0)
    try:
        assert _wait_state(member.pid, "T") == "T"
        os.kill(timer.pid, signal.SIGKILL)
        timer.join(5)
        turns.recover()  # what the executor does whenever an evaluation ends
        assert _wait_state(member.pid, "S") != "T"
    finally:
        member.kill()


def test_a_member_joining_during_a_turn_waits_for_its_end(turns: Turns) -> None:
    timer, _ = _start(_timer, turns, 0)
    try:
        started = time.monotonic()
        killer = FORK.Process(target=_kill_later, args=(timer.pid, 0.5), daemon=True)
        killer.start()
        turns.join(0)  # returns once no live turn covers this process
        assert time.monotonic() - started >= 0.4
    finally:
        timer.kill()


def _kill_later(pid: int, seconds: float) -> None:
    time.sleep(seconds)
    os.kill(pid, signal.SIGKILL)


def test_an_unknown_scope_is_refused() -> None:
    with pytest.raises(ValueError, match="host, device"):
        Turns("/nonexistent", "gpu")


def test_overlapping_evaluations_are_timed_one_at_a_time(tmp_path: Path) -> None:
    """Two real evaluations per device at once (on the CPU here; --overlap is for CUDA):
    each record tells its turn, and no two turns overlap."""
    settings = EvalSettings(warmup=2, trials=20, min_warmup_s=0.0, adaptive=False)
    before = set(Path(tempfile.gettempdir()).glob("passnet-turns-*"))
    summary = run_evaluations(
        _mlp_items(tmp_path, 3),
        compiler="eager",
        device="cpu",
        settings=settings,
        out_dir=tmp_path / "run",
        executor=LocalExecutor(["cpu"], overlap=2),
        echo_logs=False,
    )
    records = summary.records
    assert [r.status for r in records] == [Status.OK] * 3
    turns = sorted((r.turn.began, r.turn.ended) for r in records if r.turn is not None)
    assert len(turns) == 3
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(turns, turns[1:]))
    assert all(r.turn.slots == 2 and r.turn.scope == "host" for r in records if r.turn)
    assert all("turn" in r.phases_s for r in records)
    assert set(Path(tempfile.gettempdir()).glob("passnet-turns-*")) <= before  # removed


def _mlp_items(tmp_path: Path, n: int) -> list:  # type: ignore[type-arg]
    """``n`` copies of the tiny MLP sample, as separate graphs."""
    import shutil

    from passnet.runner import plan_items

    for i in range(n):
        shutil.copytree(MLP, tmp_path / "samples" / f"mlp{i}")
    return plan_items([tmp_path / "samples"])


def test_the_state_of_a_killed_run_is_swept_by_the_next_run() -> None:
    stale = Turns.create("host", 2)
    dead = FORK.Process(target=time.sleep, args=(0,))
    dead.start()
    dead.join()
    (Path(stale.folder) / "members" / str(dead.pid)).write_text("0")
    os.utime(stale.folder, (time.time() - 120, time.time() - 120))
    live = Turns.create("host", 2)  # the next run
    try:
        assert not Path(stale.folder).exists()
        assert Path(live.folder).exists()
    finally:
        live.remove()
        stale.remove()


# -- a turn that never ends: its holder waits on what a member it stopped holds ----------


def _lock_holder(
    turns: Turns,
    device: int,
    lock_path: str,
    holding: multiprocessing.Event,  # type: ignore[valid-type]
) -> None:
    """A member that holds a file lock (as a compile holds Inductor's) until a turn has
    stopped it and it has been continued, then 0.3 s more: stopped, it keeps it. (Holding
    it for a fixed time instead, a loaded machine let it go before any turn began.)"""
    import fcntl
    import signal

    continued = []
    signal.signal(signal.SIGCONT, lambda *_: continued.append(True))
    turns.join(device)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        holding.set()
        while not continued:
            time.sleep(0.01)
        for _ in range(30):
            time.sleep(0.01)
    while True:
        time.sleep(0.01)


def _lock_waiter(
    turns: Turns,
    device: int,
    lock_path: str,
    go: multiprocessing.Event,  # type: ignore[valid-type]
    reports: multiprocessing.Queue,  # type: ignore[type-arg]
) -> None:
    """A member whose turn needs the lock (as a timing turn the GPU or a cache): sends its
    turn's report once it had it, and whether the lock was free when the turn ended."""
    import dataclasses
    import fcntl

    turns.join(device)
    go.wait(10)
    with turns.turn() as report:
        reports.put(("in turn", os.getpid()))
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_UN)
    reports.put(("done", dataclasses.asdict(report)))
    while True:
        time.sleep(0.01)


def _crossing(turns: Turns, tmp_path: Path, pairs: list[tuple[int, int]]):  # type: ignore[no-untyped-def]
    """For each (device of the lock's holder, device of its waiter): a member holding a lock
    and a member on the holder's device whose turn (stopping the holder) needs it; with
    ``pairs`` [(0, 1), (1, 0)] each device's turn needs a lock a member of the other holds,
    which the other's turn stopped. Returns the processes and the waiters' report queue."""
    processes, holders = [], []
    go = FORK.Event()
    reports: multiprocessing.Queue = FORK.Queue()  # type: ignore[type-arg]
    for i, (holder_device, _) in enumerate(pairs):
        lock = str(tmp_path / f"lock{i}")
        holder, holding = _start(_lock_holder, turns, holder_device, lock)
        processes.append(holder)
        holders.append(holder)
    for i, (_, waiter_device) in enumerate(pairs):
        waiter = FORK.Process(
            target=_lock_waiter,
            args=(turns, waiter_device, str(tmp_path / f"lock{i}"), go, reports),
            daemon=True,
        )
        waiter.start()
        processes.append(waiter)
    time.sleep(0.2)  # every member joined
    go.set()
    return processes, holders, reports


def _reports(reports: multiprocessing.Queue, n: int, within_s: float) -> list[dict]:  # type: ignore[type-arg]
    done, deadline = [], time.monotonic() + within_s
    while len(done) < n and time.monotonic() < deadline:
        try:
            kind, payload = reports.get(timeout=0.1)
        except Exception:  # noqa: BLE001 - queue.Empty
            continue
        if kind == "done":
            done.append(payload)
    return done


@pytest.mark.parametrize(
    ("scope", "pairs"),
    [
        ("host", [(0, 0)]),  # the turn stopped the lock's holder itself
        ("device", [(0, 1), (1, 0)]),  # two GPUs' turns, each needing the other's lock
    ],
)
def test_a_turn_waiting_on_a_member_it_stopped_is_broken_within_its_bound(
    tmp_path: Path, scope: str, pairs: list[tuple[int, int]]
) -> None:
    turns = Turns.create(scope, 2, max_turn_s=0.5)
    processes, holders, reports = _crossing(turns, tmp_path, pairs)
    try:
        with turns.watching(interval_s=0.1):  # what the executor does while a run lasts
            done = _reports(reports, len(pairs), within_s=5)
        assert len(done) == len(pairs)
        for report in done:
            assert report["broken_after_s"] is not None
            assert 0.4 <= report["broken_after_s"] < 2.0
            assert report["ended"] - report["began"] > report["broken_after_s"]  # disturbed
        assert all(_state(h.pid) != "T" for h in holders)  # continued
        assert not list((Path(turns.folder) / "broken").iterdir())  # ended turns leave none
    finally:
        for process in processes:
            process.kill()
        turns.remove()


def test_without_a_bound_such_a_turn_never_ends(tmp_path: Path) -> None:
    """The deadlock itself: the same processes as above, turns never broken."""
    turns = Turns.create("device", 2)
    processes, holders, reports = _crossing(turns, tmp_path, [(0, 1), (1, 0)])
    try:
        with turns.watching(interval_s=0.1):  # does nothing without a bound
            assert _reports(reports, 2, within_s=1.5) == []
        assert all(_state(h.pid) == "T" for h in holders)
    finally:
        for process in processes:
            process.kill()
        turns.remove()


def test_a_turn_within_its_bound_is_not_broken(turns: Turns) -> None:
    bounded = Turns(turns.folder, "host", 2, max_turn_s=30.0)
    member, _ = _start(_member, bounded, 0)
    try:
        with bounded.turn() as report:
            assert _wait_state(member.pid, "T") == "T"
            assert bounded.break_stalled() == []
            assert bounded.break_stalled(now=time.time() + 10) == []
        assert report.broken_after_s is None
    finally:
        member.kill()


def test_a_broken_turn_is_reported_once_and_not_taken_for_the_next(turns: Turns) -> None:
    bounded = Turns(turns.folder, "host", 2, max_turn_s=30.0)
    member, _ = _start(_member, bounded, 0)
    try:
        with bounded.turn() as first:
            assert _wait_state(member.pid, "T") == "T"
            assert bounded.break_stalled(now=time.time() + 60) == [os.getpid()]
            assert bounded.break_stalled(now=time.time() + 61) == []  # once
            assert _wait_state(member.pid, "S") != "T"  # continued within the turn
        assert first.broken_after_s is not None and first.broken_after_s >= 59
        with bounded.turn() as second:  # a fresh turn stops the member again
            assert _wait_state(member.pid, "T") == "T"
        assert second.broken_after_s is None
    finally:
        member.kill()


def _stopped_lock_holder(turns: Turns, holding: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    """Holds the turn state's own lock until continued."""
    import fcntl

    turns.join(0)
    with open(Path(turns.folder) / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        holding.set()
        os.kill(os.getpid(), signal.SIGSTOP)
        for _ in range(10):
            time.sleep(0.01)
    while True:
        time.sleep(0.01)


def test_a_member_stopped_holding_the_state_lock_is_continued_without_it(
    turns: Turns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a stopped process holds the turn state's lock, breaking a turn continues the
    members it paused without that lock (beginning a turn takes it: none can begin)."""
    import passnet.evaluate._turns as turns_module

    monkeypatch.setattr(turns_module, "LOCK_WAIT_S", 0.2)
    bounded = Turns(turns.folder, "host", 2, max_turn_s=30.0)
    bounded.join(0)
    holder, _ = _start(
        _stopped_lock_holder,
        bounded,
    )
    try:
        assert _wait_state(holder.pid, "T") == "T"
        # as the turn that stopped it would have left things
        (Path(turns.folder) / "timing" / str(os.getpid())).write_text("0")
        (Path(turns.folder) / "paused" / str(holder.pid)).write_text("0")
        started = time.monotonic()
        assert bounded.break_stalled(now=time.time() + 60) == [os.getpid()]
        assert time.monotonic() - started < 2
        assert _wait_state(holder.pid, "S") != "T"
        bounded.recover()  # the lock is free again
    finally:
        holder.kill()


def test_the_executor_breaks_a_stalled_turn_within_the_bound_of_its_settings(
    tmp_path: Path,
) -> None:
    """A run whose one evaluation's turn waits on a lock the other evaluation holds: the
    LocalExecutor breaks it at its settings' bound (half the timeout here), the run ends,
    and the waiter's record says its timing turn was broken."""
    import threading

    from passnet.record import EvalRecord, TurnReport

    lock = str(tmp_path / "lock")
    holding, waited = threading.Event(), threading.Event()

    def evaluate(path, compiler, config, device, settings, *, turns, graph_label, **_):  # type: ignore[no-untyped-def]
        record = EvalRecord(graph_label, "h" * 64, compiler, config, "cfg", device, Status.OK)
        if graph_label.endswith("mlp0"):  # holds the lock the other's turn needs
            holder, _ = _start(_lock_holder, turns, 0, lock)
            holding.set()
            waited.wait(20)
            holder.kill()
            return record
        assert holding.wait(20)
        go, reports = FORK.Event(), FORK.Queue()
        go.set()
        waiter = FORK.Process(target=_lock_waiter, args=(turns, 0, lock, go, reports))
        waiter.start()
        done = _reports(reports, 1, within_s=10)
        waited.set()
        waiter.kill()
        record.turn = TurnReport(**done[0]) if done else None
        return record

    settings = EvalSettings(warmup=2, trials=20, timeout_s=1.0, max_measure_s=60.0)
    summary = run_evaluations(
        _mlp_items(tmp_path, 2),
        compiler="eager",
        device="cpu",
        settings=settings,
        out_dir=tmp_path / "run",
        executor=LocalExecutor(["cpu"], overlap=2, evaluate=evaluate),
        echo_logs=False,
    )
    waiter = next(r for r in summary.records if r.graph.endswith("mlp1"))
    assert waiter.turn is not None and waiter.turn.broken_after_s is not None
    assert 0.4 <= waiter.turn.broken_after_s < 2.0  # turn_bound_s(settings) = 0.5 s
    assert any("timing turn broken" in remark for remark in waiter.timing_remarks())


def test_a_turn_is_bounded_by_the_measuring_bound_and_half_the_timeout() -> None:
    from passnet.evaluate import TURN_MARGIN_S, turn_bound_s

    assert turn_bound_s(EvalSettings(max_measure_s=60.0, timeout_s=600.0)) == 60 + TURN_MARGIN_S
    assert turn_bound_s(EvalSettings(max_measure_s=60.0, timeout_s=180.0)) == 90.0
    assert turn_bound_s(EvalSettings(max_measure_s=None, timeout_s=600.0)) == 300.0


def test_a_member_stopped_holding_the_state_lock_outside_any_turn_is_continued(
    turns: Turns, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every join, leave and turn of every GPU waits for the state's lock: a member that
    holds it stopped (by whatever) would stop the whole run; the watcher continues it."""
    import passnet.evaluate._turns as turns_module

    monkeypatch.setattr(turns_module, "LOCK_STUCK_S", 0.3)
    bounded = Turns(turns.folder, "host", 2, max_turn_s=30.0)
    holder, _ = _start(_stopped_lock_holder, bounded)
    try:
        assert _wait_state(holder.pid, "T") == "T"
        with bounded.watching(interval_s=0.1):
            assert _wait_state(holder.pid, "S") != "T"
            bounded.recover()  # the lock is free again
    finally:
        holder.kill()


def test_without_the_watcher_such_a_member_stops_the_run(turns: Turns) -> None:
    holder, _ = _start(_stopped_lock_holder, turns)
    try:
        assert _wait_state(holder.pid, "T") == "T"
        time.sleep(0.5)
        assert _state(holder.pid) == "T" and not turns._lock_free()
    finally:
        holder.kill()


def test_a_stopped_holder_of_a_broken_turn_is_continued(turns: Turns) -> None:
    bounded = Turns(turns.folder, "host", 2, max_turn_s=30.0)
    timer, _ = _start(_timer, bounded, 0)
    try:
        os.kill(timer.pid, signal.SIGSTOP)
        assert _wait_state(timer.pid, "T") == "T"
        assert bounded.break_stalled(now=time.time() + 60) == [timer.pid]
        assert _wait_state(timer.pid, "S") != "T"
    finally:
        timer.kill()
