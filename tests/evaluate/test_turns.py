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
