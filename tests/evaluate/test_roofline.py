"""The roofline: work counted, ceilings measured once and cached, bound and fractions."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import statistics

import pytest
import torch

from passnet.evaluate import (
    Ceilings,
    EvalSettings,
    Work,
    ceilings,
    checked_roofline,
    cuda_timer,
    evaluate_sample,
    graph_work,
    measure_ceilings,
    roofline,
)
from tests.conftest import MLP

LIMITS = Ceilings(device="test", copy_gbps=100.0, matmul_tflops={"float32": 10.0}, launch_us=5.0)


def test_work_is_the_matmul_flops_and_the_bytes_read_and_written_once() -> None:
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    flops, moved, conv = graph_work(torch.mm, [a, b])
    assert conv == 0
    assert flops == 2 * 64 * 32 * 16
    assert moved == (64 * 32 + 32 * 16 + 64 * 16) * 4


def test_the_floor_is_the_larger_of_compute_and_memory_time_and_names_the_bound() -> None:
    compute = roofline(1e12, 1_000, torch.float32, LIMITS, eager_ms=200.0, compiled_ms=125.0)
    assert compute.bound == "compute" and compute.floor_ms == compute.compute_ms == 100.0
    assert compute.eager_fraction == 0.5 and compute.compiled_fraction == 0.8
    memory = roofline(1e3, 10**9, torch.float32, LIMITS, eager_ms=20.0, compiled_ms=None)
    assert memory.bound == "memory" and memory.floor_ms == memory.memory_ms == 10.0
    assert memory.compiled_fraction is None
    tiny = roofline(1e3, 1_000, torch.float32, LIMITS, eager_ms=0.05, compiled_ms=0.02)
    assert tiny.bound == "launch"  # a floor below two 5 us calls: launches decide


def test_an_unmeasured_dtype_takes_the_slowest_measured_rate() -> None:
    limits = Ceilings("t", 100.0, {"float32": 10.0, "bfloat16": 100.0}, 5.0)
    found = roofline(1e12, 0, torch.float64, limits, eager_ms=None, compiled_ms=None)
    assert found.matmul_tflops == 10.0


def test_ceilings_are_measured_once_per_machine_and_cached(tmp_path, monkeypatch) -> None:
    import passnet.evaluate._roofline as module

    calls = []

    def fake(device: str) -> Ceilings:
        calls.append(device)
        return LIMITS

    monkeypatch.setenv(module.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(module, "measure_ceilings", fake)
    assert ceilings("cpu") == LIMITS and ceilings("cpu") == LIMITS
    assert calls == ["cpu"] and len(list(tmp_path.glob("ceilings-*.json"))) == 1


def test_a_timed_record_carries_its_roofline(fast: EvalSettings) -> None:
    rec = evaluate_sample(MLP, "eager", settings=fast)
    roof = rec.roofline
    assert roof is not None and roof.bound == "launch"  # a 4 x 4 MLP
    assert roof.flops > 0 and roof.min_bytes > 0 and roof.floor_ms > 0
    assert 0 < roof.eager_fraction < 1 and 0 < roof.compiled_fraction < 1
    untimed = evaluate_sample(MLP, "eager", settings=EvalSettings(time_graphs=False))
    assert untimed.roofline is None


def test_float32_work_that_may_run_on_tf32_is_held_to_the_tf32_rate() -> None:
    """cuDNN runs float32 convolutions on TF32 tensor cores by default: a floor at the
    plain float32 rate would sit above what such a graph runs at (fractions above 1)."""
    limits = Ceilings("t", 100.0, {"float32": 10.0, "tfloat32": 40.0}, 5.0)

    def floor(conv: float, tf32: tuple[bool, bool], dtype=torch.float32):
        return roofline(1e12, 0, dtype, limits, eager_ms=30.0, compiled_ms=None,
                        conv_flops=conv, tf32=tf32)  # fmt: skip

    every = floor(1e12, (True, False))  # all convolutions, cuDNN's TF32 on
    assert (every.math, every.matmul_tflops, every.floor_ms) == ("tfloat32", 40.0, 25.0)
    half = floor(5e11, (True, False))  # half convolutions, products without TF32
    assert half.math == "float32+tfloat32" and half.floor_ms == 50.0 + 12.5
    assert half.matmul_tflops == 1e12 / 62.5e-3 / 1e12
    assert floor(5e11, (False, False)).floor_ms == 100.0  # TF32 off everywhere
    assert floor(0.0, (True, True)).math == "tfloat32"  # products with TF32 on
    assert floor(1e12, (True, True), torch.float16).math == "float32"  # unmeasured dtype
    cpu = roofline(1e12, 0, torch.float32, LIMITS, eager_ms=None, compiled_ms=None,
                   conv_flops=1e12, tf32=(True, True))  # fmt: skip
    assert cpu.math == "float32"  # no TF32 rate measured (a CPU)


def test_work_counts_convolution_flops_apart() -> None:
    conv = torch.nn.Conv2d(3, 8, 3)
    x = torch.randn(1, 3, 10, 10)
    work = graph_work(lambda x: conv(x).flatten(1) @ torch.ones(512, 4), [x])
    assert work.conv_flops == 2 * 8 * 8 * 8 * 3 * 3 * 3
    assert work.flops == work.conv_flops + 2 * 512 * 4


def test_cuda_ceilings_cached_without_the_tf32_rate_are_measured_again(
    tmp_path, monkeypatch
) -> None:
    import passnet.evaluate._roofline as module

    old = Ceilings("gpu", 100.0, {"float32": 10.0}, 5.0)
    new = Ceilings("gpu", 100.0, {"float32": 10.0, "tfloat32": 40.0}, 5.0)
    path = tmp_path / "ceilings-gpu.json"
    path.write_text(json.dumps(dataclasses.asdict(old)))
    monkeypatch.setattr(module, "_cache_file", lambda device: path)
    monkeypatch.setattr(module, "measure_ceilings", lambda device: new)
    assert ceilings("cuda") == new
    assert Ceilings(**json.loads(path.read_text())) == new
    assert ceilings("cpu") == new  # a CPU's cache has no TF32 rate to miss


@pytest.mark.gpu
def test_a_float32_convolution_on_cuda_does_not_run_faster_than_its_floor(
    tmp_path, monkeypatch
) -> None:
    """The floor of float32 convolutions, which cuDNN runs on TF32 by default, is at the
    measured TF32 rate: the measured time must not beat it (a fraction above 1)."""
    monkeypatch.setenv("PASSNET_CACHE_DIR", str(tmp_path))
    conv = torch.nn.Conv2d(256, 256, 3, padding=1).cuda()
    x = torch.randn(32, 256, 64, 64, device="cuda")
    limits = ceilings("cuda")
    assert limits.matmul_tflops["tfloat32"] > limits.matmul_tflops["float32"]
    with torch.no_grad():
        work = graph_work(conv, [x])
        for _ in range(3):
            conv(x)
        ms = statistics.median(cuda_timer(conv, [x])[1] for _ in range(20))  # device time
    roof = roofline(work.flops, work.min_bytes, torch.float32, limits, eager_ms=ms,
                    compiled_ms=None, conv_flops=work.conv_flops)  # fmt: skip
    assert roof.math == ("tfloat32" if torch.backends.cudnn.allow_tf32 else "float32")
    assert roof.bound == "compute" and roof.eager_fraction <= 1.0, (ms, roof)


# A graph of 1 GFLOP and 1 MB timed at 10 ms (eager) and 5 ms (compiled).
WORK = Work(flops=1e9, min_bytes=10**6)
TOO_LOW = Ceilings("test", copy_gbps=0.01, matmul_tflops={"float32": 0.001}, launch_us=5.0)
# floor at TOO_LOW: max(1e9 / 1e9 s, 1e6 / 1e7 s) = 1 s, far above both medians
GOOD = Ceilings("test", copy_gbps=100.0, matmul_tflops={"float32": 1.0}, launch_us=4.0)
# floor at GOOD: max(1 ms, 0.01 ms) = 1 ms: compiled reaches 20 %


def _now(seconds_ago: float = 0.0) -> str:
    moment = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds_ago)
    return moment.isoformat(timespec="seconds")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The ceilings cache in ``tmp_path``; ``measured`` lists the (fake) measurements made."""
    import passnet.evaluate._roofline as module

    path = tmp_path / "ceilings-test.json"
    monkeypatch.setattr(module, "_cache_file", lambda device: path)
    state = {"path": path, "measured": [], "next": GOOD}

    def fake(device: str) -> Ceilings:
        found = dataclasses.replace(state["next"], measured_at=_now())
        state["measured"].append(found)
        return found

    monkeypatch.setattr(module, "measure_ceilings", fake)
    return state


def _cached(state, limits: Ceilings) -> None:
    state["path"].write_text(json.dumps(dataclasses.asdict(limits)))


def test_a_too_low_cached_ceiling_is_measured_again_and_the_floor_recomputed(cache) -> None:
    _cached(cache, dataclasses.replace(TOO_LOW, measured_at=_now(3600)))
    found = checked_roofline(WORK, torch.float32, "cpu", eager_ms=10.0, compiled_ms=5.0)
    assert len(cache["measured"]) == 1
    assert found.ceilings_remeasured and not found.floor_exceeded
    assert found.compiled_fraction == pytest.approx(0.2) and found.eager_fraction == 0.1
    assert found.ceilings_measured_at == cache["measured"][0].measured_at
    kept = Ceilings(**json.loads(cache["path"].read_text()))
    assert kept.copy_gbps == 100.0 and kept.matmul_tflops == {"float32": 1.0}
    assert kept.launch_us == 4.0 and kept.merged == 1
    # the next graph finds good ceilings: nothing measured again
    again = checked_roofline(WORK, torch.float32, "cpu", eager_ms=10.0, compiled_ms=5.0)
    assert len(cache["measured"]) == 1 and not again.ceilings_remeasured


def test_a_floor_still_beaten_after_measuring_again_is_marked_and_the_best_rates_kept(
    cache,
) -> None:
    better_than_new = dataclasses.replace(TOO_LOW, copy_gbps=0.02, measured_at=_now(3600))
    _cached(cache, better_than_new)
    cache["next"] = TOO_LOW  # measured under load again
    found = checked_roofline(WORK, torch.float32, "cpu", eager_ms=10.0, compiled_ms=5.0)
    assert found.ceilings_remeasured and found.floor_exceeded
    assert found.compiled_fraction > 1  # the figure is kept; printed as "above floor"
    assert found.share(found.compiled_fraction) == "above floor"
    assert Ceilings(**json.loads(cache["path"].read_text())).copy_gbps == 0.02  # the best


def test_ceilings_measured_recently_are_not_measured_again_the_graph_is_marked(cache) -> None:
    _cached(cache, dataclasses.replace(TOO_LOW, measured_at=_now(60)))
    found = checked_roofline(WORK, torch.float32, "cpu", eager_ms=10.0, compiled_ms=5.0)
    assert cache["measured"] == []  # bounded: at most one re-measurement per interval
    assert found.floor_exceeded and not found.ceilings_remeasured


def test_a_floor_not_beaten_measures_nothing_again(cache) -> None:
    _cached(cache, dataclasses.replace(GOOD, measured_at=""))  # an old cache: time unknown
    found = checked_roofline(WORK, torch.float32, "cpu", eager_ms=10.0, compiled_ms=5.0)
    assert cache["measured"] == [] and not found.floor_exceeded
    assert found.ceilings_measured_at == ""
    assert found.share(found.eager_fraction) == "10.0%" and found.share(None) == "-"


def test_the_child_roofline_of_a_graph_beating_a_too_low_ceiling_is_marked(cache) -> None:
    from types import SimpleNamespace

    from passnet.evaluate._child import _roofline

    _cached(cache, dataclasses.replace(TOO_LOW, measured_at=_now(1)))
    side = SimpleNamespace(device=None, e2e=SimpleNamespace(median_ms=0.05))
    found = _roofline(
        torch.nn.Linear(64, 64), [torch.randn(8, 64)], "cpu", {"eager": side, "compiled": side}
    )
    assert found is not None and found["floor_exceeded"] is True
    assert found["ceilings_measured_at"] != ""


def test_measured_ceilings_say_when_and_under_what_load(tmp_path, monkeypatch) -> None:
    import passnet.evaluate._roofline as module

    monkeypatch.setattr(module, "_copy_seconds", lambda nbytes, device: 0.01)
    monkeypatch.setattr(module, "_matmul_tflops", lambda device, dtype, tf32=False: 0.5)
    found = measure_ceilings("cpu")
    assert found.age_s() < 60 and found.cpus == os.cpu_count()
    assert found.loadavg_1min is not None and found.loadavg_1min >= 0
    assert found.wait_fraction is None or 0 <= found.wait_fraction <= 1
    assert found.merged == 0
    old = {
        k: v
        for k, v in dataclasses.asdict(found).items()
        if k in ("device", "copy_gbps", "matmul_tflops", "launch_us")
    }
    assert Ceilings(**old).age_s() == float("inf")  # a cache written before the time was kept


def test_a_floor_exceeded_is_printed_as_such_never_above_100_percent(cache) -> None:
    from types import SimpleNamespace

    from passnet.agent._diagnostics import _roofline_line
    from passnet.cli._eval import _floor
    from passnet.report._html import _fraction

    _cached(cache, dataclasses.replace(TOO_LOW, measured_at=_now(60)))
    found = checked_roofline(WORK, torch.float32, "cpu", eager_ms=10.0, compiled_ms=5.0)
    record = SimpleNamespace(roofline=found)
    for text in (_floor(record), _fraction(record), _roofline_line(found)):
        assert "above floor" in text and "%" not in text.replace("above floor", "")
