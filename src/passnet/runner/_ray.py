"""The Ray executor: evaluation jobs on the workers of a Ray cluster (``--executor ray``).

A worker is a Ray actor that owns one slot for as long as the executor lives: on CUDA one
GPU (``num_gpus=1``: one timing per GPU at a time) and a share of its node's CPU cores;
on the CPU the cores one evaluation uses. Ray reserves the CPUs only by count, so the
actor also claims that many cores of its node (a lock file per core, released by the
kernel when the actor dies) and pins itself to them before its first evaluation: the
forkserver that forks its evaluation children starts pinned, so their timing thread and
compile threads stay on the slot's cores, never on another slot's. A Ray *task* per job
would not do: a worker process reused for a job on another GPU keeps the forkserver,
and with it the GPU and cores, of its first job.

The driver ships each sample's files with its job (a sample is a few small text files, and
a cluster need not share a filesystem); the worker evaluates a copy in a temporary
folder. Other paths a job names (a pass compiler's ``pass_dir``, a compiler given as
``file.py:Class``) must be readable at the same path on every node (a shared
filesystem): this, and that every node runs the driver's passnet and torch, is checked
on each node before any job starts.

Records come back to the driver as they finish; the runner writes the store, so resume
and "nothing lost" are the local executor's. A worker that dies mid-job (its node lost,
its process killed) loses nothing finished: its job runs again on another worker, at
most ``max_retries`` more times, and then becomes a ``runtime_error`` record naming the
cause. Closing the iterator (Ctrl-C in the runner) starts nothing more and kills the
workers still evaluating; their evaluation children end with them.

``ray`` is imported when a :class:`RayExecutor` is made, never with ``passnet.runner``.
"""

from __future__ import annotations

import collections
import datetime as _dt
import itertools
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

from passnet.errors import (
    DeviceUnavailable,
    MissingDependency,
    PassnetError,
    SampleError,
    exception_chain,
)
from passnet.evaluate import evaluate_sample, software_versions
from passnet.isolate import process_alive
from passnet.record import ErrorInfo, EvalRecord, compiler_config_hash, record_from_dict
from passnet.runner._executor import EvalJob, Evaluate, Executor, OnStage, SampleTask
from passnet.sample import load_sample, sample_digest
from passnet.status import Status

__all__ = ["RayExecutor"]

log = logging.getLogger(__name__)

INSTALL = "pip install 'passnet[ray]'"
_MIN_RAY = (2, 9)
_CHECKED_VERSIONS = ("passnet", "torch")
"""Software every node must share with the driver: records of one run come from one stack."""


def _import_ray() -> Any:
    """The ``ray`` module, or :class:`MissingDependency` before any work starts."""
    try:
        import ray
    except ImportError as exc:
        raise MissingDependency(
            f"the Ray executor needs the ray package, which is not installed here ({INSTALL})",
            package="ray",
            needed_by="--executor ray",
            install=INSTALL,
        ) from exc
    found = tuple(int(p) for p in ray.__version__.split(".")[:2] if p.isdigit())
    if found < _MIN_RAY:
        raise MissingDependency(
            f"the Ray executor needs ray>={'.'.join(map(str, _MIN_RAY))}, found {ray.__version__} "
            f"({INSTALL})",
            package="ray",
            needed_by="--executor ray",
            install=INSTALL,
        )
    return ray


def _death_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's exceptions for a job whose worker (process or node) went away mid-job."""
    names = (
        "RayActorError",  # ActorDiedError, ActorUnavailableError
        "WorkerCrashedError",
        "NodeDiedError",
        "ObjectLostError",
        "OutOfMemoryError",  # Ray's memory monitor killed the worker
    )
    return tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))


def _auth_hint(exc: BaseException) -> str:
    """What to do when the cluster wants a token (Ray's token authentication)."""
    if not any(
        type(e).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(e)
        for e in exception_chain(exc)
    ):
        return ""
    return (
        " (the cluster asks for a token: set RAY_AUTH_MODE=token here, with the cluster's "
        "token in ~/.ray/auth_token or RAY_AUTH_TOKEN; docs/scale.md)"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class RayExecutor(Executor):
    """Jobs on the workers of a Ray cluster; records come back to this process.

    ``address``: the cluster to join (``HOST:6379``, ``auto`` for the one started on this
    machine with ``ray start``); None starts a local cluster of this machine. A process
    already connected to Ray (``ray.init`` called before) uses that connection.
    ``cpus_per_job``: the CPUs (Ray's ``num_cpus``, and as many cores claimed and pinned)
    each evaluation owns; default on CUDA the CPUs of a GPU node divided among its GPUs,
    on the CPU the jobs' ``num_threads``, or a whole node when that is unset (as a local
    evaluation uses every core). ``max_workers`` caps the evaluations at once (default:
    as many as the cluster's GPUs, or CPUs, hold). ``max_retries``: how many more times a
    job whose worker died runs before it is recorded as a ``runtime_error``.
    ``init_options`` go to ``ray.init`` (``num_cpus``, ``num_gpus`` of a local cluster).
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        cpus_per_job: int | None = None,
        max_workers: int | None = None,
        max_retries: int = 2,
        evaluate: Evaluate = evaluate_sample,
        init_options: dict[str, Any] | None = None,
    ) -> None:
        if cpus_per_job is not None and cpus_per_job < 1:
            raise ValueError(f"cpus_per_job must be 1 or more, got {cpus_per_job}")
        if max_workers is not None and max_workers < 1:
            raise ValueError(f"max_workers must be 1 or more, got {max_workers}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self._ray = ray = _import_ray()
        self.address = address
        self.cpus_per_job = cpus_per_job
        self.max_workers = max_workers
        self.max_retries = max_retries
        self._evaluate = evaluate
        self._owns_connection = not ray.is_initialized()
        if self._owns_connection:
            options: dict[str, Any] = {"log_to_driver": False, **(init_options or {})}
            if address is None:
                options = {"address": "local", "include_dashboard": False, **options}
            else:
                options["address"] = address
            try:
                ray.init(**options)
            except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; translated here
                where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
                raise PassnetError(
                    f"cannot connect to {where}: {_first_line(exc)}{_auth_hint(exc)}",
                    address=address,
                ) from exc
        elif address is not None:
            log.info("already connected to Ray: the executor uses that cluster, not %s", address)
        self._pool: _Pool | None = None
        self._runs = itertools.count()

    def run(self, jobs: Sequence[EvalJob], on_stage: OnStage | None = None) -> Iterator[EvalRecord]:
        jobs = list(jobs)
        if not jobs:
            return
        kind = _device_kind(jobs)
        cpus = self.cpus_per_job or self._default_cpus(kind, jobs)
        self._check_nodes(jobs)
        if self._pool is None or self._pool.shape != (kind, cpus):
            if self._pool is not None:
                self._pool.close()
            capacity = self._capacity(kind, cpus)
            self._pool = _Pool(self._ray, self._evaluate, kind, cpus, capacity)
        size = min(self._pool.capacity, self.max_workers or self._pool.capacity)
        run = _Run(self._ray, self._pool, jobs, on_stage, self.max_retries, next(self._runs))
        try:
            yield from run.records(size)
        finally:
            run.stop()
            run.sweep_dead_copies()

    def sample_cpus(self) -> int | None:
        """The cores (Ray's ``num_cpus``) of one dataset sample's task: ``cpus_per_job``,
        default 1 (a sample's work is a small graph's; more cores help little)."""
        return self.cpus_per_job or 1

    def run_samples(self, tasks: Sequence[SampleTask]) -> Iterator[tuple[int, Any]]:
        """Each task a Ray task with its ``num_cpus``; at most ``max_workers`` at once. A
        task whose worker dies (killed, its node lost) runs again on another worker, at
        most ``max_retries`` more times; then the run stops with a
        :class:`~passnet.errors.PassnetError` naming the sample (what finished is kept).
        The workers read the samples and write the outputs at the driver's paths: on a
        cluster of several nodes, those folders must be on a shared filesystem."""
        ray = self._ray
        tasks = list(tasks)
        remote = ray.remote(_call)
        pending = collections.deque(range(len(tasks)))
        running: dict[Any, int] = {}
        most = self.max_workers or len(tasks)
        died = _death_errors(ray)
        try:
            while pending or running:
                while pending and len(running) < most:
                    i = pending.popleft()
                    task = tasks[i]
                    ref = remote.options(
                        num_cpus=task.cpus, max_retries=self.max_retries, retry_exceptions=False
                    ).remote(task.fn, task.args)
                    running[ref] = i
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    i = running.pop(ref)
                    try:
                        result = ray.get(ref)
                    except died as exc:
                        what = getattr(tasks[i].args[-1], "sample", f"task {i}")
                        raise PassnetError(
                            f"the Ray workers running {what} died {self.max_retries + 1} "
                            f"times: {_first_line(exc)}"
                        ) from exc
                    yield i, result
        finally:
            for ref in running:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - already finished or gone
                    pass

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._owns_connection and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_connection = False

    # -- the cluster --------------------------------------------------------------------

    def _nodes(self) -> list[dict[str, float]]:
        return [n["Resources"] for n in self._ray.nodes() if n.get("Alive")]

    def _default_cpus(self, kind: str, jobs: list[EvalJob]) -> int:
        nodes = self._nodes()
        if kind == "cuda":
            shares = [int(r.get("CPU", 0) // r["GPU"]) for r in nodes if r.get("GPU", 0) >= 1]
            return max(1, min(shares, default=1))
        threads = jobs[0].settings.num_threads
        if threads:
            return int(threads)
        return max(1, min((int(r["CPU"]) for r in nodes if r.get("CPU", 0) >= 1), default=1))

    def _capacity(self, kind: str, cpus: int) -> int:
        """How many workers of this shape the cluster holds now; none is an error."""
        nodes = self._nodes()
        if kind == "cuda":
            slots = sum(min(int(r.get("GPU", 0)), int(r.get("CPU", 0) // cpus)) for r in nodes)
            if not slots:
                gpus = sum(int(r.get("GPU", 0)) for r in nodes)
                raise DeviceUnavailable(
                    f"--device cuda, but the Ray cluster has no GPU with {cpus} CPU(s) beside "
                    f"it ({gpus} GPU(s) in all; --ray-cpus sets the CPUs per evaluation)",
                    device="cuda",
                )
            return slots
        slots = sum(int(r.get("CPU", 0) // cpus) for r in nodes)
        if not slots:
            raise DeviceUnavailable(
                f"no node of the Ray cluster has the {cpus} CPU(s) an evaluation takes "
                "(--threads, or --ray-cpus)",
                device="cpu",
            )
        return slots

    def _check_nodes(self, jobs: list[EvalJob]) -> None:
        """Every node runs the driver's passnet and torch and reads the paths the jobs
        name (other than samples, which travel with their jobs); else nothing starts."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        paths = sorted(set().union(*(_named_paths(j) for j in jobs)))
        facts = ray.remote(_node_facts)
        pending = {
            (node["NodeManagerAddress"], node["NodeID"]): facts.options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            ).remote(paths)
            for node in ray.nodes()
            if node.get("Alive") and node["Resources"].get("CPU", 0) > 0
        }
        mine = {k: v for k, v in software_versions().items() if k in _CHECKED_VERSIONS}
        problems = []
        for (node, _), ref in sorted(pending.items()):
            try:
                versions, missing = ray.get(ref, timeout=300)
            except Exception as exc:  # noqa: BLE001 - any failure of the check is reported
                problems.append(f"{node}: the check did not run ({_first_line(exc)})")
                continue
            theirs = {k: v for k, v in versions.items() if k in _CHECKED_VERSIONS}
            if theirs != mine:
                problems.append(f"{node} runs {theirs}, this process {mine}")
            if missing:
                problems.append(f"{node} cannot read {', '.join(missing)}")
        if problems:
            raise PassnetError(
                "the Ray cluster cannot run these evaluations: "
                + "; ".join(problems)
                + " (every node needs the same passnet and torch, and the paths a job names "
                "besides its sample on a shared filesystem, at the same path)"
            )


def _call(fn: Any, args: tuple[Any, ...]) -> Any:
    """A sample task in a Ray worker: ``fn(*args)``."""
    return fn(*args)


def _device_kind(jobs: list[EvalJob]) -> str:
    devices = {j.device for j in jobs}
    if len(devices) > 1:
        raise ValueError(f"one run, one device: got {sorted(devices)}")
    (device,) = devices
    if device == "cpu":
        return "cpu"
    if device == "cuda":
        return "cuda"
    raise DeviceUnavailable(
        f"--device {device}: on Ray, evaluations take whichever GPU of the cluster is "
        "free; use --device cuda",
        device=device,
    )


def _named_paths(job: EvalJob) -> set[str]:
    """Paths a job names besides its sample: a compiler file, config values that are
    paths here (a pass compiler's ``pass_dir``)."""
    found = set()
    target, sep, _ = job.compiler.rpartition(":")
    if sep and target.endswith(".py"):
        found.add(target)
    for value in job.compiler_config.values():
        if isinstance(value, str) and value and Path(value).exists():
            found.add(value)
    return found


def _node_facts(paths: list[str]) -> tuple[dict[str, str], list[str]]:
    """On a node: its software versions, and which of ``paths`` it cannot read."""
    return software_versions(), [p for p in paths if not os.access(p, os.R_OK)]


# -- the workers --------------------------------------------------------------------------


def _claim_cores(count: int) -> list[IO[str]]:
    """Claim ``count`` cores of this node that no other passnet worker holds and pin this
    process to them; the open lock files hold the claim (the kernel drops it when the
    process ends). Cores are taken from the last (the kernel and most daemons favour the
    first ones). Where too few are free, nothing is claimed and the process stays unpinned
    (as it does off Linux)."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    import fcntl

    allowed = sorted(os.sched_getaffinity(0))
    folder = Path(tempfile.gettempdir()) / "passnet-cores"
    held: list[tuple[int, IO[str]]] = []
    try:
        folder.mkdir(exist_ok=True)
        for core in reversed(allowed):
            lock = open(folder / f"{core}.lock", "a")  # noqa: SIM115 - held while the worker lives
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                continue
            held.append((core, lock))
            if len(held) == count:
                break
    except OSError as exc:
        log.warning("cannot claim cores in %s (%s): this worker is not pinned", folder, exc)
    if len(held) < count:  # the driver warns: it hears from describe() that it is unpinned
        for _, lock in held:
            lock.close()
        return []
    os.sched_setaffinity(0, {core for core, _ in held})
    return [lock for _, lock in held]


_SAMPLE_COPY = "passnet-sample-"
"""Prefix of a worker's sample copies: ``passnet-sample-PID-…`` in the node's temp folder."""


def _sweep_sample_copies() -> None:
    """Remove the sample copies of workers that died mid-job (they had no time to)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_SAMPLE_COPY}*-*"):
        pid = folder.name[len(_SAMPLE_COPY) :].split("-")[0]
        if not pid.isdigit():
            continue
        if not process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


class _Worker:
    """A Ray actor: one evaluation at a time, on its GPU (if any) and its claimed cores."""

    def __init__(self, evaluate: Evaluate, cores: int, stages: Any) -> None:
        self._evaluate = evaluate
        self._stages = stages
        self._claim = _claim_cores(cores)
        _sweep_sample_copies()

    def sweep(self) -> None:
        """Remove the copies of this node's dead workers (the driver asks at a run's end)."""
        _sweep_sample_copies()

    def describe(self) -> dict[str, Any]:
        import ray

        return {
            "node": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
            "gpus": [str(g) for g in ray.get_gpu_ids()],
            "cores": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [],
            "pinned": bool(self._claim),
        }

    def evaluate(
        self, tag: tuple[int, int, int], job: EvalJob, files: dict[str, bytes], device: str
    ) -> dict[str, Any]:
        def heard(stage: str) -> None:
            try:
                self._stages.put_nowait((tag, stage))
            except Exception:  # noqa: BLE001 - progress only: never fails an evaluation
                pass

        heard("start")
        with tempfile.TemporaryDirectory(prefix=f"{_SAMPLE_COPY}{os.getpid()}-") as tmp:
            folder = Path(tmp) / (job.item.path.name or "sample")
            folder.mkdir()
            for name, data in files.items():
                (folder / name).write_bytes(data)
            record = self._evaluate(
                folder,
                job.compiler,
                job.compiler_config,
                device,
                job.settings,
                graph_label=job.item.label,
                on_stage=heard,
            )
        if record.error is not None:  # name the sample as the driver knows it
            err, here, there = record.error, str(folder), str(job.item.path)
            err.message = err.message.replace(here, there)
            err.traceback = err.traceback.replace(here, there)
            err.context = {k: v.replace(here, there) for k, v in err.context.items()}
        return record.to_dict()


def _sample_files(path: Path) -> dict[str, bytes]:
    """The files of a sample folder (not its subfolders), as they travel with its job."""
    files = {}
    for file in sorted(Path(path).iterdir()) if Path(path).is_dir() else ():
        if file.is_file():
            try:
                files[file.name] = file.read_bytes()
            except OSError as exc:  # the worker finds it missing and records why
                log.warning("cannot read %s: %s", file, exc.strerror)
    return files


class _Place(NamedTuple):
    """Where a worker runs: its node's address and its process."""

    node: str
    pid: int

    def __str__(self) -> str:
        return f"{self.node} pid {self.pid}"


class _Pool:
    """The executor's workers, kept from run to run while the jobs' shape is the same."""

    def __init__(self, ray: Any, evaluate: Evaluate, kind: str, cpus: int, capacity: int):
        from ray.util.queue import Queue

        self.ray = ray
        self.shape = (kind, cpus)
        self.capacity = capacity
        self.stages = Queue(actor_options={"num_cpus": 0})
        options: dict[str, Any] = {"num_cpus": cpus, "max_restarts": 0, "max_task_retries": 0}
        if kind == "cuda":
            options["num_gpus"] = 1
        self._actor = ray.remote(_Worker).options(**options)
        self._evaluate = evaluate
        self.idle: list[Any] = []
        self.starting: dict[Any, Any] = {}  # describe() ref -> actor
        self.place: dict[Any, _Place] = {}  # actor -> where it runs

    @property
    def size(self) -> int:
        return len(self.place) + len(self.starting)

    def grow(self, size: int) -> None:
        while self.size < size:
            actor = self._actor.remote(self._evaluate, self.shape[1], self.stages)
            self.starting[actor.describe.remote()] = actor

    def started(self, ref: Any) -> None:
        """A worker answered (it is idle now) or failed to start (raises Ray's error)."""
        actor = self.starting.pop(ref)
        try:
            facts = self.ray.get(ref)
        except Exception:
            self.kill(actor)
            raise
        self.place[actor] = _Place(facts["node"], facts["pid"])
        self.idle.append(actor)
        if not facts["pinned"]:  # the worker's own log stays on its node: said here
            log.warning(
                "the Ray worker on %s has not got %d cores no other worker holds: it runs "
                "unpinned (Ray counts more CPUs on that node than it has free cores)",
                self.place[actor],
                self.shape[1],
            )
        log.info(
            "Ray worker on %s: GPUs %s, cores %s", facts["node"], facts["gpus"], facts["cores"]
        )

    def kill(self, actor: Any) -> None:
        self.place.pop(actor, None)
        if actor in self.idle:
            self.idle.remove(actor)
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def close(self) -> None:
        for actor in [*self.place, *self.starting.values()]:
            self.kill(actor)
        self.starting.clear()
        try:
            self.stages.shutdown()
        except Exception:  # noqa: BLE001 - already gone with the cluster
            pass


class _Run:
    """One ``run``: hands jobs to idle workers, yields records as they finish, runs a job
    whose worker died again (or records it), and forwards the workers' stages."""

    def __init__(
        self,
        ray: Any,
        pool: _Pool,
        jobs: list[EvalJob],
        on_stage: OnStage | None,
        max_retries: int,
        run_id: int,
    ) -> None:
        self.ray = ray
        self.pool = pool
        self.jobs = jobs
        self.on_stage = on_stage
        self.max_retries = max_retries
        self.run_id = run_id
        self.pending = collections.deque(range(len(jobs)))
        self.deaths = [0] * len(jobs)
        self.stage = ["start"] * len(jobs)
        self.running: dict[Any, tuple[Any, int]] = {}  # evaluate() ref -> (actor, job index)
        self.died = _death_errors(ray)
        self.failed_starts = 0
        self.death_nodes: set[str] = set()  # nodes where a worker died mid-job

    def records(self, size: int) -> Iterator[EvalRecord]:
        self.pool.grow(min(size, len(self.jobs)))
        while self.pending or self.running:
            self._dispatch()
            refs = [*self.running, *self.pool.starting]
            if not refs:
                raise PassnetError(
                    f"no Ray worker is left to run the {len(self.pending)} evaluations not run"
                )
            done, _ = self.ray.wait(refs, num_returns=1, timeout=0.5)
            if done:
                done, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
            self._forward_stages()
            for ref in done:
                if ref in self.pool.starting:
                    self._started(ref, size)
                    continue
                record = self._finished(ref, size)
                if record is not None:
                    self._dispatch()  # keep the worker busy while the store is written
                    yield record

    def stop(self) -> None:
        """Kill the workers still evaluating: their records would have nowhere to go."""
        self.pending.clear()
        for actor, _ in self.running.values():
            self.pool.kill(actor)
        self.running.clear()

    def sweep_dead_copies(self) -> None:
        """Remove the sample copies the workers that died left behind: a live worker of
        each such node removes them (the driver itself on its own node, if none is left
        there); on a node with no worker left, the next worker started there does."""
        if not self.death_nodes:
            return
        here = self.ray.util.get_node_ip_address()
        sweepers = {self.pool.place[a].node: a for a in self.pool.idle if a in self.pool.place}
        refs = [sweepers[n].sweep.remote() for n in self.death_nodes if n in sweepers]
        if here in self.death_nodes and here not in sweepers:
            _sweep_sample_copies()
        try:
            self.ray.get(refs, timeout=30)
        except Exception as exc:  # noqa: BLE001 - tidying only: never fails the run
            log.warning("could not remove dead Ray workers' sample copies: %s", _first_line(exc))
        self.death_nodes.clear()

    def _dispatch(self) -> None:
        while self.pool.idle and self.pending:
            index = self.pending.popleft()
            actor = self.pool.idle.pop()
            job = self.jobs[index]
            device = "cuda:0" if job.device == "cuda" else job.device  # Ray's GPU, as seen
            tag = (self.run_id, index, self.deaths[index])
            ref = actor.evaluate.remote(tag, job, _sample_files(job.item.path), device)
            self.running[ref] = (actor, index)

    def _started(self, ref: Any, size: int) -> None:
        try:
            self.pool.started(ref)
            self.failed_starts = 0
        except Exception as exc:
            self.failed_starts += 1
            if self.failed_starts > 2 * max(1, size):
                raise PassnetError(f"Ray workers fail to start: {_first_line(exc)}") from exc
            log.warning("a Ray worker failed to start (%s): starting another", _first_line(exc))
            if self.pending:
                self.pool.grow(min(size, len(self.pending) + len(self.running)))

    def _finished(self, ref: Any, size: int) -> EvalRecord | None:
        actor, index = self.running.pop(ref)
        job = self.jobs[index]
        try:
            data = self.ray.get(ref)
        except self.died as exc:
            place = self.pool.place.get(actor)
            where = str(place) if place is not None else "a worker"
            if place is not None:
                self.death_nodes.add(place.node)
            self.pool.kill(actor)
            self.deaths[index] += 1
            if self.deaths[index] <= self.max_retries:
                log.warning(
                    "the Ray worker (%s) evaluating %s died during stage %r (%s): running it "
                    "again (retry %d of %d)",
                    where,
                    job.item.label,
                    self.stage[index],
                    _first_line(exc),
                    self.deaths[index],
                    self.max_retries,
                )
                self.pending.appendleft(index)
                self.pool.grow(min(size, len(self.pending) + len(self.running)))
                return None
            if self.pending:
                self.pool.grow(min(size, len(self.pending) + len(self.running)))
            return _lost_record(job, self.deaths[index], self.stage[index], where, exc)
        finally:
            if actor in self.pool.place:  # alive: it answered, a record or an exception
                self.pool.idle.append(actor)
        record = record_from_dict(data)
        record.device = job.device  # the resume key names the device the user asked for
        return record

    def _forward_stages(self) -> None:
        stages = self.pool.stages
        try:
            events = stages.get_nowait_batch(stages.qsize()) if stages.qsize() else []
        except Exception:  # noqa: BLE001 - progress only
            return
        busy = {index for _, index in self.running.values()}
        for (run_id, index, attempt), stage in events:
            # only the current attempt of a job still running: never a finished graph's
            if run_id != self.run_id or index not in busy or attempt != self.deaths[index]:
                continue
            self.stage[index] = stage
            if self.on_stage is not None:
                self.on_stage(self.jobs[index], stage)


def _lost_record(
    job: EvalJob, attempts: int, stage: str, where: str, cause: BaseException
) -> EvalRecord:
    """The record of a job whose worker died on every attempt: a runtime error that names
    the cause, keyed as an evaluation of this sample would be (so a rerun resumes it)."""
    try:
        graph_hash = load_sample(job.item.path).graph_hash
    except SampleError:
        graph_hash = ""
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return EvalRecord(
        graph=job.item.label,
        graph_hash=graph_hash,
        compiler=job.compiler,
        compiler_config=dict(job.compiler_config),
        compiler_config_hash=compiler_config_hash(job.compiler, job.compiler_config),
        device=job.device,
        status=Status.RUNTIME_ERROR,
        error=ErrorInfo(
            "WorkerDied",
            f"the Ray worker evaluating this graph died on each of {attempts} attempt(s), "
            f"the last ({where}) during stage '{stage}': {_first_line(cause)}",
            stage,
            {"attempts": str(attempts), "worker": where},
            str(cause),
        ),
        settings=job.settings.to_dict(),
        started_at=now,
        finished_at=now,
        sample_digest=sample_digest(job.item.path),
    )
