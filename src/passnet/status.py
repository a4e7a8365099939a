"""The one status taxonomy of an evaluation (docs/scoring.md) and its ES_t error codes.

Every evaluation ends in exactly one :class:`Status`. Error codes map a failing
status to the tolerance level ``c`` at which ES_t starts to forgive it
(GraphNet §3.2.2): a graph with code ``c`` scores ``b`` for ``t < c`` and 1 after.
"""

from __future__ import annotations

import enum

__all__ = ["Interpretation", "Status", "error_code", "num_error_classes"]


class Status(str, enum.Enum):
    """Outcome of one graph × one compiler × one configuration."""

    OK = "ok"
    """Ran, outputs allclose at the strict (baseline, t = -5) tolerance."""
    ACCURACY = "accuracy"
    """Ran, outputs differ beyond the baseline tolerance (see per-t results)."""
    DTYPE_MISMATCH = "dtype_mismatch"
    SHAPE_MISMATCH = "shape_mismatch"
    NONFINITE = "nonfinite"
    RUNTIME_ERROR = "runtime_error"
    COMPILE_ERROR = "compile_error"
    TIMEOUT = "timeout"
    PASS_MISMATCH = "pass_mismatch"
    PASS_REJECTED = "pass_rejected"
    SAMPLE_ERROR = "sample_error"
    TOO_LARGE = "too_large"
    """Not evaluated: by its metadata the sample needs more memory than the device has
    free, so nothing was allocated (never scored: neither the compiler's fault nor the
    sample's)."""

    @property
    def ran(self) -> bool:
        """True when the compiled graph produced comparable outputs."""
        return self in (Status.OK, Status.ACCURACY)


class Interpretation(str, enum.Enum):
    """How failing statuses map to ES_t error codes (docs/scoring.md, "Error codes c_i")."""

    DEFAULT = "default"
    """GraphNet/PassNet: accuracy 1; runtime (dtype/shape/nonfinite/timeout too) 2; compile 3."""
    MISMATCH_EXTENDED = "mismatch_extended"
    """accuracy 1; nonfinite/dtype/shape 2; runtime (and timeout) 3; compile 4."""


_CODES: dict[Interpretation, dict[Status, int]] = {
    Interpretation.DEFAULT: {
        Status.ACCURACY: 1,
        Status.DTYPE_MISMATCH: 2,
        Status.SHAPE_MISMATCH: 2,
        Status.NONFINITE: 2,
        Status.RUNTIME_ERROR: 2,
        Status.TIMEOUT: 2,
        Status.COMPILE_ERROR: 3,
    },
    Interpretation.MISMATCH_EXTENDED: {
        Status.ACCURACY: 1,
        Status.DTYPE_MISMATCH: 2,
        Status.SHAPE_MISMATCH: 2,
        Status.NONFINITE: 2,
        Status.RUNTIME_ERROR: 3,
        Status.TIMEOUT: 3,
        Status.COMPILE_ERROR: 4,
    },
}

NEVER_TOLERATED = 10**9
"""Error code of statuses that are never forgiven (pass_mismatch, pass_rejected): b at every t."""


def num_error_classes(interpretation: Interpretation | str) -> int:
    """|E|: the number of error classes of an interpretation (3 or 4)."""
    return max(_CODES[Interpretation(interpretation)].values())


def error_code(status: Status | str, interpretation: Interpretation | str) -> int:
    """The ES_t error code of a failing status; ``NEVER_TOLERATED`` for pass failures.

    ``sample_error`` is scored as never tolerated when it is counted at all
    (by default it is excluded from a compiler's score).
    """
    status = Status(status)
    if status is Status.OK:
        raise ValueError("status 'ok' has no error code")
    return _CODES[Interpretation(interpretation)].get(status, NEVER_TOLERATED)
