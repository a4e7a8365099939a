"""The timing loop: statistics, interleaving, re-measurement, adaptive repetition.

A fake timer returns scripted milliseconds, so every case is exact and takes no time.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pytest

from passnet.evaluate._timing import (
    SPREAD_NARROWED,
    _median_rel_se,
    cpu_timer,
    flushing,
    measure_interleaved,
    summarize,
)


class Script:
    """Two sides whose timed calls return scripted (e2e, device) values, logging the order.

    ``series[name]`` is an iterable of milliseconds per call, consumed by timed and
    warm-up calls alike; ``device`` gives device milliseconds the same way (None: a
    clock without device events, as on CPU).
    """

    def __init__(
        self,
        series: dict[str, Iterable[float]],
        device: dict[str, Iterable[float]] | None = None,
    ) -> None:
        self.values: dict[str, Iterator[float]] = {k: iter(v) for k, v in series.items()}
        self.device = {k: iter(v) for k, v in (device or {}).items()}
        self.calls: list[str] = []
        self.fns: dict[str, tuple[Callable[..., Any], Callable[[], list[Any]]]] = {
            name: (self._side(name), list) for name in series
        }

    def _side(self, name: str) -> Callable[..., Any]:
        def call(*args: Any) -> str:
            self.calls.append(name)
            return name

        return call

    def timer(self, fn: Callable[..., Any], args: list[Any]) -> tuple[float, float | None]:
        name = fn(*args)
        dev = self.device.get(name)
        return next(self.values[name]), (next(dev) if dev is not None else None)

    def measure(self, **kwargs: Any) -> dict[str, Any]:
        options: dict[str, Any] = {
            "warmup": 0,
            "trials": 8,
            "rounds": 2,
            "unstable_threshold": 0.2,
            "max_retries": 2,
        }
        options.update(kwargs)
        return measure_interleaved(self.fns, timer=self.timer, **options)


def steady(ms: float) -> Iterator[float]:
    return itertools.repeat(ms)


def alternating(a: float, b: float) -> Iterator[float]:
    return itertools.cycle((a, b))


def test_summarize_gives_the_order_statistics_and_moments() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0, 100.0])
    assert s.median_ms == 3.0
    assert s.iqr_ms == 2.0  # 25th and 75th percentiles 2 and 4 (linear interpolation)
    assert s.mean_ms == 22.0
    assert s.std_ms == pytest.approx(np.std([4, 1, 3, 2, 100]))
    assert (s.min_ms, s.max_ms, s.n) == (1.0, 100.0, 5)
    assert s.relative_iqr == pytest.approx(2 / 3)


def test_the_median_standard_error_comes_from_the_iqr() -> None:
    assert _median_rel_se([1.0, 1.0, 1.0]) == math.inf  # too few to say
    assert _median_rel_se([2.0] * 10) == 0.0
    samples = [1.0, 2.0, 3.0, 4.0, 5.0]  # IQR 2, median 3
    assert _median_rel_se(samples) == pytest.approx(1.2533 * (2 / 1.349) / math.sqrt(5) / 3)


def test_cpu_timer_times_the_call_and_has_no_device_clock() -> None:
    calls = []
    e2e, device = cpu_timer(lambda x: (calls.append(x), time.sleep(0.002)), [7])
    assert calls == [7]
    assert e2e >= 2.0
    assert device is None


def test_sides_alternate_in_blocks_and_the_order_flips_every_round() -> None:
    script = Script({"compiled": steady(1.0), "eager": steady(2.0)})
    timings = script.measure(warmup=1, trials=4, rounds=2)
    warm, timed = script.calls[:2], script.calls[2:]
    assert warm == ["compiled", "eager"]
    assert timed == ["compiled"] * 2 + ["eager"] * 4 + ["compiled"] * 2
    assert timings["eager"].e2e.median_ms == 2.0
    assert timings["compiled"].e2e.n == timings["eager"].e2e.n == 4


def test_trials_that_do_not_divide_into_rounds_are_all_made() -> None:
    script = Script({"compiled": steady(1.0), "eager": steady(1.0)})
    timings = script.measure(trials=7, rounds=3)
    assert timings["compiled"].e2e.n == timings["eager"].e2e.n == 7
    assert script.calls.count("eager") == 7


def test_a_stable_measurement_is_neither_repeated_nor_flagged() -> None:
    timings = Script({"compiled": steady(1.0), "eager": steady(2.0)}).measure()
    for t in timings.values():
        assert (t.retries, t.unstable, t.e2e.n) == (0, False, 8)
        assert t.device is None


def test_a_persistent_spread_is_measured_again_once_with_doubled_trials_then_flagged() -> None:
    # eager's IQR/median is the same however often it is measured; compiled is steady.
    # The re-measurement keeps the spread, so it is the graph's own: no second one.
    script = Script({"compiled": steady(1.0), "eager": alternating(1.0, 3.0)})
    timings = script.measure(trials=8, max_retries=2)
    eager, compiled = timings["eager"], timings["compiled"]
    assert eager.unstable and eager.retries == 1
    assert eager.e2e.n == 8 * 2  # the last series: trials doubled once
    assert not compiled.unstable  # flagged per side
    assert compiled.retries == 1 and compiled.e2e.n == 16  # both sides measured again
    assert len(script.calls) == 2 * (8 + 16)  # each series replaces the one before
    assert "the graph's own spread, not measured again" in eager.stop


def test_a_spread_that_narrows_is_measured_again_while_it_narrows() -> None:
    # eager's first series spreads over 1-3, the re-measurement over 1-1.5 (narrower, still
    # above 20 %), the next is steady: measured again twice, not flagged
    eager = itertools.chain(alternating_n(1.0, 3.0, 8), alternating_n(1.0, 1.5, 16), steady(2.0))
    timings = Script({"compiled": steady(1.0), "eager": eager}).measure(trials=8, max_retries=2)
    assert timings["eager"].retries == 2 and not timings["eager"].unstable
    assert timings["eager"].e2e.n == 32 and timings["eager"].e2e.median_ms == 2.0
    assert "not measured again" not in timings["eager"].stop


def test_a_spread_that_barely_narrows_counts_as_kept() -> None:
    # IQR/median 1.0, then 0.8 (more than SPREAD_NARROWED of it): flagged after one
    eager = itertools.chain(alternating_n(1.0, 3.0, 8), alternating(1.0, 2.333))
    first = summarize([1.0, 3.0] * 4).relative_iqr
    second = summarize([1.0, 2.333] * 8).relative_iqr
    assert second > SPREAD_NARROWED * first
    timings = Script({"compiled": steady(1.0), "eager": eager}).measure(trials=8, max_retries=2)
    assert timings["eager"].retries == 1 and timings["eager"].unstable


def test_a_spread_that_passes_is_measured_again_but_not_flagged() -> None:
    # eager is noisy for its first 8 calls (the first series), then steady
    noisy_then_steady = itertools.chain(alternating_n(1.0, 3.0, 8), steady(2.0))
    timings = Script({"compiled": steady(1.0), "eager": noisy_then_steady}).measure(trials=8)
    eager = timings["eager"]
    assert eager.retries == 1 and not eager.unstable
    assert eager.e2e.n == 16
    assert eager.e2e.median_ms == 2.0  # the noisy first series is not kept


def alternating_n(a: float, b: float, n: int) -> Iterator[float]:
    return itertools.islice(alternating(a, b), n)


def test_no_retries_allowed_flags_at_once() -> None:
    timings = Script({"compiled": steady(1.0), "eager": alternating(1.0, 3.0)}).measure(
        max_retries=0
    )
    assert timings["eager"].unstable and timings["eager"].retries == 0
    assert timings["eager"].e2e.n == 8


def test_only_a_spread_above_the_threshold_is_flagged() -> None:
    # q1 = 1.0, q3 = 1.2 (linear interpolation over 1.0 x4, 1.2 x4), median 1.1:
    # IQR/median 0.1818, under a 0.19 threshold, over a 0.18 one
    values = [1.0, 1.2] * 4
    below = Script({"compiled": steady(1.0), "eager": itertools.cycle(values)}).measure(
        unstable_threshold=0.19, max_retries=0
    )
    over = Script({"compiled": steady(1.0), "eager": itertools.cycle(values)}).measure(
        unstable_threshold=0.18, max_retries=0
    )
    assert below["eager"].e2e.relative_iqr == pytest.approx(0.2 / 1.1)
    assert not below["eager"].unstable
    assert over["eager"].unstable


def test_a_spread_on_the_device_clock_alone_counts_too() -> None:
    script = Script(
        {"compiled": steady(1.0), "eager": steady(2.0)},
        device={"compiled": alternating(0.5, 1.5), "eager": steady(1.0)},
    )
    timings = script.measure(max_retries=1)
    assert timings["compiled"].e2e.relative_iqr == 0.0
    assert timings["compiled"].device is not None
    assert timings["compiled"].device.relative_iqr > 0.2
    assert timings["compiled"].unstable and timings["compiled"].retries == 1
    assert not timings["eager"].unstable


def test_adaptive_repetition_adds_series_until_the_speedup_is_precise() -> None:
    # a small spread (IQR/median about 9%): 8 trials leave the speedup's standard error
    # near 6%; the target of 1% needs several hundred calls per side
    script = Script({"compiled": alternating(1.0, 1.1), "eager": alternating(2.0, 2.2)})
    timings = script.measure(target_rel_se=0.01, max_extra_s=30.0)
    n = timings["eager"].e2e.n
    assert n > 8 and n % 8 == 0  # whole series of `trials` calls were added
    assert timings["compiled"].e2e.n == n
    series = {
        name: [1.0, 1.1] * (n // 2) if name == "compiled" else [2.0, 2.2] * (n // 2)
        for name in ("compiled", "eager")
    }
    se = math.hypot(*(_median_rel_se(v) for v in series.values()))
    assert se <= 0.01  # stopped once precise enough ...
    shorter = {k: v[:-8] for k, v in series.items()}
    assert math.hypot(*(_median_rel_se(v) for v in shorter.values())) > 0.01  # ... not later
    assert not any(t.unstable or t.retries for t in timings.values())


def test_adaptive_repetition_stops_at_its_time_budget() -> None:
    script = Script({"compiled": alternating(1.0, 1.1), "eager": alternating(2.0, 2.2)})
    t0 = time.perf_counter()
    timings = script.measure(target_rel_se=0.0, max_extra_s=0.05)  # a target never met
    assert time.perf_counter() - t0 < 5.0
    assert timings["eager"].e2e.n > 8


def test_adaptive_repetition_off_makes_exactly_the_trials() -> None:
    script = Script({"compiled": alternating(1.0, 1.1), "eager": alternating(2.0, 2.2)})
    assert script.measure(target_rel_se=0.0, max_extra_s=0.0)["eager"].e2e.n == 8
    script = Script({"compiled": alternating(1.0, 1.1), "eager": alternating(2.0, 2.2)})
    # a target the trials already meet adds nothing either
    assert script.measure(target_rel_se=1.0, max_extra_s=30.0)["eager"].e2e.n == 8


def test_warm_up_makes_the_calls_then_runs_for_its_minimum_time() -> None:
    script = Script({"compiled": steady(1.0), "eager": steady(1.0)})
    script.measure(warmup=3, trials=2, rounds=1, min_warmup_s=0.0)
    assert script.calls[:6] == ["compiled"] * 3 + ["eager"] * 3
    assert len(script.calls) == 6 + 4
    script = Script({"compiled": steady(1.0), "eager": steady(1.0)})
    t0 = time.perf_counter()
    script.measure(warmup=0, trials=2, rounds=1, min_warmup_s=0.05)
    assert time.perf_counter() - t0 >= 0.05
    assert len(script.calls) > 4  # warm-up calls were made for the minimum time


def test_a_flushing_timer_flushes_before_every_call_outside_the_clock() -> None:
    events: list[str] = []

    def flush() -> None:
        events.append("flush")
        time.sleep(0.02)

    timer = flushing(cpu_timer, flush)
    for _ in range(3):
        e2e, device = timer(lambda: events.append("call"), [])
        assert e2e < 20.0  # the flush's 20 ms are not in the timed call
        assert device is None
    assert events == ["flush", "call"] * 3


@pytest.mark.gpu
def test_the_l2_flusher_overwrites_twice_the_l2_cache() -> None:
    import torch

    from passnet.evaluate._timing import l2_flusher

    flush = l2_flusher("cuda")
    buffer = flush.__self__
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert buffer.is_cuda and buffer.numel() == 2 * l2
    buffer.fill_(1)
    flush()
    torch.cuda.synchronize()
    assert int(buffer.max()) == 0


@pytest.mark.gpu
def test_the_kernel_profile_counts_each_calls_kernels_and_not_the_argument_copies() -> None:
    import torch

    from passnet.evaluate._timing import profile_kernels

    x = torch.randn(1 << 16, device="cuda")

    def two_kernels(t: torch.Tensor) -> torch.Tensor:
        return (t + 1).relu_()

    def copied() -> list[torch.Tensor]:  # as for a call that mutates its inputs: a clone
        return [x.clone()]

    found = profile_kernels(
        {"two": (two_kernels, copied), "one": (torch.neg, lambda: [x])}, calls=6
    )
    two, one = found["two"], found["one"]
    assert not isinstance(two, str) and not isinstance(one, str)
    assert (two.calls, two.activities_per_call, one.activities_per_call) == (6, 2.0, 1.0)
    assert len(two.top) == 2 and all(k.count_per_call == 1.0 for k in two.top)
    assert two.ms_per_call > 0 and sum(k.ms_per_call for k in two.top) == pytest.approx(
        two.ms_per_call
    )


@pytest.mark.gpu
def test_a_call_without_device_work_has_no_kernel_profile_and_says_why() -> None:
    import torch

    from passnet.evaluate._timing import profile_kernels

    cpu = torch.randn(8)
    found = profile_kernels({"cpu": (torch.neg, lambda: [cpu])}, calls=3)
    assert found["cpu"] == "the profiler saw no device activity (no CUDA kernels were launched)"


def test_adaptive_repetition_off_times_exactly_the_trials_asked_for() -> None:
    # noisy enough that adaptive repetition would add series and retries
    script = Script({"a": alternating(1.0, 3.0), "b": alternating(2.0, 6.0)})
    timings = script.measure(trials=3, max_retries=0, max_extra_s=0.0, target_rel_se=0.004)
    for t in timings.values():
        assert t.e2e.n == 3 and t.series == 1 and t.retries == 0
        assert t.unstable  # flagged, not measured again
        assert "3 calls per side as asked (adaptive repetition off)" in t.stop


def test_adaptive_repetition_says_how_many_series_and_why_it_stopped() -> None:
    script = Script({"a": steady(2.0), "b": steady(1.0)})
    precise = script.measure(trials=8, target_rel_se=0.004, max_extra_s=5.0)
    assert all(t.series == 1 and t.stop.startswith("precise:") for t in precise.values())
    noisy = Script({"a": alternating(1.0, 1.1), "b": alternating(2.0, 2.2)})
    timings = noisy.measure(trials=8, target_rel_se=1e-9, max_extra_s=0.05)
    for t in timings.values():
        assert t.series > 1 and t.e2e.n == 8 * t.series
        assert t.stop.startswith("time budget of 0.05 s spent")


class SlowScript(Script):
    """A Script whose calls take ``seconds`` of wall time (the bound counts real time)."""

    def __init__(self, series: dict[str, Iterable[float]], seconds: float) -> None:
        super().__init__(series)
        self.seconds = seconds

    def timer(self, fn: Callable[..., Any], args: list[Any]) -> tuple[float, float | None]:
        time.sleep(self.seconds)
        return super().timer(fn, args)


def test_a_bound_on_measuring_stops_the_re_measurement_that_would_pass_it() -> None:
    """A series of 8 calls per side takes ~0.1 s here; re-measuring the noisy side with
    twice the trials would take ~0.2 s more: past a bound of 0.25 s, so it is flagged
    unstable at once and the stop says why. Without the bound it is measured again."""
    noisy = {"compiled": steady(1.0), "eager": alternating(1.0, 3.0)}
    bounded = SlowScript(noisy, 0.006).measure(trials=8, max_measure_s=0.25)
    eager = bounded["eager"]
    assert eager.unstable and eager.retries == 0 and eager.e2e.n == 8
    assert all(t.stop.endswith("; measuring bounded at 0.25 s") for t in bounded.values())
    free = SlowScript(noisy, 0.006).measure(trials=8, max_retries=1)
    assert free["eager"].retries == 1 and "bounded" not in free["eager"].stop


def test_a_bound_on_measuring_stops_extra_series_before_it_is_passed() -> None:
    script = SlowScript({"compiled": alternating(1.0, 1.1), "eager": alternating(2.0, 2.2)}, 0.003)
    t0 = time.perf_counter()
    timings = script.measure(target_rel_se=0.0, max_extra_s=30.0, max_measure_s=0.3)
    assert time.perf_counter() - t0 < 0.3 + 0.2  # no series started that would pass it
    assert 8 < timings["eager"].e2e.n <= 8 * 7  # extra series, as many as fit in 0.3 s
    assert timings["eager"].stop.endswith("measuring bounded at 0.3 s")


def test_a_bound_on_measuring_must_be_a_positive_number_of_seconds() -> None:
    from passnet.evaluate import EvalSettings

    with pytest.raises(ValueError, match="max_measure_s must be a positive number"):
        EvalSettings(max_measure_s=0.0)
    assert EvalSettings(max_measure_s=60).max_measure_s == 60
