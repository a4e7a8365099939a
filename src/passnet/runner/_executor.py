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
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from passnet.evaluate import (
    SCOPES,
    EvalSettings,
    EvaluationStopped,
    PrepareOutcome,
    Turns,
    evaluate_sample,
    evaluate_samples,
    prepare_sample,
    turn_bound_s,
)
from passnet.isolate import even_chunks
from passnet.record import EvalRecord
from passnet.runner._plan import WorkItem

__all__ = [
    "DevicePool",
    "EvalJob",
    "Executor",
    "LocalExecutor",
    "OnStage",
    "SampleTask",
    "groups",
    "local_devices",
    "slot_cores",
]

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


class Evaluate(Protocol):
    """What evaluates one job: ``evaluate_sample``'s signature. ``should_stop()`` (None
    where nothing can stop the job) is asked while it runs: true when the run stops
    part-way, and the evaluation then ends, raising
    :class:`~passnet.evaluate.EvaluationStopped`. The local executor passes ``prepared``
    only with prepare workers, ``turns`` and ``cores`` only with ``overlap``; the Ray
    executor passes ``cores`` on Linux (the cores the job claimed, or all of its worker's)."""

    def __call__(
        self,
        path: Path,
        compiler: str,
        config: dict[str, Any],
        device: str,
        settings: EvalSettings,
        *,
        graph_label: str,
        on_stage: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        prepared: float | None = None,
        turns: Turns | None = None,
        cores: Sequence[int] = (),
    ) -> EvalRecord: ...


EvaluateMany = Callable[..., list[EvalRecord]]
"""``evaluate_samples``' signature: (paths, compiler, config, device, settings,
graph_labels=, on_stage=, on_record=, should_stop=)."""

OnStage = Callable[[EvalJob, str], None]
"""Hears each stage of a job as it begins: ``start`` when it gets a device, then the
evaluation child's stages (``load``, ``compile``, ``measure``, ...)."""


@dataclass(frozen=True)
class SampleTask:
    """One sample's job of a dataset stage: ``fn(*args)`` in a worker. ``fn`` is a plain
    module-level function and ``args`` plain data (both picklable: a cluster ships them);
    its result comes back as it is. ``cpus``: the cores the job owns."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    cpus: int = 1


class Executor(abc.ABC):
    """Runs evaluation jobs (records come back in the order they finish), and the
    samples of dataset stages (:meth:`run_samples`)."""

    @abc.abstractmethod
    def run(self, jobs: Sequence[EvalJob], on_stage: OnStage | None = None) -> Iterator[EvalRecord]:
        """Start ``jobs`` and yield each one's record as it finishes. Closing the iterator
        early (an error, Ctrl-C in the consumer) cancels the jobs not yet started.
        ``on_stage`` (progress, optional: an executor may call it for some stages only or
        not at all) may be called from other threads."""

    def sample_cpus(self) -> int | None:
        """The cores one dataset sample's job owns, its child's torch threads (None: the
        child's default, every core)."""
        return None

    def run_samples(self, tasks: Sequence[SampleTask]) -> Iterator[tuple[int, Any]]:
        """Run every task and yield ``(index, result)`` as each finishes. A task whose
        worker dies (a node lost, a process killed) runs again on another; closing the
        iterator early cancels the tasks not yet started."""
        raise NotImplementedError(f"{type(self).__name__} runs no dataset stage")

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
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(len(self.slots)):
            self._free.put(index)

    @contextlib.contextmanager
    def acquire(self) -> Iterator[str]:
        """A free slot's device for the duration of the block (waits until one is free)."""
        with self.acquire_slot() as (_, device):
            yield device

    @contextlib.contextmanager
    def acquire_slot(self) -> Iterator[tuple[int, str]]:
        """A free slot, (its index, its device), for the duration of the block."""
        index = self._free.get()
        try:
            yield index, self.slots[index]
        finally:
            self._free.put(index)


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


Prepare = Callable[..., PrepareOutcome]
"""``prepare_sample``'s signature: (path, compiler, config, device, settings, cores=)."""


class LocalExecutor(Executor):
    """Jobs on this machine, one thread per device slot; each evaluation runs in its own
    isolated child process (:func:`passnet.evaluate.evaluate_sample`).

    With ``prepare_workers`` > 0, compilation overlaps timing: that many workers compile
    upcoming graphs ahead (:func:`passnet.evaluate.prepare_sample`, each in a child pinned
    to ``prepare_cores``), each for the device whose queue is shortest, while every device
    slot evaluates prepared graphs one at a time, compiling them once from the caches.
    ``lookahead`` bounds the graphs prepared but not yet evaluated, per slot.

    Without prepare workers, jobs whose settings ask for ``graphs_per_child`` > 1 run in
    groups of up to that many (jobs alike but for their graph, spread evenly over the
    slots), each group in one evaluation child (:func:`passnet.evaluate.evaluate_samples`).

    With ``overlap`` K > 1, each device runs K evaluations at once, each child pinned to
    its slot's share of the cores: they load, compile and check correctness side by side,
    and time one at a time, each in a timing turn that stops the others its ``scope``
    covers (:class:`passnet.evaluate.Turns`): the program timed is the one its own child
    just compiled, on a quiet host.
    """

    def __init__(
        self,
        devices: Sequence[str],
        *,
        evaluate: Evaluate = evaluate_sample,
        evaluate_many: EvaluateMany = evaluate_samples,
        prepare: Prepare = prepare_sample,
        prepare_workers: int = 0,
        prepare_cores: Sequence[int] = (),
        lookahead: int = 2,
        overlap: int = 1,
        scope: str = "host",
    ) -> None:
        if overlap < 1:
            raise ValueError(f"overlap must be 1 or more, got {overlap}")
        if overlap > 1 and prepare_workers:
            raise ValueError("overlap and prepare workers are two ways to compile beside timing")
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        self.overlap, self.scope = overlap, scope
        devices = [device for device in devices for _ in range(overlap)]
        self.pool = DevicePool(devices)
        self.slot_cores = slot_cores(len(devices)) if overlap > 1 else [()] * len(devices)
        self._turns: Turns | None = None
        self._evaluate = evaluate
        self._evaluate_many = evaluate_many
        self._prepare = prepare
        self.prepare_workers = max(0, prepare_workers)
        self.prepare_cores = tuple(prepare_cores)
        self.lookahead = max(1, lookahead)

    def _placement(self, slot: int | None) -> dict[str, Any]:
        """The overlap arguments of an evaluation in ``slot``: its turns and cores."""
        if self._turns is None or slot is None:
            return {}
        return {"turns": self._turns, "cores": self.slot_cores[slot]}

    def _evaluate_job(
        self,
        job: EvalJob,
        device: str,
        on_stage: OnStage | None,
        prepared: float | None,
        slot: int | None = None,
        stop: threading.Event | None = None,
    ) -> EvalRecord:
        """The job's record; raises :class:`EvaluationStopped` where ``stop`` ended it."""
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
            **({"prepared": prepared} if prepared is not None else {}),
            should_stop=stop.is_set if stop is not None else None,
            **self._placement(slot),
        )
        record.device = job.device  # the resume key names the device the user asked for
        return record

    def _work(
        self,
        group: list[EvalJob],
        on_stage: OnStage | None,
        out: Callable[[EvalRecord], None],
        stop: threading.Event,
    ) -> None:
        with self.pool.acquire_slot() as (slot, device):
            if stop.is_set():
                return
            try:
                if len(group) == 1:
                    out(self._evaluate_job(group[0], device, on_stage, None, slot, stop))
                else:
                    self._evaluate_group(group, device, on_stage, out, stop, slot)
            except EvaluationStopped:
                return  # the consumer stopped: no record (a rerun evaluates the graph)
            finally:
                if self._turns is not None:  # a child killed in its turn stops nobody for good
                    self._turns.recover()

    def _evaluate_group(
        self,
        group: list[EvalJob],
        device: str,
        on_stage: OnStage | None,
        out: Callable[[EvalRecord], None],
        stop: threading.Event,
        slot: int | None = None,
    ) -> None:
        """One child for the group; when the consumer stops (``stop``), the child is ended
        and the graphs not yet finished get no record (a rerun evaluates them)."""
        first = group[0]
        if on_stage is not None:
            for job in group:
                on_stage(job, "start")

        def record(index: int, rec: EvalRecord) -> None:
            rec.device = group[index].device  # the resume key: the device asked for
            out(rec)

        self._evaluate_many(
            [job.item.path for job in group],
            first.compiler,
            first.compiler_config,
            device,
            first.settings,
            graph_labels=[job.item.label for job in group],
            on_stage=(lambda i, stage: on_stage(group[i], stage)) if on_stage else None,
            on_record=record,
            should_stop=stop.is_set,
            **self._placement(slot),
        )

    def run(self, jobs: Sequence[EvalJob], on_stage: OnStage | None = None) -> Iterator[EvalRecord]:
        if self.prepare_workers:
            yield from self._run_pipelined(jobs, on_stage)
            return
        records: queue.SimpleQueue[Any] = queue.SimpleQueue()
        stop = threading.Event()
        if self.overlap > 1:
            every = tuple(core for share in self.slot_cores for core in share)
            bound = max((turn_bound_s(job.settings) for job in jobs), default=None)
            self._turns = Turns.create(self.scope, self.overlap, every, bound)
        with (
            contextlib.ExitStack() as cleanup,
            cf.ThreadPoolExecutor(max_workers=len(self.pool.slots)) as threads,
        ):
            if self._turns is not None:
                cleanup.callback(self._end_turns)
                # a turn that outlasts its bound is broken: nothing a stopped child holds
                # stalls the run (passnet.evaluate.Turns)
                cleanup.enter_context(self._turns.watching())
            futures = [
                threads.submit(self._work, group, on_stage, records.put, stop)
                for group in groups(jobs, len(self.pool.slots))
            ]
            try:
                for _ in jobs:
                    while True:
                        try:
                            yield records.get(timeout=0.5)
                            break
                        except queue.Empty:
                            _raise_failure(futures)
                _raise_failure(futures)
            finally:
                stop.set()  # a group in its child stops within a second
                for future in futures:
                    future.cancel()

    def sample_cpus(self) -> int | None:
        """With several slots, each job's share of the cores (so that jobs at once share
        them); with one, None (every core)."""
        slots = len(self.pool.slots)
        return max(1, (os.cpu_count() or 1) // slots) if slots > 1 else None

    def run_samples(self, tasks: Sequence[SampleTask]) -> Iterator[tuple[int, Any]]:
        """The tasks on this machine, as many at once as the pool has slots (each task
        isolates its own work in a child process)."""
        tasks = list(tasks)
        if not tasks:
            return
        pool = cf.ThreadPoolExecutor(max_workers=min(len(self.pool.slots), len(tasks)))
        try:
            futures = {pool.submit(t.fn, *t.args): i for i, t in enumerate(tasks)}
            for future in cf.as_completed(futures):
                yield futures[future], future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _end_turns(self) -> None:
        if self._turns is not None:
            self._turns.remove()
            self._turns = None

    def _run_pipelined(
        self, jobs: Sequence[EvalJob], on_stage: OnStage | None
    ) -> Iterator[EvalRecord]:
        pipeline = _Pipeline(self, list(jobs), on_stage)
        try:
            yield from pipeline.records()
        finally:
            pipeline.stop()


def _raise_failure(futures: list[cf.Future[None]]) -> None:
    """Raise the exception of a job group that failed (an error of the harness's own)."""
    for future in futures:
        if future.done() and not future.cancelled() and future.exception() is not None:
            raise future.exception()  # type: ignore[misc]


def slot_cores(slots: int) -> list[tuple[int, ...]]:
    """This process's allowed cores in ``slots`` contiguous shares as even as can be (a
    slot gets no core of its own where there are fewer cores than slots: () for all)."""
    if not hasattr(os, "sched_getaffinity"):
        return [()] * slots
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < slots:
        return [()] * slots
    size, extra = divmod(len(cores), slots)
    shares, start = [], 0
    for index in range(slots):
        end = start + size + (index < extra)
        shares.append(tuple(cores[start:end]))
        start = end
    return shares


def groups(jobs: Sequence[EvalJob], slots: int) -> list[list[EvalJob]]:
    """``jobs`` in the groups that share an evaluation child: consecutive jobs alike but for
    their graph (compiler, configuration, device, settings), at most ``graphs_per_child``
    each and evenly sized so that the ``slots`` have work alike; a job alone when its
    settings keep ``graphs_per_child`` at 1."""
    out: list[list[EvalJob]] = []
    run: list[EvalJob] = []

    def alike(a: EvalJob, b: EvalJob) -> bool:
        return (a.compiler, a.compiler_config, a.device, a.settings) == (
            b.compiler,
            b.compiler_config,
            b.device,
            b.settings,
        )

    def flush() -> None:
        if not run:
            return
        out.extend(even_chunks(run, run[0].settings.graphs_per_child, slots))
        run.clear()

    for job in jobs:
        if run and not alike(run[0], job):
            flush()
        run.append(job)
    flush()
    return out


_DONE = object()


class _Pipeline:
    """Prepare workers feed one queue per distinct device; the device's slots drain it.

    Every job is prepared once and evaluated once; a job whose preparation fails is
    evaluated all the same (it meets the failure again and records it). Records go to one
    output queue; an exception in a worker thread is handed to the consumer. The consumer
    takes exactly one record per job, then :meth:`stop` ends the threads.
    """

    def __init__(self, owner: LocalExecutor, jobs: list[EvalJob], on_stage: OnStage | None):
        self.owner = owner
        self.jobs = jobs
        self.on_stage = on_stage
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.pending = list(reversed(jobs))  # popped from the end: job order
        slots = owner.pool.slots
        self.devices = list(dict.fromkeys(slots))
        self.slots_of = {d: slots.count(d) for d in self.devices}
        self.ready: dict[str, queue.Queue[Any]] = {d: queue.Queue() for d in self.devices}
        self.queued = dict.fromkeys(self.devices, 0)  # assigned, not yet being evaluated
        self.room = threading.Semaphore(owner.lookahead * len(slots))
        self.out: queue.Queue[Any] = queue.Queue()
        self.threads: list[threading.Thread] = []
        self.preparers = 0

    def records(self) -> Iterator[EvalRecord]:
        self.preparers = min(self.owner.prepare_workers, len(self.jobs))
        workers = [self._preparer] * self.preparers
        for target in workers:
            self.threads.append(threading.Thread(target=self._guarded, args=(target,), daemon=True))
        for device in self.owner.pool.slots:
            self.threads.append(
                threading.Thread(target=self._guarded, args=(self._measurer, device), daemon=True)
            )
        for thread in self.threads:
            thread.start()
        for _ in self.jobs:
            item = self.out.get()
            if isinstance(item, BaseException):
                raise item
            yield item

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            self.pending.clear()
        for device in self.devices:
            for _ in range(self.slots_of[device]):
                self.ready[device].put(_DONE)
        for _ in range(self.preparers):
            self.room.release()  # wake every preparer that may be waiting for room
        for thread in self.threads:
            thread.join()

    def _guarded(self, target: Callable[..., None], *args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            self.stopping.set()
            self.out.put(exc)

    def _next(self) -> tuple[EvalJob, str] | None:
        """The next job to prepare and the device it is for: the one with the fewest jobs
        waiting per slot."""
        with self.lock:
            if not self.pending or self.stopping.is_set():
                return None
            job = self.pending.pop()
            device = min(self.devices, key=lambda d: self.queued[d] / self.slots_of[d])
            self.queued[device] += 1
            return job, device

    def _preparer(self) -> None:
        while True:
            self.room.acquire()
            picked = None if self.stopping.is_set() else self._next()
            if picked is None:
                return
            job, device = picked
            outcome = self.owner._prepare(
                job.item.path,
                job.compiler,
                job.compiler_config,
                device,
                job.settings,
                cores=self.owner.prepare_cores,
            )
            if not outcome.ok:
                log.info(
                    "preparing %s failed (%s): evaluated all the same",
                    job.item.label,
                    outcome.error,
                )
            self.ready[device].put((job, outcome.seconds if outcome.ok else None))

    def _measurer(self, device: str) -> None:
        while not self.stopping.is_set():
            item = self.ready[device].get()
            if item is _DONE:
                return
            job, prepared = item
            with self.lock:
                self.queued[device] -= 1
            self.room.release()
            self.out.put(self.owner._evaluate_job(job, device, self.on_stage, prepared))
