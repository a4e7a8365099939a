"""The forkserver that isolated children fork from: it has already imported the heavy
modules its callers name, and it lays its children out alike in every run
(``fixed_layout``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from passnet.isolate import no_randomization_for_exec, run_isolated, run_isolated_items


def _modules_at_start(send: Any) -> None:
    names = ("torch._dynamo", "torch._functorch.aot_autograd", "passnet.passes")
    send(("result", {name: name in sys.modules for name in names}))


def test_evaluation_children_start_with_dynamo_and_passnet_imported() -> None:
    # Every child's first torch.compile would otherwise import them again (~2 s on the
    # development CPU; benchmarks/bench_startup.py).
    from passnet.evaluate import FORKSERVER_PRELOAD

    outcome = run_isolated(_modules_at_start, (), timeout_s=120, preload=FORKSERVER_PRELOAD)
    assert outcome.result == {
        "torch._dynamo": True,
        "torch._functorch.aot_autograd": True,
        "passnet.passes": True,
    }


def _imported(names: list[str], send: Any) -> None:
    send(("result", {name: name in sys.modules for name in names}))


def test_a_caller_names_its_preload_and_a_later_caller_adds_to_it(tmp_path: Path) -> None:
    """Each caller passes the modules its children need: a server started without one is
    restarted (no child running) with it, and keeps what earlier callers asked for."""
    for name in ("passnet_preload_a", "passnet_preload_b"):
        (tmp_path / f"{name}.py").write_text("")
    script = (
        "import sys, json\n"
        "from passnet.isolate import run_isolated\n"
        "from tests.isolate.test_isolate import _imported\n"
        "names = ['passnet_preload_a', 'passnet_preload_b']\n"
        "first = run_isolated(_imported, (names,), 120, preload=['passnet_preload_a'])\n"
        "second = run_isolated(_imported, (names,), 120, preload=['passnet_preload_b'])\n"
        "print(json.dumps([first.result, second.result]))\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root), str(tmp_path)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    # a child of the first server has what its caller asked for, not the other's module
    assert first == {"passnet_preload_a": True, "passnet_preload_b": False}
    # the restarted server preloads both (the child imports neither itself)
    assert second == {"passnet_preload_a": True, "passnet_preload_b": True}


def _report_pid_then_hang(pid_file: str, send: Any) -> None:
    Path(pid_file).write_text(str(os.getpid()))
    send(("stage", "hang"))
    time.sleep(3600)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # a zombie has ended; only its reaping is left


_HARNESS = """
import sys
from passnet.isolate import run_isolated
from tests.isolate.test_isolate import _report_pid_then_hang
run_isolated(_report_pid_then_hang, (sys.argv[1],), timeout_s=3600)
"""


def _start_harness(
    script: str, pid_file: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A Python process running ``script`` (it writes its isolated child's pid to
    ``pid_file``) with passnet from this checkout."""
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{repo / 'src'}{os.pathsep}{repo}", **(env or {})}
    return subprocess.Popen([sys.executable, "-c", script, str(pid_file)], env=env, cwd=repo)


def _child_of(harness: subprocess.Popen[bytes], pid_file: Path) -> int:
    """The pid ``harness`` writes to ``pid_file`` once its child started (2 minutes at most)."""
    deadline = time.time() + 120
    while not (pid_file.exists() and pid_file.read_text()) and time.time() < deadline:
        assert harness.poll() is None, "the harness ended before its child started"
        time.sleep(0.1)
    return int(pid_file.read_text())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux's")
def test_a_hanging_child_does_not_outlive_a_killed_harness(tmp_path: Path) -> None:
    # kill -9 of `passnet eval` alone (not its process group): the forkserver sees its
    # pipe from the harness close and exits, and the kernel then kills the child.
    harness = _start_harness(_HARNESS, tmp_path / "child.pid")
    try:
        child = _child_of(harness, tmp_path / "child.pid")
        assert not _gone(child)
        harness.kill()
        harness.wait()
        deadline = time.time() + 30
        while not _gone(child) and time.time() < deadline:
            time.sleep(0.1)
        if not _gone(child):
            os.kill(child, signal.SIGKILL)
            raise AssertionError(f"child {child} still ran 30 s after its harness was killed")
    finally:
        if harness.poll() is None:
            harness.kill()


def _provisional_then(end: str, send: Any) -> None:
    send(("provisional", {"status": "ok", "n": 1}))
    send(("stage", "replay"))
    if end == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if end == "hang":
        time.sleep(3600)
    send(("result", {"status": "ok", "n": 2}))


@pytest.mark.parametrize(
    ("end", "expected", "from_provisional"),
    [("finish", 2, False), ("die", 1, True), ("hang", 1, True)],
)
def test_a_provisional_result_stands_when_the_child_ends_before_its_final_one(
    end: str, expected: int, from_provisional: bool
) -> None:
    outcome = run_isolated(_provisional_then, (end,), timeout_s=3 if end == "hang" else 120)
    assert outcome.result == {"status": "ok", "n": expected}
    assert outcome.from_provisional is from_provisional
    assert outcome.last_stage == "replay"
    assert outcome.timed_out is (end == "hang")


def _layout(send: Any) -> None:
    import torch

    from passnet.isolate import layout_fixed

    # torch was imported by the forkserver: its address is where that server put it
    send(("result", {"fixed": layout_fixed(), "torch_at": id(torch)}))


def _kernel_allows_fixed_layouts() -> bool:
    with no_randomization_for_exec() as switched_off:
        if not switched_off:
            return False
    return Path("/proc/sys/kernel/randomize_va_space").read_text().strip() != "0"


def test_fixed_layout_children_are_laid_out_alike_across_forkserver_starts() -> None:
    """What makes two runs of one command comparable: each run starts its own forkserver,
    and with ``fixed_layout`` their children find their memory at the same addresses."""
    if not _kernel_allows_fixed_layouts():
        pytest.skip("this kernel randomizes every layout or refuses ADDR_NO_RANDOMIZE")
    seen = []
    # Each change restarts the forkserver (no child runs). Random first: a server that
    # earlier tests started (in another environment, which moves the layout) is replaced,
    # so both fixed layouts below come from servers started here, as two runs' would.
    for fixed in (False, True, False, True):
        outcome = run_isolated(_layout, (), timeout_s=120, fixed_layout=fixed, preload=["torch"])
        assert outcome.result is not None, outcome
        assert outcome.result["fixed"] is fixed
        seen.append(outcome.result["torch_at"])
    assert seen[1] == seen[3]  # two server starts, the same layout
    assert seen[2] != seen[1]  # a randomized start lands elsewhere
    # no preference: the running server's layout, whatever it is
    again = run_isolated(_layout, (), timeout_s=120)
    assert again.result is not None and again.result["fixed"] is True


def test_the_record_says_whether_the_childs_layout_was_fixed() -> None:
    from passnet.evaluate import EvalSettings, evaluate_sample
    from tests.conftest import MLP

    fast = EvalSettings(warmup=1, trials=5, max_extra_s=0.0)
    rec = evaluate_sample(MLP, "eager", settings=fast)
    assert rec.settings["fixed_layout"] is True
    assert rec.layout_fixed is _kernel_allows_fixed_layouts()


def _items(ends: list[str], send: Any) -> None:
    for i, end in enumerate(ends):
        send(("stage", f"item{i}"))
        if end == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if end == "hang":
            time.sleep(3600)
        send(("result", {"item": i, "pid": os.getpid()}))


def test_items_share_one_child_and_come_back_in_order() -> None:
    heard: list[int] = []
    outcomes = run_isolated_items(
        _items,
        (["ok", "ok", "ok"],),
        3,
        timeout_s=120,
        on_outcome=lambda o: heard.append(o.result["item"]),
    )
    assert [o.result["item"] for o in outcomes] == [0, 1, 2] == heard
    assert len({o.result["pid"] for o in outcomes}) == 1
    assert [o.last_stage for o in outcomes] == ["item0", "item1", "item2"]
    assert outcomes[-1].exitcode == 0


@pytest.mark.parametrize("end", ["die", "hang"])
def test_an_item_that_ends_its_child_is_the_last_outcome(end: str) -> None:
    """The items after it are not run: the caller decides where they go."""
    started = time.perf_counter()
    outcomes = run_isolated_items(_items, (["ok", end, "ok"],), 3, timeout_s=3)
    assert [o.result for o in outcomes[:1]] == [{"item": 0, "pid": outcomes[0].result["pid"]}]
    assert len(outcomes) == 2
    failed = outcomes[1]
    assert failed.result is None and failed.last_stage == "item1"
    assert failed.timed_out is (end == "hang")
    if end == "die":
        assert failed.signal_name == "SIGKILL"
    # the timeout is the item's own, counted from its first message
    assert time.perf_counter() - started < 60


def test_items_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="items must be >= 1"):
        run_isolated_items(_items, ([],), 0, timeout_s=10)


def test_should_stop_ends_the_child_and_the_item_in_progress_gets_no_outcome() -> None:
    outcomes: list[Any] = []
    started = time.perf_counter()
    returned = run_isolated_items(
        _items,
        (["ok", "hang", "ok"],),
        3,
        timeout_s=600,
        on_outcome=outcomes.append,
        should_stop=lambda: bool(outcomes),  # stop once the first item is decided
    )
    assert [o.result["item"] for o in returned] == [0] == [o.result["item"] for o in outcomes]
    assert time.perf_counter() - started < 60  # not the hanging item's 600 s


def test_a_killed_process_not_yet_reaped_counts_as_dead() -> None:
    """What the sweeps of dead workers' copies and dead members' turns rely on."""
    import subprocess
    import time

    from passnet.isolate import process_alive

    child = subprocess.Popen(["sleep", "30"])
    try:
        assert process_alive(child.pid)
        child.kill()
        time.sleep(0.3)  # dead, not reaped: signal 0 still reaches a zombie
        assert not process_alive(child.pid)
    finally:
        child.wait()


def _stopped_then_waiting(pid_file: str, send: Any) -> None:
    """Reports its pid, then waits in C on a lock it can never get (as a turn holder on a
    stopped member's lock)."""
    import fcntl
    import threading

    Path(pid_file).write_text(str(os.getpid()))
    held = threading.Lock()
    held.acquire()
    with open(pid_file + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        held.acquire()  # forever


_STACKS_HARNESS = """
import sys
from passnet.isolate import run_isolated
from tests.isolate.test_isolate import _stopped_then_waiting
run_isolated(_stopped_then_waiting, (sys.argv[1],), timeout_s=3600)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs SIGUSR1")
def test_a_child_writes_its_stacks_on_sigusr1_also_when_stopped_first(tmp_path: Path) -> None:
    from passnet.isolate import STACKS_DIR_ENV

    stacks = tmp_path / "stacks"
    stacks.mkdir()
    harness = _start_harness(_STACKS_HARNESS, tmp_path / "child.pid", {STACKS_DIR_ENV: str(stacks)})
    try:
        child = _child_of(harness, tmp_path / "child.pid")
        time.sleep(0.3)  # in its wait
        os.kill(child, signal.SIGSTOP)
        os.kill(child, signal.SIGUSR1)  # pending while stopped
        time.sleep(0.3)
        written = stacks / f"{child}.txt"
        assert not written.exists() or written.read_text() == ""
        os.kill(child, signal.SIGCONT)
        deadline = time.time() + 10
        while not (written.exists() and "_stopped_then_waiting" in written.read_text()):
            assert time.time() < deadline, "no stacks written"
            time.sleep(0.05)
        assert written.read_text().count("Current thread") == 1  # once, when continued
        assert not _gone(child)  # the signal dumped the stacks, it did not end the child
    finally:
        harness.kill()
        harness.wait()
