"""One graph × one compiler: isolated run, correctness, timing → :class:`EvalRecord`."""

from passnet.evaluate._record import (
    SCHEMA_VERSION,
    Correctness,
    ErrorInfo,
    EvalRecord,
    OutputCheck,
    PassReport,
    Timing,
    TimingStats,
    config_hash,
    record_from_dict,
    record_from_json,
)

__all__ = [
    "SCHEMA_VERSION",
    "Correctness",
    "ErrorInfo",
    "EvalRecord",
    "OutputCheck",
    "PassReport",
    "Timing",
    "TimingStats",
    "config_hash",
    "record_from_dict",
    "record_from_json",
]
