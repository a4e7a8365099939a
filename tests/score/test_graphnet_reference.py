"""`passnet score` against GraphNet's own scorer on eval.log files that passnet wrote.

The logs in ``tests/score/data`` are passnet's ``eval.log`` rendering of two real runs
(``benchmarks/results/harness_h200/run1.jsonl``: Inductor on an H200, 17 ok and 12
accuracy failures; ``benchmarks/results/cpu_inductor/results.jsonl``: Inductor on the
CPU, 24 ok, 4 accuracy, 1 timeout). The reference values below are what GraphNet's
``graph_net_bench/calculate_es_scores.py`` and ``aggregate_es_scores.py`` (commit
1dcbd6690d80) printed for them; docs/scoring.md ("Agreement with GraphNet's scorer")
gives the commands.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from passnet.cli import main
from passnet.score import aggregate_weights

DATA = Path(__file__).parent / "data"
H200_LOG = DATA / "graphnet_ref_h200_inductor.log"
CPU_LOG = DATA / "graphnet_ref_cpu_inductor.log"
RTOL = 1e-9

# calculate_es_scores --positive-tolerance-interpretation default, H200 log
H200_ES = {
    -10: 0.11366014981538117,
    -9: 0.1197595475158532,
    -8: 0.1197595475158532,
    -7: 0.14342392572605764,
    -6: 0.2097849455474168,
    -5: 0.41081303443457656,
    -4: 0.4813803605218618,
    -3: 0.9907695110368054,
    -2: 0.9907695110368054,
    -1: 1.0734194705105442,
    0: 1.129260862356288,
    1: 1.129260862356288,
    2: 1.129260862356288,
    3: 1.129260862356288,
    4: 1.129260862356288,
}
# --positive-tolerance-interpretation mismatch_extended: one more level, t = 5
H200_ES_MISMATCH_EXTENDED = {**H200_ES, 5: 1.129260862356288}
# aggregate_es_scores on H200_ES: weighted_sum = log10 of AS with GraphNet's weights
H200_GRAPHNET_LOG10_AS = -0.10950014215398812

# calculate_es_scores (default) on the CPU log: the timeout is forgiven from t = 3 on
CPU_ES = {
    -10: 0.1409345139265037,
    -9: 0.1502479573061659,
    -8: 0.16508839599867067,
    -7: 0.17925393834203035,
    -6: 0.32179001206069496,
    -5: 0.6969825486952846,
    -4: 0.7598175760602971,
    -3: 0.9676519090281803,
    -2: 0.9676519090281803,
    -1: 0.9676519090281803,
    0: 0.9676519090281803,
    1: 0.9676519090281803,
    2: 0.9676519090281803,
    3: 1.0476155023172629,
    4: 1.0476155023172629,
}
# aggregate_es_scores on passnet's ES_t of the CPU log (its aggregated_score.json "es")
CPU_GRAPHNET_LOG10_AS_OF_OURS = -0.08141248237565439


def _score(tmp_path: Path, log: Path, *args: str) -> dict:
    out = tmp_path / "aggregated_score.json"
    assert main(["score", str(log), "--json", str(out), *args]) == 0
    return json.loads(out.read_text())


def _es(score: dict) -> dict[int, float]:
    return {int(t): v for t, v in score["es"].items()}


def _weighted_gmean(es: dict[int, float], weights: dict[int, float]) -> float:
    total = math.fsum(weights.values())
    return math.exp(math.fsum(w * math.log(es[t]) for t, w in weights.items()) / total)


@pytest.mark.parametrize(
    ("interpretation", "reference"),
    [("default", H200_ES), ("mismatch_extended", H200_ES_MISMATCH_EXTENDED)],
)
def test_es_t_equals_graphnet_at_every_level(tmp_path, interpretation, reference):
    es = _es(_score(tmp_path, H200_LOG, "--interpretation", interpretation))
    assert sorted(es) == sorted(reference)
    for t, value in reference.items():
        assert es[t] == pytest.approx(value, rel=RTOL), t


def test_graphnet_weights_give_graphnet_aggregate(tmp_path):
    score = _score(tmp_path, H200_LOG, "--weights", "graphnet")
    assert score["params"]["weights"] == "graphnet"
    assert math.log10(score["score"]) == pytest.approx(H200_GRAPHNET_LOG10_AS, rel=RTOL)


def test_passnet_weights_are_appendix_e_over_graphnet_es(tmp_path):
    score = _score(tmp_path, H200_LOG)  # the default weighting
    assert score["params"]["weights"] == "passnet"
    expected = _weighted_gmean(H200_ES, aggregate_weights("default", "passnet"))
    assert score["score"] == pytest.approx(expected, rel=RTOL)
    # the two weightings are different numbers for the same run
    graphnet = 10**H200_GRAPHNET_LOG10_AS
    assert abs(score["score"] - graphnet) > 0.005


def test_cpu_run_differs_only_where_graphnet_forgives_runtime_failures_later(tmp_path):
    """GraphNet's code forgives a runtime-class failure (here a timeout) from t = 3, passnet
    from t = 2 (c = 2, the papers' definition): ES_2 is the one level that differs."""
    es = _es(_score(tmp_path, CPU_LOG))
    for t, value in CPU_ES.items():
        if t != 2:
            assert es[t] == pytest.approx(value, rel=RTOL), t
    assert es[2] == pytest.approx(CPU_ES[3], rel=RTOL)  # passnet: forgiven at t = 2
    assert CPU_ES[2] == pytest.approx(CPU_ES[1], rel=RTOL)  # GraphNet: not yet


def test_cpu_graphnet_aggregate_of_our_es(tmp_path):
    score = _score(tmp_path, CPU_LOG, "--weights", "graphnet")
    assert math.log10(score["score"]) == pytest.approx(CPU_GRAPHNET_LOG10_AS_OF_OURS, rel=RTOL)


def test_graphnet_weights_with_mismatch_extended_is_a_usage_error(tmp_path, capsys):
    out = tmp_path / "s.json"
    args = ["score", str(H200_LOG), "--weights", "graphnet", "--interpretation"]
    assert main([*args, "mismatch_extended", "--json", str(out)]) == 2
    assert "t = -10..4" in capsys.readouterr().err
    assert not out.exists()
