"""Many evaluations: plan work items, run them on an executor, keep a resumable store."""

from passnet.runner._executor import (
    DevicePool,
    EvalJob,
    Executor,
    LocalExecutor,
    groups,
    local_devices,
)
from passnet.runner._labels import label_width, short_labels
from passnet.runner._plan import WorkItem, plan_items
from passnet.runner._ray import RayExecutor
from passnet.runner._run import RunSummary, check_device, run_evaluations
from passnet.runner._store import ResultStore, read_records

__all__ = [
    "DevicePool",
    "EvalJob",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "ResultStore",
    "RunSummary",
    "WorkItem",
    "check_device",
    "groups",
    "label_width",
    "local_devices",
    "plan_items",
    "read_records",
    "run_evaluations",
    "short_labels",
]
