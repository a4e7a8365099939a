"""Many evaluations: plan work items, run them on an executor, keep a resumable store.

Executors are found by name (:data:`EXECUTORS`, the ``passnet.executors`` entry-point
group: ``local``, ``ray``). Importing the package imports only the executor factories
(no torch, no Ray), so that a command's parser can list every executor's options; the
other names load their modules when first used.
"""

import importlib
from typing import Any

from passnet.runner._factory import (
    EXECUTORS,
    ExecutorFactory,
    ExecutorOption,
    ExecutorRequest,
    LocalFactory,
    RayFactory,
)

_LAZY = {
    "DevicePool": "passnet.runner._executor",
    "EvalJob": "passnet.runner._executor",
    "Executor": "passnet.runner._executor",
    "LocalExecutor": "passnet.runner._executor",
    "SampleTask": "passnet.runner._executor",
    "groups": "passnet.runner._executor",
    "local_devices": "passnet.runner._executor",
    "SplitPlan": "passnet.runner._bench",
    "SplitSummary": "passnet.runner._bench",
    "plan_split": "passnet.runner._bench",
    "run_split": "passnet.runner._bench",
    "split_index": "passnet.runner._bench",
    "start_split_run": "passnet.runner._bench",
    "WorkItem": "passnet.runner._plan",
    "plan_items": "passnet.runner._plan",
    "RayExecutor": "passnet.runner._ray",
    "RunSummary": "passnet.runner._run",
    "check_device": "passnet.runner._run",
    "check_run": "passnet.runner._run",
    "run_evaluations": "passnet.runner._run",
    "ResultStore": "passnet.runner._store",
    "read_records": "passnet.runner._store",
    "label_width": "passnet.runner._labels",
    "short_labels": "passnet.runner._labels",
}

__all__ = [
    "EXECUTORS",
    "DevicePool",
    "EvalJob",
    "Executor",
    "ExecutorFactory",
    "ExecutorOption",
    "ExecutorRequest",
    "LocalExecutor",
    "LocalFactory",
    "RayExecutor",
    "RayFactory",
    "ResultStore",
    "RunSummary",
    "SampleTask",
    "SplitPlan",
    "SplitSummary",
    "WorkItem",
    "check_device",
    "check_run",
    "groups",
    "label_width",
    "local_devices",
    "plan_items",
    "plan_split",
    "read_records",
    "run_evaluations",
    "run_split",
    "short_labels",
    "split_index",
    "start_split_run",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'passnet.runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
