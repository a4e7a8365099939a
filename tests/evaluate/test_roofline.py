"""The roofline: work counted, ceilings measured once and cached, bound and fractions."""

from __future__ import annotations

import dataclasses
import json
import statistics

import pytest
import torch

from passnet.evaluate import (
    Ceilings,
    EvalSettings,
    ceilings,
    cuda_timer,
    evaluate_sample,
    graph_work,
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
