"""``tasks.json``: which task each graph of a benchmark run belongs to (``passnet bench eval``).

A benchmark run evaluates every graph of every task of one split into one results folder;
its records name their graphs ``<task folder>/graphs/...`` as any run does, and the run's
``tasks.json`` says, beside ``results.jsonl``, what the run is: the split, the compiler,
the device kind, and per task its name, the configuration hash its graphs are evaluated
with and its graphs' record labels. Scores group a run's graphs by task with it (the
sample correctness ratio is per task) and see which of the split's graphs have no record
yet (a run still under way)::

    {
      "schema_version": 2,
      "split": "eval-fusible",
      "compiler": "inductor",
      "device": "cuda",
      "sample": {"of": 200, "order": "family-stratified-sha256-1"},
      "tasks": [{"name": "...", "folder": "...", "compiler_config_hash": "...",
                 "graphs": ["<folder>/graphs/float32/0/g", ...]}, ...]
    }

``sample`` is there only for a run of a sample of the split's tasks (``bench eval
--tasks K``): ``of`` the split's task count, ``order`` the rule the sample follows
(:func:`passnet.task.sample_order`). Schema 1 had no ``sample``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from passnet.errors import InputFormatError

__all__ = [
    "BENCH_INDEX_FILE",
    "BENCH_INDEX_SCHEMA_VERSION",
    "BenchIndex",
    "BenchIndexTask",
    "read_bench_index",
    "write_bench_index",
]

BENCH_INDEX_FILE = "tasks.json"
BENCH_INDEX_SCHEMA_VERSION = 2
"""2: ``sample``; 1: every run evaluates the whole split."""


@dataclass(frozen=True)
class BenchIndexTask:
    """One task of a benchmark run."""

    name: str
    """The task's name (its ``task.json`` name, else its folder's)."""
    folder: str
    """The task's folder name in the split: the first part of its graphs' labels."""
    compiler_config_hash: str
    """Of the configuration its graphs are evaluated with (a pass compiler's names the
    task's own pass directory, or the one given for every task)."""
    graphs: tuple[str, ...]
    """Its graphs' record labels (``<folder>/graphs/...``), in graph_list.txt order."""


@dataclass(frozen=True)
class BenchIndex:
    """What a benchmark run evaluates: the content of its ``tasks.json``."""

    split: str
    compiler: str
    device: str
    """The device kind records keep (``cpu``, ``cuda``)."""
    tasks: tuple[BenchIndexTask, ...]
    schema_version: int = BENCH_INDEX_SCHEMA_VERSION
    sampled_from: int | None = None
    """The split's task count where the run evaluates a sample of its tasks, else None."""
    sample_order: str | None = None
    """The rule the sample follows (:data:`passnet.task.SAMPLE_ORDER`), with ``sampled_from``."""

    @property
    def is_sample(self) -> bool:
        return self.sampled_from is not None

    def task_of(self) -> dict[str, str]:
        """Graph label → task name."""
        return {g: t.name for t in self.tasks for g in t.graphs}

    def graph_count(self) -> int:
        return sum(len(t.graphs) for t in self.tasks)

    def to_dict(self) -> dict[str, Any]:
        sample = (
            {"sample": {"of": self.sampled_from, "order": self.sample_order}}
            if self.is_sample
            else {}
        )
        return {
            "schema_version": self.schema_version,
            "split": self.split,
            "compiler": self.compiler,
            "device": self.device,
            **sample,
            "tasks": [
                {
                    "name": t.name,
                    "folder": t.folder,
                    "compiler_config_hash": t.compiler_config_hash,
                    "graphs": list(t.graphs),
                }
                for t in self.tasks
            ],
        }

    @classmethod
    def from_dict(cls, data: Any, file: Path | str = BENCH_INDEX_FILE) -> BenchIndex:
        """Read a ``tasks.json`` document; what is malformed is an :class:`InputFormatError`
        naming the file and the field."""

        def fail(message: str, field: str) -> InputFormatError:
            return InputFormatError(message, file=file, field=field)

        if not isinstance(data, dict):
            raise fail("must hold a JSON object", "")
        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise fail(
                f"schema_version must be a positive integer, got {version!r}", "schema_version"
            )
        if version > BENCH_INDEX_SCHEMA_VERSION:
            raise fail(
                f"schema_version {version} is newer than this passnet "
                f"({BENCH_INDEX_SCHEMA_VERSION})",
                "schema_version",
            )
        for key in ("split", "compiler", "device"):
            if not isinstance(data.get(key), str):
                raise fail(f"{key} must be a string, got {data.get(key)!r}", key)
        sampled_from = sample_order = None
        if "sample" in data:
            sample = data["sample"]
            if not isinstance(sample, dict):
                raise fail(f"sample must be an object, got {sample!r}", "sample")
            sampled_from, sample_order = sample.get("of"), sample.get("order")
            if not isinstance(sampled_from, int) or isinstance(sampled_from, bool):
                raise fail(f"must be the split's task count, got {sampled_from!r}", "sample.of")
            if not isinstance(sample_order, str):
                raise fail(f"must be a string, got {sample_order!r}", "sample.order")
        tasks = data.get("tasks")
        if not isinstance(tasks, list):
            raise fail("tasks must be a list", "tasks")
        out = []
        for i, task in enumerate(tasks):
            where = f"tasks[{i}]"
            if not isinstance(task, dict):
                raise fail("must be an object", where)
            for key in ("name", "folder", "compiler_config_hash"):
                if not isinstance(task.get(key), str):
                    raise fail(f"must be a string, got {task.get(key)!r}", f"{where}.{key}")
            graphs = task.get("graphs")
            if not isinstance(graphs, list) or not all(isinstance(g, str) for g in graphs):
                raise fail("must be a list of graph labels", f"{where}.graphs")
            out.append(
                BenchIndexTask(
                    task["name"], task["folder"], task["compiler_config_hash"], tuple(graphs)
                )
            )
        if sampled_from is not None and sampled_from < len(out):
            raise fail(f"a sample of {len(out)} tasks cannot be of {sampled_from}", "sample.of")
        return cls(
            data["split"],
            data["compiler"],
            data["device"],
            tuple(out),
            version,
            sampled_from,
            sample_order,
        )


def read_bench_index(folder: str | Path) -> BenchIndex | None:
    """The ``tasks.json`` of a results folder, or None where it has none (not a benchmark
    run, or not a folder)."""
    path = Path(folder) / BENCH_INDEX_FILE
    if not Path(folder).is_dir() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputFormatError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(f"cannot read: {exc}", file=path) from exc
    return BenchIndex.from_dict(data, path)


def write_bench_index(folder: str | Path, index: BenchIndex) -> Path:
    """Write ``tasks.json`` into ``folder`` (atomically: a kill leaves the old file or the
    new one); returns its path."""
    path = Path(folder) / BENCH_INDEX_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(index.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
