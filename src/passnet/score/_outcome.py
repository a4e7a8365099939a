"""What scoring needs of one evaluation, and its error-aware rectified speedup.

A :class:`GraphOutcome` is derived from an :class:`~passnet.evaluate.EvalRecord`:
status, numeric correctness per tolerance level, one speedup (e2e or device) and
the task/sample group the graph belongs to. :func:`rectified_speedup` is GraphNet
eq. (4)/(10) and PassNet eq. (2) (docs/scoring.md, "Per-graph outcome").
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from passnet.errors import InputFormatError
from passnet.record import BASELINE_T, TOLERANCE_LEVELS
from passnet.status import Interpretation, Status, error_code

if TYPE_CHECKING:
    from passnet.record import EvalRecord

__all__ = [
    "BASELINE_T",
    "GraphOutcome",
    "SpeedupKind",
    "default_group_of",
    "rectified_speedup",
]

log = logging.getLogger(__name__)

SpeedupKind = Literal["e2e", "device"]

_GRAPHS_MARKER = "/graphs/"


def default_group_of(record: EvalRecord) -> str:
    """The task/sample a graph belongs to: its path before ``/graphs/``, else the path itself.

    ``samples/c3/88/abc/graphs/float16/1/x`` → ``samples/c3/88/abc``; a path that
    starts with ``graphs/`` (relative to the task) belongs to the group ``""``.
    """
    graph = "/" + record.graph.replace("\\", "/").strip("/")
    if _GRAPHS_MARKER in graph:
        return graph.split(_GRAPHS_MARKER, 1)[0].lstrip("/")
    return record.graph


def _valid_speedup(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


@dataclass(frozen=True)
class GraphOutcome:
    """The facts of one evaluation that its score depends on."""

    graph: str
    status: Status
    correct: tuple[bool, ...]
    """Outputs allclose at level t, for t in ``TOLERANCE_LEVELS`` (-10..1), in that order."""
    speedup: float | None
    """A usable speedup (finite, > 0), or None when timing is missing or invalid."""
    group: str = ""
    """Task/sample key for the sample correctness ratio."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        if len(self.correct) != len(TOLERANCE_LEVELS):
            raise ValueError(
                f"correct must have {len(TOLERANCE_LEVELS)} entries (t = -10..1), "
                f"got {len(self.correct)}"
            )
        object.__setattr__(self, "speedup", _valid_speedup(self.speedup))

    def correct_at(self, t: int) -> bool:
        """Numerically correct at level t (t > 1 uses the t = 1 check); False unless it ran."""
        if t < TOLERANCE_LEVELS[0]:
            raise ValueError(f"tolerance level {t} is below {TOLERANCE_LEVELS[0]}")
        if not self.status.ran:
            return False
        return self.correct[min(t, 1) - TOLERANCE_LEVELS[0]]

    def scores_speedup_at(self, t: int) -> bool:
        """Correct at t *and* timed: the graph contributes its speedup (else it is a failure)."""
        return self.correct_at(t) and self.speedup is not None

    def failure_code(self, interpretation: Interpretation | str) -> int:
        """The error code c_i used wherever this graph does not score its speedup.

        A graph that ran but has no usable speedup is a runtime-class failure at
        every t (timing is part of the run); one that ran with a speedup but is
        not allclose at t is an accuracy failure (code 1) at that t.
        """
        if self.status.ran:
            failing = Status.RUNTIME_ERROR if self.speedup is None else Status.ACCURACY
            return error_code(failing, interpretation)
        return error_code(self.status, interpretation)

    @classmethod
    def from_record(
        cls,
        record: EvalRecord,
        speedup_kind: SpeedupKind = "e2e",
        group_of: Callable[[EvalRecord], str] = default_group_of,
    ) -> GraphOutcome:
        """Derive the outcome of a record; a record that ran must carry correctness results."""
        if record.status.ran and record.correctness is None:
            raise InputFormatError(
                f"record with status {record.status.value!r} has no correctness results",
                graph=record.graph,
                compiler=record.compiler,
            )
        raw = record.speedup(speedup_kind)
        speedup = _valid_speedup(raw)
        if record.status.ran and speedup is None:
            log.debug(
                "graph %s ran but has no usable %s speedup (%r): scored as a runtime failure",
                record.graph,
                speedup_kind,
                raw,
            )
        return cls(
            graph=record.graph,
            status=record.status,
            correct=tuple(record.correct_at(t) for t in TOLERANCE_LEVELS),
            speedup=speedup,
            group=group_of(record),
        )


def rectified_speedup(
    outcome: GraphOutcome,
    t: int,
    *,
    b: float = 0.1,
    p: float = 0.0,
    interpretation: Interpretation | str = Interpretation.DEFAULT,
    error_aware: bool = True,
) -> float:
    """Per-graph (error-aware) rectified speedup at level t.

    Correct at t: ``s`` if ``s >= 1`` else ``s**(p+1)``. Otherwise ``b`` if
    ``t < c_i`` else 1 (``error_aware``), or always ``b`` (S_t, ``error_aware=False``).
    """
    if outcome.scores_speedup_at(t):
        s = outcome.speedup
        assert s is not None
        return s if s >= 1 else s ** (p + 1)
    if not error_aware:
        return b
    return b if t < outcome.failure_code(interpretation) else 1.0


def log_rectified_speedup(
    outcome: GraphOutcome,
    t: int,
    *,
    b: float = 0.1,
    p: float = 0.0,
    interpretation: Interpretation | str = Interpretation.DEFAULT,
    error_aware: bool = True,
) -> float:
    """The log of :func:`rectified_speedup`, finite where ``s**(p+1)`` underflows (large p)."""
    if outcome.scores_speedup_at(t):
        s = outcome.speedup
        assert s is not None
        return math.log(s) if s >= 1 else (p + 1) * math.log(s)
    return math.log(
        rectified_speedup(outcome, t, b=b, interpretation=interpretation, error_aware=error_aware)
    )
