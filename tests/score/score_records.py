"""Test helper: records built directly from the EvalRecord dataclasses (no model is run)."""

from __future__ import annotations

from passnet.record import (
    Correctness,
    ErrorInfo,
    EvalRecord,
    OutputCheck,
    PassReport,
    Timing,
    TimingStats,
)
from passnet.status import Status


def build_record(
    graph: str = "timm/resnet18",
    status: Status = Status.OK,
    *,
    speedup: float | None = 1.0,
    speedup_device: float | None = None,
    correct_from: int | None = -10,
    dtypes: tuple[str, ...] = ("float32",),
    compiler: str = "inductor",
    error: ErrorInfo | None = None,
    pass_report: PassReport | None = None,
) -> EvalRecord:
    """A record; ``correct_from`` is the lowest t at which outputs are allclose (None: never)."""
    correctness = None
    if status.ran or status is Status.DTYPE_MISMATCH:
        allclose = {t: correct_from is not None and t >= correct_from for t in range(-10, 2)}
        outputs = [
            OutputCheck(i, d, d, [4, 8], [4, 8], equal=False, max_diff=1e-4, mean_diff=1e-6)
            for i, d in enumerate(dtypes)
        ]
        correctness = Correctness(
            num_outputs=len(dtypes),
            outputs=outputs,
            equal=False,
            allclose=allclose,
            max_diff=1e-4,
            mean_diff=1e-6,
            draws=2,
        )
    stats = TimingStats(
        median_ms=2.0, iqr_ms=0.1, mean_ms=2.01, std_ms=0.05, min_ms=1.9, max_ms=2.4, n=100
    )
    ran = status.ran
    return EvalRecord(
        graph=graph,
        graph_hash="0f" * 32,
        compiler=compiler,
        compiler_config={"mode": "default"},
        compiler_config_hash="cafebabe12345678",
        device="cpu",
        status=status,
        error=error,
        correctness=correctness,
        eager=Timing(stats) if ran else None,
        compiled=Timing(stats, device=stats, retries=1) if ran else None,
        speedup_e2e=speedup if ran else None,
        speedup_device=speedup_device if ran else None,
        pass_report=pass_report,
        settings={"warmup": 25, "trials": 100},
    )
