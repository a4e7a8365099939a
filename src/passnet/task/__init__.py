"""The PassBench task layout (docs/passes.md): write (:func:`write_task`, the one writer every
task creator uses), create from samples, load and check task folders, and the rule-order
manifest of a pass directory (``sorted_output_pass_rule_names.json``), and a benchmark
split (a folder of task folders)."""

from passnet.task._manifest import MANIFEST_FILE, read_manifest, write_manifest
from passnet.task._split import (
    BENCH_MANIFEST,
    SAMPLE_ORDER,
    Split,
    find_split,
    is_task_folder,
    load_split,
    sample_order,
    task_family,
)
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
    "BENCH_MANIFEST",
    "ENTRY_SCRIPT",
    "MANIFEST_FILE",
    "SAMPLE_ORDER",
    "Split",
    "TASK_COMPILER",
    "TASK_FILE",
    "TASK_SCHEMA_VERSION",
    "Task",
    "TaskError",
    "TaskGraph",
    "create_task",
    "find_split",
    "is_task_folder",
    "load_split",
    "load_task",
    "read_manifest",
    "sample_order",
    "task_family",
    "write_manifest",
    "write_task",
]
