"""Executors: where evaluation jobs run. The runner plans jobs and writes the store; an
executor only runs jobs and hands their records back as they finish.

:class:`LocalExecutor` runs on this machine. It owns a pool of device slots (one per
GPU on CUDA: timing owns its GPU), and a job takes a slot when it starts and gives it
back when it ends, so no two evaluations ever time on one GPU while another idles
(assigning devices by job index, as a thread pool hands jobs to whichever thread is
free, did exactly that). Other executors (a cluster) implement the same interface.
"""

from __future__ import annotations

import abc
import concurrent.futures as cf
import contextlib
import logging
import queue
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from passnet.evaluate import EvalSettings, evaluate_sample
from passnet.record import EvalRecord
from passnet.runner._plan import WorkItem

__all__ = ["DevicePool", "EvalJob", "Executor", "LocalExecutor", "OnStage", "local_devices"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalJob:
    """One evaluation: a graph, a compiler and its configuration, a device kind, settings."""

    item: WorkItem
    compiler: str
    compiler_config: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    """The device the user asked for (``cpu``, ``cuda``, ``cuda:1``); records keep it as
    their resume key, whichever GPU of the machine ran them."""
    settings: EvalSettings = field(default_factory=EvalSettings)


Evaluate = Callable[..., EvalRecord]
"""``evaluate_sample``'s signature: (path, compiler, config, device, settings, graph_label=,
on_stage=)."""

OnStage = Callable[[EvalJob, str], None]
"""Hears each stage of a job as it begins: ``start`` when it gets a device, then the
evaluation child's stages (``load``, ``compile``, ``measure``, ...)."""


class Executor(abc.ABC):
    """Runs evaluation jobs; records come back in the order they finish."""

    @abc.abstractmethod
    def run(self, jobs: Sequence[EvalJob], on_stage: OnStage | None = None) -> Iterator[EvalRecord]:
        """Start ``jobs`` and yield each one's record as it finishes. Closing the iterator
        early (an error, Ctrl-C in the consumer) cancels the jobs not yet started.
        ``on_stage`` (progress, optional: an executor may call it for some stages only or
        not at all) may be called from other threads."""

    def close(self) -> None:  # noqa: B027 - optional: an executor may hold nothing
        """Release what the executor holds (workers, connections); it may not run again."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DevicePool:
    """Device slots for evaluations: a job holds one slot from start to end.

    A slot is a device string; a device listed twice (``["cpu", "cpu"]``) runs two
    evaluations at once, a device listed once never runs two.
    """

    def __init__(self, slots: Sequence[str]) -> None:
        if not slots:
            raise ValueError("a device pool needs at least one slot")
        self.slots = list(slots)
        self._free: queue.SimpleQueue[str] = queue.SimpleQueue()
        for slot in self.slots:
            self._free.put(slot)

    @contextlib.contextmanager
    def acquire(self) -> Iterator[str]:
        """A free slot for the duration of the block (waits until one is free)."""
        slot = self._free.get()
        try:
            yield slot
        finally:
            self._free.put(slot)


def local_devices(device: str, jobs: int, gpu_count: int) -> list[str]:
    """The device slots of a local run: ``jobs`` CPU slots on ``cpu``; on ``cuda``, one slot
    per GPU for the first ``jobs`` of the ``gpu_count`` GPUs (``jobs`` beyond the GPU count
    add nothing: a GPU times one graph at a time); ``cuda:N``, one slot."""
    jobs = max(1, jobs)
    if device == "cuda" and gpu_count > 0:
        if jobs > gpu_count:
            log.warning(
                "--jobs %d on %d GPU(s): one evaluation per GPU at a time, so %d at once",
                jobs,
                gpu_count,
                gpu_count,
            )
        return [f"cuda:{i}" for i in range(min(jobs, gpu_count))]
    if device.startswith("cuda"):
        if jobs > 1:
            log.warning("--jobs %d on %s: one evaluation at a time on one GPU", jobs, device)
        return [device]
    return [device] * jobs


class LocalExecutor(Executor):
    """Jobs on this machine, one thread per device slot; each evaluation runs in its own
    isolated child process (:func:`passnet.evaluate.evaluate_sample`)."""

    def __init__(self, devices: Sequence[str], *, evaluate: Evaluate = evaluate_sample) -> None:
        self.pool = DevicePool(devices)
        self._evaluate = evaluate

    def _work(self, job: EvalJob, on_stage: OnStage | None) -> EvalRecord:
        with self.pool.acquire() as device:
            if on_stage is not None:
                on_stage(job, "start")
            record = self._evaluate(
                job.item.path,
                job.compiler,
                job.compiler_config,
                device,
                job.settings,
                graph_label=job.item.label,
                on_stage=(lambda stage: on_stage(job, stage)) if on_stage else None,
            )
        record.device = job.device  # the resume key names the device the user asked for
        return record

    def run(self, jobs: Sequence[EvalJob], on_stage: OnStage | None = None) -> Iterator[EvalRecord]:
        with cf.ThreadPoolExecutor(max_workers=len(self.pool.slots)) as threads:
            futures = [threads.submit(self._work, job, on_stage) for job in jobs]
            try:
                for future in cf.as_completed(futures):
                    yield future.result()
            finally:
                for future in futures:
                    future.cancel()
