"""Many evaluations: schedule over workers/devices, resume, persist, show progress."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from passnet.errors import DeviceUnavailable, SampleError, StoreError
from passnet.evaluate import EvalSettings, check_compiler, probe_device, spare_cores
from passnet.record import EvalRecord, compiler_config_hash, render_log
from passnet.runner._executor import EvalJob, Executor, LocalExecutor, local_devices
from passnet.runner._frameworks import check_frameworks
from passnet.runner._plan import WorkItem
from passnet.runner._progress import RunProgress
from passnet.runner._store import ResultStore
from passnet.sample import (
    OPTIONAL_FILES,
    PADDLE,
    TORCH,
    load_sample,
    missing_optional_files,
    sample_digest,
)

__all__ = ["RunSummary", "check_device", "check_run", "run_evaluations"]

log = logging.getLogger(__name__)

EVAL_LOG = "eval.log"


@dataclass
class RunSummary:
    records: list[EvalRecord]
    """Records of every requested graph (newly evaluated and resumed)."""
    folder_records: list[EvalRecord] = field(default_factory=list)
    """Every record in the folder of this compiler, configuration and device: this run's and
    those of earlier runs into the same folder (with other PATHs, say), one per sample (by
    the digest of its files; this run's record first)."""
    evaluated: int = 0
    resumed: int = 0
    out_dir: Path = field(default_factory=Path)


def _warn_missing_files(item: WorkItem) -> None:
    missing = missing_optional_files(item.path)
    if missing and (item.path / "model.py").is_file():
        log.warning(
            "%s lacks %s",
            item.label,
            "; ".join(f"{name} ({OPTIONAL_FILES[name]})" for name in missing),
        )


def _key(item: WorkItem, compiler: str, cfg_hash: str, device: str) -> tuple[str, ...]:
    try:
        sample = load_sample(item.path)
    except SampleError:
        return (item.label, "", compiler, cfg_hash, device)  # as evaluate_sample records it
    return (item.label, sample.graph_hash, compiler, cfg_hash, device)


# Settings that limit resources or add figures after the measurement rather than define it:
# a resume may change them.
_RESUMABLE_SETTINGS = frozenset({"timeout_s", "roofline"})


#: Settings added since records were first written, with the value a record without the
#: key was measured with (an older passnet had no L2 flush, replay timing or kernel profile,
#: no core guard, and randomized child layouts).
_ABSENT_MEANS: dict[str, Any] = {
    "adaptive": True,
    "fixed_layout": False,
    "core_guard": False,
    "host_wait_s": 0.0,
    "flush_l2": False,
    "replay_timing": False,
    "profile_kernels": False,
    "profile_calls": EvalSettings().profile_calls,
    "graphs_per_child": 1,
}


#: Settings that only mean something while another one is on: compared only where that
#: one is on in both the record and the request.
_ONLY_WITH: dict[str, str] = {"profile_calls": "profile_kernels", "host_wait_s": "core_guard"}

#: Settings that change only how the CUDA timing thread runs (its CPU core): not compared
#: for evaluations on the CPU, where they do nothing.
_CUDA_TIMING_ONLY = frozenset({"pin_cpu", "core_guard", "host_wait_s"})


def _settings_differences(found: dict[str, Any], wanted: dict[str, Any], device: str) -> list[str]:
    """Settings a stored record was evaluated with that differ from the ones asked for now.

    Only keys both know are compared, so records of an older passnet (without a
    setting added since) still resume; a key in :data:`_ABSENT_MEANS` missing from a
    record stands for its old behaviour. A key of :data:`_ONLY_WITH` is compared only
    where the setting it belongs to is on at both ends, and a key of
    :data:`_CUDA_TIMING_ONLY` only on a CUDA ``device``.
    """
    found = {**{k: v for k, v in _ABSENT_MEANS.items() if k in wanted}, **found}
    ignored = _RESUMABLE_SETTINGS | (
        frozenset() if device.startswith("cuda") else _CUDA_TIMING_ONLY
    )
    return [
        f"{k} {found[k]!r} there, {wanted[k]!r} now"
        for k in sorted(found.keys() & wanted.keys() - ignored)
        if found[k] != wanted[k]
        and (k not in _ONLY_WITH or (found.get(_ONLY_WITH[k]) and wanted.get(_ONLY_WITH[k])))
    ]


_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def check_device(
    compiler: str, device: str, config: dict[str, Any] | None = None, *, framework: str = "torch"
) -> None:
    """Refuse, before anything runs, a device this machine lacks or the compiler (so
    configured) cannot use. A compiler given as a code spec is checked in a child process
    (:func:`~passnet.evaluate.check_compiler`), never imported here. ``framework``: the
    samples' (a Paddle run's CUDA device is Paddle's to find, in the evaluation child: torch
    need not see it)."""
    if not _DEVICE.fullmatch(device):
        raise DeviceUnavailable(
            f"unknown device {device!r}: expected cpu, cuda or cuda:N", device=device
        )
    if device.startswith("cuda") and framework == TORCH and not torch.cuda.is_available():
        raise DeviceUnavailable(
            "--device cuda, but torch sees no CUDA device on this machine "
            f"(torch {torch.__version__}, built with CUDA {torch.version.cuda or 'none'})",
            device=device,
        )
    needs_cuda = check_compiler(compiler, config, check_config=False).needs_cuda
    if needs_cuda and not device.startswith("cuda"):
        settings = " with " + ", ".join(f"{k}={v}" for k, v in config.items()) if config else ""
        raise DeviceUnavailable(
            f"compiler {compiler!r}{settings} needs a CUDA device; run it with --device cuda",
            device=device,
        )


def _prepare_cores(device: str) -> list[int]:
    """Cores for prepare workers beside CUDA timing: those no GPU's timing thread uses. On
    the CPU, timing uses every core: prepare workers share them (and disturb CPU timing)."""
    if not device.startswith("cuda") or not hasattr(os, "sched_getaffinity"):
        return []
    spare = spare_cores(sorted(os.sched_getaffinity(0)), torch.cuda.device_count())
    if not spare:
        log.warning("no core is free of the timing threads: prepare workers share their cores")
    return spare


def _open_log(path: Path) -> Any:
    """``eval.log`` for appending; a line torn by a kill is ended first, so that the next
    entry starts on a line of its own."""
    log_file = open(path, "a+b")  # noqa: SIM115 - closed by the caller's with-block
    if log_file.tell() > 0:
        log_file.seek(-1, os.SEEK_END)
        if log_file.read(1) != b"\n":
            log_file.write(b"\n")
    log_file.close()
    return open(path, "a", encoding="utf-8")  # noqa: SIM115


def _same_kind(
    store: ResultStore, compiler: str, compiler_config: dict[str, Any], device: str
) -> list[EvalRecord]:
    """The folder's records of this compiler, configuration and device."""
    kind = (compiler, compiler_config_hash(compiler, compiler_config), device)
    return [r for r in store.records() if (r.compiler, r.compiler_config_hash, r.device) == kind]


def _pending(
    store: ResultStore,
    items: list[WorkItem],
    compiler: str,
    compiler_config: dict[str, Any],
    device: str,
    settings: EvalSettings,
) -> tuple[list[WorkItem], list[EvalRecord]]:
    """(items to evaluate, records to resume); a folder measured with other settings is refused."""
    cfg_hash = compiler_config_hash(compiler, compiler_config)
    todo: list[WorkItem] = []
    done: list[EvalRecord] = []
    # A sample is loaded (its hash read) only when the folder holds a record of its label:
    # loading all of a corpus's samples just to find them new took minutes.
    recorded = {rec.graph for rec in store}
    for item in items:
        _warn_missing_files(item)
        if item.label not in recorded:
            todo.append(item)
            continue
        found = store.get(_key(item, compiler, cfg_hash, device))
        if found is None:
            todo.append(item)
        elif found.sample_digest and found.sample_digest != sample_digest(item.path):
            log.info("%s changed since it was evaluated: evaluating it again", item.label)
            todo.append(item)
        else:
            done.append(found)
    # Resumed or new, evaluations must be measured as the folder's others of this compiler
    # were, or scores would mix measurements.
    wanted = settings.to_dict()
    for rec in _same_kind(store, compiler, compiler_config, device):
        differences = _settings_differences(rec.settings, wanted, device)
        if differences:
            raise StoreError(
                f"{rec.graph} was evaluated here with other settings ({'; '.join(differences)}); "
                "resuming or adding to these records would mix measurements: use the same "
                "settings, or another --out",
                path=store.jsonl,
            )
    return todo, done


def check_run(
    items: list[WorkItem],
    compiler: str,
    compiler_config: dict[str, Any],
    device: str,
    settings: EvalSettings,
) -> str | None:
    """Refuse, before anything runs or is written, a run that cannot be: samples of two
    frameworks or of one the compiler does not compile, a device this machine or the
    compiler lacks, settings the device cannot honour, a configuration key the compiler
    does not take. Returns the samples' framework (None for no items)."""
    framework = check_frameworks(items, compiler, device)
    check_device(compiler, device, compiler_config, framework=framework or TORCH)
    problem = settings.device_problem(device)
    if problem is not None:
        raise DeviceUnavailable(problem, device=device)
    # A key the compiler does not take is a mistake in the command, not a column of records.
    check_compiler(compiler, compiler_config)
    return framework


def run_evaluations(
    items: list[WorkItem],
    *,
    compiler: str,
    compiler_config: dict[str, Any] | None = None,
    device: str = "cpu",
    settings: EvalSettings | None = None,
    out_dir: str | Path = "passnet-out",
    jobs: int = 1,
    prepare_workers: int = 0,
    overlap: int = 1,
    overlap_scope: str = "host",
    executor: Executor | None = None,
    console: Console | None = None,
    echo_logs: bool = True,
) -> RunSummary:
    """Evaluate every item not already in ``out_dir``'s store; return all their records.

    ``executor`` runs the evaluations (default: a :class:`LocalExecutor` with ``jobs``
    slots on the CPU, or one slot for each of the first ``jobs`` GPUs on ``cuda``, and
    ``prepare_workers`` workers compiling graphs ahead on cores the timing threads do not
    use: :func:`passnet.evaluate.prepare_sample`; or ``overlap`` evaluations at once per
    device, timed one at a time in turns of ``overlap_scope``: :class:`LocalExecutor`).
    Results are persisted one by one, by this process, as they finish; Ctrl-C stops
    scheduling and keeps what finished. Records keep the device kind (``cuda``/``cpu``)
    as the resume key, so a rerun on another GPU of the same machine resumes too.
    """
    compiler_config = dict(compiler_config or {})
    settings = settings or EvalSettings()
    console = console or Console(stderr=True)
    framework = check_run(items, compiler, compiler_config, device, settings)
    store = ResultStore(out_dir)
    try:
        todo, done = _pending(store, items, compiler, compiler_config, device, settings)
        if done:
            console.print(
                f"resuming: {len(done)} of {len(items)} evaluations already in {store.dir}"
            )
        own_executor = executor is None
        if executor is None:
            executor = LocalExecutor(
                local_devices(device, jobs, torch.cuda.device_count()),
                prepare_workers=prepare_workers,
                prepare_cores=_prepare_cores(device) if prepare_workers else (),
                overlap=overlap,
                scope=overlap_scope,
            )
            first = executor.pool.slots[0]
            if todo and device.startswith("cuda") and framework != PADDLE:
                problem = probe_device(first)
                if problem is not None:
                    raise DeviceUnavailable(
                        f"an evaluation child cannot use {first}: {problem}; nothing was evaluated",
                        device=device,
                    )
        new: list[EvalRecord] = []
        log_path = store.dir / EVAL_LOG
        progress = RunProgress(
            console, f"{compiler} on {device}", len(todo), labels=[i.label for i in todo]
        )
        try:
            log_file = _open_log(log_path)
        except OSError as exc:
            raise StoreError(f"cannot write the log: {exc.strerror}", path=log_path) from exc
        with progress, log_file:
            jobs_todo = [
                EvalJob(item, compiler, compiler_config, device, settings) for item in todo
            ]
            finished = executor.run(
                jobs_todo, on_stage=lambda job, stage: progress.stage(job.item.label, stage)
            )
            try:
                for rec in finished:
                    lines = render_log(rec)
                    # the log first: a kill between the two leaves a logged evaluation
                    # that the rerun evaluates and logs again (the later entry counts),
                    # never a stored record missing from the log
                    log_file.write("\n".join(lines) + "\n")
                    log_file.flush()
                    os.fsync(log_file.fileno())
                    store.add(rec)
                    new.append(rec)
                    progress.finished(rec, lines if echo_logs else None)
            except KeyboardInterrupt:
                console.print("[yellow]interrupted: finished results are saved; rerun to resume")
                raise
            finally:
                finished.close()  # cancels what has not started
                if own_executor:
                    executor.close()
        by_label = {r.graph: r for r in [*done, *new]}
        ordered = [by_label[i.label] for i in items if i.label in by_label]
        # The folder's other records of this run's kind, without a second record of a
        # sample this run (or an earlier record) already has: labels are relative to the
        # PATH given, so one sample evaluated through two PATHs has two labels.
        seen = {r.sample_digest for r in ordered if r.sample_digest}
        folder = list(ordered)
        for r in _same_kind(store, compiler, compiler_config, device):
            if r.graph in by_label:
                continue
            if r.sample_digest and r.sample_digest in seen:
                continue
            seen.add(r.sample_digest)
            folder.append(r)
        return RunSummary(
            ordered,
            folder_records=folder,
            evaluated=len(new),
            resumed=len(done),
            out_dir=store.dir,
        )
    finally:
        store.close()  # releases the folder's lock, also on errors and Ctrl-C
