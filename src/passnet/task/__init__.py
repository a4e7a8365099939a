"""The PassBench task layout (design §4.2): create, load and check task folders, and the
rule-order manifest of a pass directory (``sorted_output_pass_rule_names.json``)."""

from passnet.task._manifest import MANIFEST_FILE, read_manifest, write_manifest
from passnet.task._task import Task, TaskError, create_task, load_task

__all__ = [
    "MANIFEST_FILE",
    "Task",
    "TaskError",
    "create_task",
    "load_task",
    "read_manifest",
    "write_manifest",
]
