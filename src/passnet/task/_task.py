"""Tasks in the PassBench layout (docs/passes.md, "The task layout"): the one writer and reader.

::

    task/
      graph_list.txt                       graph folders relative to the task, one per line
      graphs/<graph>/                      GraphNet samples (variants of one subgraph)
      pass_dir/
        sorted_output_pass_rule_names.json ["Name", ...] load order
        <Name>.py, <helper>.py
      const_pass_dir/ (optional)           fixed passes applied first
      entry.sh                             runs `passnet eval <task> --compiler pass_mgr`
      task.json (optional)                 name, schema version, what the task's creator recorded

Every task creator (:func:`create_task`, the dataset's ``build_bench`` and
``build_reference_task``) writes through :func:`write_task`, so there is one
``entry.sh`` and one ``task.json`` format. ``task.json`` (schema version 2)::

    {
      "schema_version": 2,
      "name": "...",
      "metadata": {"builder": "bench", ...},      what the creator records about the task
      "graphs": [{"path": "graphs/...", ...}]     one record per graph, in graph_list.txt order
    }

Older files are still read: version 1 (``{"schema_version": 1, "name": ...}``), and
the unversioned ``task.json`` that ``build_bench`` wrote before version 2 (its
fields, ``split``/``kind``/``op_sequence``, become the metadata and its ``graphs``
the graph records).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from passnet.errors import InputFormatError
from passnet.sample import find_samples, is_sample_dir, load_sample
from passnet.task._manifest import MANIFEST_FILE, read_manifest, write_manifest

__all__ = [
    "ENTRY_SCRIPT",
    "TASK_COMPILER",
    "TASK_FILE",
    "TASK_SCHEMA_VERSION",
    "Task",
    "TaskError",
    "TaskGraph",
    "create_task",
    "load_task",
    "write_task",
]

log = logging.getLogger(__name__)

GRAPH_LIST = "graph_list.txt"
TASK_FILE = "task.json"
ENTRY_FILE = "entry.sh"
TASK_SCHEMA_VERSION = 2
"""2: ``metadata`` and ``graphs`` records; 1: name only; unversioned: the old bench layout."""
_ENTRY_MODE = 0o755  # fixed, not umask-dependent: a task tree is a function of its inputs

TASK_COMPILER = "pass_mgr"
"""The compiler a task's ``entry.sh`` evaluates its passes with; its score is the task's
``aggregated_score.json`` (other compilers' scores of the task are named after them)."""

ENTRY_SCRIPT = f"""#!/usr/bin/env bash
# Evaluate this task's passes on every graph of graph_list.txt (writes aggregated_score.json).
set -euo pipefail
exec passnet eval "$(dirname "$0")" --compiler {TASK_COMPILER} "$@"
"""
# What the graph folders of a task may be named (the top level holds the layout's own files).
_GRAPHS_DIR = "graphs"


class TaskError(InputFormatError):
    """A task folder does not follow the PassBench layout, or a task cannot be written.

    Context: ``task``, ``file``, ``line``, ``field``.
    """


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
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """``task.json``'s ``metadata``: what the creator recorded (``builder``: ``bench``,
    ``reference``, ...; empty for a task without one). Read only."""
    graph_metadata: tuple[Mapping[str, Any], ...] = field(default=(), hash=False)
    """``task.json``'s record of each graph (without its ``path``), aligned with ``graphs``;
    ``{}`` for a graph it does not describe. Read only."""
    schema_version: int | None = None
    """Of ``task.json``: 0 for the unversioned bench layout, None without a ``task.json``."""

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


@dataclass(frozen=True)
class _TaskFile:
    """What ``task.json`` says, in the current format whatever version it was written in."""

    name: str | None
    metadata: dict[str, Any]
    graphs: dict[PurePosixPath, dict[str, Any]]
    schema_version: int | None


# Fields of the unversioned task.json build_bench wrote before version 2 (its BenchTask).
_LEGACY_BENCH_FIELDS = ("split", "kind", "op_sequence", "graphs")


def _graph_records(task: Path, records: Any, where: str) -> dict[PurePosixPath, dict[str, Any]]:
    if not isinstance(records, list):
        raise TaskError(
            f"{where} must be a list of graph records", task=task, file=TASK_FILE, field=where
        )
    out: dict[PurePosixPath, dict[str, Any]] = {}
    for i, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("path"), str):
            raise TaskError(
                f'{where}[{i}] must be an object with a string "path"',
                task=task,
                file=TASK_FILE,
                field=f"{where}[{i}].path",
            )
        out[PurePosixPath(record["path"])] = {k: v for k, v in record.items() if k != "path"}
    return out


def _read_task_file(task: Path) -> _TaskFile:
    path = task / TASK_FILE
    if not path.is_file():
        return _TaskFile(None, {}, {}, None)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TaskError(
            f"invalid JSON: {exc.msg}", task=task, file=TASK_FILE, line=exc.lineno
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"cannot read: {exc}", task=task, file=TASK_FILE) from exc
    if not isinstance(data, dict) or not isinstance(data.get("name", ""), str):
        raise TaskError(
            'must hold a JSON object with a string "name"', task=task, file=TASK_FILE, field="name"
        )
    name = data.get("name") or None
    if "schema_version" not in data:
        # Before version 2 only build_bench wrote task.json without a version: its BenchTask
        # (name, split, kind, op_sequence, graphs). Anything else unversioned is name-only.
        if not any(key in data for key in _LEGACY_BENCH_FIELDS):
            return _TaskFile(name, {}, {}, 0)
        metadata = {"builder": "bench"}
        metadata.update({k: v for k, v in data.items() if k not in ("name", "graphs")})
        return _TaskFile(name, metadata, _graph_records(task, data.get("graphs", []), "graphs"), 0)
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise TaskError(
            f"schema_version must be a positive integer, got {version!r}",
            task=task,
            file=TASK_FILE,
            field="schema_version",
        )
    if version > TASK_SCHEMA_VERSION:
        raise TaskError(
            f"schema_version {version} is newer than this passnet ({TASK_SCHEMA_VERSION})",
            task=task,
            file=TASK_FILE,
            field="schema_version",
        )
    if version == 1:
        return _TaskFile(name, {}, {}, 1)
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise TaskError(
            '"metadata" must be a JSON object', task=task, file=TASK_FILE, field="metadata"
        )
    return _TaskFile(
        name, metadata, _graph_records(task, data.get("graphs", []), "graphs"), version
    )


def load_task(path: str | Path) -> Task:
    """Validate a task folder's layout and list its graphs.

    Layout problems are :class:`TaskError` (file and line); a malformed pass
    manifest is :class:`~passnet.errors.PassLoadError`. Graph folders are checked
    to exist and hold a ``model.py``; their contents are read when evaluated.
    ``task.json`` is optional; any version up to :data:`TASK_SCHEMA_VERSION` is read
    (see the module docstring), and its metadata and graph records are on the
    :class:`Task`.
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
    info = _read_task_file(task)
    return Task(
        path=task.resolve(),
        name=info.name or task.resolve().name,
        graphs=tuple(graphs),
        graph_entries=tuple(entries),
        pass_dir=pass_dir.resolve(),
        pass_names=tuple(names),
        const_pass_dir=const_dir.resolve() if const_dir.is_dir() else None,
        const_pass_names=tuple(const_names),
        entry=entry.resolve() if entry.is_file() else None,
        metadata=info.metadata,
        graph_metadata=tuple(info.graphs.get(PurePosixPath(e), {}) for e in entries),
        schema_version=info.schema_version,
    )


@dataclass(frozen=True)
class TaskGraph:
    """One graph for :func:`write_task`: where it goes in the task and which sample it copies."""

    path: str
    """Its folder relative to the task, under ``graphs/`` (its line of ``graph_list.txt``)."""
    sample: Path
    """The sample folder copied there."""
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)
    """Recorded for it in ``task.json`` ``graphs`` (JSON values; ``path`` is added)."""


def _unique(name: str, taken: set[str]) -> str:
    candidate, k = name, 2
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    taken.add(candidate)
    return candidate


def _check_out_dir(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TaskError("task folder already exists and is not empty", task=out)


def _check_graphs(out: Path, graphs: Sequence[TaskGraph]) -> None:
    if not graphs:
        raise TaskError("a task needs at least one graph", task=out, file=GRAPH_LIST)
    seen: set[PurePosixPath] = set()
    for i, graph in enumerate(graphs):

        def fail(message: str, i: int = i) -> TaskError:
            return TaskError(message, task=out, file=GRAPH_LIST, field=f"graphs[{i}]")

        text = graph.path
        rel = PurePosixPath(text)
        # The path becomes a graph_list.txt line: it must read back as itself.
        if text != text.strip() or "\n" in text or "\r" in text or "\\" in text:
            raise fail(f"graph path {text!r} has surrounding blanks, a line break or a backslash")
        if rel.is_absolute() or str(rel) != text or any(p in ("", ".", "..") for p in rel.parts):
            raise fail(f"graph path {text!r} must be a normalized relative path")
        if len(rel.parts) < 2 or rel.parts[0] != _GRAPHS_DIR:
            raise fail(f"graph path {text!r} must be under {_GRAPHS_DIR}/")
        if rel in seen or any(rel.is_relative_to(s) or s.is_relative_to(rel) for s in seen):
            raise fail(f"graph path {text!r} is listed twice or nested in another graph's folder")
        seen.add(rel)
        if "path" in graph.metadata:
            raise fail(f'the metadata of graph {text!r} must not set "path"')
        if not is_sample_dir(Path(graph.sample)):
            raise fail(f"graph {text!r}: {graph.sample} is not a sample folder (no model.py)")


def _copy_sample(src: Path, dst: Path) -> None:
    """Copy a sample folder's files byte for byte (not their modes or times, so the task tree
    depends on content alone), without bytecode caches or samples nested in it."""
    dst.mkdir(parents=True)
    for entry in sorted(src.iterdir()):
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            if not is_sample_dir(entry):  # a nested sample is a graph of its own, not part of this
                _copy_sample(entry, dst / entry.name)
        elif entry.is_file():
            shutil.copyfile(entry, dst / entry.name)


def _copy_pass_dir(src: Path, dst: Path) -> None:
    names = read_manifest(src)  # a broken pass directory is refused before anything is copied
    dst.mkdir()
    for file in sorted(src.glob("*.py")):
        shutil.copyfile(file, dst / file.name)
    write_manifest(dst, names)


def _json_text(out: Path, document: Mapping[str, Any]) -> str:
    try:
        return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise TaskError(
            f"task metadata is not plain JSON: {exc}", task=out, file=TASK_FILE, field="metadata"
        ) from exc


def write_task(
    out_dir: str | Path,
    graphs: Sequence[TaskGraph],
    *,
    name: str,
    metadata: Mapping[str, Any] | None = None,
    pass_dir: str | Path | None = None,
) -> Task:
    """Write a task folder in the PassBench layout and return it loaded: the one task writer.

    Each :class:`TaskGraph`'s sample is copied to its ``path`` (under ``graphs/``),
    ``graph_list.txt`` lists the paths in the given order, ``pass_dir`` is a copy of
    ``pass_dir`` (its manifest and ``.py`` files) or empty (manifest ``[]``),
    ``entry.sh`` runs ``passnet eval <task> --compiler pass_mgr`` and ``task.json``
    holds ``schema_version``, ``name``, ``metadata`` and each graph's record
    (``{"path": ..., **graph.metadata}``). ``metadata`` records what the creator
    knows about the task; by convention its ``builder`` says who made it (``bench``,
    ``reference``).

    The output is a function of the inputs alone: no timestamps, sorted JSON keys,
    files copied byte for byte, fixed modes. ``out_dir`` must be absent or empty;
    bad paths, a folder that is not a sample or metadata that is not JSON are a
    :class:`TaskError` raised before anything is written, and a failure while
    writing removes what was written.
    """
    out = Path(out_dir)
    _check_out_dir(out)
    if not isinstance(name, str) or not name.strip():
        raise TaskError(f"task name must be a non-empty string, got {name!r}", task=out)
    _check_graphs(out, graphs)
    document = {
        "schema_version": TASK_SCHEMA_VERSION,
        "name": name,
        "metadata": dict(metadata or {}),
        "graphs": [{**g.metadata, "path": g.path} for g in graphs],
    }
    task_json = _json_text(out, document)
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        for graph in graphs:
            _copy_sample(Path(graph.sample), out / graph.path)
        (out / GRAPH_LIST).write_text("".join(f"{g.path}\n" for g in graphs), encoding="utf-8")
        if pass_dir is not None:
            _copy_pass_dir(Path(pass_dir), out / "pass_dir")
        else:
            (out / "pass_dir").mkdir()
            write_manifest(out / "pass_dir", [])
        entry = out / ENTRY_FILE
        entry.write_text(ENTRY_SCRIPT, encoding="utf-8")
        entry.chmod(_ENTRY_MODE)
        (out / TASK_FILE).write_text(task_json, encoding="utf-8")
    except BaseException:
        # Leave no half task behind: the folder as it was (absent, or empty).
        if created:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for child in out.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        raise
    log.info("wrote task %s with %d graphs at %s", name, len(graphs), out)
    return load_task(out)


def create_task(
    out_dir: str | Path,
    sample_paths: Iterable[str | Path],
    *,
    name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Task:
    """Create a task folder from samples: ``graphs/<sample>/`` copies, ``graph_list.txt``,
    an empty ``pass_dir`` (manifest ``[]``), ``entry.sh`` and ``task.json`` (see
    :func:`write_task`; each graph's record holds its ``source`` folder).

    ``sample_paths`` may name sample folders, folders holding samples, or list
    files (see :func:`passnet.sample.find_samples`). Every sample is loaded first,
    so a broken one is a precise :class:`~passnet.errors.SampleError` and nothing
    is written. ``out_dir`` must not exist or be empty. ``name`` defaults to the
    folder name; ``metadata`` goes to ``task.json`` as it is.
    """
    out = Path(out_dir)
    _check_out_dir(out)
    samples = find_samples(list(sample_paths))
    if not samples:
        raise TaskError("no samples given", task=out)
    for sample in samples:
        load_sample(sample)
    taken: set[str] = set()
    graphs = [
        TaskGraph(
            f"{_GRAPHS_DIR}/{_unique(Path(sample).resolve().name, taken)}",
            Path(sample),
            {"source": str(Path(sample).resolve())},
        )
        for sample in samples
    ]
    return write_task(out, graphs, name=name or out.resolve().name, metadata=metadata)
