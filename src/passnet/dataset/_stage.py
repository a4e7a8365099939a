"""One shape for a dataset stage, and the one batch loop that runs any of them.

A stage (:class:`Stage`) is a small picklable object that says what one sample's job is
(:meth:`Stage.work`, run in an isolated child), what its record is (a typed, schema-
versioned result with ``to_dict``; :meth:`Stage.record`) and where its files go
(``OUT/<name>/``). :func:`run_stage` does the rest, once for every stage:

* **layout**: each sample's ``name`` is its path relative to a root
  (:mod:`~passnet.dataset._layout`), so a corpus processed whole or in chunks writes the
  same files;
* **resume** by record key: the sample's name, its graph hash and the stage options'
  fingerprint (:meth:`Stage.fingerprint`, as a dataset library fingerprints a transform);
  a recorded sample whose key matches is not done again (:meth:`Stage.keep` may ask for
  a failed one again);
* **isolation**: each sample runs in a child process of :mod:`passnet.isolate`, stopped
  after the stage's time limit and bounded to its memory limit; a crash, a hang or an
  out-of-memory failure is that sample's record (:meth:`Stage.failed`);
* **executor**: the samples' jobs run on any :class:`~passnet.runner.Executor` (``local``
  with ``--jobs``, ``ray``), each a plain function and plain data;
* **records**: each record is appended to ``OUT/<stage records file>`` as it finishes
  (nothing finished is lost to a kill), and when the run ends the file is rewritten,
  atomically, with one record per sample in input order (after the records of samples
  the run did not name), so that the file is the same whatever the job count, the
  executor, or the chunks (in order) the corpus came in;
* **catalog** (:meth:`Stage.catalog`) and **progress** (a rich bar).

Adding a stage: subclass :class:`Stage` in the stage's module (its options as dataclass
fields), and call :func:`run_stage` from its batch function and CLI entry.
"""

from __future__ import annotations

import abc
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from passnet.dataset._layout import output_root, sample_names
from passnet.dataset._progress import progress_bar
from passnet.record import ErrorInfo, append_jsonl
from passnet.sample import find_samples

__all__ = ["ChildDeath", "SampleJob", "Stage", "StageRun", "run_stage"]

log = logging.getLogger(__name__)

R = TypeVar("R")

Send = Callable[[tuple[str, Any]], None]


@dataclass(frozen=True)
class SampleJob:
    """One sample of a stage run: its folder, its name under the root, where its files go
    (``OUT/<name>``), the torch threads and the memory bound of its child, and the root
    (resolved) its name is relative to."""

    sample: str
    name: str
    out_dir: str
    threads: int | None = None
    memory_limit_bytes: int | None = None
    root: str = ""


@dataclass(frozen=True)
class ChildDeath:
    """How a sample's child ended without a record: ``kind`` ``timeout``,
    ``out_of_memory`` or ``crashed``; ``message`` says how (the time limit and stage, or
    the signal and the last line of its stderr); ``stderr_tail`` the end of its stderr."""

    kind: str
    message: str
    stderr_tail: str = ""

    def error(self, sample: str) -> ErrorInfo:
        """The death as an error record (stage ``isolate``; the stderr tail as its
        traceback)."""
        return ErrorInfo(
            "Timeout" if self.kind == "timeout" else "ChildDied",
            self.message,
            "isolate",
            {"sample": sample},
            self.stderr_tail[-2000:],
        )


@dataclass(frozen=True)
class Stage(abc.ABC, Generic[R]):
    """A dataset stage: subclass with the stage's options as (picklable) dataclass fields.

    Class attributes: ``verb`` (progress, logs), ``records_file`` (in ``OUT``), ``per_sample_dir``
    (each sample's files go to ``OUT/<name>``; False: the job gets ``OUT``).
    """

    verb: ClassVar[str] = ""
    records_file: ClassVar[str] = ""
    per_sample_dir: ClassVar[bool] = True
    timeout_s: float = 600.0
    memory_limit_gb: float | None = None

    # -- what a subclass says ---------------------------------------------------------

    @abc.abstractmethod
    def work(self, job: SampleJob, send: Send) -> R:
        """One sample's job, in the isolated child: do it, return its record.
        ``send(("stage", name))`` tells progress; ``send(("provisional", dict))`` a record
        to keep if the child dies later."""

    @abc.abstractmethod
    def record(self, data: dict[str, Any]) -> R:
        """The record from its ``to_dict`` form (and from the records file)."""

    @abc.abstractmethod
    def failed(self, job: SampleJob, death: ChildDeath, provisional: R | None) -> R:
        """The record of a sample whose child ended without one (``provisional``: the
        record it sent before, if any)."""

    def preload(self) -> list[str]:
        """Modules the forkserver imports once for every child of this stage."""
        from passnet.isolate import TORCH_PRELOAD

        return [*TORCH_PRELOAD, type(self).__module__]

    def fingerprint_options(self) -> dict[str, Any]:
        """The options that shape the stage's outputs (default: every field but the time
        and memory limits, which change no file)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("timeout_s", "memory_limit_gb")
        }

    def fingerprint(self) -> str:
        """The digest of :meth:`fingerprint_options`: a record made with other options is
        not resumed."""
        text = json.dumps(_plain(self.fingerprint_options()), sort_keys=True, default=str)
        return hashlib.sha256(f"{self.verb}:{text}".encode()).hexdigest()[:16]

    def keep(self, before: R, retry_failed: bool) -> bool:
        """Whether a recorded sample (same key) stands; False: it is done again
        (``retry_failed``: the caller asks for failed samples again)."""
        return True

    def catalog(self, catalog: Any, record: R) -> None:  # noqa: B027 - optional
        """Record what the sample's record made in the catalog."""

    # -- what the loop reads off a record ---------------------------------------------

    def key_of(self, record: Any) -> tuple[str, str, str]:
        """A record's resume key: its sample's name, graph hash and options' fingerprint
        (:meth:`resume_hash` gives the hash)."""
        return (record.name, self.resume_hash(record), record.fingerprint)

    def resume_hash(self, record: Any) -> str:
        """The graph hash a record is resumed by, compared with the sample's recorded hash
        (``graph_hash.txt``): the record's own, by default."""
        return str(record.graph_hash)


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass
class StageRun(Generic[R]):
    """What :func:`run_stage` did: every sample's record in input order, and counts."""

    records: list[R]
    done: int
    resumed: int
    root: Path


# -- in the worker and in the child ---------------------------------------------------------


def _child(stage: Stage[Any], job: SampleJob, send: Send) -> None:
    import torch

    from passnet.isolate import limit_data_segment

    if job.threads:
        torch.set_num_threads(job.threads)
    if job.memory_limit_bytes:
        limit_data_segment(job.memory_limit_bytes)
    record = stage.work(job, send)
    send(("result", record.to_dict()))  # type: ignore[attr-defined]


def run_sample(stage: Stage[Any], job: SampleJob) -> dict[str, Any]:
    """One sample's job in an isolated child (the function an executor runs, in a worker
    thread or on a cluster node): its record as a dict, also when the child died."""
    from passnet.isolate import run_isolated

    t0 = time.perf_counter()
    outcome = run_isolated(
        _child, (stage, job), stage.timeout_s, preload=stage.preload(), capture_stderr=True
    )
    if outcome.result is not None and not outcome.from_provisional:
        return outcome.result
    provisional = stage.record(outcome.result) if outcome.result is not None else None
    kind, message = outcome.death(stage.timeout_s, stage=True)
    if not outcome.timed_out and outcome.signal_name == "SIGKILL":
        message += " (SIGKILL: the kernel's out-of-memory killer, or someone)"
    record = stage.failed(job, ChildDeath(kind, message, outcome.stderr_tail), provisional)
    if hasattr(record, "elapsed_s"):
        record.elapsed_s = time.perf_counter() - t0
    return record.to_dict()  # type: ignore[attr-defined]


def _run_in_process(stage: Stage[Any], job: SampleJob) -> dict[str, Any]:
    """One sample in the worker itself, without a child (``isolated=False``: a stage
    whose work is light and safe, tests, debugging)."""
    sent: list[tuple[str, Any]] = []
    return stage.work(job, sent.append).to_dict()  # type: ignore[attr-defined]


# -- the driver -------------------------------------------------------------------------------


def _read_records(stage: Stage[R], path: Path) -> list[R]:
    from passnet.record import read_jsonl

    if not path.is_file():
        return []
    return read_jsonl(path, stage.record, what=f"a {stage.verb} record")


def _rewrite(path: Path, records: Sequence[Any]) -> None:
    """``records`` into ``path`` in one atomic replace (a kill leaves the old file)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r.to_dict(), sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_stage(
    stage: Stage[R],
    paths: Iterable[str | Path],
    out_dir: str | Path | None,
    *,
    records_path: str | Path | None = None,
    find: bool = True,
    root: str | Path | None = None,
    resume: bool = True,
    retry_failed: bool = False,
    executor: Any = None,
    jobs: int = 1,
    isolated: bool = True,
    progress: bool = False,
    catalog: Any = None,
    on_record: Callable[[R], None] | None = None,
    decided: Callable[[list[tuple[Path, str]], list[R]], dict[Path, R]] | None = None,
) -> StageRun[R]:
    """Run ``stage`` on the samples of ``paths`` into ``out_dir`` (see the module).

    ``records_path``: the records file (default: ``out_dir/<stage.records_file>``); with
    neither, nothing is written and nothing resumed (a stage that writes no files).
    ``find``: ``paths`` are searched for samples (folders, list files); False: they are
    the sample folders themselves, each done even if it is no sample.

    ``isolated`` (the default): each sample in a child process of its worker; False: in
    the worker itself. ``retry_failed`` is handed to :meth:`Stage.keep`. ``executor`` runs the samples'
    jobs (default: this machine, ``jobs`` at once); each child gets the cores the executor
    gives a job as its torch threads (:meth:`~passnet.runner.Executor.sample_cpus`).
    ``decided(todo, previous)``
    may decide records of samples without running them (a duplicate of another), from
    the samples to do and the records already in ``out_dir``. ``on_record`` sees each new
    record. Raises :class:`~passnet.errors.DatasetError` before any work when a sample
    lies outside the root or two samples would share a folder, and
    :class:`~passnet.errors.ChildStartError` when no child process can be started.
    """
    from passnet.sample import recorded_hash

    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    samples = find_samples(paths) if find else [Path(p) for p in paths]
    if records_path is None and out is not None:
        records_path = out / stage.records_file
    records = Path(records_path) if records_path is not None else None
    previous = _read_records(stage, records) if records is not None else []
    recorded_root = next((r.root for r in reversed(previous) if r.root), None)  # type: ignore[attr-defined]
    chosen_root = output_root(records or Path("."), samples, root, recorded_root)
    names = sample_names(samples, chosen_root)
    fingerprint = stage.fingerprint()
    earlier = {stage.key_of(r): r for r in previous} if resume else {}
    by_path: dict[Path, R] = {}
    todo: list[tuple[Path, str]] = []
    for path, name in zip(samples, names, strict=True):
        before = earlier.get((name, recorded_hash(path), fingerprint))
        if before is not None and stage.keep(before, retry_failed):
            by_path[path] = before
        else:
            todo.append((path, name))
    resumed = len(by_path)
    pre = decided(todo, previous) if decided is not None else {}
    todo = [(p, n) for p, n in todo if p not in pre]
    own = executor is None
    if own:
        from passnet.runner import LocalExecutor

        executor = LocalExecutor(["cpu"] * max(1, int(jobs)))
    threads = executor.sample_cpus() if executor is not None else None
    limit = int(stage.memory_limit_gb * 2**30) if stage.memory_limit_gb else None
    sample_jobs = [
        SampleJob(
            str(path),
            name,
            str(out / name if stage.per_sample_dir else out) if out is not None else "",
            threads,
            limit,
            str(chosen_root),
        )
        for path, name in todo
    ]
    new: list[R] = []

    def finish(path: Path, name: str, record: R) -> None:
        record.name, record.root = name, str(chosen_root)  # type: ignore[attr-defined]
        record.fingerprint = fingerprint  # type: ignore[attr-defined]
        if not record.graph_hash:  # type: ignore[attr-defined]
            record.graph_hash = recorded_hash(path)  # type: ignore[attr-defined]
        if catalog is not None:
            stage.catalog(catalog, record)
        if records is not None:
            append_jsonl(records, record.to_dict())  # type: ignore[attr-defined]
        by_path[path] = record
        new.append(record)
        if on_record is not None:
            on_record(record)

    try:
        with progress_bar(stage.verb, progress) as bar:
            task = bar.add_task("", total=len(samples))
            bar.advance(task, resumed)
            for path, name in [(p, n) for p, n in zip(samples, names, strict=True) if p in pre]:
                finish(path, name, pre[path])
                bar.advance(task)
            from passnet.runner import SampleTask

            fn = run_sample if isolated else _run_in_process
            tasks = [SampleTask(fn, (stage, job), threads or 1) for job in sample_jobs]
            results = executor.run_samples(tasks)
            try:
                for index, data in results:
                    path, name = todo[index]
                    finish(path, name, stage.record(data))
                    bar.update(task, description=name)
                    bar.advance(task)
            finally:
                results.close()
    finally:
        if own:
            executor.close()
        if new and records is not None:
            _input_order(stage, records, [by_path[p] for p in samples if p in by_path])
    return StageRun([by_path[p] for p in samples], len(new), resumed, chosen_root)


def _input_order(stage: Stage[Any], records_path: Path, ours: list[Any]) -> None:
    """Rewrite the records file: the records this run does not replace first (other
    samples, other options), in their order in the file (one per key, the last), then
    this run's in input order. A
    corpus processed in chunks, one after another, gets the file one whole run writes."""
    mine = {(r.name, r.fingerprint) for r in ours}
    latest: dict[tuple[str, str, str], Any] = {}
    for r in _read_records(stage, records_path):
        key = stage.key_of(r)
        if (r.name, r.fingerprint) not in mine:  # one of ours (a changed sample's too)
            latest.pop(key, None)
            latest[key] = r
    _rewrite(records_path, [*latest.values(), *ours])
