"""Evaluate one sample with one compiler on one device → :class:`EvalRecord`."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from passnet.errors import MissingDependency, SampleError
from passnet.evaluate._child import ChildRequest, probe_device_child, run_child, run_children
from passnet.evaluate._host import HostReference
from passnet.evaluate._settings import FORKSERVER_PRELOAD, EvalSettings
from passnet.evaluate._turns import Turns
from passnet.isolate import ChildOutcome, run_isolated, run_isolated_batch, run_isolated_items
from passnet.record import ErrorInfo, EvalRecord, compiler_config_hash, record_from_dict
from passnet.sample import PADDLE, PADDLE_INSTALL, load_sample, paddle_missing, sample_digest
from passnet.status import Status

__all__ = [
    "EvaluationStopped",
    "evaluate_sample",
    "evaluate_samples",
    "probe_device",
    "software_versions",
]

log = logging.getLogger(__name__)

HOST_REFERENCE = HostReference()
"""The host's full speed per device, from the guard reports of this process's evaluations."""

_STAGE_STATUS = {
    "start": Status.RUNTIME_ERROR,
    "load": Status.SAMPLE_ERROR,
    "compile": Status.COMPILE_ERROR,
    "eager": Status.SAMPLE_ERROR,
    "eager_recheck": Status.SAMPLE_ERROR,
}


def software_versions() -> dict[str, str]:
    import passnet

    versions = {
        "passnet": passnet.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    return versions


def _paddle_version() -> dict[str, str]:
    """PaddlePaddle's version for a Paddle sample's record, read without importing it."""
    from importlib import metadata

    for dist in ("paddlepaddle", "paddlepaddle-gpu"):
        try:
            return {"paddle": metadata.version(dist)}
        except metadata.PackageNotFoundError:
            continue
    return {}


def probe_device(device: str, timeout_s: float = 120.0) -> str | None:
    """Whether an evaluation child can use ``device``: None if it can, else why not.

    A child that cannot (a driver that fails after fork, a forkserver that touched
    CUDA before forking) would fail every evaluation in its load stage, and those
    records would read as broken samples; the runner asks this once before a run.
    """
    outcome = run_isolated(probe_device_child, (device,), timeout_s, preload=FORKSERVER_PRELOAD)
    if outcome.result is not None:
        return outcome.result["error"]
    if outcome.timed_out:
        return f"no answer within {timeout_s:.0f} s"
    return f"the child process died ({outcome.how_ended})"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class EvaluationStopped(Exception):
    """An evaluation ended early because its caller asked (``should_stop``): no record."""


def evaluate_sample(
    sample_path: str | Path,
    compiler: str = "inductor",
    compiler_config: dict[str, Any] | None = None,
    device: str = "cpu",
    settings: EvalSettings | None = None,
    *,
    graph_label: str | None = None,
    on_stage: Callable[[str], None] | None = None,
    prepared: float | None = None,
    turns: Turns | None = None,
    cores: Sequence[int] = (),
    should_stop: Callable[[], bool] | None = None,
) -> EvalRecord:
    """Evaluate one GraphNet sample in an isolated child process.

    Never raises for problems of the sample or the compiler: they become the
    record's status. Raises ``ValueError`` for a mistake of the caller's: a CUDA-only
    setting (``flush_l2``, ``replay_timing``) off CUDA. ``graph_label`` is the name
    stored in the record (default: the path as given). ``on_stage(name)`` hears each stage
    of the evaluation child as it begins (``load``, ``compile``, ``measure``, ...).
    ``prepared``: the seconds a prepare worker spent compiling this graph into the shared
    caches (:func:`prepare_sample`), or None: then the compiler compiles as it would alone.
    ``turns``: the run's timing turns (``--overlap``, :class:`Turns`): the child joins
    them and times the graph in a turn. ``cores``: the cores the child is pinned to.
    ``should_stop()`` (asked about once a second) ends the child early: then
    :class:`EvaluationStopped` is raised, and there is no record.
    """
    records = _evaluate(
        [sample_path],
        compiler,
        compiler_config,
        device,
        settings,
        [graph_label or str(sample_path)],
        (lambda _i, stage: on_stage(stage)) if on_stage else None,
        None,
        prepared,
        should_stop=should_stop,
        turns=turns,
        cores=cores,
    )
    if not records:
        raise EvaluationStopped(f"the evaluation of {graph_label or sample_path} was stopped")
    return records[0]


def evaluate_samples(
    sample_paths: Sequence[str | Path],
    compiler: str = "inductor",
    compiler_config: dict[str, Any] | None = None,
    device: str = "cpu",
    settings: EvalSettings | None = None,
    *,
    graph_labels: Sequence[str] | None = None,
    on_stage: Callable[[int, str], None] | None = None,
    on_record: Callable[[int, EvalRecord], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    turns: Turns | None = None,
    cores: Sequence[int] = (),
) -> list[EvalRecord]:
    """Evaluate several samples in turn in one isolated child (``graphs_per_child``).

    Each graph is evaluated as :func:`evaluate_sample` would, but the child's start (its
    CUDA context, the compilers' imports, what a pass directory's kernels compiled) is
    paid once for all of them. The records say so: :attr:`EvalRecord.child_position` is a
    graph's place in its child (0 for the first). A child that dies or times out costs
    the graph it was evaluating (that record says how, as :func:`evaluate_sample`'s would);
    the graphs after it go on in a fresh child. ``on_stage(i, stage)`` hears the stages of
    the ``i``-th sample, ``on_record(i, record)`` each record as it is decided; the records
    come back in the samples' order. ``graph_labels``: the names stored (default: paths).
    ``should_stop()`` (asked about once a second) ends the work early: the graph being
    evaluated and those after it get no record. ``turns``, ``cores``: as
    :func:`evaluate_sample`'s.
    """
    paths = list(sample_paths)
    labels = list(graph_labels) if graph_labels is not None else [str(p) for p in paths]
    if len(labels) != len(paths):
        raise ValueError(f"{len(labels)} graph labels for {len(paths)} samples")
    return _evaluate(
        paths,
        compiler,
        compiler_config,
        device,
        settings,
        labels,
        on_stage,
        on_record,
        should_stop=should_stop,
        turns=turns,
        cores=cores,
    )


@dataclasses.dataclass
class _Pending:
    """One graph to evaluate: its index among the samples, request and record fields."""

    index: int
    request: ChildRequest
    base: dict[str, Any]
    graph_hash: str


def _evaluate(
    paths: list[str | Path],
    compiler: str,
    compiler_config: dict[str, Any] | None,
    device: str,
    settings: EvalSettings | None,
    labels: list[str],
    on_stage: Callable[[int, str], None] | None,
    on_record: Callable[[int, EvalRecord], None] | None,
    prepared: float | None = None,
    should_stop: Callable[[], bool] | None = None,
    turns: Turns | None = None,
    cores: Sequence[int] = (),
) -> list[EvalRecord]:
    settings = settings or EvalSettings()
    problem = settings.device_problem(device)
    if problem is not None:
        raise ValueError(problem)
    compiler_config = dict(compiler_config or {})
    records: list[EvalRecord | None] = [None] * len(paths)

    def decided(index: int, record: EvalRecord) -> None:
        records[index] = record
        if on_record is not None:
            on_record(index, record)

    pending: list[_Pending] = []
    for index, (path, label) in enumerate(zip(paths, labels)):
        base = dict(
            graph=label,
            compiler=compiler,
            compiler_config=compiler_config,
            compiler_config_hash=compiler_config_hash(compiler, compiler_config),
            device=device,
            versions=software_versions(),
            settings=settings.to_dict(),
            started_at=_now(),
            sample_digest=sample_digest(path),
        )
        graph_hash = ""
        try:
            sample = load_sample(path)
            graph_hash = sample.graph_hash
            if sample.framework == PADDLE:
                base["versions"] = {**base["versions"], **_paddle_version()}
                if (missing := paddle_missing()) is not None:
                    raise MissingDependency(missing, package="paddlepaddle", install=PADDLE_INSTALL)
        except (SampleError, MissingDependency) as exc:
            error = ErrorInfo(type(exc).__name__, exc.message, "load", exc.context)
            decided(
                index,
                EvalRecord(
                    graph_hash=graph_hash if isinstance(exc, MissingDependency) else "",
                    status=Status.SAMPLE_ERROR,
                    error=error,
                    finished_at=_now(),
                    **base,
                ),
            )
            continue
        request = ChildRequest(
            str(path),
            compiler,
            compiler_config,
            device,
            settings,
            host_reference_ns=HOST_REFERENCE.get(device),
            prepared=prepared is not None,
            turns=turns,
            cores=tuple(cores),
        )
        pending.append(_Pending(index, request, base, graph_hash))
    _run_children(pending, settings, prepared, on_stage, decided, should_stop)
    return [r for r in records if r is not None]


def _run_children(
    pending: list[_Pending],
    settings: EvalSettings,
    prepared: float | None,
    on_stage: Callable[[int, str], None] | None,
    decided: Callable[[int, EvalRecord], None],
    should_stop: Callable[[], bool] | None = None,
) -> None:
    """Evaluate ``pending`` in shared children, a fresh one after each that dies."""

    def on_outcome(item: _Pending, outcome: ChildOutcome, position: int, elapsed: float) -> bool:
        if position and outcome.result is None and not outcome.stages:
            # The shared child ended before this graph began (it could not clear up after
            # the last one): the graph goes to a fresh child, unblamed.
            return False
        rec = _to_record(outcome, item.base, item.graph_hash)
        if rec.compile_cache is not None and prepared is not None:
            rec.compile_cache.prepare_s = prepared
        if rec.host is not None:
            HOST_REFERENCE.note(item.request.device, rec.host.probe_ns)
        rec.child_position = position
        rec.phases_s["total"] = elapsed
        decided(item.index, rec)
        return True

    def child(left: list[_Pending]) -> tuple[Any, tuple[Any, ...]]:
        if len(left) == 1:
            return run_child, (left[0].request,)
        return run_children, ([p.request for p in left],)

    run_isolated_batch(
        pending,
        child,
        settings.timeout_s,
        on_outcome,
        preload=FORKSERVER_PRELOAD,
        fixed_layout=settings.fixed_layout,
        on_stage=(lambda item, name: on_stage(item.index, name)) if on_stage else None,
        should_stop=should_stop,
        run_items=run_isolated_items,  # this module's name: tests stand in for it
    )


def _to_record(outcome: ChildOutcome, base: dict[str, Any], graph_hash: str) -> EvalRecord:
    res = outcome.result
    if res is None:
        return EvalRecord(
            graph_hash=graph_hash,
            status=_death_status(outcome),
            error=_death_error(outcome),
            phases_s={"process_start": outcome.started_s},
            finished_at=_now(),
            **base,
        )
    timing = res.get("timing") or {}
    d: dict[str, Any] = {
        **base,
        "graph_hash": graph_hash,
        "status": res["status"],
        "device_name": res.get("device_name", ""),
        "error": res.get("error"),
        "correctness": res.get("correctness"),
        "eager": timing.get("eager"),
        "compiled": timing.get("compiled"),
        "pass_report": res.get("pass_report"),
        "host": res.get("host"),
        "gpu": res.get("gpu"),
        "cpu_contention": res.get("cpu_contention"),
        "layout_fixed": res.get("layout_fixed"),
        "compile_cache": res.get("compile_cache"),
        "compile_options": res.get("compile_options") or {},
        "turn": res.get("turn"),
        "roofline": res.get("roofline"),
        "cudagraphs": res.get("cudagraphs") or [],
        "integrity": res.get("integrity", []),
        "phases_s": {"process_start": outcome.started_s, **res.get("phases_s", {})},
        "finished_at": _now(),
    }
    d["phases_s"].pop("start", None)
    rec = record_from_dict(d)
    if outcome.from_provisional:
        # the child ended during the optional work after its result (replay timing, the
        # kernel profile): each side says why the figures asked for are missing
        ended = _death_error(outcome).message
        asked = rec.settings
        for side in (rec.eager, rec.compiled):
            if side is None:
                continue
            if asked.get("replay_timing") and side.replay is None:
                side.replay_error = f"no replay figures: {ended}"
            if asked.get("profile_kernels") and side.kernels is None:
                side.kernels_error = f"no kernel profile: {ended}"
    if rec.eager and rec.compiled:
        rec.speedup_e2e = _ratio(rec.eager.e2e.median_ms, rec.compiled.e2e.median_ms)
        if rec.eager.device and rec.compiled.device:
            rec.speedup_device = _ratio(rec.eager.device.median_ms, rec.compiled.device.median_ms)
        if rec.eager.replay and rec.compiled.replay:
            rec.speedup_replay = _ratio(rec.eager.replay.median_ms, rec.compiled.replay.median_ms)
        if rec.eager.kernels and rec.compiled.kernels:
            rec.speedup_kernels = _ratio(
                rec.eager.kernels.ms_per_call, rec.compiled.kernels.ms_per_call
            )
    return rec


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def _death_status(outcome: ChildOutcome) -> Status:
    if outcome.timed_out:
        # Loading runs before any compiler code: a sample that hangs there is broken.
        # A child that never reported its start is the harness's failure.
        if outcome.last_stage == "start":
            return Status.RUNTIME_ERROR
        return Status.SAMPLE_ERROR if outcome.last_stage == "load" else Status.TIMEOUT
    return _STAGE_STATUS.get(outcome.last_stage, Status.RUNTIME_ERROR)


def _death_error(outcome: ChildOutcome) -> ErrorInfo:
    if outcome.timed_out:
        msg = f"timed out during stage '{outcome.last_stage}'"
        if outcome.last_stage == "load":
            msg += " (the sample's own code: building the module and its inputs, before any compiler ran)"
        elif outcome.last_stage == "start":
            msg = "the evaluation child did not start (no message from it before the deadline)"
        return ErrorInfo("Timeout", msg, outcome.last_stage)
    msg = f"child process died ({outcome.how_ended}) during stage '{outcome.last_stage}'"
    return ErrorInfo("ChildDied", msg, outcome.last_stage, {"exitcode": str(outcome.exitcode)})
