"""Tasks in the PassBench layout (design §4.2).

::

    task/
      graph_list.txt                       graph folders relative to the task, one per line
      graphs/<graph>/                      GraphNet samples (variants of one subgraph)
      pass_dir/
        sorted_output_pass_rule_names.json ["Name", ...] load order
        <Name>.py, <helper>.py
      const_pass_dir/ (optional)           fixed passes applied first
      entry.sh                             runs `passnet eval <task> --compiler pass_mgr`
      task.json (optional)                 {"schema_version": 1, "name": ...} written by create_task
"""

from __future__ import annotations

import json
import logging
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from passnet.errors import InputFormatError
from passnet.sample import find_samples, is_sample_dir, load_sample
from passnet.task._manifest import MANIFEST_FILE, read_manifest, write_manifest

__all__ = ["Task", "TaskError", "create_task", "load_task"]

log = logging.getLogger(__name__)

GRAPH_LIST = "graph_list.txt"
TASK_FILE = "task.json"
ENTRY_FILE = "entry.sh"
TASK_SCHEMA_VERSION = 1

ENTRY_SCRIPT = """#!/usr/bin/env bash
# Evaluate this task's passes on every graph of graph_list.txt (writes aggregated_score.json).
set -euo pipefail
exec passnet eval "$(dirname "$0")" --compiler pass_mgr "$@"
"""


class TaskError(InputFormatError):
    """A task folder does not follow the PassBench layout. Context: ``task``, ``file``, ``line``."""


@dataclass(frozen=True)
class Task:
    """A PassBench task folder, validated."""

    path: Path
    name: str
    graphs: tuple[Path, ...]
    """Absolute graph folders, in graph_list.txt order."""
    graph_entries: tuple[str, ...]
    """The graph_list.txt lines they come from (relative to the task)."""
    pass_dir: Path
    pass_names: tuple[str, ...]
    const_pass_dir: Path | None = None
    const_pass_names: tuple[str, ...] = ()
    entry: Path | None = None

    def compiler_config(self) -> dict[str, str]:
        """The ``pass_mgr`` / ``pass_mgr+inductor`` configuration for this task."""
        config = {"pass_dir": str(self.pass_dir)}
        if self.const_pass_dir is not None:
            config["const_pass_dir"] = str(self.const_pass_dir)
        return config


def _read_graph_list(task: Path) -> tuple[list[str], list[Path]]:
    path = task / GRAPH_LIST
    if not path.is_file():
        raise TaskError(
            f"missing {GRAPH_LIST} (graph folders relative to the task, one per line)",
            task=task,
            file=GRAPH_LIST,
        )
    entries: list[str] = []
    graphs: list[Path] = []
    seen: dict[Path, int] = {}
    root = task.resolve()
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue

        def fail(message: str, lineno: int = lineno) -> TaskError:
            return TaskError(message, task=task, file=GRAPH_LIST, line=lineno)

        if Path(line).is_absolute():
            raise fail(f"{line!r} is absolute; graph folders must be relative to the task folder")
        folder = (task / line).resolve()
        if root not in folder.parents:
            raise fail(f"{line!r} points outside the task folder")
        if not folder.is_dir():
            raise fail(f"graph folder {line!r} does not exist")
        if not is_sample_dir(folder):
            raise fail(f"graph folder {line!r} has no model.py (not a GraphNet sample)")
        if folder in seen:
            raise fail(f"graph folder {line!r} is listed twice (first on line {seen[folder]})")
        seen[folder] = lineno
        entries.append(line)
        graphs.append(folder)
    if not graphs:
        raise TaskError(f"{GRAPH_LIST} lists no graph", task=task, file=GRAPH_LIST)
    return entries, graphs


def _task_name(task: Path) -> str:
    path = task / TASK_FILE
    if not path.is_file():
        return task.resolve().name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TaskError(
            f"invalid JSON: {exc.msg}", task=task, file=TASK_FILE, line=exc.lineno
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("name", ""), str):
        raise TaskError('must hold a JSON object with a string "name"', task=task, file=TASK_FILE)
    version = data.get("schema_version", TASK_SCHEMA_VERSION)
    if not isinstance(version, int) or version > TASK_SCHEMA_VERSION:
        raise TaskError(
            f"schema_version {version!r} is newer than this passnet ({TASK_SCHEMA_VERSION})",
            task=task,
            file=TASK_FILE,
            field="schema_version",
        )
    return data.get("name") or task.resolve().name


def load_task(path: str | Path) -> Task:
    """Validate a task folder's layout and list its graphs.

    Layout problems are :class:`TaskError` (file and line); a malformed pass
    manifest is :class:`~passnet.errors.PassLoadError`. Graph folders are checked
    to exist and hold a ``model.py``; their contents are read when evaluated.
    """
    task = Path(path)
    if not task.is_dir():
        raise TaskError("task folder does not exist", task=task)
    entries, graphs = _read_graph_list(task)
    pass_dir = task / "pass_dir"
    if not pass_dir.is_dir():
        raise TaskError(
            f"missing pass_dir/ (the pass files and {MANIFEST_FILE})", task=task, file="pass_dir"
        )
    names = read_manifest(pass_dir)
    const_dir = task / "const_pass_dir"
    const_names: list[str] = read_manifest(const_dir) if const_dir.is_dir() else []
    entry = task / ENTRY_FILE
    return Task(
        path=task.resolve(),
        name=_task_name(task),
        graphs=tuple(graphs),
        graph_entries=tuple(entries),
        pass_dir=pass_dir.resolve(),
        pass_names=tuple(names),
        const_pass_dir=const_dir.resolve() if const_dir.is_dir() else None,
        const_pass_names=tuple(const_names),
        entry=entry.resolve() if entry.is_file() else None,
    )


def _unique(name: str, taken: set[str]) -> str:
    candidate, k = name, 2
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    taken.add(candidate)
    return candidate


def create_task(
    out_dir: str | Path, sample_paths: Iterable[str | Path], *, name: str | None = None
) -> Task:
    """Create a task folder from samples: ``graphs/<sample>/`` copies, ``graph_list.txt``,
    an empty ``pass_dir`` (manifest ``[]``), ``entry.sh`` and ``task.json``.

    ``sample_paths`` may name sample folders, folders holding samples, or list
    files (see :func:`passnet.sample.find_samples`). Every sample is loaded first,
    so a broken one is a precise :class:`~passnet.errors.SampleError` and nothing
    is written. ``out_dir`` must not exist or be empty. ``name`` defaults to the
    folder name.
    """
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TaskError("task folder already exists and is not empty", task=out)
    samples = find_samples(list(sample_paths))
    if not samples:
        raise TaskError("no samples given", task=out)
    for sample in samples:
        load_sample(sample)
    graphs = out / "graphs"
    graphs.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    entries = []
    for sample in samples:
        folder = _unique(Path(sample).resolve().name, taken)
        shutil.copytree(sample, graphs / folder, ignore=shutil.ignore_patterns("__pycache__"))
        entries.append(f"graphs/{folder}")
    (out / GRAPH_LIST).write_text("\n".join(entries) + "\n", encoding="utf-8")
    pass_dir = out / "pass_dir"
    pass_dir.mkdir()
    write_manifest(pass_dir, [])
    entry = out / ENTRY_FILE
    entry.write_text(ENTRY_SCRIPT, encoding="utf-8")
    entry.chmod(entry.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    task_name = name or out.resolve().name
    (out / TASK_FILE).write_text(
        json.dumps({"schema_version": TASK_SCHEMA_VERSION, "name": task_name}, indent=2) + "\n",
        encoding="utf-8",
    )
    log.info("created task %s with %d graphs at %s", task_name, len(entries), out)
    return load_task(out)
