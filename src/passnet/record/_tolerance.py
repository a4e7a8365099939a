"""Tolerance tables atol(t), rtol(t) (GraphNet appendix A, PassNet appendix F).

``lg atol`` and ``lg rtol`` are linear in ``t`` with per-dtype slopes, anchored
at 1 for ``t = 0``; ``t = -5`` gives PyTorch's default testing tolerances.
"""

from __future__ import annotations

import torch

__all__ = ["BASELINE_T", "TOLERANCE_LEVELS", "baseline_tolerance", "log_key", "tolerance"]

TOLERANCE_LEVELS: tuple[int, ...] = tuple(range(-10, 2))
"""Levels at which numeric correctness is checked; t >= 1 reuses the t = 1 tolerance."""

BASELINE_T = -5

_ATOL_SLOPE: dict[torch.dtype, float] = {
    torch.float16: 1.0,
    torch.bfloat16: 1.0,
    torch.float32: 1.0,
    torch.float64: 7 / 5,
    torch.complex32: 1.0,
    torch.complex64: 1.0,
    torch.complex128: 7 / 5,
    torch.quint8: 1.0,
    torch.quint2x4: 1.0,
    torch.quint4x2: 1.0,
    torch.qint8: 1.0,
    torch.qint32: 1.0,
}
_RTOL_SLOPE: dict[torch.dtype, float] = {
    torch.float16: 3 / 5,
    torch.bfloat16: 1.796 / 5,
    torch.float32: 5.886 / 5,
    torch.float64: 7 / 5,
    torch.complex32: 3 / 5,
    torch.complex64: 5.886 / 5,
    torch.complex128: 7 / 5,
    torch.quint8: 5.886 / 5,
    torch.quint2x4: 5.886 / 5,
    torch.quint4x2: 5.886 / 5,
    torch.qint8: 5.886 / 5,
    torch.qint32: 5.886 / 5,
}


def tolerance(dtype: torch.dtype, t: int) -> tuple[float, float]:
    """``(atol, rtol)`` at level ``t`` for outputs of ``dtype``.

    Levels above 1 use the t = 1 tolerance (error classes are forgiven instead).
    Integer and bool dtypes get ``(0, 0)``: they must be equal.
    """
    t = min(t, 1)
    if dtype not in _ATOL_SLOPE:
        return 0.0, 0.0
    return 10.0 ** (_ATOL_SLOPE[dtype] * t), 10.0 ** (_RTOL_SLOPE[dtype] * t)


def baseline_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """The PassNet baseline ``(atol, rtol)``: level t = -5."""
    return tolerance(dtype, BASELINE_T)


def log_key(atol: float, rtol: float) -> str:
    """The PassNet log key of an allclose check, e.g. ``all_close_atol_1.00E-05_rtol_1.30E-06``."""
    return f"all_close_atol_{atol:.2E}_rtol_{rtol:.2E}"
