"""PassNet/GraphNet-compatible log lines rendered from an evaluation record.

The log is a rendering of the record (docs/scoring.md, "Logs"): GraphNet's ``test_compiler``
lines (``[Processing]``, ``[Config]``, ``[Datatype]``, ``[Correctness]``,
``[Result]``, ``[Performance]``, ``[Speedup]``), PassNet's pass manager lines
(``[PassMgrBackend] …``, ``Has Any pass matched? […]``), and ``[passnet]`` lines
carrying what those formats lack (the exact status, hashes, the error), so that
:func:`~passnet.score.parse_log` gives back every field scoring needs.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

import torch

from passnet.record._tolerance import TOLERANCE_LEVELS, log_key, tolerance
from passnet.status import Status

if TYPE_CHECKING:
    from passnet.record._schema import EvalRecord, Timing, TimingStats

__all__ = ["FAIL_REASONS", "dtype_from_name", "render_log"]

FAIL_REASONS: dict[Status, str] = {
    Status.DTYPE_MISMATCH: "datatype mismatch",
    Status.SHAPE_MISMATCH: "shape mismatch",
    Status.NONFINITE: "nonfinite outputs",
    Status.RUNTIME_ERROR: "runtime error",
    Status.COMPILE_ERROR: "compiled model execution error",
    Status.TIMEOUT: "timeout",
    Status.PASS_MISMATCH: "pass mismatch",
    Status.PASS_REJECTED: "pass rejected",
    Status.SAMPLE_ERROR: "eager model execution error",
    Status.TOO_LARGE: "too large for this machine (not evaluated)",
}
"""``[Fail due to <reason>.]`` per failing status; GraphNet's own phrases where it has one.

``accuracy`` has no reason line: like GraphNet, its allclose lines tell.
"""


def dtype_from_name(name: str) -> torch.dtype | None:
    """``'float32'`` / ``'torch.float32'`` → ``torch.float32``; None for non-dtypes (``'int'``)."""
    value = getattr(torch, name.strip().removeprefix("torch."), None)
    return value if isinstance(value, torch.dtype) else None


def _short_dtype(name: str) -> str:
    return name.strip().removeprefix("torch.")


def _is_floating(name: str) -> bool:
    dtype = dtype_from_name(name)
    return dtype is not None and tolerance(dtype, 0) != (0.0, 0.0)


BROKEN_SAMPLE = "broken sample (model.py or its metadata cannot be loaded)"
"""The reason of a sample error in the load stage, before eager ran at all (a syntax
error in model.py, a bad metadata field): not an eager execution error."""


def _fail_reason(record: EvalRecord) -> str | None:
    if record.status is Status.SAMPLE_ERROR and record.error and record.error.stage == "load":
        return BROKEN_SAMPLE
    return FAIL_REASONS.get(record.status)


def _num(value: float | None) -> str:
    """Shortest text that parses back to the same float."""
    return "nan" if value is None or math.isnan(value) else repr(float(value))


def _stats_json(stats: TimingStats) -> dict[str, Any]:
    return {
        "median": stats.median_ms,
        "iqr": stats.iqr_ms,
        "mean": stats.mean_ms,
        "std": stats.std_ms,
        "min": stats.min_ms,
        "max": stats.max_ms,
        "n": stats.n,
    }


def _timing_json(timing: Timing) -> str:
    d: dict[str, Any] = {"e2e": _stats_json(timing.e2e)}
    if timing.device is not None:
        d["gpu"] = _stats_json(timing.device)
    d["retries"] = timing.retries
    d["unstable"] = timing.unstable
    return json.dumps(d)


_PM = "[PassMgrBackend]"
# The pass manager's own summary lines, which PassReport.diagnostics also holds (its
# log, in order): rendered from the report's fields, and used to tell which pass the
# lines after them explain.
_PASS_LINE = re.compile(
    r"\[PassMgrBackend\] (?:Applied \d+ replacements with (?P<applied>\S+)\."
    r"|Pass (?P<failed>\S+) failed to match\.)$"
)
_SUMMARY_LINE = re.compile(
    r"\[PassMgrBackend\] Loaded \d+ passes: |Has Any pass matched\? |Pass testing early exits"
)


def _explanations(diagnostics: list[str]) -> dict[str | None, list[str]]:
    """The diagnostics that are not summary lines, by the pass whose line they follow
    (None: before any pass line, such as a loading error)."""
    grouped: dict[str | None, list[str]] = {}
    current: str | None = None
    for diagnostic in diagnostics:
        m = _PASS_LINE.match(diagnostic)
        if m:
            current = m.group("applied") or m.group("failed")
            continue
        if _SUMMARY_LINE.match(diagnostic):
            continue
        text = " ".join(diagnostic.splitlines())
        grouped.setdefault(current, []).append(
            text if text.startswith(_PM) else f"{_PM} Diagnostic: {text}"
        )
    return grouped


def _pass_lines(record: EvalRecord) -> list[str]:
    report = record.pass_report
    if report is None:
        return []
    explained = _explanations(report.diagnostics)
    lines = [f"[PassMgrBackend] Loaded {len(report.loaded)} passes: {report.loaded!r}"]
    lines += explained.pop(None, [])
    names = list(report.loaded) + [n for n in report.replacements if n not in report.loaded]
    for name in names:
        count = report.replacements.get(name, 0)
        if count > 0:
            lines.append(f"[PassMgrBackend] Applied {count} replacements with {name}.")
        else:
            lines.append(f"[PassMgrBackend] Pass {name} failed to match.")
        lines += explained.pop(name, [])
    for rest in explained.values():  # after a pass line the report does not list
        lines += rest
    lines.append(f"Has Any pass matched? [{report.matched}]")
    if record.status is Status.PASS_MISMATCH:
        lines.append("Pass testing early exits on pass mismatch.")
    return lines


def _correctness_lines(record: EvalRecord) -> list[str]:
    c = record.correctness
    if c is None:
        return []
    eager = [_short_dtype(o.eager_dtype) for o in c.outputs]
    compiled = [_short_dtype(o.compiled_dtype) for o in c.outputs]
    lines = [
        f"[Datatype][eager]: {' '.join(eager)}",
        f"[Datatype][compiled]: {' '.join(compiled)}",
        f"[DataType] eager:{eager} compiled:{compiled} match:{eager == compiled}",
        f"[Correctness][equal]: {int(c.equal)}",
    ]
    # One line per t, keyed by the tolerance of the first floating output; the
    # value is the all-outputs result. Integer-only outputs have no allclose key
    # (their tolerance is (0, 0)): the [equal] line decides for them.
    primary = next((d for d in eager if _is_floating(d)), None)
    if primary is not None:
        dtype = dtype_from_name(primary)
        assert dtype is not None
        for t in TOLERANCE_LEVELS:
            if t in c.allclose:
                key = log_key(*tolerance(dtype, t))
                lines.append(f"[Correctness][{key}]: {int(c.allclose[t])}")
    lines.append(f"[Correctness][max_diff]: {_num(c.max_diff)}")
    lines.append(f"[Correctness][mean_diff]: {_num(c.mean_diff)}")
    return lines


def _meta_json(record: EvalRecord) -> str:
    meta: dict[str, Any] = {
        "graph_hash": record.graph_hash,
        "compiler_config_hash": record.compiler_config_hash,
        "compiler_config": record.compiler_config,
        "schema_version": record.schema_version,
    }
    if record.correctness is not None:
        meta["draws"] = record.correctness.draws
        meta["first_failing_draw"] = record.correctness.first_failing_draw
    return json.dumps(meta, sort_keys=True, default=str)


def render_log(record: EvalRecord, *, prefix: str = "") -> list[str]:
    """The log lines of one evaluation (no trailing newlines).

    ``prefix`` is GraphNet's ``log_prompt`` (e.g. ``graph-net-test-compiler-log``),
    put before the ``test_compiler`` lines; pass manager lines never carry it.
    """
    lead = f"{prefix} " if prefix else ""
    tagged: list[str] = [
        f"[Processing] {record.graph}",
        f"[Config] model: {PurePosixPath(record.graph.replace(chr(92), '/')).name}",
        f"[Config] device: {record.device}",
    ]
    if record.device_name:
        tagged.append(f"[Config] hardware: {record.device_name}")
    tagged.append(f"[Config] compiler: {record.compiler}")
    for key in ("warmup", "trials"):
        if key in record.settings:
            tagged.append(f"[Config] {key}: {record.settings[key]}")
    tagged.append(f"[passnet] status: {record.status.value}")
    tagged.append(f"[passnet] meta: {_meta_json(record)}")
    if record.error is not None:
        error = {
            "type": record.error.type,
            "message": record.error.message,
            "stage": record.error.stage,
            "context": record.error.context,
        }
        tagged.append(f"[passnet] error: {json.dumps(error, sort_keys=True)}")
    lines = [lead + line for line in tagged]
    lines += _pass_lines(record)
    if record.eager is not None and record.compiled is not None:
        hardware = f" {record.device_name}" if record.device_name else ""
        lines.append(
            f"{lead}[Profiling] Using device: {record.device}{hardware}, "
            f"warm up {record.settings.get('warmup', '?')}, trials {record.settings.get('trials', '?')}"
        )

    tagged = _correctness_lines(record)
    if record.status is Status.OK:
        tagged.append("[Result] status: success")
    else:
        tagged.append("[Result] status: failed")
        reason = _fail_reason(record)
        if reason:
            tagged.append(f"[Fail due to {reason}.]")
    if record.eager is not None:
        tagged.append(f"[Performance][eager]: {_timing_json(record.eager)}")
    if record.compiled is not None:
        tagged.append(f"[Performance][compiled]: {_timing_json(record.compiled)}")
    if record.speedup_e2e is not None:
        tagged.append(f"[Speedup][e2e]: {_num(record.speedup_e2e)}")
    if record.speedup_device is not None:
        tagged.append(f"[Speedup][gpu]: {_num(record.speedup_device)}")
    return lines + [lead + line for line in tagged]
