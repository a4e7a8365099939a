"""S_t, ES_t, AS and friends against hand-computed values (docs/scoring.md)."""

from __future__ import annotations

import json
import math
import random

import pytest

from passnet.score import (
    GraphOutcome,
    aggregate_weights,
    compute_scores,
    factored_score,
    rectified_speedup,
)
from passnet.status import Interpretation, Status
from tests.score.score_records import build_record


def five_graphs():
    """A: fast, B: slow (wrong below t=-7), C: accuracy (right from t=-2), D: compile, E: runtime."""
    return [
        build_record("timm/a", Status.OK, speedup=2.0, correct_from=-10),
        build_record("timm/b", Status.OK, speedup=0.5, correct_from=-7),
        build_record("torchvision/c", Status.ACCURACY, speedup=1.5, correct_from=-2),
        build_record("torchvision/d", Status.COMPILE_ERROR),
        build_record("torchvision/e", Status.RUNTIME_ERROR),
    ]


def gm(*values: float) -> float:
    return math.prod(values) ** (1 / len(values))


def test_es_and_s_match_hand_computation_default_interpretation():
    report = compute_scores(five_graphs())
    b = 0.1
    expected = {}
    for t in (-10, -9, -8):
        expected[t] = gm(2.0, b, b, b, b)
    for t in (-7, -6, -5, -4, -3):
        expected[t] = gm(2.0, 0.5, b, b, b)
    for t in (-2, -1, 0, 1):
        expected[t] = gm(2.0, 0.5, 1.5, b, b)
    expected[2] = gm(2.0, 0.5, 1.5, b, 1.0)  # runtime (code 2) forgiven
    expected[3] = expected[4] = gm(2.0, 0.5, 1.5, 1.0, 1.0)  # compile (code 3) forgiven
    assert sorted(report.es) == list(range(-10, 5))
    for t, value in expected.items():
        assert report.es[t] == pytest.approx(value, rel=1e-12), t
    assert sorted(report.s) == list(range(-10, 1))
    for t in range(-10, 1):
        assert report.s[t] == pytest.approx(expected[t], rel=1e-12)


def test_aggregated_speedup_is_weighted_geometric_mean_of_es():
    report = compute_scores(five_graphs())
    weights = {t: 0.001 for t in range(-10, -5)}
    weights.update({-5: 1.0, -4: 1.0, -3: 1.0})
    weights.update({-2: 0.8, -1: 0.64, 0: 0.512, 1: 0.4096, 2: 0.32768, 3: 0.262144, 4: 0.001})
    assert report.weights == pytest.approx(weights)
    log_as = sum(w * math.log(report.es[t]) for t, w in weights.items()) / sum(weights.values())
    assert report.score == pytest.approx(math.exp(log_as), rel=1e-12)
    assert 0.1 < report.score < 1.0


def test_slowdown_penalty_p_raises_slow_speedups_to_p_plus_1():
    report = compute_scores(five_graphs(), p=1.0)
    assert report.es[-5] == pytest.approx(gm(2.0, 0.25, 0.1, 0.1, 0.1))
    assert report.components[-5].beta == pytest.approx(0.5)


def test_components_at_baseline_follow_graphnet_definitions():
    c = compute_scores(five_graphs()).components
    assert (c[-5].alpha, c[-5].beta, c[-5].lam, c[-5].eta) == pytest.approx((1.0, 0.5, 0.4, 0.5))
    assert c[-5].gamma == pytest.approx(0.1)
    assert (c[-5].n_correct, c[-5].n_slow, c[-5].n_failed) == (2, 1, 3)
    assert c[2].gamma == pytest.approx(math.sqrt(0.1))  # compile still b, runtime forgiven
    assert c[3].gamma == pytest.approx(1.0)
    assert c[-9].alpha == pytest.approx(2.0) and c[-9].eta == 0.0


def test_no_correct_graph_uses_appendix_d_conventions():
    report = compute_scores([build_record("x/a", Status.COMPILE_ERROR)])
    c = report.components[-5]
    assert (c.alpha, c.beta, c.lam, c.eta, c.gamma) == pytest.approx((1.0, 1.0, 0.0, 0.0, 0.1))
    assert report.es[-5] == pytest.approx(0.1)
    assert report.es[3] == pytest.approx(1.0)
    assert report.gmean_speedup is None
    assert report.fast_p == 0.0


def test_mismatch_extended_interpretation_moves_runtime_to_3_and_compile_to_4():
    report = compute_scores(five_graphs(), interpretation="mismatch_extended")
    b = 0.1
    assert sorted(report.es) == list(range(-10, 6))
    assert report.es[2] == pytest.approx(gm(2.0, 0.5, 1.5, b, b))
    assert report.es[3] == pytest.approx(gm(2.0, 0.5, 1.5, b, 1.0))
    assert report.es[4] == pytest.approx(gm(2.0, 0.5, 1.5, 1.0, 1.0))
    assert report.weights[4] == pytest.approx(0.8**7)
    assert report.weights[5] == 0.001
    assert report.params.interpretation is Interpretation.MISMATCH_EXTENDED


@pytest.mark.parametrize(
    "status, code_default, code_extended",
    [
        (Status.DTYPE_MISMATCH, 2, 2),
        (Status.SHAPE_MISMATCH, 2, 2),
        (Status.NONFINITE, 2, 2),
        (Status.TIMEOUT, 2, 3),
        (Status.RUNTIME_ERROR, 2, 3),
        (Status.COMPILE_ERROR, 3, 4),
    ],
)
def test_failure_is_forgiven_exactly_from_its_error_code(status, code_default, code_extended):
    outcome = GraphOutcome.from_record(build_record("x/y", status))
    for interpretation, code in (("default", code_default), ("mismatch_extended", code_extended)):
        values = {
            t: rectified_speedup(outcome, t, interpretation=interpretation) for t in range(-10, 6)
        }
        assert all(values[t] == 0.1 for t in range(-10, code))
        assert all(values[t] == 1.0 for t in range(code, 6))


@pytest.mark.parametrize("status", [Status.PASS_MISMATCH, Status.PASS_REJECTED])
@pytest.mark.parametrize("interpretation", ["default", "mismatch_extended"])
def test_pass_failures_score_b_at_every_t(status, interpretation):
    report = compute_scores(
        [build_record("x/fast", speedup=2.0), build_record("x/p", status)],
        interpretation=interpretation,
    )
    for t, value in report.es.items():
        assert value == pytest.approx(math.sqrt(2.0 * 0.1)), t


def test_graph_that_ran_but_is_not_allclose_at_t_is_an_accuracy_error_at_t():
    never = build_record("x/never", Status.ACCURACY, speedup=3.0, correct_from=None)
    report = compute_scores([build_record("x/a", speedup=2.0), never])
    assert report.es[0] == pytest.approx(math.sqrt(2.0 * 0.1))
    assert report.es[1] == pytest.approx(math.sqrt(2.0))  # accuracy forgiven at t = 1
    # an ok-at-baseline graph that fails a stricter level is an accuracy error there
    strict = compute_scores([build_record("x/a", speedup=2.0, correct_from=-5)])
    assert strict.es[-6] == pytest.approx(0.1)
    assert strict.es[-5] == pytest.approx(2.0)


def test_sample_errors_are_excluded_by_default_and_counted_on_request():
    records = five_graphs() + [build_record("timm/f", Status.SAMPLE_ERROR)]
    excluded = compute_scores(records)
    assert excluded.n_graphs == 5 and excluded.n_excluded == 1
    assert excluded.counts["sample_error"] == 1
    assert excluded.es == compute_scores(five_graphs()).es

    counted = compute_scores(records, count_sample_errors=True)
    assert counted.n_graphs == 6 and counted.n_excluded == 0
    assert counted.es[4] == pytest.approx(gm(2.0, 0.5, 1.5, 1.0, 1.0, 0.1))  # b at every t
    assert counted.es[-5] == pytest.approx(gm(2.0, 0.5, 0.1, 0.1, 0.1, 0.1))


@pytest.mark.parametrize("bad_speedup", [None, float("nan"), 0.0, -1.0, float("inf")])
def test_correct_graph_without_usable_speedup_is_a_runtime_failure(bad_speedup):
    records = [build_record("x/a", speedup=2.0), build_record("x/h", speedup=bad_speedup)]
    report = compute_scores(records)
    assert report.n_missing_speedup == 1
    assert report.es[1] == pytest.approx(math.sqrt(2.0 * 0.1))
    assert report.es[2] == pytest.approx(math.sqrt(2.0))  # runtime class forgiven at 2
    extended = compute_scores(records, interpretation="mismatch_extended")
    assert extended.es[2] == pytest.approx(math.sqrt(2.0 * 0.1))
    assert report.subgraph_correctness_ratio == 1.0  # numerically correct all the same
    assert report.fast_0 == 0.5 and report.gmean_speedup == pytest.approx(2.0)


def test_fast_p_gmean_and_correctness_ratios():
    records = five_graphs() + [
        build_record("samples/task1/graphs/float16/g1", speedup=1.2),
        build_record("samples/task1/graphs/float32/g2", Status.ACCURACY, correct_from=-4),
        build_record("samples/task2/graphs/float32/g3", speedup=0.9),
    ]
    report = compute_scores(records, p_fast=1.1)
    n = 8
    correct_at_baseline = {"a": 2.0, "b": 0.5, "g1": 1.2, "g3": 0.9}
    assert report.n_graphs == n
    assert report.fast_p == pytest.approx(2 / n)  # a, g1 > 1.1
    assert report.fast_0 == pytest.approx(4 / n)
    assert report.gmean_speedup == pytest.approx(gm(*correct_at_baseline.values()))
    assert report.subgraph_correctness_ratio == pytest.approx(4 / n)
    # groups: 5 single-graph groups (a, b correct) + task1 (g2 wrong) + task2 (correct)
    assert report.n_samples == 7
    assert report.sample_correctness_ratio == pytest.approx(3 / 7)
    fast1 = compute_scores(records)
    assert fast1.fast_p == pytest.approx(2 / n)  # a and g1 (> 1.0)
    assert fast1.params.p_fast == 1.0


def test_fast_p_counts_speedups_strictly_above_p():
    records = [build_record("x/a", speedup=1.0), build_record("x/b", speedup=1.25)]
    report = compute_scores(records)
    assert report.fast_p == 0.5
    assert compute_scores(records, p_fast=1.25).fast_p == 0.0


def test_custom_group_of_groups_graphs_into_samples():
    report = compute_scores(five_graphs(), group_of=lambda r: r.graph.split("/")[0])
    assert report.n_samples == 2
    assert report.sample_correctness_ratio == 0.5  # timm all correct, torchvision not


def test_graph_outcomes_can_be_scored_directly():
    outcomes = [GraphOutcome.from_record(r) for r in five_graphs()]
    assert compute_scores(outcomes).es == compute_scores(five_graphs()).es


def test_device_speedup_kind_uses_device_speedups():
    records = [build_record("x/a", speedup=0.5, speedup_device=4.0)]
    assert compute_scores(records, speedup_kind="device").es[-5] == pytest.approx(4.0)
    assert compute_scores(records).es[-5] == pytest.approx(0.5)


def test_device_speedups_requested_but_absent_is_a_clear_error():
    with pytest.raises(ValueError, match="device speedup"):
        compute_scores(five_graphs(), speedup_kind="device")


def test_missing_speedups_are_reported_once(caplog):
    records = [build_record(f"x/{i}", speedup=None) for i in range(5)] + [build_record("x/ok")]
    with caplog.at_level("WARNING", logger="passnet.score"):
        compute_scores(records)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "5 of 6" in warnings[0].getMessage()


def test_factored_form_agrees_with_per_graph_form_on_random_result_sets():
    rng = random.Random(7)
    statuses = list(Status)
    for _ in range(20):
        records = []
        for i in range(rng.randint(1, 40)):
            status = rng.choice(statuses)
            correct_from = rng.choice([None, -10, -7, -5, -3, 0, 1])
            speedup = rng.choice([None, rng.uniform(0.05, 4.0)])
            records.append(
                build_record(f"g/{i}", status, speedup=speedup, correct_from=correct_from)
            )
        if all(r.status is Status.SAMPLE_ERROR for r in records):
            continue
        p = rng.choice([0.0, 0.1, 1.0])
        for interpretation in Interpretation:
            report = compute_scores(records, p=p, interpretation=interpretation)
            for t, c in report.components.items():
                es = factored_score(c.alpha, c.beta, c.lam, c.eta, c.gamma, p)
                assert es == pytest.approx(report.es[t], rel=1e-9)
            for t, value in report.s.items():
                c = report.components[t]
                assert value == pytest.approx(factored_score(c.alpha, c.beta, c.lam, c.eta, 0.1, p))


def test_disagreeing_factored_form_is_an_internal_error(monkeypatch):
    import passnet.score._metrics as metrics

    monkeypatch.setattr(metrics, "factored_log_score", lambda *args: -2.1)
    with pytest.raises(RuntimeError, match="internal error"):
        compute_scores(five_graphs())


def test_empty_input_raises_a_clear_error():
    with pytest.raises(ValueError, match="no graphs to score"):
        compute_scores([])
    with pytest.raises(ValueError, match="excluded sample errors"):
        compute_scores([build_record("x", Status.SAMPLE_ERROR)])


@pytest.mark.parametrize("kwargs", [{"b": 0.0}, {"b": 1.5}, {"p": -0.1}, {"speedup_kind": "gpu"}])
def test_invalid_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError):
        compute_scores(five_graphs(), **kwargs)


def test_ran_record_without_correctness_is_rejected():
    from passnet.errors import InputFormatError

    record = build_record("x/a")
    record.correctness = None
    with pytest.raises(InputFormatError, match="no correctness"):
        compute_scores([record])


def test_counts_cover_every_status():
    report = compute_scores(five_graphs())
    assert set(report.counts) == {s.value for s in Status}
    assert report.counts["ok"] == 2 and report.counts["compile_error"] == 1
    assert sum(report.counts.values()) == 5


def test_json_dict_keeps_passnet_fields_and_round_trips():
    from passnet.score import ScoreReport

    report = compute_scores(five_graphs(), score_id="inductor", b=0.2, p=0.5)
    d = json.loads(json.dumps(report.to_json_dict(), allow_nan=False))
    assert d["id"] == "inductor" and d["score"] == pytest.approx(report.score)
    assert list(d["es"]) == [str(t) for t in range(-10, 5)]
    assert list(d["s"]) == [str(t) for t in range(-10, 1)]
    assert set(d["components"]["-5"]) >= {"alpha", "beta", "lambda", "eta", "gamma"}
    assert d["params"] == {
        "b": 0.2,
        "p": 0.5,
        "interpretation": "default",
        "speedup_kind": "e2e",
        "count_sample_errors": False,
        "p_fast": 1.0,
        "weights": "passnet",
    }
    for key in ("fast_p", "fast_0", "gmean_speedup", "subgraph_correctness_ratio"):
        assert key in d
    assert d["n_graphs"] == 5 and d["n_excluded"] == 0
    assert ScoreReport.from_json_dict(d) == report
    del d["params"]["weights"]  # a score file written before the choice existed
    assert ScoreReport.from_json_dict(d).params.weights == "passnet"


def test_graphnet_weights_are_graphnets_table():
    report = compute_scores(five_graphs(), weights="graphnet")
    raw = {t: 0.001 for t in (-10, -9, -8)} | {-7: 0.13, -6: 0.40}
    raw |= {t: 0.48 for t in range(-5, 5)}
    assert report.weights == raw and report.params.weights == "graphnet"
    total = sum(raw.values())
    expected = math.prod(report.es[t] ** (w / total) for t, w in raw.items())
    assert report.score == pytest.approx(expected, rel=1e-12)
    assert report.score != pytest.approx(compute_scores(five_graphs()).score, rel=1e-3)
    with pytest.raises(ValueError, match="t = -10..4 only"):
        compute_scores(five_graphs(), weights="graphnet", interpretation="mismatch_extended")
    with pytest.raises(ValueError, match="weights must be one of"):
        compute_scores(five_graphs(), weights="equal")


def test_aggregate_weights_cover_both_interpretations():
    assert list(aggregate_weights("default")) == list(range(-10, 5))
    assert list(aggregate_weights("mismatch_extended")) == list(range(-10, 6))


# --- GraphNet appendix D, Tables 3-6 ---------------------------------------------------
# (t, alpha, beta, lambda, eta, S(t) or None, gamma, ES(t)), as printed in the paper.
GRAPHNET_TABLES = {
    "PaddlePaddle-NLP": [
        (-10, 1.000, 1.000, 0.000, 0.000, 0.100, 0.100, 0.100),
        (-9, 1.000, 1.000, 0.000, 0.000, 0.100, 0.100, 0.100),
        (-8, 1.000, 1.000, 0.000, 0.000, 0.100, 0.100, 0.100),
        (-7, 1.441, 1.000, 0.009, 0.000, 0.103, 0.100, 0.103),
        (-6, 1.321, 0.858, 0.575, 0.049, 0.442, 0.100, 0.442),
        (-5, 1.284, 0.878, 0.953, 0.050, 1.139, 0.100, 1.139),
        (-4, 1.282, 0.878, 0.962, 0.049, 1.165, 0.100, 1.165),
        (-3, 1.278, 0.878, 0.991, 0.048, 1.248, 0.100, 1.248),
        (-2, 1.278, 0.878, 0.991, 0.048, 1.248, 0.100, 1.248),
        (-1, 1.278, 0.878, 0.991, 0.048, 1.248, 0.100, 1.248),
        (0, 1.278, 0.878, 0.991, 0.048, 1.248, 0.100, 1.248),
        (1, 1.278, 0.878, 0.991, 0.048, None, 0.100, 1.248),
        (2, 1.278, 0.878, 0.991, 0.048, None, 0.100, 1.248),
        (3, 1.278, 0.878, 0.991, 0.048, None, 1.000, 1.276),
        (4, 1.278, 0.878, 0.991, 0.048, None, 1.000, 1.276),
    ],
    "PyTorch-NLP": [
        (-10, 0.981, 0.927, 0.010, 0.800, 0.102, 0.100, 0.102),
        (-9, 1.038, 0.927, 0.013, 0.615, 0.103, 0.100, 0.103),
        (-8, 1.170, 0.840, 0.029, 0.321, 0.107, 0.100, 0.107),
        (-7, 1.175, 0.840, 0.030, 0.310, 0.108, 0.100, 0.108),
        (-6, 1.344, 0.822, 0.423, 0.064, 0.300, 0.100, 0.300),
        (-5, 1.342, 0.817, 0.930, 0.046, 1.118, 0.100, 1.118),
        (-4, 1.345, 0.817, 0.933, 0.046, 1.129, 0.100, 1.129),
        (-3, 1.348, 0.817, 0.941, 0.045, 1.156, 0.100, 1.156),
        (-2, 1.354, 0.818, 0.963, 0.045, 1.229, 0.100, 1.229),
        (-1, 1.360, 0.818, 0.975, 0.045, 1.275, 0.100, 1.275),
        (0, 1.363, 0.818, 0.977, 0.044, 1.284, 0.100, 1.284),
        (1, 1.363, 0.818, 0.977, 0.044, None, 0.100, 1.284),
        (2, 1.363, 0.818, 0.977, 0.044, None, 0.100, 1.284),
        (3, 1.363, 0.818, 0.977, 0.044, None, 1.000, 1.353),
        (4, 1.363, 0.818, 0.977, 0.044, None, 1.000, 1.353),
    ],
    "PaddlePaddle-CV": [
        (-10, 1.056, 0.917, 0.054, 0.739, 0.114, 0.100, 0.114),
        (-9, 1.056, 0.917, 0.054, 0.739, 0.114, 0.100, 0.114),
        (-8, 1.056, 0.917, 0.054, 0.739, 0.114, 0.100, 0.114),
        (-7, 1.056, 0.920, 0.080, 0.529, 0.121, 0.100, 0.121),
        (-6, 1.117, 0.906, 0.228, 0.216, 0.173, 0.100, 0.173),
        (-5, 1.137, 0.906, 0.526, 0.129, 0.359, 0.100, 0.359),
        (-4, 1.131, 0.915, 0.732, 0.109, 0.591, 0.100, 0.591),
        (-3, 1.125, 0.912, 0.892, 0.105, 0.866, 0.100, 0.866),
        (-2, 1.123, 0.911, 0.939, 0.105, 0.969, 0.100, 0.969),
        (-1, 1.122, 0.911, 0.965, 0.105, 1.031, 0.100, 1.031),
        (0, 1.121, 0.910, 0.981, 0.105, 1.072, 0.100, 1.072),
        (1, 1.122, 0.910, 0.993, 0.104, None, 1.000, 1.121),
        (2, 1.122, 0.910, 0.993, 0.104, None, 1.000, 1.123),
        (3, 1.122, 0.910, 0.993, 0.104, None, 1.000, 1.123),
        (4, 1.122, 0.910, 0.993, 0.104, None, 1.000, 1.123),
    ],
    "PyTorch-CV": [
        (-10, 0.949, 0.825, 0.345, 0.618, 0.217, 0.100, 0.217),
        (-9, 0.954, 0.829, 0.404, 0.623, 0.249, 0.100, 0.249),
        (-8, 0.957, 0.821, 0.447, 0.609, 0.274, 0.100, 0.274),
        (-7, 0.984, 0.819, 0.605, 0.552, 0.399, 0.100, 0.399),
        (-6, 1.006, 0.814, 0.766, 0.505, 0.586, 0.100, 0.586),
        (-5, 1.030, 0.815, 0.882, 0.472, 0.783, 0.100, 0.783),
        (-4, 1.028, 0.815, 0.886, 0.474, 0.788, 0.100, 0.788),
        (-3, 1.028, 0.815, 0.886, 0.474, 0.788, 0.100, 0.788),
        (-2, 1.028, 0.815, 0.887, 0.473, 0.790, 0.100, 0.790),
        (-1, 1.028, 0.815, 0.887, 0.473, 0.790, 0.100, 0.790),
        (0, 1.028, 0.815, 0.887, 0.473, 0.790, 0.100, 0.790),
        (1, 1.028, 0.815, 0.887, 0.473, None, 0.100, 0.790),
        (2, 1.028, 0.815, 0.887, 0.473, None, 0.100, 0.790),
        (3, 1.028, 0.815, 0.887, 0.473, None, 1.000, 1.025),
        (4, 1.028, 0.815, 0.887, 0.473, None, 1.000, 1.025),
    ],
}
TABLE_ROUNDING = 0.002


@pytest.mark.parametrize("table", sorted(GRAPHNET_TABLES))
def test_graphnet_tables_s_column_is_reproduced_from_components(table):
    rows = [row for row in GRAPHNET_TABLES[table] if row[5] is not None]
    assert len(rows) == 11
    for t, alpha, beta, lam, eta, s_t, _gamma, _es in rows:
        computed = factored_score(alpha, beta, lam, eta, gamma=0.1, p=0.0)
        assert computed == pytest.approx(s_t, abs=TABLE_ROUNDING), (table, t)


@pytest.mark.parametrize("table", sorted(GRAPHNET_TABLES))
def test_graphnet_tables_es_column_at_t3_t4_is_reproduced_from_gamma(table):
    for t, alpha, beta, lam, eta, _s, gamma, es_t in GRAPHNET_TABLES[table]:
        if t in (3, 4):
            computed = factored_score(alpha, beta, lam, eta, gamma=gamma, p=0.0)
            assert computed == pytest.approx(es_t, abs=TABLE_ROUNDING), (table, t)


def test_graphnet_tables_are_not_reproduced_with_a_wrong_penalty():
    """The check above can fail: b = 0.2 misses the S column by far."""
    t, alpha, beta, lam, eta, s_t, _, _ = GRAPHNET_TABLES["PyTorch-CV"][5]
    assert abs(factored_score(alpha, beta, lam, eta, gamma=0.2) - s_t) > 10 * TABLE_ROUNDING


def test_a_large_p_underflows_nothing(caplog):
    # s**(p+1) of a slow graph underflows to 0 with p = 2000; the scores are computed in
    # log space, so they stay finite and positive (or 0.0 where the score itself is tiny)
    records = five_graphs()
    report = compute_scores(records, p=2000.0)
    assert all(v >= 0.0 for v in report.es.values())
    assert report.score >= 0.0
