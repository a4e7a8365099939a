"""Many evaluations: scheduling over devices, resume, result store."""

from passnet.runner._plan import WorkItem, plan_items
from passnet.runner._run import RunSummary, check_device, run_evaluations, worker_devices
from passnet.runner._store import ResultStore, read_records

__all__ = [
    "ResultStore",
    "RunSummary",
    "WorkItem",
    "check_device",
    "plan_items",
    "read_records",
    "run_evaluations",
    "worker_devices",
]
