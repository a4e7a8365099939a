"""CPU contention: the run-queue wait of the evaluation's threads while timing."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from passnet.evaluate import (
    ContentionMonitor,
    EvalSettings,
    cpu_timer,
    evaluate_sample,
    measure_interleaved,
    open_contention_monitor,
)
from passnet.evaluate._contention import (
    CONTENDED_WAIT_FRACTION,
    read_thread_schedstat,
    wait_fraction,
)
from passnet.record import EvalRecord, record_from_dict
from passnet.status import Status
from tests.conftest import MLP


def scripted(readings: list[dict[int, tuple[int, int]]]) -> ContentionMonitor:
    it = iter(readings)
    return ContentionMonitor(read=lambda: next(it))


def test_the_wait_fraction_is_the_waiting_share_of_the_ready_time() -> None:
    assert wait_fraction(900, 100) == pytest.approx(0.1)
    assert wait_fraction(0, 0) == 0.0


def test_rounds_sum_the_threads_and_the_first_reading_is_the_baseline() -> None:
    monitor = scripted(
        [
            {1: (1_000, 50), 2: (500, 0)},
            {1: (9_000_000, 50), 2: (1_000_500, 0)},  # round 1: 10 ms on a core, no wait
            # round 2: thread 2 ended, thread 3 started; 4 ms on a core, 6 ms waiting
            {1: (11_000_000, 3_000_050), 3: (2_000_000, 3_000_000)},
        ]
    )
    for _ in range(3):
        monitor.sample()
    report = monitor.report()
    assert report is not None
    assert report.rounds == 2
    assert report.on_cpu_ms == pytest.approx(
        (9_000_000 - 1_000 + 1_000_000 + 2_000_000 + 2_000_000) / 1e6
    )
    assert report.waited_ms == pytest.approx(6.0)
    assert report.worst_round_wait_fraction == pytest.approx(0.6)
    assert report.wait_fraction == pytest.approx(round(6e6 / (6e6 + 13_999_000), 4))
    assert report.contended and report.threshold == CONTENDED_WAIT_FRACTION


def test_a_little_waiting_is_not_contention() -> None:
    monitor = scripted([{1: (0, 0)}, {1: (10_000_000, 500_000)}])
    monitor.sample()
    monitor.sample()
    report = monitor.report()
    assert report is not None and report.wait_fraction == pytest.approx(0.0476, abs=1e-4)
    assert not report.contended


def test_no_report_before_two_readings_or_from_counters_that_never_move() -> None:
    one = scripted([{1: (5, 5)}])
    one.sample()
    assert one.report() is None
    still = scripted([{1: (0, 0)}, {1: (0, 0)}])  # a kernel without scheduler statistics
    still.sample()
    still.sample()
    assert still.report() is None


def test_cuda_timing_has_no_contention_monitor() -> None:
    assert open_contention_monitor("cuda:0") is None


def _schedstat_or_skip() -> None:
    try:
        read_thread_schedstat()
    except OSError:
        pytest.skip("no per-thread scheduler statistics on this kernel")


def test_the_kernel_counters_of_this_thread_move_while_it_runs() -> None:
    _schedstat_or_skip()
    me = __import__("threading").get_native_id()
    before = read_thread_schedstat()[me]
    deadline = time.perf_counter() + 0.05
    while time.perf_counter() < deadline:
        pass
    after = read_thread_schedstat()[me]
    # ready to run all along: the 50 ms were spent on a core or waiting for one
    assert (after[0] - before[0]) + (after[1] - before[1]) > 40_000_000
    assert after[0] > before[0] and after[1] >= before[1]


def test_a_record_with_contention_says_so_and_round_trips() -> None:
    d = {
        "graph": "g",
        "graph_hash": "h",
        "compiler": "eager",
        "compiler_config": {},
        "compiler_config_hash": "c",
        "device": "cpu",
        "status": "ok",
        "cpu_contention": {
            "wait_fraction": 0.41,
            "worst_round_wait_fraction": 0.7,
            "rounds": 10,
            "on_cpu_ms": 50.0,
            "waited_ms": 34.7,
            "threshold": 0.1,
            "contended": True,
        },
    }
    rec = record_from_dict(d)
    assert rec.timing_remarks() == ["CPU contended: threads waited 41% for a core"]
    assert record_from_dict(rec.to_dict()) == rec
    d["cpu_contention"]["contended"] = False
    assert record_from_dict(d).timing_remarks() == []
    old = {k: v for k, v in d.items() if k != "cpu_contention"}  # records of older versions
    assert record_from_dict(old).cpu_contention is None


def test_a_cpu_evaluation_records_its_contention() -> None:
    _schedstat_or_skip()
    # the timed calls of this 4 x 4 MLP take microseconds, less than a scheduler tick: the
    # 0.1 s of warm-up is what moves the kernel's counters
    settings = EvalSettings(warmup=2, trials=10, min_warmup_s=0.1, max_extra_s=0.0)
    rec: EvalRecord = evaluate_sample(MLP, "eager", settings=settings)
    assert rec.status is Status.OK, rec.error
    cpu = rec.cpu_contention
    assert cpu is not None and cpu.rounds > settings.rounds  # the warm-up, then the rounds
    assert cpu.on_cpu_ms > 0 and 0.0 <= cpu.wait_fraction <= 1.0
    assert cpu.contended == (cpu.wait_fraction > cpu.threshold)


def _busy_ms(ms: float) -> None:
    deadline = time.perf_counter() + ms / 1000
    while time.perf_counter() < deadline:
        pass


def _measure_wait() -> tuple[float, bool]:
    monitor = ContentionMonitor()
    measure_interleaved(
        {"a": (_busy_ms, lambda: [2.0]), "b": (_busy_ms, lambda: [2.0])},
        timer=cpu_timer,
        warmup=2,
        trials=100,
        rounds=10,
        unstable_threshold=10.0,
        max_retries=0,
        contention=monitor,
    )
    report = monitor.report()
    assert report is not None and report.rounds == 11  # the warm-up and 10 rounds
    return report.wait_fraction, report.contended


@pytest.mark.slow
def test_busy_processes_on_the_same_cores_are_flagged_and_their_absence_is_not() -> None:
    """A real competitor: 2 busy loops per allowed core, for a bounded few seconds."""
    _schedstat_or_skip()
    cores = sorted(os.sched_getaffinity(0))
    idle_before = os.getloadavg()[0] < 0.25 * len(cores)
    quiet, quiet_flag = _measure_wait()
    spin = "import time\nt = time.time()\nwhile time.time() - t < 6: pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2 * len(cores))]
    try:
        time.sleep(0.3)
        loaded, loaded_flag = _measure_wait()
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert loaded_flag, loaded
    assert loaded > 0.5 and loaded > quiet, (quiet, loaded)
    if idle_before:  # a shared machine's own load may contend the quiet measurement too
        assert not quiet_flag, quiet
