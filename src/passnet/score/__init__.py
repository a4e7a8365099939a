"""Scores from records: S_t, ES_t, AS, fast_p, the factored components, score files and tables
(the benchmark table of PassNet's Table 1 columns too)."""

from passnet.score._bench import (
    BENCH_TABLE_SCHEMA_VERSION,
    BOOTSTRAP_RESAMPLES,
    SPEEDUP_BINS,
    BenchRow,
    BenchRun,
    PairedRatio,
    bench_markdown,
    bench_notes,
    bench_row,
    bench_table,
    bench_table_dict,
    load_bench_runs,
    paired_ratios,
    speedup_bin,
    task_intervals,
)
from passnet.score._io import (
    RESULTS_FILE,
    SCORE_FILE,
    load_records,
    read_score,
    split_by_run,
    write_score,
)
from passnet.score._metrics import (
    aggregate_log_terms,
    aggregate_weights,
    compute_scores,
    factored_score,
    gmean,
)
from passnet.score._outcome import GraphOutcome, default_group_of, rectified_speedup
from passnet.score._result import WEIGHT_SCHEMES, Components, ScoreParams, ScoreReport
from passnet.score._table import compare_table, score_table

__all__ = [
    "BENCH_TABLE_SCHEMA_VERSION",
    "BOOTSTRAP_RESAMPLES",
    "RESULTS_FILE",
    "SCORE_FILE",
    "SPEEDUP_BINS",
    "WEIGHT_SCHEMES",
    "BenchRow",
    "BenchRun",
    "Components",
    "GraphOutcome",
    "PairedRatio",
    "ScoreParams",
    "ScoreReport",
    "aggregate_log_terms",
    "aggregate_weights",
    "bench_markdown",
    "bench_notes",
    "bench_row",
    "bench_table",
    "bench_table_dict",
    "compare_table",
    "compute_scores",
    "default_group_of",
    "factored_score",
    "gmean",
    "load_bench_runs",
    "paired_ratios",
    "load_records",
    "read_score",
    "rectified_speedup",
    "score_table",
    "speedup_bin",
    "task_intervals",
    "split_by_run",
    "write_score",
]
