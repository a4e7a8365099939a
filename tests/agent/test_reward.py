"""The reward rule: AS for passes that run, MIN_REWARD below every AS for the rest."""

from __future__ import annotations

import math

import pytest

from passnet.agent import MIN_REWARD, reward_of
from passnet.record import Correctness, EvalRecord, OutputCheck
from passnet.score import compute_scores
from passnet.status import Status

B = 0.1


def _record(graph: str, status: Status, speedup: float | None = None, ok_from: int = -10):
    correctness = None
    if status.ran:
        correctness = Correctness(
            num_outputs=1,
            outputs=[OutputCheck(0, "float32", "float32", [2], [2])],
            equal=False,
            allclose={t: t >= ok_from for t in range(-10, 2)},
            max_diff=1e-6,
            mean_diff=1e-7,
            draws=2,
        )
    return EvalRecord(
        graph=graph,
        graph_hash="00" * 32,
        compiler="pass_mgr",
        compiler_config={},
        compiler_config_hash="0" * 16,
        device="cpu",
        status=status,
        correctness=correctness,
        speedup_e2e=speedup,
    )


def _reward(records: list[EvalRecord]) -> float:
    try:
        score = compute_scores(records, b=B)
    except ValueError:
        score = None
    return reward_of(records, score)


def test_an_honest_pass_a_thousand_times_slower_earns_more_than_a_rejected_cheat():
    # the case: honest, correct, 1,000x slower -> AS ~ 0.001; a cheat -> rejected
    honest = _reward([_record("g", Status.OK, speedup=1e-3)])
    cheat = _reward([_record("g", Status.PASS_REJECTED)])
    assert 0 < honest < 0.01
    assert cheat == MIN_REWARD < honest


@pytest.mark.parametrize(
    "records",
    [
        [_record("g", Status.OK, speedup=1e-300)],  # absurdly slow, still above the minimum
        [_record("g", Status.ACCURACY, speedup=2.0, ok_from=2)],  # wrong at every t
        [_record("g", Status.RUNTIME_ERROR), _record("h", Status.COMPILE_ERROR)],
        [_record("g", Status.PASS_MISMATCH)],  # nothing matched: AS = b
        [_record("g", Status.OK, speedup=1.5), _record("h", Status.TIMEOUT)],
    ],
)
def test_every_pass_that_runs_earns_its_as_strictly_above_the_minimum(records):
    score = compute_scores(records, b=B)
    assert reward_of(records, score) == score.score
    assert math.isfinite(score.score) and score.score > 0 > MIN_REWARD


def test_rejected_on_one_graph_or_nothing_to_score_earns_the_minimum():
    fast_but_rejected = [_record("g", Status.OK, speedup=50.0), _record("h", Status.PASS_REJECTED)]
    assert _reward(fast_but_rejected) == MIN_REWARD
    assert _reward([_record("g", Status.SAMPLE_ERROR)]) == MIN_REWARD  # nothing to score
    assert reward_of([], None) == MIN_REWARD
