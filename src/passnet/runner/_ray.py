"""The Ray executor: evaluation jobs on the workers of a Ray cluster (``--executor ray``).

A worker is a Ray actor that owns one slot for as long as the executor lives: on CUDA one
GPU (``num_gpus=1``: one timing per GPU at a time) and a share of its node's CPU cores;
on the CPU the cores one evaluation uses. Ray reserves the CPUs only by count, so each
job also claims that many cores of its node for as long as it runs (a lock file per
core, held with ``flock``: released when the job ends, however it ends, and by the
kernel when its worker dies) and runs pinned to them: the evaluation child pins itself
to the job's cores, so its timing thread and compile threads never meet another job's.
A job waits for free cores (a worker still exiting, another cluster's job on the same
node holds them) at most its own timeout, then runs unpinned and the driver warns.
Claims are the jobs', not the workers': an idle worker, a worker Ray keeps from an
earlier run, or one of another executor holds no core, and a worker's later job never
inherits an unpinned start. A Ray *task* per job would not do: a worker process reused
for a job on another GPU keeps the forkserver, and with it the GPU, of its first job.

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
import time
from collections.abc import Callable, Iterator, Sequence
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
    ``cpus_per_job``: the CPUs (Ray's ``num_cpus``, and as many cores each job claims and
    is pinned to while it runs) each evaluation owns; default on CUDA the CPUs of a GPU
    node divided among its GPUs, on the CPU the jobs' ``num_threads``, or a whole node
    when that is unset (as a local evaluation uses every core). ``max_workers`` caps the
    evaluations at once (default: as many as the cluster's GPUs, or CPUs, hold).
    ``max_retries``: how many more times a job whose worker died runs before it is
    recorded as a ``runtime_error``.
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

_CORES_FOLDER = "passnet-cores"
"""The node's core claims: ``N.lock`` per core in its temp folder, held with ``flock``."""
_CLAIM_POLL_S = 0.1
"""How often a job waiting for free cores tries again."""


class _Claim(NamedTuple):
    """Cores of this node that one job holds while it runs (none: it runs unpinned)."""

    cores: tuple[int, ...]
    locks: tuple[IO[str], ...] = ()
    waited_s: float = 0.0
    problem: str = ""
    """Why nothing is claimed, where cores were asked for and none are held."""

    def release(self) -> None:
        """Give the cores back (closing a lock file drops its ``flock``)."""
        for lock in self.locks:
            lock.close()


def _cores_folder() -> Path:
    return Path(tempfile.gettempdir()) / _CORES_FOLDER


def _claim_cores(
    count: int,
    allowed: Sequence[int],
    *,
    prefer: Sequence[int] = (),
    wait_s: float,
    folder: Path | None = None,
) -> _Claim:
    """Claim ``count`` of the ``allowed`` cores that no other job of this node holds, all
    or none: a lock file per core, held with ``flock``, which the kernel drops when its
    holder ends however it ends (a killed worker leaves no stale claim). The cores of
    ``prefer`` (the worker's previous job's) are taken first where free, then the others
    from the last (the kernel and most daemons favour the first ones). While too few are
    free (another job, a worker still exiting, another cluster on this node holds them),
    it tries again every ``_CLAIM_POLL_S`` s, for at most ``wait_s``; then, or where the
    node has fewer allowed cores than ``count`` or the lock files cannot be made, nothing
    is claimed and :attr:`_Claim.problem` says why (off Linux too, silently)."""
    if not hasattr(os, "sched_setaffinity"):
        return _Claim(())
    import fcntl

    if count > len(allowed):
        return _Claim((), problem=f"this worker may use {len(allowed)} cores, fewer than {count}")
    folder = folder or _cores_folder()
    order = [c for c in prefer if c in allowed]
    order += [c for c in reversed(sorted(allowed)) if c not in order]
    started = time.monotonic()
    while True:
        held: list[tuple[int, IO[str]]] = []
        busy: list[int] = []
        try:
            folder.mkdir(exist_ok=True)
            for core in order:
                lock = open(folder / f"{core}.lock", "a+")  # noqa: SIM115 - held for the job
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    lock.close()
                    busy.append(core)
                    continue
                held.append((core, lock))
                lock.truncate(0)  # the holder, for the messages of jobs that wait for it
                lock.write(f"{os.getpid()}\n")
                lock.flush()
                if len(held) == count:
                    break
        except OSError as exc:
            for _, lock in held:
                lock.close()
            return _Claim((), problem=f"cannot claim cores in {folder} ({exc})")
        waited_s = time.monotonic() - started
        if len(held) == count:
            cores, locks = zip(*sorted(held))
            return _Claim(cores, locks, waited_s)
        for _, lock in held:
            lock.close()
        if waited_s >= wait_s:
            holders = _holders(folder, busy)
            return _Claim(
                (),
                waited_s=waited_s,
                problem=f"{count} of its {len(allowed)} cores were not free for {waited_s:.0f} s"
                + (f" (held by pid {', '.join(holders)})" if holders else ""),
            )
        time.sleep(_CLAIM_POLL_S)


def _holders(folder: Path, cores: Sequence[int]) -> list[str]:
    """The processes that last claimed ``cores`` (as their lock files say), each once."""
    pids: dict[str, None] = {}
    for core in sorted(cores):
        try:
            pid = (folder / f"{core}.lock").read_text().strip()
        except OSError:
            continue
        if pid.isdigit():
            pids[pid] = None
    return list(pids)


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


class _Outcome(NamedTuple):
    """What a worker hands back for a job: its record, and the cores it ran on."""

    record: dict[str, Any]
    cores: tuple[int, ...]
    waited_s: float
    """How long the job waited for free cores before it started."""
    unpinned: str
    """Why the job ran on every core of the worker, where it asked for some ("" if not)."""


class _Worker:
    """A Ray actor: one evaluation at a time, on its GPU (if any) and, for each job, cores
    it claims for that job alone."""

    def __init__(self, evaluate: Evaluate, cores: int, stages: Any) -> None:
        self._evaluate = evaluate
        self._stages = stages
        self._count = cores
        self._allowed = (
            tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
        )
        self._last: tuple[int, ...] = ()  # the previous job's cores, claimed first if free
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
        }

    def evaluate(
        self, tag: tuple[int, int, int], job: EvalJob, files: dict[str, bytes], device: str
    ) -> _Outcome:
        def heard(stage: str) -> None:
            try:
                self._stages.put_nowait((tag, stage))
            except Exception:  # noqa: BLE001 - progress only: never fails an evaluation
                pass

        claim = _claim_cores(
            self._count, self._allowed, prefer=self._last, wait_s=job.settings.timeout_s
        )
        try:
            # Unpinned, the job still names every core: the forkserver (started by an
            # earlier job) may be pinned to that job's cores, and its children re-pin.
            cores = claim.cores or self._allowed
            if cores:
                os.sched_setaffinity(0, cores)  # what this thread starts (the forkserver)
            self._last = claim.cores or self._last
            heard("start")  # the job has its slot now: its GPU and its cores
            record = self._evaluate_copy(job, files, device, cores, heard)
        finally:
            claim.release()
        return _Outcome(record.to_dict(), claim.cores, claim.waited_s, claim.problem)

    def _evaluate_copy(
        self,
        job: EvalJob,
        files: dict[str, bytes],
        device: str,
        cores: tuple[int, ...],
        heard: Callable[[str], None],
    ) -> EvalRecord:
        """Evaluate a copy of the job's sample, handing the evaluation ``cores``."""
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
                cores=cores,
            )
        if record.error is not None:  # name the sample as the driver knows it
            err, here, there = record.error, str(folder), str(job.item.path)
            err.message = err.message.replace(here, there)
            err.traceback = err.traceback.replace(here, there)
            err.context = {k: v.replace(here, there) for k, v in err.context.items()}
        return record


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
        log.info("Ray worker on %s: GPUs %s", self.place[actor], facts["gpus"])

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
        where = str(self.pool.place.get(actor, "a worker"))
        if data.unpinned:  # the worker's own log stays on its node: said here
            log.warning(
                "%s ran unpinned on the Ray worker on %s, which had not got %d cores no other "
                "job holds: %s",
                job.item.label,
                where,
                self.pool.shape[1],
                data.unpinned,
            )
        elif data.waited_s >= _CLAIM_POLL_S:
            log.info(
                "%s waited %.1f s for free cores on %s, then ran on cores %s",
                job.item.label,
                data.waited_s,
                where,
                list(data.cores),
            )
        record = record_from_dict(data.record)
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
