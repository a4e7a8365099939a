"""The GPU's clocks during timing: read through NVML between rounds, summarized in the
record (``EvalRecord.gpu``), and absent without a GPU rather than an error.

Readings are scripted here; the one GPU test reads a real device.
"""

from __future__ import annotations

import ctypes
import dataclasses

import pytest

from passnet.evaluate import _gpu_clock
from passnet.evaluate._gpu_clock import ClockMonitor, ClockSample, open_clock_monitor, reason_names
from passnet.record import EvalRecord, record_from_json
from passnet.status import Status

from .test_timing import Script, steady


def scripted(samples: list[ClockSample | Exception], limit: int | None = 1980) -> ClockMonitor:
    readings = iter(samples)

    def read() -> ClockSample:
        value = next(readings)
        if isinstance(value, Exception):
            raise value
        return value

    return ClockMonitor(read, limit)


def test_the_report_summarizes_the_readings() -> None:
    monitor = scripted(
        [
            ClockSample(1980, 3201, 41, 180.0, 0),
            ClockSample(1755, 3201, 44, 420.0, 0x4),  # held back by the power cap
            ClockSample(1980, 3201, 43, 200.5, 0x1),
        ]
    )
    for _ in range(3):
        monitor.sample()
    report = monitor.report()
    assert report is not None
    assert (report.samples, report.sm_mhz_min, report.sm_mhz_max) == (3, 1755, 1980)
    assert report.sm_mhz_median == 1980.0 and report.sm_mhz_limit == 1980
    assert report.below_limit_samples == 1
    assert report.mem_mhz_median == 3201.0 and report.temperature_c_max == 44
    assert report.power_w_median == 200.5
    assert report.reasons == ["gpu_idle", "sw_power_cap"]


def test_a_failed_reading_is_counted_and_skipped() -> None:
    monitor = scripted([OSError("nvmlDeviceGetClockInfo failed"), ClockSample(1500)], limit=None)
    monitor.sample()
    assert monitor.report() is None  # nothing read yet: no report rather than zeros
    monitor.sample()
    report = monitor.report()
    assert monitor.failed == 1 and report is not None and report.samples == 1
    assert report.below_limit_samples is None  # no limit known: nothing to compare with
    assert report.mem_mhz_median is None and report.power_w_median is None
    assert report.reasons == []


def test_reason_names_keep_unknown_bits() -> None:
    assert reason_names(0) == []
    assert reason_names(0x20 | 0x40) == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert reason_names(0x8 | 0x10000) == ["hw_slowdown", "0x10000"]


def test_the_timing_loop_reads_the_clocks_after_warm_up_and_each_round() -> None:
    script = Script({"compiled": steady(1.0), "eager": steady(2.0)})
    reads: list[int] = []

    def read() -> ClockSample:
        reads.append(len(script.calls))  # how many calls had run when the clock was read
        return ClockSample(1980)

    monitor = ClockMonitor(read, 1980)
    script.measure(warmup=1, trials=8, rounds=2, clocks=monitor)
    # warm-up: 1 call per side, plus none for min_warmup_s; then 2 rounds of 4 + 4 calls
    assert reads == [2, 10, 18]
    assert monitor.report() is not None and monitor.report().samples == 3


def test_no_gpu_means_no_monitor(monkeypatch: pytest.MonkeyPatch) -> None:
    assert open_clock_monitor("cpu") is None

    def missing(name: str, *args: object, **kwargs: object) -> ctypes.CDLL:
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(_gpu_clock.ctypes, "CDLL", missing)
    assert open_clock_monitor("cuda:0") is None


def test_the_gpu_report_round_trips_through_a_record() -> None:
    rec = EvalRecord("g", "h" * 64, "inductor", {}, "cfg", "cuda", Status.OK)
    assert record_from_json(rec.to_json()).gpu is None  # records without it load
    monitor = scripted([ClockSample(1980, 3201, 40, 150.0, 0x4)])
    monitor.sample()
    rec.gpu = monitor.report()
    back = record_from_json(rec.to_json())
    assert back.gpu == rec.gpu and back.gpu.reasons == ["sw_power_cap"]


@pytest.mark.gpu
def test_a_cuda_evaluation_reports_the_gpu_clocks() -> None:
    from passnet.evaluate import EvalSettings, evaluate_sample
    from tests.conftest import MLP

    monitor = open_clock_monitor("cuda")
    assert monitor is not None, "NVML should answer on a machine with an NVIDIA driver"
    monitor.sample()
    first = monitor.report()
    assert first is not None and 100 < first.sm_mhz_median <= (first.sm_mhz_limit or 10**5)
    rec = evaluate_sample(
        MLP, "eager", device="cuda", settings=EvalSettings(warmup=2, trials=20, max_extra_s=0.0)
    )
    assert rec.status is Status.OK and rec.gpu is not None
    assert rec.gpu.samples >= 2  # after warm-up and after each round
    assert rec.gpu.sm_mhz_min <= rec.gpu.sm_mhz_median <= rec.gpu.sm_mhz_max
    assert dataclasses.asdict(rec.gpu)["sm_mhz_limit"] == first.sm_mhz_limit
