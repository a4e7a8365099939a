"""One graph block of a PassNet/GraphNet log, and the record it becomes.

The scanner (:mod:`passnet.record._logparse`) fills a :class:`Block` line by line;
:func:`block_to_record` decides the status and rebuilds correctness per level t
from the ``all_close_atol_…_rtol_…`` keys through the dtype tables.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from passnet.errors import InputFormatError
from passnet.record._log import dtype_from_name
from passnet.record._schema import (
    SCHEMA_VERSION,
    Correctness,
    ErrorInfo,
    EvalRecord,
    OutputCheck,
    PassReport,
    Timing,
)
from passnet.record._tolerance import BASELINE_T, TOLERANCE_LEVELS, log_key, tolerance
from passnet.status import Status

__all__ = ["Block", "PassFacts", "block_to_record"]

log = logging.getLogger(__name__)

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


@dataclass
class PassFacts:
    """What the pass manager printed for one evaluation."""

    loaded: list[str] = field(default_factory=list)
    replacements: dict[str, int] = field(default_factory=dict)
    diagnostics: list[str] = field(default_factory=list)
    has_matched: bool | None = None
    early_exit: bool = False
    no_modified: bool = False
    crash: str | None = None
    seen: bool = False

    @property
    def applied(self) -> bool:
        return any(n > 0 for n in self.replacements.values())

    @property
    def mismatch(self) -> bool:
        """The pass manager said that no pass matched."""
        if self.has_matched is not None:
            return not self.has_matched
        if self.early_exit:
            return True
        failed = any(n == 0 for n in self.replacements.values())
        return not self.applied and (self.no_modified or failed)

    def report(self) -> PassReport:
        """The record's pass-manager facts; ``matched`` only on positive evidence."""
        return PassReport(
            loaded=list(self.loaded),
            replacements=dict(self.replacements),
            diagnostics=list(self.diagnostics),
            matched=not self.mismatch and (self.applied or bool(self.has_matched)),
        )


@dataclass
class Block:
    """The lines of one graph evaluation, as read so far (``line``: its ``[Processing]`` line)."""

    graph: str
    line: int
    passes: PassFacts
    config: dict[str, str] = field(default_factory=dict)
    status: Status | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    error: ErrorInfo | None = None
    timing: dict[str, Timing] = field(default_factory=dict)
    dtypes: dict[str, list[str]] = field(default_factory=dict)
    dtype_match: bool | None = None
    checks: dict[str, list[Any]] = field(default_factory=dict)
    result: str | None = None
    fail_reason: str | None = None
    speedups: dict[str, float] = field(default_factory=dict)
    messages: list[tuple[str, str]] = field(default_factory=list)
    exc_type: str | None = None


def _pick(values: list[Any] | None, i: int) -> Any:
    if values is None:
        return None
    if len(values) == 1:
        return values[0]
    return values[i] if i < len(values) else None


def _infer_primary(checks: dict[str, list[Any]]) -> torch.dtype | None:
    """The float dtype whose tolerance keys best explain the allclose lines present."""
    best, best_hits = None, 0
    for dtype in _FLOAT_DTYPES:
        hits = sum(1 for t in TOLERANCE_LEVELS if log_key(*tolerance(dtype, t)) in checks)
        if hits > best_hits:
            best, best_hits = dtype, hits
    return best


def _allclose_at(
    t: int,
    checks: dict[str, list[Any]],
    dtypes: list[torch.dtype | None],
    primary: torch.dtype | None,
) -> bool | None:
    """Allclose of all outputs at t; None when the log does not say."""
    if primary is not None:
        values = checks.get(log_key(*tolerance(primary, t)))
        if values is not None and (len(values) == 1 or len(dtypes) <= 1):
            return all(values)
    equal = checks.get("equal")
    if not dtypes:
        return True if equal and all(equal) else None
    verdicts: list[bool | None] = []
    for i, dtype in enumerate(dtypes):
        if _pick(equal, i):
            verdicts.append(True)
            continue
        tol = tolerance(dtype, t) if dtype is not None else (0.0, 0.0)
        values = equal if tol == (0.0, 0.0) else checks.get(log_key(*tol))
        verdict = _pick(values, i)
        verdicts.append(None if verdict is None else bool(verdict))
    if False in verdicts:
        return False
    return None if None in verdicts else True


def _classify_failure(block: Block) -> Status | None:
    """The failing status that a failure reason / exception message names, if any."""
    reason = (block.fail_reason or "").lower()
    messages = " ".join(m for _, m in block.messages).lower()
    if "eager" in reason or "broken sample" in reason:
        return Status.SAMPLE_ERROR
    if "too large" in reason:
        return Status.TOO_LARGE
    if "blocked call" in reason + " " + messages or "pass rejected" in reason:
        return Status.PASS_REJECTED
    if "pass mismatch" in reason:
        return Status.PASS_MISMATCH
    if "timeout" in reason or "timed out" in reason:
        return Status.TIMEOUT
    if "compile" in reason:
        return Status.COMPILE_ERROR
    if "datatype" in reason or "dtype" in reason:
        return Status.DTYPE_MISMATCH
    if "shape" in reason:
        return Status.SHAPE_MISMATCH
    if "nonfinite" in reason or re.search(r"\b(nan|inf)\b", reason):
        return Status.NONFINITE
    if reason:
        return Status.RUNTIME_ERROR
    if block.messages:
        stages = {stage for stage, _ in block.messages}
        return Status.SAMPLE_ERROR if "eager" in stages else Status.COMPILE_ERROR
    if block.passes.crash is not None:
        return Status.COMPILE_ERROR
    return None


def block_correctness(block: Block) -> Correctness | None:
    """Output comparison rebuilt from the block's ``[Datatype]`` and ``[Correctness]`` lines."""
    if not block.checks and not block.dtypes:
        return None
    checks = block.checks
    eager = block.dtypes.get("eager", [])
    compiled = block.dtypes.get("compiled", eager)
    lengths = [len(v) for v in checks.values()]
    n = len(eager) or max(lengths, default=1)
    dtypes = [dtype_from_name(name) for name in eager]
    floating = [d for d in dtypes if d is not None and tolerance(d, 0) != (0.0, 0.0)]
    primary = floating[0] if floating else (None if eager else _infer_primary(checks))
    if not eager and primary is not None:
        dtypes = [primary]
    allclose = {}
    for t in TOLERANCE_LEVELS:
        verdict = _allclose_at(t, checks, dtypes, primary)
        if verdict is not None:
            allclose[t] = verdict
    allclose = _fill_by_monotonicity(allclose, block.graph)
    max_diffs, mean_diffs = checks.get("max_diff", []), checks.get("mean_diff", [])
    equal = checks.get("equal")
    per_output = n == 1 or len(max_diffs) == n
    outputs = [
        OutputCheck(
            index=i,
            eager_dtype=eager[i] if i < len(eager) else "",
            compiled_dtype=compiled[i] if i < len(compiled) else "",
            eager_shape=[],
            compiled_shape=[],
            equal=bool(_pick(equal, i)),
            max_diff=_pick(max_diffs, i) if per_output else None,
            mean_diff=_pick(mean_diffs, i) if per_output else None,
        )
        for i in range(n)
    ]
    return Correctness(
        num_outputs=n,
        outputs=outputs,
        equal=bool(equal) and all(equal),
        allclose=allclose,
        max_diff=_max(max_diffs),
        mean_diff=math.fsum(mean_diffs) / len(mean_diffs) if mean_diffs else math.nan,
        draws=int(block.meta.get("draws", 1)),
        first_failing_draw=block.meta.get("first_failing_draw"),
    )


def _fill_by_monotonicity(stated: dict[int, bool], graph: str) -> dict[int, bool]:
    """Levels a partial log does not state, where the stated ones decide them.

    atol and rtol only grow with t, so outputs allclose at t are allclose at every
    larger t, and outputs not allclose at t are not at any smaller t. A level that
    the stated ones leave open stays out of ``allclose`` (scored as not correct)
    and is logged.
    """
    if not stated:
        return stated
    allclose = {}
    for t in TOLERANCE_LEVELS:
        if t in stated:
            allclose[t] = stated[t]
        elif any(v for k, v in stated.items() if k < t):
            allclose[t] = True
        elif any(not v for k, v in stated.items() if k > t):
            allclose[t] = False
    open_levels = [t for t in TOLERANCE_LEVELS if t not in allclose]
    if open_levels:
        log.warning(
            "graph %s: the log states no allclose result for t = %s, and the stated levels "
            "do not decide them: scored as not correct there",
            graph,
            ", ".join(map(str, open_levels)),
        )
    return allclose


def block_status(block: Block, correctness: Correctness | None, source: str) -> Status:
    """The block's status: the ``[passnet]`` line, else pass-manager facts, the failure
    reason, the dtype check and the baseline allclose, in that order of precedence.
    """
    if block.status is not None:
        return block.status
    if block.passes.mismatch:
        return Status.PASS_MISMATCH
    if block.result != "success" and (failure := _classify_failure(block)) is not None:
        return failure
    if correctness is None:
        if block.result == "success":
            raise InputFormatError(
                f"graph {block.graph!r} reports success but has no [Correctness] lines",
                file=source,
                line=block.line,
            )
        if block.result is None and block.error is None:
            block.error = ErrorInfo(
                type="IncompleteLog",
                message="no [Result] line: the run crashed or was killed",
                stage="log",
            )
        return Status.RUNTIME_ERROR
    eager, compiled = block.dtypes.get("eager"), block.dtypes.get("compiled")
    if block.dtype_match is False or (eager and compiled and eager != compiled):
        return Status.DTYPE_MISMATCH
    return Status.OK if correctness.allclose.get(BASELINE_T, False) else Status.ACCURACY


def block_to_record(block: Block, source: str, compiler: str | None) -> EvalRecord:
    """The evaluation record of a finished block; InputFormatError when it is inconsistent."""
    correctness = block_correctness(block)
    status = block_status(block, correctness, source)
    if status.ran and correctness is None:
        raise InputFormatError(
            f"graph {block.graph!r} has status {status.value!r} but no [Correctness] lines",
            file=source,
            line=block.line,
        )
    error = block.error
    if error is None and not status.ran and block.status is None:
        # foreign log: say what the log said; a passnet log has its own error line
        message = "; ".join(m for _, m in block.messages) or block.passes.crash
        stage = block.messages[0][0] if block.messages else "log"
        error = ErrorInfo(
            type=block.exc_type or status.value,
            message=message or block.fail_reason or f"{status.value} (from log)",
            stage=stage,
        )
    settings = {
        k: int(block.config[k]) for k in ("warmup", "trials") if block.config.get(k, "").isdigit()
    }
    meta = block.meta
    return EvalRecord(
        graph=block.graph,
        graph_hash=str(meta.get("graph_hash", "")),
        compiler=block.config.get("compiler") or compiler or "unknown",
        compiler_config=dict(meta.get("compiler_config") or {}),
        compiler_config_hash=str(meta.get("compiler_config_hash", "")),
        device=block.config.get("device", ""),
        status=status,
        schema_version=int(meta.get("schema_version", SCHEMA_VERSION)),
        device_name=block.config.get("hardware", ""),
        error=error,
        correctness=correctness,
        eager=block.timing.get("eager"),
        compiled=block.timing.get("compiled"),
        speedup_e2e=block.speedups.get("e2e"),
        speedup_device=block.speedups.get("device"),
        pass_report=block.passes.report() if block.passes.seen else None,
        settings=settings,
    )


def _max(values: list[float]) -> float:
    if not values:
        return math.nan
    return math.nan if any(math.isnan(v) for v in values) else max(values)
