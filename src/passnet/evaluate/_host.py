"""Keep the timing thread on a CPU core that runs at full speed (docs/evaluation.md, "Core guard").

Launch-bound GPU graphs run as fast as the core that launches their kernels. On a
virtual machine a core (a vCPU) can run at half speed for seconds at a time, while
the host gives its physical core's other hardware thread to someone else. The guest
sees no steal time and no run-queue wait: only the work is slower, on that core, for
that while (H200 measurements in ``benchmarks/results/child_host_state_h200/``).
A child whose timing falls into such a slow stretch times both sides slower, by
different factors, so its speedup moves by several per cent.

:class:`CoreGuard` probes the core's speed with a short fixed Python loop (about 0.2 ms)
before and after each round of timed calls. It keeps the fastest probe seen as the
reference. A core slower than ``slow_factor`` times the reference on two probes in a
row is left for the fastest core of the worker's share, and a round that ended on a
slowed core is measured again. A host slowed down as a whole (every core of the share
slower than earlier children's cores, :class:`HostReference`) is waited for, within a
bound. Everything it did is reported in the record (:class:`HostReport`).
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from passnet.record import HostReport

__all__ = ["CoreGuard", "HostReference", "core_share", "siblings", "spare_cores"]

PROBE_LOOPS = 2000
"""Iterations of the probe loop: about 60 µs on the cores of an H200 VM."""

WAIT_STEP_S = 0.05
"""How long a guard sleeps between probes while every core of its share is slowed down."""

SLOW_FACTOR = 1.35
"""A core counts as slowed down above this many times the fastest probe. On an H200 VM
host the probe read 28-39 ns per iteration on a core at full speed and 49-65 ns on a
slowed one (``benchmarks/results/child_host_state_h200/``); at 1.15 a single probe
counted as a slowdown in 7-35 % of the checks of most evaluations (78 % in one)
(``benchmarks/results/host_episodes_h200/ab_first_guard.txt``)."""


def _spin(n: int) -> int:
    acc = 0
    for i in range(n):
        acc += i & 7
    return acc


def siblings(core: int) -> set[int]:
    """``core`` and its hyper-thread siblings (just ``core`` where the topology is unknown)."""
    path = f"/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list"
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return {core}
    found = {core}
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            found.update(range(int(lo), int(hi or lo) + 1))
    return found


def core_share(allowed: Sequence[int], gpu: int, gpus: int) -> list[int]:
    """The cores a timing thread for GPU ``gpu`` (of ``gpus``) may use, preferred first.

    Cores are taken from the end of the allowed set (the kernel and most daemons favour
    the first ones), skipping core 0 and its hyper-thread siblings, and every other one
    (two apart, so that workers of adjacent GPUs never get sibling cores where siblings
    are numbered next to each other). GPU ``i`` gets every ``gpus``-th of those, from
    the ``i``-th on, so workers of different GPUs never share a core. Where too few
    cores are left, the share is the one core the plain rule gives.
    """
    cores = sorted(allowed)
    if len(cores) < 2:
        return list(cores)
    busy = siblings(cores[0])
    candidates = [c for c in reversed(cores) if c not in busy] or cores[::-1]
    spaced = candidates[::2]
    gpus = max(1, gpus)
    share = spaced[gpu % gpus :: gpus] if len(spaced) >= gpus else []
    return share or [candidates[(2 * gpu) % len(candidates)]]


def spare_cores(allowed: Sequence[int], gpus: int) -> list[int]:
    """The cores no GPU's timing thread may use (:func:`core_share`), nor their hyper-thread
    siblings: where compile workers can run beside timing without sharing its cores."""
    timing: set[int] = set()
    for gpu in range(max(1, gpus)):
        for core in core_share(allowed, gpu, gpus):
            timing |= siblings(core)
    return [c for c in sorted(allowed) if c not in timing]


class CoreGuard:
    """Pins the calling thread to the fastest core of ``cores`` and keeps it on a fast one.

    ``probe()`` times :data:`PROBE_LOOPS` iterations of a fixed Python loop on the current
    core (best of ``repeats``), in nanoseconds per iteration. ``settle()`` probes every core
    of the share and stays on the fastest. ``ensure_fast()`` (before a round of timed calls)
    probes the current core and settles again if two probes in a row exceed ``slow_factor``
    times the yardstick: the fastest probe seen, or ``reference_ns`` from earlier children
    if that is faster. ``still_fast()`` (after the round) says whether the round ended on a
    core at full speed. When even the fastest core is slower than that, the yardstick
    becomes its probe (counted in ``all_slow``). ``fastest_ns`` is this guard's own fastest
    probe, whatever the reference. Setting the affinity applies to the calling thread only.
    """

    def __init__(
        self,
        cores: Sequence[int],
        *,
        slow_factor: float = SLOW_FACTOR,
        repeats: int = 3,
        reference_ns: float | None = None,
        max_wait_s: float = 0.0,
    ) -> None:
        if not cores:
            raise ValueError("CoreGuard needs at least one core")
        if slow_factor <= 1.0:
            raise ValueError(f"slow_factor must be above 1, got {slow_factor!r}")
        if reference_ns is not None and not (reference_ns > 0 and math.isfinite(reference_ns)):
            raise ValueError(f"reference_ns must be a positive number, got {reference_ns!r}")
        self.cores = list(cores)
        self.slow_factor = slow_factor
        self.repeats = max(1, repeats)
        self.reference_ns = reference_ns
        self.max_wait_s = max(0.0, max_wait_s)
        self.waited_s = 0.0
        self.best_ns = reference_ns if reference_ns is not None else math.inf
        """The yardstick a probe is compared with."""
        self.fastest_ns = math.inf
        """This guard's own fastest probe (what it reports, and what later children's
        reference is made of)."""
        self.last_ns = math.inf
        self.core: int | None = None
        self.moves = 0
        self.checks = 0
        self.slow_checks = 0
        self.remeasured_rounds = 0
        self.all_slow = 0
        self._just_found_fast = False
        self._check_probes: list[float] = []

    def probe(self) -> float:
        best = math.inf
        for _ in range(self.repeats):
            t0 = time.perf_counter_ns()
            _spin(PROBE_LOOPS)
            best = min(best, (time.perf_counter_ns() - t0) / PROBE_LOOPS)
        return best

    def _check(self) -> bool:
        """Probe the current core; a slow probe counts only if a second one agrees (a core
        slowed down for less than a probe's time does not move a round's median)."""
        self.checks += 1
        for attempt in range(2):
            self._saw(self.probe())
            if attempt == 0:
                self._check_probes.append(self.last_ns)
            if self.last_ns <= self.slow_factor * self.best_ns:
                return True
        self.slow_checks += 1
        return False

    def settle(self) -> bool:
        """Probe each core of the share, stay on the fastest; True if it moved.

        If even the fastest is slowed down, the whole host is: wait for it (in steps of
        :data:`WAIT_STEP_S`, within ``max_wait_s`` for the guard's whole life) and probe
        again. Once the wait is spent, the fastest core's probe becomes the reference
        (``all_slow`` counts these)."""
        previous = self.core
        self._just_found_fast = False
        while True:
            found: dict[int, float] = {}
            for core in self.cores:
                os.sched_setaffinity(0, {core})
                found[core] = self.probe()
            best = min(found, key=found.__getitem__)
            os.sched_setaffinity(0, {best})
            self.core = best
            self._saw(found[best])
            if self.last_ns <= self.slow_factor * self.best_ns:
                break
            if not self._wait():
                self.all_slow += 1
                self.best_ns = self.last_ns
                break
        moved = previous is not None and self.core != previous
        self.moves += int(moved)
        return moved

    def _saw(self, ns: float) -> None:
        self.last_ns = ns
        self.fastest_ns = min(self.fastest_ns, ns)
        self.best_ns = min(self.best_ns, ns)

    def _wait(self) -> bool:
        left = self.max_wait_s - self.waited_s
        if left <= 0:
            return False
        step = min(WAIT_STEP_S, left)
        time.sleep(step)
        self.waited_s += step
        return True

    def ensure_fast(self) -> bool:
        """Before a round: move to the fastest core if this one has slowed down; True if it moved."""
        if self.core is None:
            return self.settle()
        if self._just_found_fast:  # ``still_fast`` probed it a moment ago
            self._just_found_fast = False
            return False
        if self._check():
            return False
        return self.settle()

    def still_fast(self) -> bool:
        """After a round: is the core still at full speed?"""
        self._just_found_fast = self._check()
        return self._just_found_fast

    def report(self) -> HostReport:
        return HostReport(
            cores=list(self.cores),
            core=self.core if self.core is not None else -1,
            probe_ns=round(self.fastest_ns, 3) if math.isfinite(self.fastest_ns) else None,
            slow_factor=self.slow_factor,
            checks=self.checks,
            slow_checks=self.slow_checks,
            moves=self.moves,
            remeasured_rounds=self.remeasured_rounds,
            all_slow=self.all_slow,
            reference_ns=self.reference_ns,
            waited_s=round(self.waited_s, 3),
            probe_median_ns=(
                round(statistics.median(self._check_probes), 3) if self._check_probes else None
            ),
        )


class HostReference:
    """The host's full speed as earlier evaluation children saw it, per device.

    Each child's guard reports its fastest probe (:attr:`HostReport.probe_ns`). A child
    alone cannot tell a host slowed down as a whole, all of its cores at once, from a
    slow host: the median of the last ``keep`` children's fastest probes can. Thread-safe
    (the runner's workers share one).
    """

    def __init__(self, keep: int = 16) -> None:
        self._seen: dict[str, deque[float]] = {}
        self._keep = keep
        self._lock = threading.Lock()

    def note(self, device: str, probe_ns: float | None) -> None:
        if probe_ns is None or not (probe_ns > 0 and math.isfinite(probe_ns)):
            return
        with self._lock:
            self._seen.setdefault(device, deque(maxlen=self._keep)).append(probe_ns)

    def get(self, device: str) -> float | None:
        with self._lock:
            seen = self._seen.get(device)
            return statistics.median(seen) if seen else None
