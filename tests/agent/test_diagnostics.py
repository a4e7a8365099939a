"""pass_evaluator's answer: its performance stage names each graph's hardware floor."""

from __future__ import annotations

from passnet.agent._diagnostics import render_evaluation
from passnet.agent._evaluator import Evaluation
from passnet.record import EvalRecord, Roofline, Timing, TimingStats
from passnet.status import Status


def _timing(median_ms: float) -> Timing:
    return Timing(e2e=TimingStats(median_ms, 0.01, median_ms, 0.01, median_ms, median_ms, 20))


def _record(graph: str, roofline: Roofline | None) -> EvalRecord:
    return EvalRecord(
        graph=graph,
        graph_hash="0" * 64,
        compiler="pass_mgr",
        compiler_config={},
        compiler_config_hash="h",
        device="cuda",
        status=Status.OK,
        eager=_timing(0.2),
        compiled=_timing(0.1),
        speedup_e2e=2.0,
        roofline=roofline,
    )


def test_the_performance_stage_gives_the_floor_and_how_close_each_side_came() -> None:
    roof = Roofline(
        flops=2.5e9,
        min_bytes=4_000_000,
        compute_ms=0.004,
        memory_ms=0.0012,
        floor_ms=0.004,
        bound="compute",
        eager_fraction=0.02,
        compiled_fraction=0.04,
    )
    text = render_evaluation(
        Evaluation(records=(_record("g1", roof), _record("g2", None)), reward=1.0), {}
    )
    performance = text.split("3. performance", 1)[1]
    assert "g1: speedup 2.000" in performance
    assert (
        "floor 0.0040 ms, compute-bound (2.5 GFLOP, 4 MB at least): compiled reaches 4.0% of "
        "it, eager 2.0%" in performance
    )
    assert performance.count("floor ") == 1  # g2 has no roofline: no line
