"""The one output comparator: count, shape, dtype, non-finite values, equality, and
allclose at every tolerance level t (:mod:`passnet.record._tolerance`).

Used by the evaluator (compiled against eager) and by dataset validation (a split or
re-extracted graph against the sample), always as ``compare_outputs(actual, expected)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from passnet.record import BASELINE_T, TOLERANCE_LEVELS, OutputCheck, tolerance
from passnet.status import Status

__all__ = ["Comparison", "accuracy_message", "compare_outputs", "flatten_outputs"]


def flatten_outputs(out: Any) -> list[Any]:
    """Outputs as a flat list (tuples/lists/dicts flattened in order)."""
    if isinstance(out, (tuple, list)):
        return [x for item in out for x in flatten_outputs(item)]
    if isinstance(out, dict):
        return [x for key in out for x in flatten_outputs(out[key])]
    return [out]


@dataclass
class Comparison:
    """Result of comparing one draw of compiled outputs with eager outputs."""

    status: Status
    message: str = ""
    checks: list[OutputCheck] = field(default_factory=list)
    allclose: dict[int, bool] = field(default_factory=dict)
    equal: bool = False
    max_diff: float = 0.0
    mean_diff: float = 0.0


def _dtype_name(x: Any) -> str:
    return str(x.dtype).removeprefix("torch.") if isinstance(x, torch.Tensor) else type(x).__name__


def _shape(x: Any) -> list[int]:
    return list(x.shape) if isinstance(x, torch.Tensor) else []


def compare_outputs(actual: Any, expected: Any, *, t: int = BASELINE_T) -> Comparison:
    """Compare ``actual`` outputs (the compiled side, a rewritten graph) with ``expected``
    ones (eager, the sample): nested tuples/lists/dicts are flattened in order first.

    The first structural failure (count, shape, dtype, non-finite values where the
    expected has none, or elsewhere) decides the status; otherwise the status is ``ok``
    when all outputs are allclose at tolerance level ``t`` (default: the PassNet
    baseline, t = -5), else ``accuracy``. ``allclose`` holds the result at every level.
    NaN is never a wildcard: non-finite values must sit where the expected has them.
    """
    decisive = max(min(t, 1), TOLERANCE_LEVELS[0])  # t >= 1 uses the t = 1 tolerance
    compiled, eager = flatten_outputs(actual), flatten_outputs(expected)
    if len(compiled) != len(eager):
        return Comparison(
            Status.SHAPE_MISMATCH, f"compiled returned {len(compiled)} outputs, eager {len(eager)}"
        )
    checks: list[OutputCheck] = []
    allclose = dict.fromkeys(TOLERANCE_LEVELS, True)
    all_equal = True
    max_diff, diff_sum, diff_count = 0.0, 0.0, 0
    failure: tuple[Status, str] | None = None
    for i, (c, e) in enumerate(zip(compiled, eager)):
        check = OutputCheck(i, _dtype_name(e), _dtype_name(c), _shape(e), _shape(c))
        checks.append(check)
        if failure is not None:
            continue
        if not isinstance(e, torch.Tensor) or not isinstance(c, torch.Tensor):
            same = type(c) is type(e) and c == e
            check.equal = bool(same)
            if isinstance(e, torch.Tensor) != isinstance(c, torch.Tensor):
                failure = (
                    Status.DTYPE_MISMATCH,
                    f"output {i}: {_dtype_name(c)} instead of {_dtype_name(e)}",
                )
            elif not same:
                all_equal = False
                allclose = dict.fromkeys(allclose, False)
            continue
        if c.shape != e.shape:
            failure = (
                Status.SHAPE_MISMATCH,
                f"output {i}: shape {list(c.shape)} instead of {list(e.shape)}",
            )
            continue
        if c.dtype != e.dtype:
            failure = (Status.DTYPE_MISMATCH, f"output {i}: dtype {c.dtype} instead of {e.dtype}")
            continue
        c64, e64 = _as_float64(c.detach().cpu()), _as_float64(e.detach().cpu())
        if c64.is_complex():
            c64, e64 = torch.view_as_real(c64), torch.view_as_real(e64)
        c_fin, e_fin = torch.isfinite(c64), torch.isfinite(e64)
        # Non-finite values must sit exactly where eager has them, with the same value
        # (NaN at NaN, +inf at +inf): NaN is never a wildcard.
        same_nonfinite = torch.equal(c_fin, e_fin) and bool(
            (torch.isnan(c64[~c_fin]) == torch.isnan(e64[~e_fin])).all()
            and (c64[~c_fin & ~torch.isnan(c64)] == e64[~e_fin & ~torch.isnan(e64)]).all()
        )
        if not same_nonfinite:
            check.nonfinite = True
            failure = (
                Status.NONFINITE,
                f"output {i}: non-finite values where eager has finite ones (or vice versa)",
            )
            continue
        diff = (c64[c_fin] - e64[e_fin]).abs()
        ref = e64[e_fin].abs()
        check.max_diff = float(diff.max()) if diff.numel() else 0.0
        check.mean_diff = float(diff.mean()) if diff.numel() else 0.0
        check.equal = bool(diff.numel() == 0 or check.max_diff == 0.0)
        all_equal = all_equal and check.equal
        max_diff = max(max_diff, check.max_diff)
        diff_sum += float(diff.sum())
        diff_count += diff.numel()
        for level in TOLERANCE_LEVELS:
            if not allclose[level]:
                continue
            atol, rtol = tolerance(e.dtype, level)
            allclose[level] = bool((diff <= atol + rtol * ref).all())
    if failure is not None:
        return Comparison(failure[0], failure[1], checks)
    status = Status.OK if allclose[decisive] else Status.ACCURACY
    message = "" if status is Status.OK else accuracy_message(checks, max_diff)
    return Comparison(
        status,
        message,
        checks,
        allclose,
        all_equal,
        max_diff,
        diff_sum / diff_count if diff_count else 0.0,
    )


def accuracy_message(checks: list[OutputCheck], max_diff: float) -> str:
    """What an ``accuracy`` result says: the largest difference and the output it is in."""
    worst = max(
        (c for c in checks if c.max_diff is not None), key=lambda c: c.max_diff or 0.0, default=None
    )
    where = f" in output {worst.index}" if worst is not None and len(checks) > 1 else ""
    return f"outputs differ beyond the baseline tolerance (max_diff {max_diff:.3g}{where})"


def _as_float64(t: torch.Tensor) -> torch.Tensor:
    if t.is_complex():
        return t.to(torch.complex128)
    return t.to(torch.float64)
