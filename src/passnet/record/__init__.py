"""The evaluation record: its schema and versions, tolerance tables, JSON Lines, and the
PassNet/GraphNet log format (rendered from records, parsed back into records).

Everything above this package (sample comparison, compilers, the evaluator, the
runner, scores, reports) speaks in these types; this package imports nothing of
passnet but :mod:`passnet.status` and :mod:`passnet.errors`.
"""

from passnet.record._bench import (
    BENCH_INDEX_FILE,
    BENCH_INDEX_SCHEMA_VERSION,
    BenchIndex,
    BenchIndexTask,
    read_bench_index,
    write_bench_index,
)
from passnet.record._jsonl import append_jsonl, iter_jsonl, read_jsonl, repair_jsonl_tail
from passnet.record._log import dtype_from_name, render_log
from passnet.record._logparse import parse_log
from passnet.record._schema import (
    SCHEMA_VERSION,
    CompileCache,
    Correctness,
    CpuContention,
    CudaGraphDecision,
    ErrorInfo,
    EvalRecord,
    GpuReport,
    HostReport,
    KernelProfile,
    KernelShare,
    OutputCheck,
    PassReport,
    Roofline,
    Timing,
    TimingStats,
    TurnReport,
    compiler_config_hash,
    config_hash,
    latest_records,
    read_records,
    record_from_dict,
    record_from_json,
)
from passnet.record._tolerance import (
    BASELINE_T,
    TOLERANCE_LEVELS,
    baseline_tolerance,
    log_key,
    tolerance,
)

__all__ = [
    "BASELINE_T",
    "BENCH_INDEX_FILE",
    "BENCH_INDEX_SCHEMA_VERSION",
    "BenchIndex",
    "BenchIndexTask",
    "SCHEMA_VERSION",
    "TOLERANCE_LEVELS",
    "CompileCache",
    "CudaGraphDecision",
    "Correctness",
    "ErrorInfo",
    "EvalRecord",
    "CpuContention",
    "GpuReport",
    "HostReport",
    "KernelProfile",
    "KernelShare",
    "OutputCheck",
    "PassReport",
    "Roofline",
    "Timing",
    "TimingStats",
    "TurnReport",
    "append_jsonl",
    "baseline_tolerance",
    "compiler_config_hash",
    "config_hash",
    "dtype_from_name",
    "iter_jsonl",
    "latest_records",
    "log_key",
    "parse_log",
    "read_jsonl",
    "read_bench_index",
    "read_records",
    "record_from_dict",
    "record_from_json",
    "render_log",
    "repair_jsonl_tail",
    "tolerance",
    "write_bench_index",
]
