"""One graph × one compiler: the isolated child, correctness, timing → :class:`~passnet.record.EvalRecord`."""

from passnet.evaluate._evaluate import evaluate_sample, probe_device, software_versions
from passnet.evaluate._isolate import ChildOutcome, run_isolated
from passnet.evaluate._settings import EvalSettings

__all__ = [
    "ChildOutcome",
    "EvalSettings",
    "evaluate_sample",
    "probe_device",
    "run_isolated",
    "software_versions",
]
