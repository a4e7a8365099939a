"""The PassBench task layout (docs/passes.md): write (:func:`write_task`, the one writer every
task creator uses), create from samples, load and check task folders, and the rule-order
manifest of a pass directory (``sorted_output_pass_rule_names.json``)."""

from passnet.task._manifest import MANIFEST_FILE, read_manifest, write_manifest
from passnet.task._task import (
    ENTRY_SCRIPT,
    TASK_COMPILER,
    TASK_FILE,
    TASK_SCHEMA_VERSION,
    Task,
    TaskError,
    TaskGraph,
    create_task,
    load_task,
    write_task,
)

__all__ = [
    "ENTRY_SCRIPT",
    "MANIFEST_FILE",
    "TASK_COMPILER",
    "TASK_FILE",
    "TASK_SCHEMA_VERSION",
    "Task",
    "TaskError",
    "TaskGraph",
    "create_task",
    "load_task",
    "read_manifest",
    "write_manifest",
    "write_task",
]
