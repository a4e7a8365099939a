"""What runs inside the isolated child process: one graph × one compiler.

Order (docs/evaluation.md): load and replay → poison freed memory → compile → compiled
call on draw 1 (checked) → eager call on draw 1 → compare → interleaved timing →
compiled and eager on a fresh draw 2 (checked) → compare. The child reports each
stage to the parent before entering it, so a crash is attributed to its stage.
Everything sent back is plain data (strings, numbers, dicts).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import torch

from passnet.errors import (
    CompileError,
    DeviceUnavailable,
    NondeterministicSample,
    PassnetError,
    exception_chain,
)
from passnet.evaluate._contention import ContentionMonitor, open_contention_monitor
from passnet.evaluate._gpu_clock import ClockMonitor, open_clock_monitor
from passnet.evaluate._host import CoreGuard, core_share
from passnet.evaluate._memory import bound_memory, check_fits
from passnet.evaluate._prepare import cache_counters
from passnet.evaluate._roofline import checked_roofline, graph_work
from passnet.evaluate._settings import EvalSettings
from passnet.evaluate._timing import (
    cpu_timer,
    cuda_timer,
    flushing,
    l2_flusher,
    measure_interleaved,
    measure_replays,
    profile_kernels,
)
from passnet.evaluate._turns import Turns
from passnet.isolate import layout_fixed, out_of_host_memory
from passnet.passes.integrity import harness_findings, mutated_inputs
from passnet.record import BASELINE_T, TurnReport
from passnet.sample import (
    PADDLE,
    TORCH,
    Comparison,
    accuracy_message,
    compare_outputs,
    flatten_outputs,
)
from passnet.status import Status

__all__ = [
    "ChildRequest",
    "gc_paused",
    "measure_sides",
    "pin_to_one_core",
    "probe_device_child",
    "run_child",
    "run_children",
    "timing_cores",
    "use_device",
]

log = logging.getLogger(__name__)

Send = Callable[[tuple[str, Any]], None]


@dataclasses.dataclass
class ChildRequest:
    sample_path: str
    compiler: str
    compiler_config: dict[str, Any]
    device: str
    settings: EvalSettings
    host_reference_ns: float | None = None
    """The host's full speed from earlier children (:class:`HostReference`), for the guard."""
    prepared: bool = False
    """A prepare worker compiled this graph into the caches (:mod:`._prepare`): compile once."""
    turns: Turns | None = None
    """``--overlap``: the run's timing turns (:mod:`._turns`); the timed rounds take one."""
    cores: tuple[int, ...] = ()
    """Cores this child is pinned to (its slot's share, with ``--overlap``); () for all."""


class _Stage:
    def __init__(self, send: Send) -> None:
        self.send = send
        self.name = "start"
        self.phases: dict[str, float] = {}
        self.broken_turns: list[str] = []
        """The stages whose timing turns the executor broke (:meth:`Turns.break_stalled`)."""
        self._t = time.perf_counter()

    def enter(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[self.name] = self.phases.get(self.name, 0.0) + now - self._t
        self._t = now
        self.name = name
        self.send(("stage", name))


def probe_device_child(device: str, send: Send) -> None:
    """Can an evaluation child use ``device`` at all? Sends the problem, or None."""
    send(("result", {"error": _device_problem(device)}))


def use_device(device: str) -> None:
    """Make CUDA ``device`` (``cuda:N``) this process's current device. ``synchronize()``,
    CUDA events, ``mem_get_info()`` and the current stream are the current device's: a
    child of ``cuda:1`` left on ``cuda:0`` would synchronize and time an idle ``cuda:0``
    (its timings the launch times alone) and hold a context there too."""
    if device.startswith("cuda"):
        index = torch.device(device).index
        if index is not None:
            torch.cuda.set_device(index)


def _device_problem(device: str) -> str | None:
    """Allocate, add and synchronise on ``device``: None if that works, else the error (a
    sticky CUDA error, such as an illegal address, fails every later call)."""
    try:
        torch.ones(1, device=device).add_(1)
        use_device(device)  # the synchronization below is the current device's
        _sync(device)
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return f"{type(exc).__name__}: {exc}"
    return None


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _poison_free_memory(device: str) -> None:
    """Fill memory the caching allocator will hand out next with NaN.

    Compiled code runs before eager, so without this an output that is never
    written could still hold a previous result; with it, it holds NaN.
    """
    if not device.startswith("cuda"):
        return
    free, _ = torch.cuda.mem_get_info()
    chunk = min(free // 4, 4 << 30)
    blocks = []
    for size in (chunk, chunk // 8, chunk // 64, 1 << 20, 1 << 16):
        if size >= 4:
            blocks.append(
                torch.full((size // 4,), float("nan"), dtype=torch.float32, device=device)
            )
    torch.cuda.synchronize()
    del blocks  # back to the caching allocator, still NaN-filled


def _call(fn: Callable[..., Any], inputs: list[Any], device: str) -> tuple[list[Any], list[Any]]:
    args = _clone(inputs)
    with torch.no_grad():
        out = flatten_outputs(fn(*args))
    _sync(device)
    return out, args


def _error(exc: BaseException, stage: str, sample_dir: str | None = None) -> dict[str, Any]:
    context = dict(getattr(exc, "context", {}) or {})
    if sample_dir is not None and "file" not in context:
        # a failure inside the sample's own code (model.py): its file and line, which the
        # message of a NameError or a shape error does not carry
        context.update(_sample_location(exc, sample_dir))
    return {
        "type": type(exc).__name__,
        "message": str(getattr(exc, "message", exc)) or type(exc).__name__,
        "stage": stage,
        "context": {k: str(v) for k, v in context.items()},
        "traceback": traceback.format_exc(limit=20),
    }


def _sample_location(exc: BaseException, sample_dir: str) -> dict[str, str]:
    """``file`` (relative to the sample) and ``line`` of the innermost frame of the
    traceback in one of the sample's files; empty when it never ran the sample's code."""
    root = os.path.realpath(sample_dir)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = os.path.realpath(frame.filename)
        if path.startswith(root + os.sep):
            return {"file": os.path.relpath(path, root), "line": str(frame.lineno)}
    return {}


def run_child(request: ChildRequest, send: Send) -> None:
    """Evaluate and send ``("result", dict)``; exceptions become statuses, never escape."""
    stage = _Stage(send)
    result: dict[str, Any] = {
        "integrity": [],
        "pass_report": None,
        "layout_fixed": layout_fixed(),
    }
    loaded: dict[str, Any] = {}
    try:
        if request.cores and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, set(request.cores))
        if request.turns is not None:
            request.turns.join(_device_index(request.device))
        _evaluate(request, stage, result, loaded)
    except BaseException as exc:  # noqa: BLE001 - everything becomes a status
        status = _status_for(exc, stage.name, request.compiler)
        result["status"] = status.value
        sample_dir = request.sample_path if status is Status.SAMPLE_ERROR else None
        result["error"] = _error(exc, stage.name, sample_dir)
        if loaded.get("memory_limit") and out_of_host_memory(exc):
            _out_of_memory_at_limit(result, loaded["memory_limit"], stage.name)
        elif status in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR) and "module" in loaded:
            _blame_the_sample(result, loaded, stage, exc, request.sample_path)
    finally:
        if request.turns is not None:
            request.turns.leave()
    stage.enter("done")
    result["phases_s"] = stage.phases
    send(("result", result))


def _device_index(device: str) -> int:
    """The CUDA device's index (0 for ``cuda`` and for every other device)."""
    return torch.device(device).index or 0 if device.startswith("cuda") else 0


@contextlib.contextmanager
def _timing_turn(req: ChildRequest, stage: _Stage, name: str) -> Iterator[TurnReport | None]:
    """The block as stage ``name``, within a timing turn where the run has turns (the
    wait for it is stage ``turn``)."""
    if req.turns is None:
        stage.enter(name)
        yield None
        return
    stage.enter("turn")
    with req.turns.turn() as report:
        stage.enter(name)
        yield report
    if report.broken_after_s is not None:
        stage.broken_turns.append(name)
        report.broken_turns = list(stage.broken_turns)
        log.warning(
            "the %s turn was broken after %.1f s (it lasted %.1f s): the evaluations it "
            "stopped were continued",
            name,
            report.broken_after_s,
            report.ended - report.began,
        )


def run_children(requests: list[ChildRequest], send: Send) -> None:
    """Evaluate ``requests`` in turn in this one child, each as :func:`run_child` would
    (its stages, then its result), with what one graph left behind cleared before the
    next: Dynamo's caches and counters, unreachable objects, and, on CUDA, the caching
    allocator's free blocks (so the next graph's poisoning reaches the memory its outputs
    will get).

    A child that cannot clear up (a sticky CUDA error an earlier graph left, say) ends
    before it sends anything of the next graph: the parent then runs that graph and the
    rest in a fresh child, so no graph is blamed for another's damage."""
    for i, request in enumerate(requests):
        if i and not _cleared_between_graphs(request.device):
            os._exit(_UNCLEAN_EXIT)
        run_child(request, send)


_UNCLEAN_EXIT = 75
"""The exit code of a shared child that could not be cleared for its next graph."""


def _cleared_between_graphs(device: str) -> bool:
    from torch._dynamo.utils import counters

    try:
        torch._dynamo.reset()
        counters.clear()  # compile_cache's hits and misses are per evaluation
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - any failure: this process is not fit for another graph
        return False
    return not (device.startswith("cuda") and _device_problem(device))


def _out_of_memory_at_limit(result: dict[str, Any], limit: int, stage: str) -> None:
    """The CPU child ran out of the memory that was available when it started: the sample
    does not fit this machine (``too_large``), whichever side was running."""
    result["status"] = Status.TOO_LARGE.value
    error = result["error"]
    error["context"]["memory_limit_bytes"] = str(limit)
    error["message"] = (
        f"ran out of memory during stage '{stage}' at {limit / 2**30:.1f} GiB, the memory "
        "available when the evaluation started: run it on a machine with more memory "
        f"({error['message'].splitlines()[0][:200] if error['message'] else error['type']})"
    )


def _blame_the_sample(
    result: dict[str, Any],
    loaded: dict[str, Any],
    stage: _Stage,
    exc: BaseException,
    sample_dir: str,
) -> None:
    """After the compiled side failed: if eager fails on the same inputs, the sample is broken.

    ``sample_error`` means "eager itself fails" (docs/scoring.md), whichever side ran first.
    Not when the compiled side ran out of memory (eager would run short of what it
    still holds), nor when the device is no longer usable (a CUDA error such as an
    illegal address is sticky: eager would fail for the compiler's fault).
    """
    compiler_error = result["error"]
    device = loaded["device"]
    if device.startswith("cuda") and (_out_of_memory(exc) or _device_problem(device)):
        return
    stage.enter("eager")
    try:
        _call(loaded["module"], loaded["inputs"], device)
    except Exception as eager_exc:  # noqa: BLE001 - eager's own failure is the finding
        result["status"] = Status.SAMPLE_ERROR.value
        result["error"] = _error(eager_exc, "eager", sample_dir)
        result["error"]["context"]["compiler_error"] = (
            f"{compiler_error['type']} during {compiler_error['stage']}: "
            f"{compiler_error['message'].splitlines()[0] if compiler_error['message'] else ''}"
        )


def _out_of_memory(exc: BaseException) -> bool:
    """An OOM anywhere in the exception's chain (compilers wrap the errors they meet)."""
    return any(
        isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e)
        for e in exception_chain(exc)
    )


def _status_for(exc: BaseException, stage: str, compiler: str) -> Status:
    if isinstance(exc, PassnetError) and exc.status is not None:
        return exc.status
    if stage in ("load", "eager", "eager_recheck"):
        return Status.SAMPLE_ERROR
    if stage == "compile":
        return Status.COMPILE_ERROR
    return Status.RUNTIME_ERROR  # CUDA errors and OOM during a compiled call included


def _evaluate(
    req: ChildRequest, stage: _Stage, result: dict[str, Any], loaded: dict[str, Any]
) -> None:
    from passnet.compilers import create_compiler, mark_module_state
    from passnet.sample import load_sample

    s = req.settings
    if s.num_threads:
        torch.set_num_threads(s.num_threads)
    elif req.cores:  # a pinned child: as many threads as its cores, never more
        torch.set_num_threads(len(req.cores))
    device = req.device
    stage.enter("load")
    sample = load_sample(req.sample_path)
    if sample.framework == PADDLE:  # the same stages, in Paddle (docs/paddle.md)
        from passnet.evaluate._paddle import evaluate_paddle

        evaluate_paddle(req, sample, stage, result, loaded)
        return
    use_device(device)
    check_fits(sample, device)  # from the metadata, before any tensor exists
    loaded["memory_limit"] = bound_memory(device)  # CPU: fail an allocation, not be killed
    module = sample.build_module(device)
    inputs1 = sample.replay_inputs(device, s.seed)
    inputs2 = sample.replay_inputs(device, s.seed + 1)
    result["device_name"] = (
        torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    )
    loaded.update(module=module, inputs=inputs1, device=device)

    stage.enter("compile")
    compiler = create_compiler(req.compiler, **req.compiler_config)
    compiler.cache_prepared = req.prepared
    if TORCH not in compiler.frameworks:
        raise CompileError(
            f"compiler {req.compiler!r} compiles {', '.join(sorted(compiler.frameworks))} "
            "graphs, and this is a torch sample",
            compiler=req.compiler,
        )
    if compiler.needs_cuda(compiler.config) and not device.startswith("cuda"):
        raise DeviceUnavailable(f"compiler {req.compiler!r} needs a CUDA device", device=device)
    if s.poison_allocator:
        _poison_free_memory(device)
    try:
        example = _clone(inputs1)
        # the model's weights as what they were, its module's state: CUDA-graphed calls
        # read them in place (as CUDA graph trees read parameters), never copy them
        mark_module_state(example, sample.module_state_positions)
        compiled = compiler.compile(module, example)
        stage.enter("compiled_run")
        with compiler.checked_call():
            out_c, args_c = _call(compiled, inputs1, device)
    finally:
        # Kept also when compiling fails: a pass mismatch's diagnostics live here.
        result["pass_report"] = _report(compiler)
        result["compile_cache"] = {"prepared": req.prepared, **cache_counters()}
        result["cudagraphs"] = [dataclasses.asdict(d) for d in compiler.cudagraph_decisions()]
        result["compile_options"] = dict(getattr(compiler, "compiled_with", {}))

    stage.enter("eager")
    out_e, args_e = _call(module, inputs1, device)
    sample_nonfinite = _nonfinite_outputs(out_e)
    if sample_nonfinite:
        result["sample_nonfinite"] = sample_nonfinite

    stage.enter("compare")
    findings = harness_findings(inputs1, args_c, args_e, out_c, out_e)
    cmp1 = compare_outputs(out_c, out_e)
    _require_deterministic_eager(cmp1, module, inputs1, out_e, device)
    del out_c, out_e, args_c, args_e
    if findings:
        result["integrity"] = findings
        raise _IntegrityViolation("; ".join(findings), _integrity_status(compiler))
    if not cmp1.status.ran:
        _fill_comparison(result, cmp1, draws=1)
        return

    timings = None
    if s.time_graphs:
        mutating = _mutating(inputs1, module, compiled, device)
        with _timing_turn(req, stage, "measure") as turn:  # its cores are known in it
            guard = None
            share = timing_cores(device) if s.pin_cpu else []
            if share and s.core_guard:
                guard = CoreGuard(
                    share, reference_ns=req.host_reference_ns, max_wait_s=s.host_wait_s
                )
            elif share:
                pin_to_one_core(device, share)
            clocks = open_clock_monitor(device)
            contention = open_contention_monitor(device)
            with gc_paused(s.pause_gc):
                timings = measure_sides(
                    compiled, module, inputs1, device, s, mutating, guard, clocks, contention
                )
        if turn is not None:
            result["turn"] = dataclasses.asdict(turn)
        if guard is not None:
            result["host"] = dataclasses.asdict(guard.report())
        gpu = clocks.report() if clocks is not None else None
        if gpu is not None:
            result["gpu"] = dataclasses.asdict(gpu)
        waits = contention.report() if contention is not None else None
        if waits is not None:
            result["cpu_contention"] = dataclasses.asdict(waits)

    stage.enter("compiled_recheck")
    with compiler.checked_call():
        out_c2, args_c2 = _call(compiled, inputs2, device)
    stage.enter("eager_recheck")
    out_e2, args_e2 = _call(module, inputs2, device)
    stage.enter("compare_recheck")
    findings = harness_findings(inputs2, args_c2, args_e2, out_c2, out_e2)
    if findings:
        result["integrity"] = findings
        raise _IntegrityViolation("; ".join(findings), _integrity_status(compiler))
    cmp2 = compare_outputs(out_c2, out_e2)
    _require_deterministic_eager(cmp2, module, inputs2, out_e2, device)
    _fill_comparison(
        result, _merge(cmp1, cmp2), draws=2, first_failing=_first_failing_draw(cmp1, cmp2)
    )
    result["cudagraphs"] = [dataclasses.asdict(d) for d in compiler.cudagraph_decisions()]
    if timings is not None:
        result["timing"] = {k: dataclasses.asdict(v) for k, v in timings.items()}
        if s.roofline:  # the device's ceilings are measured once per machine: a turn
            with _timing_turn(req, stage, "roofline"):
                result["roofline"] = _roofline(module, inputs1, device, timings)
            _note_broken_turns(result, stage)
        cuda = device.startswith("cuda")
        if cuda and (s.replay_timing or s.profile_kernels):
            # Last, once the result is decided: optional work that kills the process costs
            # only its own figures, since the parent keeps this provisional result.
            stage.send(("provisional", {**result, "phases_s": dict(stage.phases)}))

            def extra(field: str, what: str, measure: Callable[[dict[str, Any]], Any]) -> None:
                _extra_figures(compiled, module, inputs1, mutating, timings, field, what, measure)

            if s.replay_timing:  # each side's call captured as a CUDA graph, replays timed
                with _timing_turn(req, stage, "replay"):
                    extra(
                        "replay",
                        "replay timing",
                        lambda fns: measure_replays(
                            fns, warmup=s.warmup, trials=s.trials, rounds=s.rounds
                        ),
                    )
            if s.profile_kernels:  # each side's call under the CUDA profiler
                with _timing_turn(req, stage, "profile"):
                    extra(
                        "kernels",
                        "profiling",
                        lambda fns: profile_kernels(fns, calls=s.profile_calls),
                    )
            _note_broken_turns(result, stage)
            result["timing"] = {k: dataclasses.asdict(v) for k, v in timings.items()}


def _note_broken_turns(result: dict[str, Any], stage: _Stage) -> None:
    """The turns broken after the measuring one (roofline, replay, profile) in the record's
    ``turn``."""
    if result.get("turn") is not None:
        result["turn"]["broken_turns"] = list(stage.broken_turns)


_SUSPECT = (Status.ACCURACY, Status.NONFINITE)
"""Outcomes a nondeterministic eager side produces by itself."""


def _require_deterministic_eager(
    cmp: Comparison, module: Any, inputs: list[Any], out_e: list[Any], device: str
) -> None:
    """Before the compiled side is blamed for differing from eager: run eager again on the
    same inputs. If eager differs from itself, the graph is nondeterministic (uninitialized
    memory, random ops, nondeterministic kernels) and cannot judge any compiler: a
    :class:`~passnet.errors.NondeterministicSample`."""
    if cmp.status not in _SUSPECT:
        return
    again, _ = _call(module, inputs, device)
    self_check = compare_outputs(again, out_e)
    if self_check.status is not Status.OK:
        raise NondeterministicSample(
            "eager is nondeterministic: two eager runs on the same inputs differ "
            f"({self_check.message or self_check.status.value}), so the compiled outputs "
            f"cannot be judged against it (the compiled side's comparison: {cmp.message})",
            eager_max_diff=f"{self_check.max_diff:.3g}",
        )


def _roofline(
    module: Any, inputs: list[Any], device: str, timings: dict[str, Any]
) -> dict[str, Any] | None:
    """The graph's roofline (:mod:`._roofline`) against each side's median, device time on
    CUDA; None (and a note in the log) where it cannot be measured: an optional figure."""
    try:
        work = graph_work(module, _clone(inputs))
        floats = [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]
        dtype = (
            max(floats, key=lambda t: t.numel() * t.element_size()).dtype
            if floats
            else torch.float32
        )

        def median(side: Any) -> float:
            return (side.device or side.e2e).median_ms

        found = checked_roofline(
            work,
            dtype,
            device,
            eager_ms=median(timings["eager"]),
            compiled_ms=median(timings["compiled"]),
        )
    except Exception as exc:  # noqa: BLE001 - an optional figure: the result stands without it
        log.warning("no roofline: %s: %s", type(exc).__name__, exc)
        return None
    return dataclasses.asdict(found)


def _integrity_status(compiler: Any) -> Status:
    """A pass compiler's outputs that break the harness's checks are the pass's fault."""
    return Status.PASS_REJECTED if compiler.applies_passes else Status.RUNTIME_ERROR


class _IntegrityViolation(PassnetError):
    def __init__(self, message: str, status: Status) -> None:
        super().__init__(message)
        self.status = status


def _report(compiler: Any) -> dict[str, Any] | None:
    rep = compiler.pass_report()
    return dataclasses.asdict(rep) if rep is not None else None


def _nonfinite_outputs(outs: list[Any]) -> list[int]:
    return [
        i
        for i, o in enumerate(outs)
        if isinstance(o, torch.Tensor)
        and (o.is_floating_point() or o.is_complex())
        and not torch.isfinite(o).all()
    ]


def _mutating(inputs: list[Any], module: Any, compiled: Any, device: str) -> bool:
    # Measured calls reuse one set of inputs unless a call changes them (then each
    # call gets fresh clones, outside the timed region).
    for fn in (module, compiled):
        _, args = _call(fn, inputs, device)
        if mutated_inputs(inputs, args):
            return True
    return False


@contextlib.contextmanager
def gc_paused(pause: bool) -> Iterator[None]:
    """Without Python's cyclic collector while timing (a collection lands in whichever call
    happens to allocate the object that triggers it); collected first, restored after."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def timing_cores(device: str) -> list[int]:
    """The CPU cores the timing thread for ``device`` may use (:func:`core_share`), or none
    (not CUDA, no affinity control, or a single allowed core: nothing to choose)."""
    if not device.startswith("cuda") or not hasattr(os, "sched_setaffinity"):
        return []
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        return []
    return core_share(allowed, _device_index(device), max(1, torch.cuda.device_count()))


def pin_to_one_core(device: str, share: list[int] | None = None) -> None:
    """Pin this thread to the first core of its share (after compilation, before timing);
    ``share``: the device's :func:`timing_cores`, where the caller has them already.

    Launch-bound GPU graphs run as fast as the launching core; a fixed core per GPU
    worker removes core-to-core and migration differences between runs. With
    ``core_guard`` (the default) the timing loop's :class:`CoreGuard` chooses the core
    instead, and keeps choosing.
    """
    share = timing_cores(device) if share is None else share
    if share:
        os.sched_setaffinity(0, {share[0]})


def _args_factory(inputs: list[Any], mutating: bool) -> Callable[[], list[Any]]:
    """The arguments of each timed call: the same inputs, or fresh clones for a graph that
    mutates them (made outside the timed region)."""

    def same() -> list[Any]:
        return inputs

    def fresh() -> list[Any]:
        return _clone(inputs)

    return fresh if mutating else same


def _extra_figures(
    compiled: Any,
    module: Any,
    inputs: list[Any],
    mutating: bool,
    timings: dict[str, Any],
    field: str,
    what: str,
    measure: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """Optional figures of both sides, taken after the result is decided (replay timing,
    the kernel profile). ``measure`` maps each side's (call, argument factory) to its
    figures or to why there are none; they go into ``timings[side].<field>``, the reasons
    into ``<field>_error``."""
    make_args = _args_factory(inputs, mutating)
    try:
        with torch.no_grad():
            found = measure({"compiled": (compiled, make_args), "eager": (module, make_args)})
    except Exception as exc:  # noqa: BLE001 - optional figures: the result stands
        found = {name: f"{what} failed: {type(exc).__name__}: {exc}"[:500] for name in timings}
    for name, value in found.items():
        setattr(timings[name], f"{field}_error" if isinstance(value, str) else field, value)


def measure_sides(
    compiled: Any,
    module: Any,
    inputs: list[Any],
    device: str,
    s: EvalSettings,
    mutating: bool,
    guard: CoreGuard | None = None,
    clocks: ClockMonitor | None = None,
    contention: ContentionMonitor | None = None,
) -> dict[str, Any]:
    """The harness's timing of one graph: ``compiled`` against its eager ``module`` on
    ``inputs``, ``{"compiled": Timing, "eager": Timing}``.

    The clock is :func:`cuda_timer` on CUDA (with the L2 cache flushed before every call
    where ``s.flush_l2`` says so), :func:`cpu_timer` elsewhere; both sides are timed by
    :func:`measure_interleaved` with ``s``'s warm-up, trials, rounds and adaptive
    repetition, under ``torch.no_grad()``. ``mutating``: each call gets fresh clones of the
    inputs (made outside the timed region). ``guard``, ``clocks`` and ``contention`` are
    passed on to :func:`measure_interleaved`. Pinning the thread and pausing the collector
    are the caller's (:func:`pin_to_one_core`, :func:`gc_paused`).
    """
    timer = cuda_timer if device.startswith("cuda") else cpu_timer
    if s.flush_l2 and device.startswith("cuda"):
        timer = flushing(timer, l2_flusher(device))

    make_args = _args_factory(inputs, mutating)
    with torch.no_grad():
        return measure_interleaved(
            {"compiled": (compiled, make_args), "eager": (module, make_args)},
            timer=timer,
            warmup=s.warmup,
            trials=s.trials,
            rounds=s.rounds,
            unstable_threshold=s.unstable_threshold,
            # adaptive off: exactly ``trials`` calls per side, nothing measured again
            max_retries=s.max_retries if s.adaptive else 0,
            min_warmup_s=s.min_warmup_s,
            target_rel_se=s.target_rel_se,
            max_extra_s=s.max_extra_s if s.adaptive else 0.0,
            guard=guard,
            clocks=clocks,
            max_measure_s=s.max_measure_s,
            contention=contention,
        )


def _first_failing_draw(cmp1: Comparison, cmp2: Comparison) -> int | None:
    """The first of the two draws whose outputs fail the strict tolerance, or None."""
    if not cmp1.allclose[BASELINE_T]:
        return 1
    if not cmp2.status.ran or not cmp2.allclose[BASELINE_T]:
        return 2
    return None


def _merge(a: Comparison, b: Comparison) -> Comparison:
    """Both draws must pass: the worse status, allclose AND-ed per t."""
    if not b.status.ran:
        return b
    allclose = {t: a.allclose[t] and b.allclose[t] for t in a.allclose}
    status = Status.OK if allclose[BASELINE_T] else Status.ACCURACY
    max_diff = max(a.max_diff, b.max_diff)
    # the message names the figure the record keeps: the larger difference of the two draws
    worse = a if a.max_diff >= b.max_diff else b
    message = accuracy_message(worse.checks, max_diff) if status is Status.ACCURACY else ""
    return Comparison(
        status,
        message,
        a.checks,
        allclose,
        a.equal and b.equal,
        max_diff,
        (a.mean_diff + b.mean_diff) / 2,
    )


def _fill_comparison(
    result: dict[str, Any], cmp: Comparison, draws: int, first_failing: int | None = None
) -> None:
    result["status"] = cmp.status.value
    if cmp.message and cmp.status is not Status.OK:
        result["error"] = {
            "type": cmp.status.value,
            "message": cmp.message,
            "stage": "compare",
            "context": {},
            "traceback": "",
        }
    result["correctness"] = {
        "num_outputs": len(cmp.checks),
        "outputs": [dataclasses.asdict(c) for c in cmp.checks],
        "equal": cmp.equal,
        "allclose": {str(t): v for t, v in cmp.allclose.items()},
        "max_diff": cmp.max_diff,
        "mean_diff": cmp.mean_diff,
        "draws": draws,
        "first_failing_draw": first_failing,
    }
