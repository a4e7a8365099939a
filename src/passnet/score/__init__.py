"""Metrics: S_t, ES_t, AS, fast_p; tolerance tables; PassNet/GraphNet log rendering and parsing."""

# _tolerance first: evaluate imports it, and the modules below import evaluate's record.
from passnet.score._tolerance import TOLERANCE_LEVELS, baseline_tolerance, log_key, tolerance

# isort: split
from passnet.score._io import (
    RESULTS_FILE,
    SCORE_FILE,
    load_records,
    read_jsonl,
    read_score,
    split_by_run,
    write_score,
)
from passnet.score._log import render_log
from passnet.score._logparse import parse_log
from passnet.score._metrics import aggregate_weights, compute_scores, factored_score, gmean
from passnet.score._outcome import BASELINE_T, GraphOutcome, default_group_of, rectified_speedup
from passnet.score._result import Components, ScoreParams, ScoreReport
from passnet.score._table import compare_table, score_table

__all__ = [
    "BASELINE_T",
    "RESULTS_FILE",
    "SCORE_FILE",
    "TOLERANCE_LEVELS",
    "Components",
    "GraphOutcome",
    "ScoreParams",
    "ScoreReport",
    "aggregate_weights",
    "baseline_tolerance",
    "compare_table",
    "compute_scores",
    "default_group_of",
    "factored_score",
    "gmean",
    "load_records",
    "log_key",
    "parse_log",
    "read_jsonl",
    "read_score",
    "rectified_speedup",
    "render_log",
    "score_table",
    "split_by_run",
    "tolerance",
    "write_score",
]
