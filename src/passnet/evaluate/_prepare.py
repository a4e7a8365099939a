"""Preparing a graph while another is timed: the compile that the timed evaluation then
loads from the caches.

A *prepare worker* compiles a graph ahead of its evaluation, in an isolated child of its
own pinned to cores the timing threads never use: it loads the sample, replays one input
draw on the evaluation's device and compiles (for Inductor: a cold compile and its first
call, which fill Inductor's on-disk caches — the FX graph cache, autotuning results,
Triton and C++ kernels). The evaluation that follows then compiles once, from those
caches (:attr:`passnet.compilers.Compiler.cache_prepared`), instead of compiling cold and
again warm: the program it times is the same either way, and its record says whether the
caches hit (:class:`passnet.record.CompileCache`). Nothing a prepare child computes is
trusted or reused but the caches, which any compile may fill.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from passnet.evaluate._settings import FORKSERVER_PRELOAD, EvalSettings
from passnet.isolate import run_isolated

__all__ = ["PrepareOutcome", "cache_counters", "prepare_sample"]

log = logging.getLogger(__name__)

Send = Callable[[tuple[str, Any]], None]


@dataclasses.dataclass(frozen=True)
class PrepareOutcome:
    """How preparing one graph went: ``ok``, its seconds, and what failed (a graph whose
    preparation failed is still evaluated: the evaluation records the failure properly)."""

    ok: bool
    seconds: float
    error: str = ""


def cache_counters() -> dict[str, int]:
    """This process's Inductor FX-graph cache hits and misses so far."""
    from torch._dynamo.utils import counters

    inductor = counters["inductor"]
    return {
        "fxgraph_hits": int(inductor["fxgraph_cache_hit"]),
        "fxgraph_misses": int(inductor["fxgraph_cache_miss"]),
    }


def _prepare_child(
    sample_path: str,
    compiler_name: str,
    compiler_config: dict[str, Any],
    device: str,
    seed: int,
    num_threads: int | None,
    cores: tuple[int, ...],
    send: Send,
) -> None:
    import torch

    from passnet.compilers import create_compiler, mark_module_state
    from passnet.evaluate._child import use_device
    from passnet.evaluate._memory import check_fits
    from passnet.sample import load_sample

    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(cores))  # compilers' subprocesses inherit it
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        use_device(device)  # as the evaluation does: Inductor benchmarks on the current GPU
        sample = load_sample(sample_path)
        check_fits(sample, device)
        module = sample.build_module(device)
        inputs = sample.replay_inputs(device, seed)
        mark_module_state(inputs, sample.module_state_positions)  # as the evaluation does
        compiler = create_compiler(compiler_name, **compiler_config)
        with torch.no_grad():
            compiler.compile(module, inputs)
    except Exception as exc:  # noqa: BLE001 - the evaluation will meet it and record it
        send(("result", {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}))
        return
    send(("result", {"ok": True, **cache_counters()}))


def prepare_sample(
    sample_path: str | Path,
    compiler: str,
    compiler_config: dict[str, Any],
    device: str,
    settings: EvalSettings,
    *,
    cores: Sequence[int] = (),
) -> PrepareOutcome:
    """Compile ``sample_path`` with ``compiler`` on ``device`` in an isolated child pinned to
    ``cores``, so that its evaluation finds the compiled program in the caches. Never
    raises for the sample's or the compiler's failures (the outcome says what failed)."""
    started = time.perf_counter()
    outcome = run_isolated(
        _prepare_child,
        (
            str(sample_path),
            compiler,
            dict(compiler_config),
            device,
            settings.seed,
            settings.num_threads,
            tuple(cores),
        ),
        settings.timeout_s,
        preload=FORKSERVER_PRELOAD,
        fixed_layout=settings.fixed_layout,
    )
    seconds = time.perf_counter() - started
    result = outcome.result
    if result is None:
        how = (
            "timed out"
            if outcome.timed_out
            else f"died ({outcome.signal_name or outcome.exitcode})"
        )
        return PrepareOutcome(False, seconds, f"the prepare child {how}")
    return PrepareOutcome(bool(result["ok"]), seconds, str(result.get("error", "")))
