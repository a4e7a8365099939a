"""The evaluation record: one per graph × compiler × configuration (docs/evaluation.md).

Records are plain dataclasses with a ``schema_version``; :func:`record_from_dict`
migrates older versions on load. JSON Lines on disk, mirrored in SQLite.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from passnet.errors import InputFormatError
from passnet.record._jsonl import iter_jsonl
from passnet.status import Status

__all__ = [
    "SCHEMA_VERSION",
    "CompileCache",
    "TurnReport",
    "CudaGraphDecision",
    "Correctness",
    "ErrorInfo",
    "EvalRecord",
    "CpuContention",
    "GpuReport",
    "HostReport",
    "KernelProfile",
    "KernelShare",
    "OutputCheck",
    "PassReport",
    "Roofline",
    "TimingStats",
    "Timing",
    "config_hash",
    "record_from_dict",
    "record_from_json",
    "read_records",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
"""Version 2 dropped ``roofline`` (a field no version-1 record ever set)."""


@dataclass
class TimingStats:
    """Summary of one series of timed calls, in milliseconds."""

    median_ms: float
    iqr_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    n: int

    @property
    def relative_iqr(self) -> float:
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else float("inf")


@dataclass
class KernelProfile:
    """What the GPU ran for one call, from the CUDA profiler (``profile_kernels``): every
    device activity of the call (kernels, copies, fills), without the gaps between them."""

    ms_per_call: float
    """Summed duration of the call's device activities, mean over ``calls`` calls."""
    activities_per_call: float
    calls: int
    top: list[KernelShare] = field(default_factory=list)
    """The activities with the largest total time (at most five), largest first."""


@dataclass
class KernelShare:
    """One kernel (or copy, or fill) in a :class:`KernelProfile`: its name, its time per call
    and how often it ran per call."""

    name: str
    ms_per_call: float
    count_per_call: float


@dataclass
class Timing:
    """Timing of one side (eager or compiled): host clock (e2e) and device events."""

    e2e: TimingStats
    device: TimingStats | None = None
    retries: int = 0
    """How many times the measurement was repeated with more trials because it was unstable."""
    series: int = 1
    """Series of ``trials`` calls per side in the measurement kept (more than one: adaptive
    repetition added series until the speedup was precise or its time budget was spent)."""
    stop: str = ""
    """Why measuring stopped, in words (``precise: ...``, ``time budget ... spent``, ``...
    as asked (adaptive repetition off)``); "" in records of older versions."""
    unstable: bool = False
    """Still unstable after all retries: a timing flag, never a correctness failure."""
    replay: TimingStats | None = None
    """CUDA only, on request (``replay_timing``): device milliseconds of one replay of the
    call captured as a CUDA graph, the device floor without launch overhead."""
    replay_error: str | None = None
    """Why ``replay`` is missing although it was asked for (the call could not be captured)."""
    kernels: KernelProfile | None = None
    """CUDA only, on request (``profile_kernels``): the call's device activity under the
    CUDA profiler."""
    kernels_error: str | None = None
    """Why ``kernels`` is missing although it was asked for."""


@dataclass
class HostReport:
    """The timing thread's CPU core on CUDA (``core_guard``): where it ran and what the core
    guard did (:class:`passnet.evaluate._host.CoreGuard`)."""

    cores: list[int]
    """The cores this worker's timing thread could use (its share)."""
    core: int
    """The core it ended on."""
    probe_ns: float | None
    """This child's own fastest probe: nanoseconds per iteration of the guard's fixed Python
    loop (never the reference handed down, even where that was faster)."""
    slow_factor: float
    """A core whose probe exceeded ``slow_factor`` × ``probe_ns`` counted as slowed down."""
    checks: int = 0
    """Probes of the current core (before and after each round of timed calls)."""
    slow_checks: int = 0
    """Probes that found the current core slowed down."""
    moves: int = 0
    """Times the thread moved to a faster core."""
    remeasured_rounds: int = 0
    """Rounds of timed calls measured again because the core slowed down during them."""
    all_slow: int = 0
    """Times every core of the share was still slowed down after the wait (the reference then
    became the fastest core's probe, and timing went on)."""
    reference_ns: float | None = None
    """The host's full speed from earlier children (median of their ``probe_ns``), if any."""
    waited_s: float = 0.0
    """Seconds spent waiting for a host whose every core was slowed down."""
    probe_median_ns: float | None = None
    """Median of the current core's probes before and after each round: the host's speed
    while timing, where ``probe_ns`` is its best."""


@dataclass
class CpuContention:
    """CPU timing: how long the evaluation's threads waited for a core while the graph was
    timed (the kernel's per-thread run-queue wait, ``/proc/self/task/*/schedstat``), read
    before and after warm-up and after each round of timed calls
    (:mod:`passnet.evaluate._contention`)."""

    wait_fraction: float
    """Run-queue wait / (time on a core + run-queue wait), summed over the process's threads,
    the warm-up and the timed rounds: the share of the time the threads were ready to run but another
    process had the core."""
    worst_round_wait_fraction: float
    """The same over the worst round alone (the warm-up counts as one)."""
    rounds: int
    """Intervals read: the warm-up and each round of timed calls (re-measurements
    included)."""
    on_cpu_ms: float
    waited_ms: float
    threshold: float
    """``contended`` is ``wait_fraction > threshold``."""
    contended: bool
    """Other processes competed for the cores while timing: the medians, and the speedup,
    are not this graph's alone."""


@dataclass
class GpuReport:
    """The GPU's clocks while a graph was timed (CUDA, where NVML answers): read between the
    rounds of timed calls, never changed (:mod:`passnet.evaluate._gpu_clock`)."""

    samples: int
    """Readings taken (after warm-up and after each round)."""
    sm_mhz_median: float
    sm_mhz_min: int
    sm_mhz_max: int
    sm_mhz_limit: int | None = None
    """The device's maximum SM clock."""
    mem_mhz_median: float | None = None
    temperature_c_max: int | None = None
    power_w_median: float | None = None
    reasons: list[str] = field(default_factory=list)
    """Why the clocks were below their maximum, in any reading (NVML's clock event reasons,
    e.g. ``sw_power_cap``, ``hw_thermal_slowdown``)."""
    below_limit_samples: int | None = None
    """Readings with the SM clock below ``sm_mhz_limit``."""


@dataclass
class Roofline:
    """The hardware floor of one call of the graph on its device, and how close each side
    came (:mod:`passnet.evaluate._roofline`)."""

    flops: float
    """FLOPs of one call (matmuls, convolutions, attention: a lower bound)."""
    min_bytes: int
    """Bytes one call must move at least: inputs (weights included) and outputs, once."""
    compute_ms: float
    memory_ms: float
    floor_ms: float
    """max(compute_ms, memory_ms) at the device's measured ceilings."""
    bound: str
    """``launch`` (the floor is below two small operation calls), ``compute`` or ``memory``."""
    eager_fraction: float | None = None
    """floor_ms / eager's median (device time on CUDA, else e2e)."""
    compiled_fraction: float | None = None
    device: str = ""
    copy_gbps: float = 0.0
    matmul_tflops: float = 0.0
    """The matrix-product rate used (of the graph's floating dtype)."""
    math: str = ""
    """Whose rate that is: the graph's dtype, ``tfloat32`` for a float32 graph whose work
    may all run on TF32 tensor cores, ``float32+tfloat32`` where part of it may."""
    launch_us: float = 0.0
    ceilings_measured_at: str = ""
    """When the ceilings used were measured (UTC, ISO 8601; "" for ceilings cached before
    this was kept, and in records of older versions)."""
    ceilings_remeasured: bool = False
    """A side ran faster than the floor of the cached ceilings, so they were measured again
    (at most once per ten minutes per machine) and the floor recomputed."""
    floor_exceeded: bool = False
    """A side still ran faster than the floor: a ceiling is too low (measured under load) or
    the work is not bound by it (data that stays in a cache moves faster than a large copy).
    The fraction above 1 is kept, but printed as ``above floor``, never as above 100 %."""

    def share(self, fraction: float | None) -> str:
        """A side's fraction of the floor in words: ``-``, ``37.5%``, or ``above floor``."""
        if fraction is None:
            return "-"
        return "above floor" if fraction > 1 else f"{fraction:.1%}"


@dataclass
class CudaGraphDecision:
    """Whether one graph (a Dynamo graph, or a pass-rewritten graph) is replayed as a CUDA
    graph or launched as it is, and the measurements that decided it
    (:func:`passnet.compilers.select_cudagraph`)."""

    name: str
    chosen: str
    """``cudagraph``, ``launch``, or ``partitions`` (a graph that cannot be captured whole:
    each of its Inductor partitions has a decision of its own, named ``… partition K``;
    ``launch_ms`` is the graph with every partition launched, ``graph_ms`` with the
    choices)."""
    launch_ms: float
    """Median host time of one synchronized call, launched."""
    graph_ms: float | None = None
    """The same, replayed (input copies included); None where it could not be captured."""
    copy_bytes: int = 0
    """Bytes each replay copies into the graph's static inputs (parameters are replayed in
    place, not copied)."""
    rerecords: int = 0
    """Times the graph was captured again because a parameter moved (replayed graphs)."""
    reason: str = ""
    selection_s: float = 0.0
    """Seconds the measuring (and capturing) took: the selection's cost."""


@dataclass
class CompileCache:
    """How the compiled program came to be: prepared ahead by a prepare worker (and then
    loaded from Inductor's caches here), and the FX-graph cache hits and misses of this
    evaluation's compiles."""

    prepared: bool
    fxgraph_hits: int = 0
    fxgraph_misses: int = 0
    prepare_s: float | None = None
    """Seconds the prepare worker took (None: not prepared)."""


@dataclass
class TurnReport:
    """How a graph's timing went under ``--overlap`` (:mod:`passnet.evaluate._turns`): the
    evaluations its GPU ran at once, the turn's scope (``host`` or ``device``), seconds it
    waited for its turn, the members its turn stopped, and when it began and ended (epoch
    seconds: turns whose scopes meet never overlap), and whether a turn was broken."""

    slots: int
    scope: str
    wait_s: float = 0.0
    paused: int = 0
    began: float = 0.0
    ended: float = 0.0
    broken_after_s: float | None = None
    """Seconds into the turn at which the executor broke it for lasting too long, and
    continued the members it had stopped; None: it was not. Before ``ended - began``, the
    timed rounds may have shared the machine (:meth:`disturbed`)."""
    broken_turns: list[str] = field(default_factory=list)
    """The stages of the evaluation whose turns were broken: ``measure`` (this turn),
    ``roofline``, ``replay``, ``profile``."""

    @property
    def disturbed(self) -> bool:
        """The turn was broken before its timed work ended: not a clean measurement."""
        return self.broken_after_s is not None and self.broken_after_s < self.ended - self.began


@dataclass
class OutputCheck:
    """Comparison of one output tensor (eager vs compiled) on the first input draw."""

    index: int
    eager_dtype: str
    compiled_dtype: str
    eager_shape: list[int]
    compiled_shape: list[int]
    equal: bool = False
    max_diff: float | None = None
    mean_diff: float | None = None
    nonfinite: bool = False
    """The compiled output has NaN/Inf where eager has finite values."""


@dataclass
class Correctness:
    """Output comparison over every input draw; allclose holds at t only if it held for all."""

    num_outputs: int
    outputs: list[OutputCheck]
    equal: bool
    allclose: dict[int, bool]
    """Tolerance level t (-10..1) -> all outputs allclose at atol(t), rtol(t) on every draw."""
    max_diff: float
    mean_diff: float
    draws: int
    first_failing_draw: int | None = None


@dataclass
class ErrorInfo:
    """A failure, as strings only: exception type, message, stage, context, traceback."""

    type: str
    message: str
    stage: str
    context: dict[str, str] = field(default_factory=dict)
    traceback: str = ""

    def headline(self) -> str:
        """The message's first line (the type when there is none), after where it happened
        (``model.py:19: ...``) when the context says: a note cut to its width keeps it."""
        first = self.message.splitlines()[0] if self.message else self.type
        file, line = self.context.get("file"), self.context.get("line")
        where = f"{file}:{line}" if file and line else ""
        return f"{where}: {first}" if where and where not in first else first


@dataclass
class PassReport:
    """What the pass manager did to this graph."""

    loaded: list[str] = field(default_factory=list)
    replacements: dict[str, int] = field(default_factory=dict)
    diagnostics: list[str] = field(default_factory=list)
    matched: bool = False


@dataclass
class EvalRecord:
    """The result of evaluating one graph with one compiler (docs/evaluation.md, "The record")."""

    graph: str
    """Path of the sample folder (as given, or relative to the task)."""
    graph_hash: str
    compiler: str
    compiler_config: dict[str, Any]
    compiler_config_hash: str
    device: str
    status: Status
    schema_version: int = SCHEMA_VERSION
    device_name: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    error: ErrorInfo | None = None
    correctness: Correctness | None = None
    eager: Timing | None = None
    compiled: Timing | None = None
    speedup_e2e: float | None = None
    speedup_device: float | None = None
    speedup_replay: float | None = None
    """Eager's median replay time over the compiled side's (``replay_timing``; informational:
    scores use e2e or device speedups)."""
    speedup_kernels: float | None = None
    """Eager's profiled device time per call over the compiled side's (``profile_kernels``;
    informational, like ``speedup_replay``)."""
    pass_report: PassReport | None = None
    integrity: list[str] = field(default_factory=list)
    host: HostReport | None = None
    """CUDA timing with ``core_guard``: the timing thread's core and what the guard did."""
    gpu: GpuReport | None = None
    """CUDA timing where NVML answers: the GPU's clocks while the graph was timed."""
    cpu_contention: CpuContention | None = None
    """CPU timing where the kernel keeps scheduler statistics: whether other processes
    competed for the cores while the graph was timed; None otherwise and in older records."""
    roofline: Roofline | None = None
    """The graph's hardware floor and the fraction of it each side reached (timed runs);
    None when untimed or not measured."""
    cudagraphs: list[CudaGraphDecision] = field(default_factory=list)
    """Per graph, whether it was replayed as a CUDA graph and why (``inductor-scg``, pass
    compilers with ``cudagraphs=auto``); empty for compilers that do not choose."""
    compile_cache: CompileCache | None = None
    """Where the compiled program came from (see :class:`CompileCache`); None in records of
    older versions."""
    compile_options: dict[str, Any] = field(default_factory=dict)
    """What the compiler compiled with, its defaults resolved (``Compiler.compiled_with``):
    for the Inductor compilers torch.compile's arguments (``dynamic`` among them), the warm
    compile, the compile threads and the capture options of Dynamo in force. ``{}`` for a
    compiler that says nothing, a graph that failed before compiling, and older records."""
    turn: TurnReport | None = None
    """With ``--overlap``: the timing turn the graph was timed in; None otherwise."""
    layout_fixed: bool | None = None
    """The child ran without address-space randomization (``fixed_layout``); None where
    unknown (a child that never started, records of older versions, not Linux)."""
    child_position: int = 0
    """The graph's place in its evaluation child: 0 for a child's first graph (with the
    default ``graphs_per_child`` of 1, every graph's, and in records of older versions);
    k > 0 for a child shared with k graphs evaluated before it."""
    phases_s: dict[str, float] = field(default_factory=dict)
    """Wall time per phase of the evaluation: process_start, load, compile, measure, ...
    (``process_start``: of a child's first graph, the child's start; of a later one, the
    clearing up after the graph before it)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """warmup, trials, seed, timeout_s: what the evaluation was run with."""
    started_at: str = ""
    finished_at: str = ""
    sample_digest: str = ""
    """SHA-256 of the sample's files when it was evaluated (:func:`passnet.sample.sample_digest`):
    a resume evaluates a sample again when it changed ("" in records of older versions)."""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """Identity used for resume: graph, hash, compiler, config hash, device."""
        return (self.graph, self.graph_hash, self.compiler, self.compiler_config_hash, self.device)

    @property
    def slot(self) -> tuple[str, str, str, str]:
        """The graph's place in a run: graph, compiler, config hash, device (the key less the hash).

        A later record in the same slot supersedes an earlier one, also when the
        sample changed in between (a fixed sample evaluated again).
        """
        return (self.graph, self.compiler, self.compiler_config_hash, self.device)

    def timing_remarks(self) -> list[str]:
        """What makes this record's timing doubtful, in words (empty when nothing does): a
        side still unstable after its retries, other processes competing for the CPU, a
        timing turn broken while it timed."""
        remarks = []
        if (self.eager and self.eager.unstable) or (self.compiled and self.compiled.unstable):
            remarks.append("unstable timing")
        cpu = self.cpu_contention
        if cpu is not None and cpu.contended:
            remarks.append(f"CPU contended: threads waited {cpu.wait_fraction:.0%} for a core")
        if self.turn is not None and self.turn.disturbed:
            remarks.append(
                f"timing turn broken after {self.turn.broken_after_s:.0f} s: the evaluations "
                "it stopped ran during its timing"
            )
        return remarks

    def correct_at(self, t: int) -> bool:
        """Numerically correct at tolerance level t (t > 1 uses the t = 1 check)."""
        if not self.status.ran or self.correctness is None:
            return False
        return self.correctness.allclose.get(min(t, 1), False)

    def speedup(self, kind: str = "e2e") -> float | None:
        """Eager median / compiled median for ``kind`` 'e2e' or 'device'."""
        if kind not in ("e2e", "device"):
            raise ValueError(f"speedup kind must be 'e2e' or 'device', got {kind!r}")
        return self.speedup_e2e if kind == "e2e" else self.speedup_device

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        if self.correctness is not None:
            d["correctness"]["allclose"] = {str(k): v for k, v in self.correctness.allclose.items()}
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=True)


def config_hash(config: dict[str, Any]) -> str:
    """Stable short hash of a compiler configuration."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def compiler_config_hash(compiler: str, compiler_config: dict[str, Any]) -> str:
    """The ``compiler_config_hash`` of a record of this compiler and configuration."""
    return config_hash({"compiler": compiler, **compiler_config})


T = TypeVar("T")


def _build(tp: Any, value: Any, where: str = "record") -> Any:
    """Rebuild a (possibly nested / optional) dataclass value from JSON data, checking each
    value's JSON type (a TypeError names the field and what was expected)."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _build(args[0], value, where) if len(args) == 1 else value
    if dataclasses.is_dataclass(tp):
        _expect(isinstance(value, dict), where, "an object", value)
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        missing = [
            f.name
            for f in dataclasses.fields(tp)
            if f.name not in value
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:  # named here: the dataclass would say "missing 7 positional arguments"
            raise TypeError(
                f"{where} lacks the required field{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)}"
            )
        return tp(
            **{k: _build(hints[k], v, f"{where}.{k}") for k, v in value.items() if k in known}
        )
    if origin is list:
        _expect(isinstance(value, list), where, "a list", value)
        (inner,) = typing.get_args(tp)
        return [_build(inner, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _expect(isinstance(value, dict), where, "an object", value)
        kt, vt = typing.get_args(tp)
        return {
            (int(k) if kt is int else k): _build(vt, v, f"{where}.{k}") for k, v in value.items()
        }
    if tp is Status:
        try:
            return Status(value)
        except ValueError:
            known = ", ".join(st.value for st in Status)
            raise ValueError(
                f"{where} must be one of {known}; got {json.dumps(value)[:60]}"
            ) from None
    if tp is bool:
        _expect(isinstance(value, bool), where, "true or false", value)
    elif tp is float:
        _expect(
            isinstance(value, (int, float)) and not isinstance(value, bool),
            where,
            "a number",
            value,
        )
    elif tp is int:
        _expect(isinstance(value, int) and not isinstance(value, bool), where, "an integer", value)
    elif tp is str:
        _expect(isinstance(value, str), where, "a string", value)
    return value


def _expect(ok: bool, where: str, expected: str, value: Any) -> None:
    if not ok:
        raise TypeError(f"{where} must be {expected}, got {json.dumps(value)[:60]}")


def _v1_to_v2(d: dict[str, Any]) -> dict[str, Any]:
    d.pop("roofline", None)  # never set in version 1
    return d


_MIGRATIONS: dict[int, Any] = {1: _v1_to_v2}
"""Version N → N + 1, applied in turn to a record read from disk."""


def _migrate(d: dict[str, Any]) -> dict[str, Any]:
    # Every record passnet has written carries its version; a dict without one is built
    # in this process (the evaluator's), so it is of this version.
    version = d.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputFormatError(
            f"record schema_version must be a positive integer, got {version!r}",
            field="schema_version",
        )
    if version > SCHEMA_VERSION:
        raise InputFormatError(
            f"record schema_version {version} is newer than this passnet ({SCHEMA_VERSION})",
            field="schema_version",
        )
    while version < SCHEMA_VERSION:
        d = _MIGRATIONS[version](d)
        version += 1
        d["schema_version"] = version
    return d


def record_from_dict(d: dict[str, Any]) -> EvalRecord:
    """Rebuild a record from its dict form, migrating older schema versions."""
    try:
        return _build(EvalRecord, _migrate(dict(d)))
    except (TypeError, ValueError, KeyError) as exc:
        raise InputFormatError(f"not an evaluation record: {exc}") from exc


def record_from_json(line: str) -> EvalRecord:
    """Parse one JSON Lines record."""
    try:
        d = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputFormatError(f"invalid JSON: {exc.msg}", column=exc.colno) from exc
    if not isinstance(d, dict):
        raise InputFormatError("a record must be a JSON object")
    return record_from_dict(d)


def read_records(path: str | Path) -> list[EvalRecord]:
    """Records of a JSON Lines file, in file order of their last occurrence.

    A record whose slot (:attr:`EvalRecord.slot`: graph, compiler, configuration,
    device) appears again, a repeated evaluation or the same graph evaluated again
    after its sample changed, is replaced by the later one. Lines are read as
    :func:`passnet.record.iter_jsonl` reads every JSON Lines file: a final line without a
    newline that does not parse is a write torn by a kill, skipped with a warning; any
    other bad line is an :class:`InputFormatError` naming the file and line.
    """
    by_key: dict[tuple[str, ...], EvalRecord] = {}
    for number, record in iter_jsonl(path, _record_of_line, what="an evaluation record"):
        _keep_latest(by_key, record, f"{path}:{number}")
    return list(by_key.values())


def _record_of_line(d: dict[str, Any]) -> EvalRecord:
    """A record from one line's object; the reader names a refusal with file and line."""
    return _build(EvalRecord, _migrate(dict(d)))


def _keep_latest(
    by_slot: dict[tuple[str, ...], EvalRecord], record: EvalRecord, where: str
) -> None:
    earlier = by_slot.pop(record.slot, None)
    if earlier is not None:
        changed = " (its sample changed)" if earlier.graph_hash != record.graph_hash else ""
        log.warning(
            "%s: repeated record for %s%s replaces the earlier one", where, record.graph, changed
        )
    by_slot[record.slot] = record


def latest_records(records: list[EvalRecord], source: str) -> list[EvalRecord]:
    """One record per slot (graph × compiler × configuration × device): a later record of a
    graph replaces an earlier one, as a rerun's does; each replacement is logged."""
    by_slot: dict[tuple[str, ...], EvalRecord] = {}
    for record in records:
        _keep_latest(by_slot, record, source)
    return list(by_slot.values())
