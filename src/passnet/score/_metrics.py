"""S_t, ES_t, AS, fast_p and correctness ratios (docs/scoring.md).

ES_t is computed twice, as the geometric mean of per-graph error-aware rectified
speedups and through the factored form α^λ·β^(ληp)·γ_t^(1-λ) (GraphNet eq. 3);
the two must agree to 1e-9 or scoring stops with an internal error.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from passnet.score._outcome import (
    BASELINE_T,
    GraphOutcome,
    SpeedupKind,
    default_group_of,
    log_rectified_speedup,
    rectified_speedup,
)
from passnet.score._result import WEIGHT_SCHEMES, Components, ScoreParams, ScoreReport
from passnet.status import Interpretation, Status, num_error_classes

if TYPE_CHECKING:
    from passnet.record import EvalRecord

__all__ = [
    "aggregate_weights",
    "compute_scores",
    "factored_score",
    "gmean",
]

log = logging.getLogger(__name__)

T_MIN = -10
AGREEMENT_RTOL = 1e-9


def gmean(values: Sequence[float]) -> float:
    """Geometric mean of positive values (computed in log space)."""
    if not values:
        raise ValueError("geometric mean of no values")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def factored_score(
    alpha: float, beta: float, lam: float, eta: float, gamma: float, p: float = 0.0
) -> float:
    """GraphNet eq. (1)/(3): ``α^λ · β^(λ·η·p) · γ^(1-λ)`` (γ = b gives S_t)."""
    return math.exp(factored_log_score(alpha, beta, lam, eta, gamma, p))


def factored_log_score(
    alpha: float, beta: float, lam: float, eta: float, gamma: float, p: float = 0.0
) -> float:
    """The log of :func:`factored_score` (finite where the score itself underflows)."""
    return lam * math.log(alpha) + lam * eta * p * math.log(beta) + (1 - lam) * math.log(gamma)


# GraphNet's reference aggregator (graph_net_bench/aggregate_es_scores.py) fixes one
# weight per level for t = -10..4, "derived from the NLP ES metrics of NVIDIA A100
# relative to H20"; it is defined for those 15 levels only.
_GRAPHNET_WEIGHTS = {
    **{t: 0.001 for t in (-10, -9, -8)},
    -7: 0.13,
    -6: 0.40,
    **{t: 0.48 for t in range(-5, 5)},
}


def aggregate_weights(
    interpretation: Interpretation | str = Interpretation.DEFAULT,
    scheme: str = "passnet",
) -> dict[int, float]:
    """W_t for t = -10..|E|+1: PassNet appendix E (``passnet``) or GraphNet's (``graphnet``).

    AS divides by the sum of the weights, so neither table needs to be normalized.
    Raises ``ValueError`` for an unknown scheme, and for ``graphnet`` with an
    interpretation whose levels are not GraphNet's t = -10..4.
    """
    n_classes = num_error_classes(interpretation)
    levels = range(T_MIN, n_classes + 2)
    if scheme == "graphnet":
        if set(levels) != set(_GRAPHNET_WEIGHTS):
            raise ValueError(
                f"the graphnet weights cover t = -10..4 only (interpretation 'default'); "
                f"interpretation {Interpretation(interpretation).value!r} has t = "
                f"{T_MIN}..{n_classes + 1}"
            )
        return dict(_GRAPHNET_WEIGHTS)
    if scheme != "passnet":
        raise ValueError(f"weights must be one of {WEIGHT_SCHEMES}, got {scheme!r}")
    weights: dict[int, float] = {}
    for t in levels:
        if t <= -6 or t >= n_classes + 1:
            weights[t] = 0.001
        elif t <= -3:
            weights[t] = 1.0
        else:
            weights[t] = 0.8 ** (t + 3)
    return weights


def aggregate_log_terms(outcomes: Sequence[GraphOutcome], params: ScoreParams) -> list[float]:
    """Each graph's term of log AS: Σ_t w_t·log(rectified speedup at t) / Σ_t w_t, so that
    AS of :func:`compute_scores` over ``outcomes`` (the scored ones) is exp of their mean.
    A resample of graphs (a bootstrap) is scored from these without scoring it again."""
    weights = aggregate_weights(params.interpretation, params.weights)
    total = math.fsum(weights.values())
    return [
        math.fsum(
            w
            * log_rectified_speedup(
                o, t, b=params.b, p=params.p, interpretation=params.interpretation
            )
            for t, w in weights.items()
        )
        / total
        for o in outcomes
    ]


def scored_outcomes(
    outcomes: Iterable[GraphOutcome], *, count_sample_errors: bool = False
) -> list[GraphOutcome]:
    """The outcomes a score counts in N: never a graph too large to evaluate; a broken
    sample (eager itself fails) only with ``count_sample_errors``."""
    return [
        o
        for o in outcomes
        if o.status is not Status.TOO_LARGE
        and (count_sample_errors or o.status is not Status.SAMPLE_ERROR)
    ]


def correct_speedups(outcomes: Iterable[GraphOutcome], t: int) -> list[float]:
    """The speedups of the graphs correct at tolerance level t with a usable speedup."""
    return [o.speedup for o in outcomes if o.scores_speedup_at(t) and o.speedup is not None]


def subgraph_correctness(outcomes: Sequence[GraphOutcome], t: int) -> float:
    """The fraction of graphs whose outputs are allclose at t (timing not required)."""
    return sum(1 for o in outcomes if o.correct_at(t)) / len(outcomes)


def sample_correctness(outcomes: Iterable[GraphOutcome], t: int) -> tuple[float, int]:
    """(fraction of groups, tasks or samples, whose graphs are all allclose at t; number
    of groups)."""
    groups: dict[str, bool] = {}
    for o in outcomes:
        groups[o.group] = groups.get(o.group, True) and o.correct_at(t)
    return sum(groups.values()) / len(groups), len(groups)


def _components(
    outcomes: Sequence[GraphOutcome], t: int, params: ScoreParams, error_aware: bool
) -> Components:
    correct = [o.speedup for o in outcomes if o.scores_speedup_at(t)]
    slow = [s for s in correct if s < 1]
    failed = [o for o in outcomes if not o.scores_speedup_at(t)]
    penalties = [
        rectified_speedup(
            o, t, b=params.b, interpretation=params.interpretation, error_aware=error_aware
        )
        for o in failed
    ]
    return Components(
        alpha=gmean(correct) if correct else 1.0,
        beta=gmean(slow) if slow else 1.0,
        lam=len(correct) / len(outcomes),
        eta=len(slow) / len(correct) if correct else 0.0,
        gamma=gmean(penalties) if penalties else 1.0,
        n_correct=len(correct),
        n_slow=len(slow),
        n_failed=len(failed),
    )


def _score_at(
    outcomes: Sequence[GraphOutcome], t: int, params: ScoreParams, error_aware: bool
) -> tuple[float, Components, float]:
    """Per-graph geometric mean and its log, checked against the factored form.

    Computed in log space: with a large p, ``s**(p+1)`` of a slow graph underflows to 0
    while the mean of the logs is still finite.
    """
    logs = [
        log_rectified_speedup(
            o,
            t,
            b=params.b,
            p=params.p,
            interpretation=params.interpretation,
            error_aware=error_aware,
        )
        for o in outcomes
    ]
    per_graph_log = math.fsum(logs) / len(logs)
    c = _components(outcomes, t, params, error_aware)
    factored_log = factored_log_score(c.alpha, c.beta, c.lam, c.eta, c.gamma, params.p)
    if not math.isclose(
        per_graph_log, factored_log, rel_tol=AGREEMENT_RTOL, abs_tol=AGREEMENT_RTOL
    ):
        name = "ES" if error_aware else "S"
        raise RuntimeError(
            f"internal error: {name}_{t} per-graph log {per_graph_log!r} != factored "
            f"{factored_log!r} ({c})"
        )
    return math.exp(per_graph_log), c, per_graph_log


def _to_outcome(
    item: EvalRecord | GraphOutcome,
    speedup_kind: SpeedupKind,
    group_of: Callable[[EvalRecord], str],
) -> GraphOutcome:
    if isinstance(item, GraphOutcome):
        return item
    return GraphOutcome.from_record(item, speedup_kind, group_of)


def _check_single_run(items: Sequence[EvalRecord | GraphOutcome]) -> None:
    runs = {
        (i.compiler, i.compiler_config_hash, i.device)
        for i in items
        if not isinstance(i, GraphOutcome)
    }
    if len(runs) > 1:
        log.warning(
            "scoring records of %d compiler configurations together: %s",
            len(runs),
            sorted(runs),
        )


def compute_scores(
    items: Iterable[EvalRecord | GraphOutcome],
    *,
    b: float = 0.1,
    p: float = 0.0,
    interpretation: Interpretation | str = Interpretation.DEFAULT,
    speedup_kind: SpeedupKind = "e2e",
    count_sample_errors: bool = False,
    p_fast: float = 1.0,
    group_of: Callable[[EvalRecord], str] = default_group_of,
    score_id: str = "",
    weights: str = "passnet",
) -> ScoreReport:
    """Score a result set: S_t, ES_t with components, AS, fast_p, g-mean, correctness ratios.

    ``items`` are evaluation records (or outcomes derived from them) of one
    compiler configuration. Sample errors are excluded from N unless
    ``count_sample_errors``, in which case they score ``b`` at every t. ``weights``
    picks AS's level weights (:func:`aggregate_weights`).
    Raises ``ValueError`` when no graph is left to score.
    """
    params = ScoreParams(
        b=b,
        p=p,
        interpretation=Interpretation(interpretation),
        speedup_kind=speedup_kind,
        count_sample_errors=count_sample_errors,
        p_fast=p_fast,
        weights=weights,
    )
    level_weights = aggregate_weights(params.interpretation, params.weights)
    items = list(items)
    _check_single_run(items)
    all_outcomes = [_to_outcome(i, speedup_kind, group_of) for i in items]
    counts = Counter(o.status.value for o in all_outcomes)
    # Never scored: a graph too large to evaluate; by default, a broken sample either.
    scored = scored_outcomes(all_outcomes, count_sample_errors=count_sample_errors)
    n_excluded = len(all_outcomes) - len(scored)
    if not scored:
        raise ValueError(
            f"no graphs to score: {len(all_outcomes)} records given"
            + (f", all {n_excluded} are excluded sample errors" if n_excluded else "")
        )

    ran = [o for o in scored if o.status.ran]
    missing = [o for o in ran if o.speedup is None]
    if speedup_kind == "device" and ran and len(missing) == len(ran):
        raise ValueError(
            "no graph has a device speedup (device timing needs CUDA): use speedup_kind='e2e'"
        )
    if missing:
        log.warning(
            "%d of %d graphs ran but have no usable %s speedup; scored as runtime failures "
            "(first: %s)",
            len(missing),
            len(ran),
            speedup_kind,
            missing[0].graph,
        )

    n_classes = num_error_classes(params.interpretation)
    es: dict[int, float] = {}
    es_log: dict[int, float] = {}
    components: dict[int, Components] = {}
    for t in range(T_MIN, n_classes + 2):
        es[t], components[t], es_log[t] = _score_at(scored, t, params, error_aware=True)
    s = {t: _score_at(scored, t, params, error_aware=False)[0] for t in range(T_MIN, 1)}

    total_weight = math.fsum(level_weights.values())
    score = math.exp(math.fsum(w * es_log[t] for t, w in level_weights.items()) / total_weight)

    n = len(scored)
    baseline = correct_speedups(scored, BASELINE_T)
    sample_ratio, n_groups = sample_correctness(scored, BASELINE_T)

    return ScoreReport(
        id=score_id,
        score=score,
        es=es,
        s=s,
        components=components,
        weights=level_weights,
        fast_p=sum(1 for v in baseline if v > p_fast) / n,
        fast_0=sum(1 for v in baseline if v > 0) / n,
        gmean_speedup=gmean(baseline) if baseline else None,
        subgraph_correctness_ratio=subgraph_correctness(scored, BASELINE_T),
        sample_correctness_ratio=sample_ratio,
        n_samples=n_groups,
        counts={st.value: counts.get(st.value, 0) for st in Status},
        params=params,
        n_graphs=n,
        n_excluded=n_excluded,
        n_missing_speedup=len(missing),
    )
