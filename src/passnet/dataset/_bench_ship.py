"""PassBench-GN as shipped: check a benchmark folder against its manifest, pack the
evaluation splits into the package's versioned archive, find the shipped copy.

A benchmark folder (``passnet bench build``) is ``manifest.json`` and one folder per
split, ``<split>/<task>/...``. The manifest (schema version 2) records the version,
each split's counts (``splits``), every task with its graphs (``tasks``) and the sha256
of every file of the folder but itself (``files``, POSIX paths relative to it, of every
split). A copy may hold only some splits: the package ships the two evaluation splits
(:func:`pack_bench`) with the manifest that lists every split's files, so a train split
rebuilt from the corpus is checked against it (:func:`verify_bench` with ``manifest``).

:func:`bench_path` unpacks the shipped archive once into the cache folder
(:func:`cache_dir`) and returns it: unpacked beside it, verified, renamed into place
under a lock, so no caller sees a half folder. Once a copy is verified in full, a stamp
beside it records the archive's and the manifest's SHA-256 and one digest over the size
and modification time (ns) of every file the manifest lists for it; a later call
compares those stats only. When anything differs (or the stamp is missing or unreadable)
the files are hashed against the manifest again, and a copy that no longer matches is
unpacked again; another shipped archive is unpacked again at once.
"""

from __future__ import annotations

import json
import logging
import lzma
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import passnet.data
from passnet.data import (
    CACHE_DIR_ENV,
    SHIPPED_MANIFEST_FILE,
    cache_dir,
    cache_lock,
    file_sha256,
    read_stamp,
    stamp_path,
    stamped_copy,
    write_atomically,
    write_stamp,
)
from passnet.errors import DatasetError, PassnetError
from passnet.task import BENCH_MANIFEST, load_task

__all__ = [
    "BENCH_SPLITS",
    "CACHE_DIR_ENV",
    "EVAL_SPLITS",
    "MANIFEST_SCHEMA_VERSIONS",
    "BenchManifest",
    "BenchVerification",
    "ChangedFile",
    "ManifestTask",
    "SplitCheck",
    "SplitCounts",
    "bench_path",
    "cache_dir",
    "file_sha256",
    "pack_bench",
    "read_bench_manifest",
    "shipped_bench",
    "verify_bench",
]

log = logging.getLogger(__name__)

MANIFEST_FILE = BENCH_MANIFEST
MANIFEST_SCHEMA_VERSIONS = frozenset({2})
"""The ``manifest.json`` schema versions this passnet reads."""
BENCH_SPLITS = ("eval-fusible", "eval-classical", "train-fusible", "train-classical", "single-op")
EVAL_SPLITS = ("eval-fusible", "eval-classical")
"""The splits the package ships (:func:`pack_bench`'s default)."""

_HEX64 = re.compile(r"[0-9a-f]{64}")
# name and version become file and folder names (the archive, the cache folder)
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_FILE_MODE, _EXEC_MODE, _DIR_MODE = 0o644, 0o755, 0o755
BUILD_HINT = (
    "build it from the GraphNet corpus with `passnet bench build SUBGRAPHS... --out DIR` "
    "(docs/dataset_decompose.md, 'Benchmark tasks'), check it with `passnet bench verify "
    "DIR`, and give DIR's split folders to the commands"
)


# --------------------------------------------------------------------------- the manifest


@dataclass(frozen=True)
class SplitCounts:
    """``splits.<split>`` of the manifest."""

    tasks: int
    graphs: int
    bytes: int


@dataclass(frozen=True)
class ManifestTask:
    """One entry of the manifest's ``tasks``: what verification needs of it."""

    index: int
    """Its position in ``tasks`` (messages name ``tasks[index]``)."""
    name: str
    split: str
    graphs: tuple[tuple[str, str], ...]
    """``(path, graph_hash)`` of each graph, in the manifest's order."""


@dataclass(frozen=True)
class BenchManifest:
    """A benchmark's ``manifest.json``, read by :func:`read_bench_manifest`."""

    path: Path
    schema_version: int
    name: str
    version: str
    splits: Mapping[str, SplitCounts | None]
    """Split name -> its counts (None where they are malformed: a problem)."""
    tasks: tuple[ManifestTask, ...]
    files: Mapping[str, str]
    """Relative POSIX path -> sha256, the well-formed entries only."""
    problems: tuple[str, ...] = ()
    """Malformed entries found while reading (each names its field); they were left out."""

    @property
    def archive_name(self) -> str:
        """The packed evaluation splits' file name: ``<name>-<version>.tar.xz``."""
        return f"{self.name}-{self.version}.tar.xz"

    def split_files(self, split: str) -> list[str]:
        """The files of one split, sorted."""
        return sorted(p for p in self.files if p.split("/", 1)[0] == split)

    def top_files(self) -> list[str]:
        """The files outside every split's folder, sorted (checked when every split is)."""
        return sorted(p for p in self.files if p.split("/", 1)[0] not in self.splits)


def _fatal(manifest: Path, message: str, field_name: str | None = None) -> DatasetError:
    return DatasetError(message, file=manifest, field=field_name)


def _int_field(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def manifest_bytes(path: str | Path) -> bytes:
    """A manifest's JSON bytes: the file's, or decompressed where it ends in ``.xz``."""
    raw = Path(path).read_bytes()
    return lzma.decompress(raw) if str(path).endswith(".xz") else raw


def read_bench_manifest(path: str | Path) -> BenchManifest:
    """Read a benchmark's ``manifest.json`` (or ``manifest.json.xz``).

    What makes it unusable raises :class:`~passnet.errors.DatasetError` naming the file
    and field: not a JSON object, a ``schema_version`` this passnet does not know, a
    missing or malformed ``name``, ``version``, ``splits`` or ``files``. Malformed
    entries of ``splits``, ``tasks`` or ``files`` are left out and listed in
    ``problems``, so a verification still checks the rest.
    """
    manifest = Path(path)
    try:
        data = json.loads(manifest_bytes(manifest).decode("utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"invalid JSON: {exc.msg}", file=manifest, line=exc.lineno) from exc
    except (OSError, UnicodeDecodeError, lzma.LZMAError) as exc:
        raise DatasetError(f"cannot read the manifest: {exc}", file=manifest) from exc
    if not isinstance(data, dict):
        raise _fatal(manifest, f"must hold a JSON object, not {type(data).__name__}")
    version = data.get("schema_version")
    if not _int_field(version) or version not in MANIFEST_SCHEMA_VERSIONS:
        known = ", ".join(str(v) for v in sorted(MANIFEST_SCHEMA_VERSIONS))
        raise _fatal(
            manifest,
            f"schema_version {version!r} is not one this passnet reads ({known}); a benchmark "
            "built by `passnet bench build` before schema version 2 has no file hashes: "
            "build it again",
            "schema_version",
        )
    for key in ("name", "version"):
        value = data.get(key)
        if not isinstance(value, str) or not _SAFE_NAME.fullmatch(value):
            raise _fatal(
                manifest,
                f"{key} must be a non-empty string of letters, digits and . _ + - "
                f"(it names the archive and the cache folder), got {value!r}",
                key,
            )
    problems: list[str] = []

    def problem(field_name: str, message: str) -> None:
        problems.append(f"{manifest.name}: {field_name}: {message}")

    raw_splits = data.get("splits")
    if not isinstance(raw_splits, dict) or not raw_splits:
        raise _fatal(
            manifest,
            'splits must be a non-empty object {"<split>": {"tasks", "graphs", "bytes"}}',
            "splits",
        )
    splits: dict[str, SplitCounts | None] = {}
    # the benchmark's own splits in their order (the file's keys are sorted), then others
    order = {name: i for i, name in enumerate(BENCH_SPLITS)}
    for name, counts in sorted(raw_splits.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])):
        where = f"splits.{name}"
        if not _SAFE_NAME.fullmatch(name):
            problem(where, "a split name must be a plain folder name")
            continue
        splits[name] = None
        if not isinstance(counts, dict) or not all(
            _int_field(counts.get(k)) for k in ("tasks", "graphs", "bytes")
        ):
            problem(where, f"must be {{tasks, graphs, bytes}} (integers ≥ 0), got {counts!r}")
        else:
            splits[name] = SplitCounts(counts["tasks"], counts["graphs"], counts["bytes"])

    raw_files = data.get("files")
    if not isinstance(raw_files, dict):
        raise _fatal(
            manifest, 'files must be an object {"<split>/<task>/<file>": "<sha256>"}', "files"
        )
    files: dict[str, str] = {}
    for key, digest in raw_files.items():
        where = f"files[{key!r}]"
        parts = PurePosixPath(key).parts
        if (
            key != PurePosixPath(key).as_posix()
            or key.startswith("/")
            or "\\" in key
            or not parts
            or any(p in ("", ".", "..") for p in parts)
        ):
            problem(where, "must be a relative POSIX path (<split>/<task>/<file>) without . or ..")
        elif key == MANIFEST_FILE:
            problem(where, "the manifest does not list itself")
        elif not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            problem(where, f"must be a sha256 in lower-case hex (64 digits), got {digest!r}")
        else:
            files[key] = digest

    raw_tasks = data.get("tasks")
    tasks: list[ManifestTask] = []
    if not isinstance(raw_tasks, list):
        problem("tasks", f"must be a list of task records, got {type(raw_tasks).__name__}")
        raw_tasks = []
    for i, task in enumerate(raw_tasks):
        where = f"tasks[{i}]"
        if not isinstance(task, dict):
            problem(where, "must be an object")
            continue
        name, split, graphs = task.get("name"), task.get("split"), task.get("graphs")
        if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name):
            problem(f"{where}.name", f"must be a plain folder name, got {name!r}")
            continue
        if split not in splits:
            problem(f"{where}.split", f"{split!r} is not in splits ({', '.join(splits)})")
            continue
        if not isinstance(graphs, list) or not graphs:
            problem(f"{where}.graphs", "must be a non-empty list of graph records")
            continue
        pairs = []
        for j, g in enumerate(graphs):
            if (
                not isinstance(g, dict)
                or not isinstance(g.get("path"), str)
                or not isinstance(g.get("graph_hash"), str)
            ):
                problem(
                    f"{where}.graphs[{j}]", 'must be an object with string "path" and "graph_hash"'
                )
                break
            pairs.append((g["path"], g["graph_hash"]))
        else:
            tasks.append(ManifestTask(i, name, split, tuple(pairs)))
    return BenchManifest(
        path=manifest,
        schema_version=version,
        name=data["name"],
        version=data["version"],
        splits=splits,
        tasks=tuple(tasks),
        files=files,
        problems=tuple(problems),
    )


def _consistency(m: BenchManifest) -> list[str]:
    """The manifest against itself: each split's counts against its tasks and its files."""
    out: list[str] = []
    name = m.path.name
    seen: dict[tuple[str, str], int] = {}
    for t in m.tasks:
        if (t.split, t.name) in seen:
            out.append(
                f"{name}: tasks[{t.index}]: task {t.name!r} of {t.split} is also "
                f"tasks[{seen[t.split, t.name]}]"
            )
        seen.setdefault((t.split, t.name), t.index)
        task_json = f"{t.split}/{t.name}/task.json"
        if task_json not in m.files:
            out.append(f"{name}: tasks[{t.index}]: files does not list {task_json}")
    for split, counts in m.splits.items():
        if counts is None:
            continue  # already a problem
        listed = sorted(t.name for t in m.tasks if t.split == split)
        folders = sorted({p.split("/")[1] for p in m.split_files(split) if p.count("/") >= 2})
        graphs = sum(len(t.graphs) for t in m.tasks if t.split == split)
        if counts.tasks != len(folders):
            out.append(
                f"{name}: splits.{split}.tasks: {counts.tasks}, but files lists "
                f"{len(folders)} task folders of {split}"
            )
        if counts.tasks != len(listed):
            out.append(
                f"{name}: splits.{split}.tasks: {counts.tasks}, but tasks has {len(listed)} "
                f"tasks of split {split}"
            )
        for folder in sorted(set(folders) - set(listed)):
            out.append(f"{name}: files lists {split}/{folder}/, a task that tasks does not have")
        if counts.graphs != graphs:
            out.append(
                f"{name}: splits.{split}.graphs: {counts.graphs}, but the tasks of {split} "
                f"hold {graphs} graphs"
            )
    return out


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class ChangedFile:
    """A file whose bytes are not those the manifest hashed."""

    path: str
    expected: str
    actual: str


@dataclass(frozen=True)
class SplitCheck:
    """One split of a verification."""

    name: str
    present: bool
    """Its folder is there; an absent split's files are not checked (nor missing)."""
    files: int
    """Files the manifest lists for it."""
    matched: int = 0
    missing: int = 0
    changed: int = 0
    extra: int = 0


@dataclass
class BenchVerification:
    """What :func:`verify_bench` found."""

    path: str
    manifest: str
    name: str
    version: str
    splits: list[SplitCheck] = field(default_factory=list)
    """The splits checked (all the manifest's, or those asked for), in manifest order."""
    requested: tuple[str, ...] | None = None
    """The splits asked for (None: every split of the manifest)."""
    checked: int = 0
    """Files hashed and compared (those of the present splits that exist)."""
    missing: list[str] = field(default_factory=list)
    changed: list[ChangedFile] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    """Files (or, at the top, folders, ending in ``/``) the manifest does not list."""
    manifest_errors: list[str] = field(default_factory=list)
    """The manifest's own problems, and where it disagrees with a task's ``task.json``."""

    @property
    def present(self) -> list[str]:
        return [s.name for s in self.splits if s.present]

    @property
    def absent(self) -> list[str]:
        return [s.name for s in self.splits if not s.present]

    @property
    def absent_files(self) -> int:
        """Files of absent splits: not checked, not missing."""
        return sum(s.files for s in self.splits if not s.present)

    @property
    def intact(self) -> bool:
        """Every listed file of the present splits is there with its bytes, the manifest
        is consistent, and at least one split is present (extra files aside)."""
        return bool(self.present) and not (self.missing or self.changed or self.manifest_errors)

    @property
    def ok(self) -> bool:
        """:attr:`intact`, no extra file, and every split asked for present."""
        asked_absent = self.requested is not None and bool(self.absent)
        return self.intact and not self.extra and not asked_absent

    def summary(self) -> str:
        """One line: what matched, what did not."""
        parts = [f"{self.checked} files checked"]
        parts += [
            f"{len(items)} {what}"
            for what, items in (
                ("missing", self.missing),
                ("changed", self.changed),
                ("extra", self.extra),
                ("manifest errors", self.manifest_errors),
            )
            if items
        ]
        if self.absent:
            parts.append(f"absent splits: {', '.join(self.absent)} ({self.absent_files} files)")
        return ", ".join(parts)


def _walk_files(folder: Path, root: Path) -> Iterator[str]:
    """Every file (and symlink) under ``folder`` as a POSIX path relative to ``root``."""
    for current, dirs, files in os.walk(folder):
        base = Path(current)
        # a symlinked folder is not walked (os.walk does not follow it): it is listed itself
        names = files + [d for d in dirs if (base / d).is_symlink()]
        for name in names:
            yield (base / name).relative_to(root).as_posix()


def _select(m: BenchManifest, splits: Iterable[str] | None) -> tuple[str, ...] | None:
    if splits is None:
        return None
    asked = tuple(dict.fromkeys((splits,) if isinstance(splits, str) else splits))
    if not asked:
        raise DatasetError("no split given", file=m.path, field="splits")
    unknown = [s for s in asked if s not in m.splits]
    if unknown:
        raise DatasetError(
            f"unknown split {', '.join(unknown)}: the manifest's splits are {', '.join(m.splits)}",
            file=m.path,
            field="splits",
        )
    return asked


def _check_task_json(root: Path, m: BenchManifest, task: ManifestTask) -> list[str]:
    """The manifest's record of a task against the task's own ``task.json`` (its graph
    list and graph hashes, read by the one task reader)."""
    where = f"{task.split}/{task.name}/task.json"
    manifest_at = f"{m.path.name} tasks[{task.index}]"
    try:
        loaded = load_task(root / task.split / task.name)
    except PassnetError as exc:
        return [f"{task.split}/{task.name}: not a readable task: {exc}"]
    if loaded.name != task.name:
        return [f"{where}: name is {loaded.name!r}, {manifest_at}.name is {task.name!r}"]
    ours = [
        (entry, str(meta.get("graph_hash", "")))
        for entry, meta in zip(loaded.graph_entries, loaded.graph_metadata)
    ]
    if len(ours) != len(task.graphs):
        return [f"{where}: holds {len(ours)} graphs, {manifest_at} lists {len(task.graphs)}"]
    out = []
    for j, ((path, graph_hash), (want_path, want_hash)) in enumerate(zip(ours, task.graphs)):
        if path != want_path:
            out.append(
                f"{where}: graphs[{j}].path is {path!r}, {manifest_at}.graphs[{j}].path is {want_path!r}"
            )
        elif graph_hash != want_hash:
            out.append(
                f"{where}: graphs[{j}].graph_hash is {graph_hash!r}, "
                f"{manifest_at}.graphs[{j}].graph_hash is {want_hash!r}"
            )
    return out


def _check_files(
    root: Path, m: BenchManifest, listed: Sequence[str], result: BenchVerification
) -> tuple[list[str], list[ChangedFile], int]:
    """Hash the ``listed`` files under ``root`` against the manifest; add what differs to
    ``result``; return (missing, changed, bytes of the files there)."""
    missing: list[str] = []
    changed: list[ChangedFile] = []
    size = 0
    for rel in listed:
        file = root / rel
        if not file.is_file():
            missing.append(rel)
            continue
        actual = file_sha256(file)
        result.checked += 1
        size += file.stat().st_size
        if actual != m.files[rel]:
            changed.append(ChangedFile(rel, m.files[rel], actual))
    result.missing += missing
    result.changed += changed
    return missing, changed, size


def verify_bench(
    path: str | Path,
    manifest: str | Path | None = None,
    splits: Iterable[str] | None = None,
) -> BenchVerification:
    """Check a benchmark folder against a manifest (default: its own ``manifest.json``).

    Every file the manifest lists for a present split (its folder exists) is hashed:
    absent ones are ``missing``, different bytes ``changed``; files there that it does not
    list are ``extra``. A split whose folder is absent is reported as such, its files
    neither checked nor missing (the package ships only the evaluation splits). ``splits``
    restricts the check to those splits (then they must be present for :attr:`ok`). The
    manifest is checked too: each split's task and graph counts against its tasks and
    files, its bytes against the files of an intact split, and each intact task's
    ``task.json`` graphs against the manifest's (path and graph hash).

    A folder that is not there, a manifest that cannot be read (see
    :func:`read_bench_manifest`) or an unknown split raise
    :class:`~passnet.errors.DatasetError`.
    """
    root = Path(path)
    if not root.is_dir():
        raise DatasetError("not a benchmark folder (no such folder)", file=root)
    manifest_path = Path(manifest) if manifest is not None else root / MANIFEST_FILE
    if not manifest_path.is_file():
        hint = "" if manifest is not None else " (give the manifest to check against)"
        raise DatasetError(f"no manifest: {manifest_path} is not a file{hint}", file=manifest_path)
    m = read_bench_manifest(manifest_path)
    requested = _select(m, splits)
    result = BenchVerification(
        path=str(root),
        manifest=str(manifest_path),
        name=m.name,
        version=m.version,
        requested=requested,
        manifest_errors=[*m.problems, *_consistency(m)],
    )
    for split in requested if requested is not None else tuple(m.splits):
        listed = m.split_files(split)
        folder = root / split
        if not folder.is_dir():
            result.splits.append(SplitCheck(split, False, len(listed)))
            continue
        missing, changed, size = _check_files(root, m, listed, result)
        # a task whose files differ is reported by them; its task.json is not compared
        bad_tasks = {PurePosixPath(rel).parts[1] for rel in [*missing, *(c.path for c in changed)]}
        extra = sorted(set(_walk_files(folder, root)) - set(m.files))
        result.extra += extra
        result.splits.append(
            SplitCheck(
                split,
                True,
                len(listed),
                len(listed) - len(missing) - len(changed),
                len(missing),
                len(changed),
                len(extra),
            )
        )
        counts = m.splits.get(split)
        if counts is not None and not (missing or changed) and counts.bytes != size:
            result.manifest_errors.append(
                f"{m.path.name}: splits.{split}.bytes: {counts.bytes}, but the "
                f"{len(listed)} files of {split} hold {size} bytes"
            )
        for task in m.tasks:
            if task.split == split and task.name not in bad_tasks:
                result.manifest_errors += _check_task_json(root, m, task)
    if requested is None:
        top = m.top_files()
        _check_files(root, m, top, result)
        for entry in sorted(root.iterdir()):
            if entry.name == MANIFEST_FILE or (entry.name in m.splits and entry.is_dir()):
                continue
            if not entry.is_dir() or entry.is_symlink():
                if entry.name not in m.files:
                    result.extra.append(entry.name)
            elif any(rel.startswith(f"{entry.name}/") for rel in top):
                result.extra += sorted(set(_walk_files(entry, root)) - set(m.files))
            else:  # a folder the manifest knows nothing of: named once
                result.extra.append(f"{entry.name}/")
    return result


# --------------------------------------------------------------------------- packing


def _tar_info(
    name: str, *, directory: bool, size: int = 0, executable: bool = False
) -> tarfile.TarInfo:
    """A member's header that depends on its name and bytes alone: no time, owner or umask."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if directory else tarfile.REGTYPE
    info.mode = _DIR_MODE if directory else (_EXEC_MODE if executable else _FILE_MODE)
    info.size = size
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack_bench(
    bench_dir: str | Path, out_dir: str | Path, splits: Sequence[str] = EVAL_SPLITS
) -> Path:
    """Pack ``splits`` of a benchmark folder into ``out_dir/<name>-<version>.tar.xz`` and
    copy its ``manifest.json`` (every split's files) beside it; return the archive.

    The folder is verified first (:func:`verify_bench`; splits it lacks are not
    checked): a copy that does not match its manifest, or lacks one of ``splits``, is
    refused with the problems. The archive holds ``manifest.json`` and exactly the files
    the manifest lists for ``splits`` and outside every split, in sorted order, with
    their folders; every member has mtime
    0, uid/gid 0, no owner names and a fixed mode (0644, 0755 for executables and
    folders). So the same folder packs to the same bytes (with the same Python and
    liblzma), on any machine and whoever runs it.
    """
    root = Path(bench_dir)
    check = verify_bench(root)
    m = read_bench_manifest(root / MANIFEST_FILE)
    splits = _select(m, splits) or ()
    lacking = [s for s in splits if s not in check.present]
    if not check.ok or lacking:
        shown = [
            *check.manifest_errors,
            *check.missing,
            *(c.path for c in check.changed),
            *check.extra,
            *(f"split {s} is not there" for s in lacking),
        ]
        raise DatasetError(
            f"the benchmark does not match its manifest ({check.summary()}); first: "
            f"{shown[0] if shown else 'no split'} (passnet bench verify {root})",
            file=root,
        )
    files = [*m.top_files(), *(rel for split in splits for rel in m.split_files(split))]
    folders = {p.as_posix() for rel in files for p in PurePosixPath(rel).parents if p.parts}
    members = sorted([MANIFEST_FILE, *folders, *files], key=lambda p: PurePosixPath(p).parts)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    archive = out / m.archive_name

    def write(f: Any) -> None:
        # format PAX: long names get an extended header holding the name only
        with tarfile.open(fileobj=f, mode="w:xz", format=tarfile.PAX_FORMAT, preset=9) as tar:
            for name in members:
                if name in folders:
                    tar.addfile(_tar_info(name, directory=True))
                    continue
                source = root / name
                stat = source.stat()
                info = _tar_info(
                    name, directory=False, size=stat.st_size, executable=bool(stat.st_mode & 0o111)
                )
                with open(source, "rb") as data:
                    tar.addfile(info, data)

    write_atomically(archive, write)
    packed = lzma.compress((root / MANIFEST_FILE).read_bytes(), preset=9)
    write_atomically(out / SHIPPED_MANIFEST_FILE, lambda f: f.write(packed))
    log.info("packed %s (%s) into %s", ", ".join(splits), check.summary(), archive)
    return archive


# --------------------------------------------------------------------------- the shipped copy


def shipped_bench() -> tuple[BenchManifest, Path]:
    """The shipped manifest and archive (:func:`passnet.data.passbench_dir`); a
    :class:`~passnet.errors.DatasetError` that says how to build the benchmark when this
    installation has none."""
    folder = passnet.data.passbench_dir()
    manifest = folder / SHIPPED_MANIFEST_FILE
    if not manifest.is_file():
        raise DatasetError(
            f"PassBench-GN is not in this installation (the package holds no manifest of it): "
            f"{BUILD_HINT}",
            file=manifest,
        )
    m = read_bench_manifest(manifest)
    archive = folder / m.archive_name
    if not archive.is_file():
        raise DatasetError(
            f"PassBench-GN {m.version} is not in this installation: its manifest ships but "
            f"not its archive {archive.name}: {BUILD_HINT}",
            file=archive,
        )
    return m, archive


def _extract(archive: Path, into: Path) -> None:
    """Extract the archive in one pass, each member checked first: a plain file or folder
    with a relative path that stays inside (also the ``data`` filter's rules, where this
    Python has them)."""
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar:
            parts = PurePosixPath(member.name).parts
            if (
                not (member.isfile() or member.isdir())
                or member.name.startswith("/")
                or any(p in ("", ".", "..") for p in parts)
            ):
                raise DatasetError(
                    f"member {member.name!r} is not a plain file or folder inside the archive",
                    file=archive,
                )
            if hasattr(tarfile, "data_filter"):
                tar.extract(member, into, filter="data")
            else:  # Python < 3.10.12: checked above
                tar.extract(member, into)


def _write_stamp(
    target: Path, m: BenchManifest, archive: Path, digests: tuple[str, str], splits: list[str]
) -> None:
    """Stamp a copy just verified in full: its splits, and its files' stats now."""
    files = [MANIFEST_FILE, *m.top_files(), *(rel for s in splits for rel in m.split_files(s))]
    write_stamp(target, archive.name, digests, splits, files)


def _cached_copy_intact(
    target: Path, m: BenchManifest, archive: Path, digests: tuple[str, str]
) -> bool:
    """The cached folder holds every split it was unpacked with, each file the manifest
    lists for them with its bytes (files the user added, such as scores written into a
    task, are left alone), unpacked from this archive and manifest (``digests``: their
    SHA-256).

    Its stamp's stats matching is enough; else the files are hashed against the manifest
    and, when they match, the stamp is written again. Without a usable stamp the splits
    checked are those present."""
    if not target.is_dir() or not (target / MANIFEST_FILE).is_file():
        return False
    stamp = read_stamp(stamp_path(target))
    if stamp is not None and (stamp.archive_sha256, stamp.manifest_sha256) != digests:
        log.info("the shipped benchmark changed since %s was unpacked: unpacking it again", target)
        return False
    if stamp is not None and stamp.holds(target):
        return True
    if (target / MANIFEST_FILE).read_bytes() != manifest_bytes(m.path):
        return False
    check = verify_bench(target, manifest=m.path)
    splits = list(stamp.splits) if stamp is not None else check.present
    removed = [s for s in splits if s not in check.present]
    if not check.intact or removed or not splits:
        first = [
            *check.missing,
            *(c.path for c in check.changed),
            *check.manifest_errors,
            *(f"split {s} removed" for s in removed),
        ]
        log.warning(
            "the cached benchmark %s does not match its manifest (%s; first: %s): unpacking "
            "it again",
            target,
            check.summary(),
            first[0] if first else "-",
        )
        return False
    _write_stamp(target, m, archive, digests, splits)
    return True


def _unpack(archive: Path, m: BenchManifest, target: Path, digests: tuple[str, str]) -> None:
    """Unpack into a folder beside ``target``, verify it, and rename it into place (the
    old folder, if any, moved aside first and removed), then stamp it."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.unpack-", dir=target.parent))
    try:
        try:
            _extract(archive, tmp)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise DatasetError(f"cannot unpack the shipped benchmark: {exc}", file=archive) from exc
        check = verify_bench(tmp, manifest=m.path)
        same_manifest = (tmp / MANIFEST_FILE).is_file() and (
            (tmp / MANIFEST_FILE).read_bytes() == manifest_bytes(m.path)
        )
        if not (check.ok and same_manifest):
            problems = [
                *check.manifest_errors,
                *check.missing,
                *(c.path for c in check.changed),
                *check.extra,
            ]
            if not same_manifest:
                problems.insert(0, f"its {MANIFEST_FILE} is not the shipped one")
            raise DatasetError(
                f"the shipped archive does not match the shipped manifest ({check.summary()}); "
                f"first: {problems[0] if problems else 'no split'}: reinstall passnet",
                file=archive,
            )
        stamp_path(target).unlink(missing_ok=True)
        old = None
        if target.exists() or target.is_symlink():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rename(target, old / "copy")
        tmp.chmod(_DIR_MODE)  # mkdtemp made it 0700
        os.rename(tmp, target)
        _write_stamp(target, m, archive, digests, check.present)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def bench_path(split: str | None = None) -> Path:
    """The folder of the shipped PassBench-GN (or of one of its splits), unpacked once.

    The package ships the evaluation splits packed (:func:`pack_bench`) with the manifest
    of every split. The first call unpacks the archive into
    ``cache_dir()/<name>-<version>/``: into a temporary folder beside it, verified against
    the manifest, then renamed, under a lock (a concurrent caller waits, then finds the
    whole folder). A later call compares the stats of the cached files with those
    stamped when they were last verified (the module docstring): where one differs, the
    files are hashed against the manifest, and unpacked again when one is missing or
    changed (files added to it, such as scores written into a task, do not count, but
    are lost then). Raises
    :class:`~passnet.errors.DatasetError`: a ``split`` that is not a benchmark split, or
    not shipped (the train and single-op splits are rebuilt from the corpus), and an
    installation without the benchmark (the message says how to build it).
    """
    if split is not None and split not in BENCH_SPLITS:
        raise DatasetError(f"unknown split {split!r}: the splits are {', '.join(BENCH_SPLITS)}")
    cached = stamped_copy(split)
    if cached is not None:
        return cached
    m, archive = shipped_bench()
    digests = (file_sha256(archive), file_sha256(m.path))
    if split is not None and split not in m.splits:
        raise DatasetError(
            f"PassBench-GN {m.version} has no split {split!r} (its splits: {', '.join(m.splits)})"
        )
    root = cache_dir()
    target = root / f"{m.name}-{m.version}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        with cache_lock(target):
            # what a killed unpacker left behind (nobody else unpacks while the lock is held)
            for stale in root.glob(f".{target.name}.unpack-*"):
                shutil.rmtree(stale, ignore_errors=True)
            for stale in root.glob(f".{target.name}.old-*"):
                shutil.rmtree(stale, ignore_errors=True)
            if not _cached_copy_intact(target, m, archive, digests):
                log.info("unpacking %s into %s", archive, target)
                _unpack(archive, m, target, digests)
    except OSError as exc:
        raise DatasetError(
            f"cannot unpack the shipped benchmark into the cache folder: {exc} (set "
            f"{CACHE_DIR_ENV} to a writable folder)",
            file=root,
        ) from exc
    if split is not None and not (target / split).is_dir():
        shipped = [s for s in m.splits if (target / s).is_dir()]
        raise DatasetError(
            f"split {split} does not ship with passnet (only {', '.join(shipped)}); the "
            f"shipped manifest lists its files, so a rebuilt copy can be checked: {BUILD_HINT}, "
            f"then `passnet bench verify DIR --manifest {m.path} --split {split}`"
        )
    return target / split if split is not None else target
