"""Timing of eager vs compiled (docs/evaluation.md, "Timing").

One function per clock, one signature: a *timer* takes a callable and returns one
sample ``(e2e_ms, device_ms | None)``. :func:`measure_interleaved` alternates
blocks of eager and compiled calls so drift hits both alike, and re-measures
with more trials while the spread is too large.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from passnet.compilers import capture_graph
from passnet.record import KernelProfile, KernelShare, Timing, TimingStats

if TYPE_CHECKING:
    from passnet.evaluate._contention import ContentionMonitor
    from passnet.evaluate._gpu_clock import ClockMonitor
    from passnet.evaluate._host import CoreGuard

__all__ = [
    "cpu_timer",
    "cuda_timer",
    "flushing",
    "l2_flusher",
    "measure_interleaved",
    "measure_replays",
    "profile_kernels",
    "summarize",
]

log = logging.getLogger(__name__)

Timer = Callable[[Callable[..., Any], list[Any]], tuple[float, float | None]]
ArgsFactory = Callable[[], list[Any]]


def cpu_timer(fn: Callable[..., Any], args: list[Any]) -> tuple[float, float | None]:
    """Host clock around one call."""
    t0 = time.perf_counter_ns()
    fn(*args)
    return (time.perf_counter_ns() - t0) / 1e6, None


def cuda_timer(fn: Callable[..., Any], args: list[Any]) -> tuple[float, float | None]:
    """Host clock around one synchronized call (e2e), and CUDA events around it (device)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    start.record()
    fn(*args)
    end.record()
    torch.cuda.synchronize()
    e2e = (time.perf_counter_ns() - t0) / 1e6
    return e2e, float(start.elapsed_time(end))


def flushing(timer: Timer, flush: Callable[[], Any]) -> Timer:
    """``timer`` with ``flush()`` called before every call, outside the timed region (the
    CUDA timer synchronizes before it starts its clocks, so the flush has finished)."""

    def timed(fn: Callable[..., Any], args: list[Any]) -> tuple[float, float | None]:
        flush()
        return timer(fn, args)

    return timed


def l2_flusher(device: str | torch.device) -> Callable[[], Any]:
    """A callable that evicts the GPU's L2 cache: it overwrites a buffer of twice its size.

    The size comes from the device's properties (``L2_cache_size``); where torch does not
    report it, 128 MiB is assumed (more than any current GPU's L2).
    """
    dev = torch.device(device)
    l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 128 * 2**20
    buffer = torch.empty(2 * int(l2), dtype=torch.uint8, device=dev)
    return buffer.zero_


def measure_replays(
    fns: dict[str, tuple[Callable[..., Any], ArgsFactory]], *, warmup: int, trials: int, rounds: int
) -> dict[str, TimingStats | str]:
    """Each callable captured as a CUDA graph and its replays timed with CUDA events, in
    alternating blocks as :func:`measure_interleaved` times the calls; per name the
    statistics of device milliseconds per replay, or why the call could not be captured."""
    graphs: dict[str, torch.cuda.CUDAGraph] = {}
    out: dict[str, TimingStats | str] = {}
    for name, (fn, make_args) in fns.items():
        try:
            graphs[name], _ = capture_graph(fn, make_args())
        except Exception as exc:  # noqa: BLE001 - a call that cannot be captured is a finding
            why = f"cannot capture the call as a CUDA graph: {type(exc).__name__}: {exc}"
            out[name] = why[:500]
            torch.cuda.synchronize()

    def replay_timer(graph: Any, _args: list[Any]) -> tuple[float, float | None]:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)), None

    if graphs:
        replays = {name: (g, list) for name, g in graphs.items()}
        _warm_up(replays, replay_timer, warmup, 0.0)
        series = _run_series(replays, replay_timer, trials, rounds)
        out.update({name: summarize(e2e) for name, (e2e, _) in series.items()})
    del graphs
    return out


def profile_kernels(
    fns: dict[str, tuple[Callable[..., Any], ArgsFactory]], *, calls: int
) -> dict[str, KernelProfile | str]:
    """Each callable run ``calls`` times under the CUDA profiler; per name what the GPU ran
    per call (every device activity: kernels, copies, fills), or why it could not be
    profiled. The arguments are made before profiling starts, so copies of the inputs (for
    a call that mutates them) are not counted."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    out: dict[str, KernelProfile | str] = {}
    for name, (fn, make_args) in fns.items():
        try:
            args = [make_args() for _ in range(calls)]
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for a in args:
                    fn(*a)
                torch.cuda.synchronize()
            del args
            totals: dict[str, list[float]] = {}
            for event in prof.events():
                if event.device_type == DeviceType.CUDA:
                    entry = totals.setdefault(event.name, [0.0, 0.0])
                    entry[0] += event.time_range.elapsed_us() / 1000.0
                    entry[1] += 1
        except Exception as exc:  # noqa: BLE001 - an optional figure: say why it is missing
            out[name] = f"profiling failed: {type(exc).__name__}: {exc}"[:500]
            continue
        if not totals:
            out[name] = "the profiler saw no device activity (no CUDA kernels were launched)"
            continue
        largest = sorted(totals.items(), key=lambda item: -item[1][0])[:5]
        out[name] = KernelProfile(
            ms_per_call=sum(ms for ms, _ in totals.values()) / calls,
            activities_per_call=sum(n for _, n in totals.values()) / calls,
            calls=calls,
            top=[KernelShare(k[:200], ms / calls, n / calls) for k, (ms, n) in largest],
        )
    return out


def summarize(samples_ms: list[float]) -> TimingStats:
    """Median, IQR, mean, std, min, max of a series of milliseconds."""
    a = np.asarray(samples_ms, dtype=np.float64)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return TimingStats(
        median_ms=float(med),
        iqr_ms=float(q3 - q1),
        mean_ms=float(a.mean()),
        std_ms=float(a.std()),
        min_ms=float(a.min()),
        max_ms=float(a.max()),
        n=int(a.size),
    )


_ROUND_ATTEMPTS = 3

SPREAD_NARROWED = 0.75
"""A re-measurement for instability is repeated only if it narrowed the widest noisy
spread (IQR/median) to at most this share of the one before. A disturbance that passes
leaves the re-measurement narrower; a spread the re-measurement kept is the graph's own
(the launch jitter of a graph of tens of microseconds is a fifth of its time), and more
trials estimate it better without changing it. On 225 subgraphs of PassBench-GN's
eval-fusible (one H200) the 73 measured again twice took a median 5.2 s of measuring
against 1.1 s for those never measured again, and 35 of the 73 were flagged all the same."""
"""With a core guard: how often one round may be measured (the last attempt is kept)."""


def _run_series(
    fns: dict[str, tuple[Callable[..., Any], ArgsFactory]],
    timer: Timer,
    trials: int,
    rounds: int,
    guard: CoreGuard | None = None,
    clocks: ClockMonitor | None = None,
    contention: ContentionMonitor | None = None,
) -> dict[str, tuple[list[float], list[float]]]:
    names = list(fns)
    out: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in names}
    rounds = max(1, min(rounds, trials))
    per_round = [trials // rounds + (1 if r < trials % rounds else 0) for r in range(rounds)]
    for r, k in enumerate(per_round):
        order = names if r % 2 == 0 else names[::-1]
        for attempt in range(_ROUND_ATTEMPTS):
            if guard is not None and guard.ensure_fast():
                _rewarm(fns, timer)  # the new core's caches, outside the timed calls
            block: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in names}
            for name in order:
                e2e, dev = block[name]
                fn, make_args = fns[name]
                for _ in range(k):
                    a, b = timer(fn, make_args())
                    e2e.append(a)
                    if b is not None:
                        dev.append(b)
            if clocks is not None:
                clocks.sample()
            if contention is not None:
                contention.sample()
            if guard is None or attempt == _ROUND_ATTEMPTS - 1 or guard.still_fast():
                break
            guard.remeasured_rounds += 1  # the core slowed down during the round
        for name, (e2e, dev) in block.items():
            out[name][0].extend(e2e)
            out[name][1].extend(dev)
    return out


def _rewarm(fns: dict[str, tuple[Callable[..., Any], ArgsFactory]], timer: Timer) -> None:
    for fn, make_args in fns.values():
        for _ in range(2):
            timer(fn, make_args())


def _median_rel_se(samples: list[float]) -> float:
    """Relative standard error of a median, from the IQR (normal approximation)."""
    if len(samples) < 4:
        return float("inf")
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    sigma = (q3 - q1) / 1.349
    return float(1.2533 * sigma / np.sqrt(len(samples)) / med) if med > 0 else float("inf")


def _speedup_rel_se(series: dict[str, tuple[list[float], list[float]]]) -> float:
    """Relative standard error of every speedup the series can give (e2e and device)."""
    worst = 0.0
    for clock in (0, 1):
        parts = [_median_rel_se(s[clock]) for s in series.values() if s[clock]]
        if parts:
            worst = max(worst, float(np.sqrt(sum(p * p for p in parts))))
    return worst


def _warm_up(
    fns: dict[str, tuple[Callable[..., Any], ArgsFactory]], timer: Timer, calls: int, min_s: float
) -> None:
    for fn, make_args in fns.values():
        for _ in range(calls):
            timer(fn, make_args())
    deadline = time.perf_counter() + min_s
    while time.perf_counter() < deadline:
        for fn, make_args in fns.values():
            timer(fn, make_args())


def measure_interleaved(
    fns: dict[str, tuple[Callable[..., Any], ArgsFactory]],
    *,
    timer: Timer,
    warmup: int,
    trials: int,
    rounds: int,
    unstable_threshold: float,
    max_retries: int,
    min_warmup_s: float = 0.0,
    target_rel_se: float = 0.0,
    max_extra_s: float = 0.0,
    guard: CoreGuard | None = None,
    clocks: ClockMonitor | None = None,
    max_measure_s: float | None = None,
    contention: ContentionMonitor | None = None,
) -> dict[str, Timing]:
    """Warm up each callable, then time them in alternating blocks.

    Warm-up is ``warmup`` calls each and at least ``min_warmup_s`` seconds. After
    ``trials`` calls per side, further series are added while the relative standard
    error of the speedup exceeds ``target_rel_se`` (at most ``max_extra_s`` seconds).

    ``fns`` maps a name to ``(callable, make_args)``; ``make_args`` runs outside the
    timed region (it returns the same inputs, or fresh clones for graphs that mutate them).

    While any side's IQR/median exceeds ``unstable_threshold`` the whole series is
    measured again with twice the trials, up to ``max_retries`` times, and again only
    while each re-measurement narrows the widest such spread (:data:`SPREAD_NARROWED`); a
    side still above the threshold is flagged ``unstable`` (a timing flag, not a failure). With
    ``max_extra_s`` and ``max_retries`` 0, exactly ``trials`` calls per side are timed.
    Each :class:`Timing` says how many series were measured and why measuring stopped.

    With a ``guard`` (:class:`~passnet.evaluate._host.CoreGuard`) the calling thread is
    first settled on the fastest core of its share; each round then starts on a core at
    full speed and is measured again (up to twice) if the core slowed down during it.
    ``clocks`` (:class:`~passnet.evaluate._gpu_clock.ClockMonitor`) reads the GPU's clocks
    after warm-up and after each round, outside the timed calls; ``contention``
    (:class:`~passnet.evaluate._contention.ContentionMonitor`) reads the process's
    scheduler counters at the same points and before warm-up.

    ``max_measure_s`` bounds the measuring after warm-up: an extra series or a
    re-measurement starts only if, at the pace of the series before it, it ends within
    the bound (the first series always runs).
    """
    if guard is not None:
        guard.settle()
    if contention is not None:  # warm-up is read too: the timed rounds of a graph of a few
        contention.sample()  # microseconds can all fall between two scheduler ticks
    _warm_up(fns, timer, warmup, min_warmup_s)
    if clocks is not None:
        clocks.sample()
    if contention is not None:
        contention.sample()
    retries = 0
    started = time.perf_counter()

    def fits(seconds: float) -> bool:
        """Whether measuring that long more ends within ``max_measure_s``."""
        if max_measure_s is None:
            return True
        return time.perf_counter() - started + seconds <= max_measure_s

    bounded = False  # whether the bound stopped an extra series or a re-measurement
    spread_before: float | None = None  # the widest noisy spread of the series before
    while True:
        began = time.perf_counter()
        series = _run_series(fns, timer, trials, rounds, guard, clocks, contention)
        pace = time.perf_counter() - began  # seconds one series of ``trials`` took
        count = 1
        # Adaptive repetition: more alternating series until the speedup is precise.
        extra_deadline = time.perf_counter() + max_extra_s
        while _speedup_rel_se(series) > target_rel_se and time.perf_counter() < extra_deadline:
            if not fits(pace):
                bounded = True
                break
            extra = _run_series(fns, timer, trials, rounds, guard, clocks, contention)
            for name, (e2e, dev) in extra.items():
                series[name][0].extend(e2e)
                series[name][1].extend(dev)
            count += 1
        stop = _stop_reason(_speedup_rel_se(series), target_rel_se, max_extra_s, trials)
        timings = {
            name: Timing(
                e2e=summarize(e2e),
                device=summarize(dev) if dev else None,
                retries=retries,
                series=count,
                stop=stop,
            )
            for name, (e2e, dev) in series.items()
        }
        noisy = [n for n, t in timings.items() if _spread(t) > unstable_threshold]
        widest = max((_spread(timings[n]) for n in noisy), default=0.0)
        kept = spread_before is not None and widest > SPREAD_NARROWED * spread_before
        retry = noisy and retries < max_retries and not kept
        if retry and not fits(2 * pace):  # twice the trials: about twice as long
            retry, bounded = False, True
        if not retry:
            for name in noisy:
                timings[name].unstable = True
            if noisy and kept:
                for t in timings.values():
                    t.stop += (
                        f"; IQR/median {widest:.0%} after re-measuring, {spread_before:.0%}"
                        " before: the graph's own spread, not measured again"
                    )
            if bounded:
                for t in timings.values():
                    t.stop += f"; measuring bounded at {max_measure_s:g} s"
            return timings
        spread_before = widest
        retries += 1
        trials *= 2
        log.info(
            "unstable timing for %s (IQR/median > %.0f%%): re-measuring with %d trials",
            ", ".join(noisy),
            unstable_threshold * 100,
            trials,
        )


def _stop_reason(rel_se: float, target: float, max_extra_s: float, trials: int) -> str:
    """Why measuring stopped after the series it took, in words for the record."""
    precision = f"the speedup's relative standard error {rel_se:.2%}"
    if max_extra_s <= 0:
        return f"{trials} calls per side as asked (adaptive repetition off); {precision}"
    if rel_se <= target:
        return f"precise: {precision} <= {target:.2%}"
    return f"time budget of {max_extra_s:g} s spent: {precision} > {target:.2%}"


def _spread(t: Timing) -> float:
    # Both clocks can feed a speedup (e2e by default, device on request): both must be stable.
    spreads = [t.e2e.relative_iqr] + ([t.device.relative_iqr] if t.device is not None else [])
    return max(spreads)
