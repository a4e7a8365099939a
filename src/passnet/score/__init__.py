"""Scores from records: S_t, ES_t, AS, fast_p, the factored components, score files and tables."""

from passnet.score._io import (
    RESULTS_FILE,
    SCORE_FILE,
    load_records,
    read_score,
    split_by_run,
    write_score,
)
from passnet.score._metrics import aggregate_weights, compute_scores, factored_score, gmean
from passnet.score._outcome import GraphOutcome, default_group_of, rectified_speedup
from passnet.score._result import WEIGHT_SCHEMES, Components, ScoreParams, ScoreReport
from passnet.score._table import compare_table, score_table

__all__ = [
    "RESULTS_FILE",
    "SCORE_FILE",
    "WEIGHT_SCHEMES",
    "Components",
    "GraphOutcome",
    "ScoreParams",
    "ScoreReport",
    "aggregate_weights",
    "compare_table",
    "compute_scores",
    "default_group_of",
    "factored_score",
    "gmean",
    "load_records",
    "read_score",
    "rectified_speedup",
    "score_table",
    "split_by_run",
    "write_score",
]
