"""Whether other processes competed for the CPU while a graph was timed on it.

On the CPU a graph's calls run on the evaluation's own threads (the caller and torch's
intra-op workers). When other processes want the same cores, those threads sit in the
kernel's run queue, ready but not running, and every timed call takes longer: the same
command gave bert-tiny an eager median of 1.36 ms on a quiet machine and 112 ms beside
other work. The kernel counts that wait per thread (``/proc/<pid>/task/<tid>/schedstat``:
nanoseconds on a core, nanoseconds waiting in a run queue), so the harness can tell a
contended measurement from a slow graph, whatever the graph does: a graph that is slow
by itself runs, it does not wait.

:class:`ContentionMonitor` reads those counters before and after warm-up and after each
round of timed calls (where the GPU clock monitor reads its clocks on CUDA), and reports
the share of the threads' time spent waiting (:class:`~passnet.record.CpuContention`).
Warm-up counts too: the kernel brings a running thread's counters up to date only at its
scheduler ticks and switches, so the timed rounds of a graph of a few microseconds can
all read zero.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from passnet.record import CpuContention

__all__ = [
    "CONTENDED_WAIT_FRACTION",
    "ContentionMonitor",
    "open_contention_monitor",
    "read_thread_schedstat",
    "wait_fraction",
]

CONTENDED_WAIT_FRACTION = 0.10
"""Timing counts as contended above this share of waiting. A busy loop on a shared 2-core
machine waited 2-3 % of its time; with two more busy processes on the same 2 cores,
68-71 %."""

Counters = dict[int, tuple[int, int]]
"""Thread id -> (nanoseconds on a core, nanoseconds waiting in a run queue)."""


def read_thread_schedstat(task_dir: str = "/proc/self/task") -> Counters:
    """Every thread's scheduler counters; raises ``OSError`` where the kernel keeps none."""
    found: Counters = {}
    for tid in os.listdir(task_dir):
        try:
            with open(f"{task_dir}/{tid}/schedstat") as f:
                fields = f.read().split()
        except FileNotFoundError:  # the thread ended since the listing
            continue
        found[int(tid)] = (int(fields[0]), int(fields[1]))
    return found


def wait_fraction(on_cpu_ns: float, waited_ns: float) -> float:
    """The share of the time threads were ready to run that they spent waiting (0 if none)."""
    total = on_cpu_ns + waited_ns
    return waited_ns / total if total > 0 else 0.0


def _delta(before: Counters, after: Counters) -> tuple[int, int]:
    """Time on a core and waiting, summed over the threads, between two readings (a thread
    started in between counts from zero; one that ended is lost)."""
    on_cpu = waited = 0
    for tid, (run, wait) in after.items():
        run0, wait0 = before.get(tid, (0, 0))
        on_cpu += max(0, run - run0)
        waited += max(0, wait - wait0)
    return on_cpu, waited


class ContentionMonitor:
    """Reads the process's scheduler counters at each :meth:`sample` (the first reading is
    the baseline); :meth:`report` sums the rounds in between."""

    def __init__(
        self,
        read: Callable[[], Counters] = read_thread_schedstat,
        threshold: float = CONTENDED_WAIT_FRACTION,
    ) -> None:
        self._read = read
        self.threshold = threshold
        self._last: Counters | None = None
        self.rounds: list[tuple[int, int]] = []
        """(on-core ns, waiting ns) of each round between two readings."""

    def sample(self) -> None:
        now = self._read()
        if self._last is not None:
            self.rounds.append(_delta(self._last, now))
        self._last = now

    def report(self) -> CpuContention | None:
        """None before two readings, or where the kernel's counters did not move (a kernel
        without scheduler statistics reads zeros). The kernel brings a running thread's
        counters up to date at its scheduler ticks and switches, so a round shorter than a
        tick can read zero: the sum over the rounds is the figure, the worst round a hint."""
        on_cpu = sum(r for r, _ in self.rounds)
        waited = sum(w for _, w in self.rounds)
        if on_cpu + waited <= 0:
            return None
        fraction = wait_fraction(on_cpu, waited)
        return CpuContention(
            wait_fraction=round(fraction, 4),
            worst_round_wait_fraction=round(
                max(wait_fraction(r, w) for r, w in self.rounds if r + w > 0), 4
            ),
            rounds=len(self.rounds),
            on_cpu_ms=round(on_cpu / 1e6, 3),
            waited_ms=round(waited / 1e6, 3),
            threshold=self.threshold,
            contended=fraction > self.threshold,
        )


def open_contention_monitor(device: str) -> ContentionMonitor | None:
    """A monitor for CPU timing where the kernel keeps per-thread scheduler statistics; None
    on CUDA (the core guard watches the timing thread's core there) and elsewhere."""
    if device.startswith("cuda"):
        return None
    try:
        read_thread_schedstat()
    except (OSError, ValueError, IndexError):
        return None
    return ContentionMonitor()
