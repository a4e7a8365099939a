"""Settings of one evaluation, and what its children's forkserver preloads."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from passnet.isolate import TORCH_PRELOAD

__all__ = ["FORKSERVER_PRELOAD", "EvalSettings"]

FORKSERVER_PRELOAD: list[str] = [
    *TORCH_PRELOAD,
    "passnet.evaluate._child",
    "passnet.compilers",
    "passnet.sample",
    "passnet.passes",
]
"""Modules the forkserver imports before it forks evaluation children (names a torch
version lacks are skipped), passed as ``preload`` to :func:`passnet.isolate.run_isolated`
by every evaluation call, which reads it then: an experiment may change it in place
before the first evaluation of its process (``benchmarks/bench_startup.py`` does)."""


@dataclass(frozen=True)
class EvalSettings:
    """How to evaluate: timing budget, seeds, limits. Defaults: docs/evaluation.md, "Timing"."""

    warmup: int = 25
    trials: int = 100
    seed: int = 0
    """Seed of the first input draw; the fresh-input re-check uses ``seed + 1``."""
    timeout_s: float = 600.0
    """Wall-clock limit of the whole child process (load, compile, check, time)."""
    rounds: int = 10
    """Eager and compiled trials are interleaved in this many alternating blocks."""
    min_warmup_s: float = 0.2
    """Warm-up continues until at least this long has passed (GPU clocks ramp up, caches fill)."""
    adaptive: bool = True
    """Adaptive repetition: after the first ``trials`` calls per side, add series until the
    speedup is precise (``target_rel_se``, at most ``max_extra_s``) and measure an unstable
    series again with twice the trials (``max_retries``). Off: exactly ``trials`` timed calls
    per side, nothing measured again (a side that stays noisy is only flagged ``unstable``).
    The record's timings say which happened and why (``series``, ``retries``, ``stop``)."""
    target_rel_se: float = 0.004
    """Adaptive repetition: add series until the speedup's relative standard error is below this..."""
    max_extra_s: float = 3.0
    """...or this much extra measuring time has been spent on the graph."""
    unstable_threshold: float = 0.20
    """IQR / median above this triggers re-measurement with more trials (adaptive)."""
    max_retries: int = 2
    """Re-measurements (each doubling the trials) before a result is flagged unstable."""
    max_measure_s: float | None = None
    """A bound on one graph's measuring (after warm-up): no extra series and no
    re-measurement starts that would, at the pace of the series before it, end past it
    (the timings' ``stop`` says so; a side still noisy is flagged ``unstable``). None:
    the trials, retries and ``max_extra_s`` decide alone, however long a slow graph's
    doubled series take. ``passnet eval --overlap`` sets 60 s: a timing turn stops the
    run's other evaluations for as long as it lasts."""
    num_threads: int | None = None
    """CPU threads for torch in the child (None: torch's default)."""
    pin_cpu: bool = True
    """On CUDA, pin the child to one CPU core for timing (launch-bound graphs are CPU-sensitive)."""
    core_guard: bool = True
    """On CUDA with ``pin_cpu``: probe the pinned core's speed around each round of timed
    calls, move to the fastest core of the worker's share when it slows down, and measure
    a round again that ended on a slowed core (virtual machines' cores slow down for
    seconds at a time; see :mod:`passnet.evaluate._host`)."""
    host_wait_s: float = 2.0
    """With ``core_guard``: how long, at most, one evaluation waits while every core of its
    share runs slower than earlier evaluations' cores did (a host slowed down as a whole),
    before it times on the slowed host all the same."""
    fixed_layout: bool = True
    """Run evaluation children without address-space layout randomization, so that every
    run of the same command lays them out alike (their forkserver is started with Linux's
    ``ADDR_NO_RANDOMIZE``; where the kernel refuses, layouts stay random and the record's
    ``layout_fixed`` says so). Randomized layouts moved sub-0.1 ms graphs' speedups by
    several per cent between runs (:mod:`passnet.isolate`)."""
    pause_gc: bool = True
    """Collect, then switch off Python's cyclic garbage collector while timing (as ``timeit`` does)."""
    poison_allocator: bool = True
    """Fill freed device memory with NaN before compiling, so stale results cannot pass."""
    time_graphs: bool = True
    """Measure timing (off: correctness only)."""
    roofline: bool = True
    """After timing, count the graph's FLOPs and bytes (one more eager call) and put its
    hardware floor, bound and each side's fraction of it in the record (the device's
    ceilings are measured once per machine and cached)."""
    flush_l2: bool = False
    """On CUDA, overwrite a buffer twice the size of the GPU's L2 cache before every timed
    call, outside the timed region (cold-cache timing, as ``triton.testing.do_bench``
    does); CUDA only."""
    replay_timing: bool = False
    """On CUDA, after the timed calls and the fresh-input re-check, capture each side's call
    as a CUDA graph and time its replays (the device floor without launch overhead);
    a side that cannot be captured keeps a note instead; CUDA only."""
    profile_kernels: bool = False
    """On CUDA, last, run each side's call ``profile_calls`` times under the CUDA profiler
    and record what the GPU ran per call (kernels, copies, fills: their summed duration,
    count and the largest of them); CUDA only."""
    profile_calls: int = 20
    """Calls per side under the profiler (``profile_kernels``)."""
    graphs_per_child: int = 1
    """How many graphs of a run one evaluation child may evaluate in turn. 1 (the
    reference method): every graph in a fresh process. More pays a child's start (its CUDA
    context, the compilers' imports, the kernels a pass directory compiles) once for that
    many graphs, at the price of graphs sharing a process (cleared between them): what
    the agent's ``pass_evaluator`` uses. Records give each graph's ``child_position``."""

    #: Settings that only mean something on a CUDA device, with their command-line option.
    CUDA_ONLY: ClassVar[dict[str, str]] = {
        "flush_l2": "--flush-l2",
        "replay_timing": "--replay-timing",
        "profile_kernels": "--profile-kernels",
    }

    def device_problem(self, device: str) -> str | None:
        """Why these settings cannot run on ``device`` (CUDA-only ones off CUDA), or None."""
        names = [name for name in self.CUDA_ONLY if getattr(self, name)]
        if not names or str(device).startswith("cuda"):
            return None
        options = [self.CUDA_ONLY[name] for name in names]
        return (
            f"{' and '.join(options)} (settings {', '.join(names)}) time on a GPU "
            f"(its L2 cache, CUDA graphs, the CUDA profiler): run with --device cuda, not {device!r}"
        )

    def __post_init__(self) -> None:
        positive = {
            "warmup": self.warmup,
            "trials": self.trials,
            "rounds": self.rounds,
            "profile_calls": self.profile_calls,
            "graphs_per_child": self.graphs_per_child,
        }
        for name, value in positive.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not (self.timeout_s > 0 and math.isfinite(self.timeout_s)):
            raise ValueError(
                f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}"
            )
        if self.max_measure_s is not None and not (
            self.max_measure_s > 0 and math.isfinite(self.max_measure_s)
        ):
            raise ValueError(
                f"max_measure_s must be a positive number of seconds (or None), got "
                f"{self.max_measure_s!r}"
            )
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1 (or None), got {self.num_threads!r}")
        if (
            self.max_retries < 0
            or self.max_extra_s < 0
            or self.min_warmup_s < 0
            or self.host_wait_s < 0
        ):
            raise ValueError(
                "max_retries, max_extra_s, min_warmup_s and host_wait_s must not be negative"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
