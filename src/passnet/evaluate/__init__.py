"""One graph × one compiler: isolated run, correctness, timing → :class:`EvalRecord`."""

from passnet.evaluate._evaluate import evaluate_sample, probe_device, software_versions
from passnet.evaluate._isolate import ChildOutcome, run_isolated
from passnet.evaluate._record import (
    SCHEMA_VERSION,
    Correctness,
    ErrorInfo,
    EvalRecord,
    GpuReport,
    HostReport,
    KernelProfile,
    KernelShare,
    OutputCheck,
    PassReport,
    Timing,
    TimingStats,
    compiler_config_hash,
    config_hash,
    read_records,
    record_from_dict,
    record_from_json,
)
from passnet.evaluate._settings import EvalSettings

__all__ = [
    "ChildOutcome",
    "EvalSettings",
    "run_isolated",
    "evaluate_sample",
    "probe_device",
    "software_versions",
    "SCHEMA_VERSION",
    "Correctness",
    "ErrorInfo",
    "EvalRecord",
    "GpuReport",
    "HostReport",
    "KernelProfile",
    "KernelShare",
    "OutputCheck",
    "PassReport",
    "Timing",
    "TimingStats",
    "compiler_config_hash",
    "config_hash",
    "read_records",
    "record_from_dict",
    "record_from_json",
]
