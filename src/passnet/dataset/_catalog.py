"""An SQLite catalog of samples, subgraphs, tasks and their provenance.

One file, stdlib :mod:`sqlite3`. Tables (schema version in ``meta``):

* ``samples`` — every sample folder (whole graphs and subgraphs alike): kind,
  source, model name, canonical hash, op count, op sequence, input shapes and
  dtypes, the sample it duplicates, its validation outcome, provenance (JSON);
* ``subgraphs`` — a subgraph sample's parent and its op range ``[start, stop)``
  over the parent's call nodes;
* ``tasks`` and ``task_samples`` — benchmark tasks and the samples they hold.

Paths are stored resolved (absolute). Adding a sample again updates its row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from passnet.dataset._hash import CanonicalGraph, canonical_graph
from passnet.errors import StoreError
from passnet.sample import Sample, load_sample

__all__ = [
    "CATALOG_SCHEMA_VERSION",
    "COUNT_KEYS",
    "Catalog",
    "SampleRecord",
    "TaskRecord",
    "sample_kind",
    "sample_provenance",
]

CATALOG_SCHEMA_VERSION = 1
COUNT_KEYS = ("source", "kind", "op_count", "validation", "model")
"""What :meth:`Catalog.counts` can group by."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT,
    model_name TEXT,
    graph_hash TEXT,
    op_count INTEGER NOT NULL,
    ops TEXT NOT NULL,
    ops_key TEXT NOT NULL,
    input_shapes TEXT NOT NULL,
    input_dtypes TEXT NOT NULL,
    duplicate_of INTEGER REFERENCES samples(id) ON DELETE SET NULL,
    validation_status TEXT,
    validation TEXT,
    provenance TEXT NOT NULL,
    added_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_hash ON samples(graph_hash);
CREATE INDEX IF NOT EXISTS samples_kind ON samples(kind);
CREATE TABLE IF NOT EXISTS subgraphs (
    sample_id INTEGER PRIMARY KEY REFERENCES samples(id) ON DELETE CASCADE,
    parent_id INTEGER NOT NULL REFERENCES samples(id) ON DELETE CASCADE,
    start INTEGER NOT NULL,
    stop INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS subgraphs_parent ON subgraphs(parent_id);
CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    path TEXT,
    kind TEXT,
    split TEXT,
    ops TEXT,
    dtypes TEXT,
    extra TEXT NOT NULL,
    added_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS task_samples (
    task_id INTEGER NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    sample_id INTEGER NOT NULL REFERENCES samples(id) ON DELETE CASCADE,
    PRIMARY KEY (task_id, sample_id)
);
"""


@dataclass
class SampleRecord:
    """One row of ``samples``."""

    id: int
    path: str
    name: str
    kind: str
    source: str | None
    model_name: str | None
    graph_hash: str | None
    op_count: int
    ops: list[str]
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    duplicate_of: str | None = None
    """Path of the sample this one duplicates (same hash), if any."""
    validation_status: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    parent: str | None = None
    """Path of the parent sample when this is a subgraph."""
    op_range: tuple[int, int] | None = None
    """``[start, stop)`` over the parent's call nodes, for a subgraph."""

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["op_range"] = list(self.op_range) if self.op_range else None
        return d


@dataclass
class TaskRecord:
    """One row of ``tasks`` with the paths of its samples."""

    id: int
    name: str
    path: str | None
    kind: str | None
    split: str | None
    ops: list[str] | None
    dtypes: list[str] | None
    extra: dict[str, Any]
    samples: list[str]


_VARIANT_KEYS = ("generalization", "dtype_generalization")


def sample_kind(sample: Sample) -> str:
    """The catalog kind of a sample, from its ``graph_net.json``: ``variant`` for a dtype or
    shape variant (``generalization`` / ``dtype_generalization``), the subgraph kind
    (``fusible``, ``classical``, ``single-op``, ``pass-site``) for a subgraph, else
    ``graph``."""
    if any(isinstance(sample.graph_net.get(k), dict) for k in _VARIANT_KEYS):
        return "variant"
    subgraph = sample.graph_net.get("subgraph")
    if isinstance(subgraph, dict) and subgraph.get("kind"):
        return str(subgraph["kind"])
    return "graph"


def sample_provenance(sample: Sample) -> dict[str, Any]:
    """What a sample records about where it came from (``subgraph`` and variant provenance
    of its ``graph_net.json``)."""
    return {
        k: sample.graph_net[k]
        for k in ("subgraph", *_VARIANT_KEYS)
        if isinstance(sample.graph_net.get(k), dict)
    }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


def _ops_key(ops: Sequence[str]) -> str:
    # Delimited so a LIKE on "|op|" matches whole names only.
    return "|" + "|".join(ops) + "|"


def _op_bucket(count: int) -> tuple[int, str]:
    if count < 2:
        return count, str(count)
    low = 1 << (count.bit_length() - 1)
    return low, f"{low}-{2 * low - 1}"


def op_matches(query: str, op: str) -> bool:
    """A query op names a canonical op exactly or by its last part (``linear`` ~ ``F.linear``)."""
    return query == op or query == op.rsplit(".", 1)[-1]


class Catalog:
    """The dataset catalog at ``path`` (created if missing). Use as a context manager."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30.0)
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open catalog: {exc}", file=self.path) from exc
        if row is None:
            with self._db:
                self._db.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (str(CATALOG_SCHEMA_VERSION),)
                )
        elif int(row[0]) > CATALOG_SCHEMA_VERSION:
            raise StoreError(
                f"catalog schema {row[0]} is newer than this passnet ({CATALOG_SCHEMA_VERSION})",
                file=self.path,
            )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def add_sample(
        self,
        path: str | Path,
        *,
        kind: str = "graph",
        source: str | None = None,
        provenance: dict[str, Any] | None = None,
        sample: Sample | None = None,
        graph: CanonicalGraph | None = None,
    ) -> int:
        """Record a sample folder (loading and tracing it unless ``sample``/``graph`` are
        given) and return its id. ``source`` defaults to ``graph_net.json``'s.

        Raises :class:`~passnet.errors.SampleError` / ``DatasetError`` for a sample that
        cannot be loaded or traced.
        """
        sample = sample or load_sample(path)
        graph = graph or canonical_graph(sample)
        key = _key(path)
        row = {
            "path": key,
            "name": sample.name,
            "kind": kind,
            "source": source or _str_or_none(sample.graph_net.get("source")),
            "model_name": _str_or_none(sample.graph_net.get("model_name")),
            "graph_hash": graph.graph_hash,
            "op_count": len(graph.ops),
            "ops": json.dumps(graph.ops),
            "ops_key": _ops_key(graph.ops),
            "input_shapes": json.dumps([list(i.shape) for i in graph.inputs]),
            "input_dtypes": json.dumps([i.dtype for i in graph.inputs]),
            "provenance": json.dumps(provenance or {}, sort_keys=True),
            "added_at": _now(),
        }
        columns = ", ".join(row)
        updates = ", ".join(f"{c} = excluded.{c}" for c in row if c not in ("path", "added_at"))
        with self._db:
            self._db.execute(
                f"INSERT INTO samples ({columns}) VALUES ({', '.join('?' * len(row))}) "
                f"ON CONFLICT(path) DO UPDATE SET {updates}",
                tuple(row.values()),
            )
        return self._id(key)

    def add_subgraph(
        self,
        parent: str | Path | int,
        range: tuple[int, int],  # noqa: A002 - the issue's name for it
        path: str | Path,
        *,
        kind: str,
        provenance: dict[str, Any] | None = None,
        sample: Sample | None = None,
    ) -> int:
        """Record subgraph sample ``path`` of ``parent`` (a path or id; added if missing),
        covering call nodes ``range = (start, stop)`` of the parent. Returns its id."""
        start, stop = range
        if not 0 <= start < stop:
            raise ValueError(f"subgraph range must satisfy 0 <= start < stop, got {range}")
        parent_id = parent if isinstance(parent, int) else self._ensure(parent)
        info = dict(provenance or {})
        info.setdefault("parent", self._path_of(parent_id))
        info.setdefault("range", [start, stop])
        sample_id = self.add_sample(path, kind=kind, provenance=info, sample=sample)
        with self._db:
            self._db.execute(
                "INSERT INTO subgraphs VALUES (?, ?, ?, ?) ON CONFLICT(sample_id) DO UPDATE SET "
                "parent_id = excluded.parent_id, start = excluded.start, stop = excluded.stop",
                (sample_id, parent_id, start, stop),
            )
        return sample_id

    def add_task(
        self,
        name: str,
        *,
        samples: Iterable[str | Path | int] = (),
        path: str | Path | None = None,
        kind: str | None = None,
        split: str | None = None,
        ops: Sequence[str] | None = None,
        dtypes: Sequence[str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Record a benchmark task and its samples (paths or ids; paths are added if missing)."""
        ids = [s if isinstance(s, int) else self._ensure(s) for s in samples]
        with self._db:
            self._db.execute(
                "INSERT INTO tasks (name, path, kind, split, ops, dtypes, extra, added_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET path = excluded.path, kind = excluded.kind, split = excluded.split, "
                "ops = excluded.ops, dtypes = excluded.dtypes, extra = excluded.extra",
                (
                    name,
                    _key(path) if path else None,
                    kind,
                    split,
                    json.dumps(list(ops)) if ops is not None else None,
                    json.dumps(list(dtypes)) if dtypes is not None else None,
                    json.dumps(extra or {}, sort_keys=True),
                    _now(),
                ),
            )
            task_id = self._db.execute("SELECT id FROM tasks WHERE name = ?", (name,)).fetchone()[0]
            self._db.execute("DELETE FROM task_samples WHERE task_id = ?", (task_id,))
            self._db.executemany(
                "INSERT OR IGNORE INTO task_samples VALUES (?, ?)", [(task_id, i) for i in ids]
            )
        return int(task_id)

    def mark_duplicate(self, path: str | Path, of: str | Path | None) -> None:
        """Record that ``path`` has the same graph as ``of`` (None clears it)."""
        of_id = self._ensure(of) if of is not None else None
        sample_id = self._ensure(path)
        with self._db:
            self._db.execute("UPDATE samples SET duplicate_of = ? WHERE id = ?", (of_id, sample_id))

    def record_validation(
        self, path: str | Path, status: str, failed: list[dict[str, Any]]
    ) -> None:
        """Store a validation outcome (``ok`` / ``sample_error``) and its failed checks."""
        key = _key(path)
        with self._db:
            cur = self._db.execute(
                "UPDATE samples SET validation_status = ?, validation = ? WHERE path = ?",
                (status, json.dumps(failed), key),
            )
        if cur.rowcount == 0:
            raise StoreError("sample is not in the catalog", file=self.path, sample=key)

    # ------------------------------------------------------------------ reading

    def has_sample(self, path: str | Path) -> bool:
        return (
            self._db.execute("SELECT 1 FROM samples WHERE path = ?", (_key(path),)).fetchone()
            is not None
        )

    def get_sample(self, path: str | Path) -> SampleRecord | None:
        rows = self._select("WHERE s.path = ?", (_key(path),))
        return rows[0] if rows else None

    def samples(self, *, kind: str | None = None, unique: bool = False) -> list[SampleRecord]:
        """All samples (of one kind; without duplicates when ``unique``), by path."""
        clauses, params = [], []
        if kind is not None:
            clauses.append("s.kind = ?")
            params.append(kind)
        if unique:
            clauses.append("s.duplicate_of IS NULL")
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        return self._select(where + " ORDER BY s.path", tuple(params))

    def subgraphs(self, parent: str | Path) -> list[SampleRecord]:
        """The subgraphs recorded for ``parent``, by range."""
        return self._select("WHERE p.path = ? ORDER BY g.start, g.stop", (_key(parent),))

    def tasks(self) -> list[TaskRecord]:
        out = []
        for row in self._db.execute(
            "SELECT id, name, path, kind, split, ops, dtypes, extra FROM tasks ORDER BY name"
        ):
            members = [
                r[0]
                for r in self._db.execute(
                    "SELECT s.path FROM task_samples t JOIN samples s ON s.id = t.sample_id WHERE t.task_id = ? ORDER BY s.path",
                    (row[0],),
                )
            ]
            out.append(
                TaskRecord(
                    row[0],
                    row[1],
                    row[2],
                    row[3],
                    row[4],
                    json.loads(row[5]) if row[5] else None,
                    json.loads(row[6]) if row[6] else None,
                    json.loads(row[7]),
                    members,
                )
            )
        return out

    def counts(self, by: str, *, unique: bool = False) -> list[tuple[str, int]]:
        """Number of samples per ``source``, ``kind``, ``model``, ``validation`` status or
        ``op_count`` bucket (1, 2-3, 4-7, ...); ``unique`` leaves duplicates out."""
        if by not in COUNT_KEYS:
            raise ValueError(f"cannot count by {by!r}; choose from {', '.join(COUNT_KEYS)}")
        where = "WHERE duplicate_of IS NULL" if unique else ""
        if by == "op_count":
            buckets: dict[tuple[int, str], int] = {}
            for (count,) in self._db.execute(f"SELECT op_count FROM samples {where}"):
                bucket = _op_bucket(int(count))
                buckets[bucket] = buckets.get(bucket, 0) + 1
            return [(label, n) for (_, label), n in sorted(buckets.items())]
        column = {"validation": "validation_status", "model": "model_name"}.get(by, by)
        rows = self._db.execute(
            f"SELECT COALESCE({column}, '(none)'), COUNT(*) FROM samples {where} GROUP BY 1 ORDER BY 2 DESC, 1"
        )
        return [(str(k), int(n)) for k, n in rows]

    def find(
        self, ops: Sequence[str], *, kind: str | None = None
    ) -> list[tuple[SampleRecord, int]]:
        """Samples whose op sequence contains ``ops`` contiguously, with the first position.

        A query op matches a canonical name exactly or by its last part: ``linear`` finds
        ``F.linear``, ``Tensor.view`` finds only the method.
        """
        if not ops:
            raise ValueError("find needs at least one op")
        clauses, params = [], []
        for op in ops:
            clauses.append(r"s.ops_key LIKE ? ESCAPE '\'")
            params.append("%" + _like_escape(op) + "|%")
        if kind is not None:
            clauses.append("s.kind = ?")
            params.append(kind)
        found = []
        for record in self._select(
            "WHERE " + " AND ".join(clauses) + " ORDER BY s.path", tuple(params)
        ):
            seq = record.ops
            for i in range(len(seq) - len(ops) + 1):
                if all(op_matches(q, seq[i + j]) for j, q in enumerate(ops)):
                    found.append((record, i))
                    break
        return found

    # ------------------------------------------------------------------ internals

    def _id(self, key: str) -> int:
        row = self._db.execute("SELECT id FROM samples WHERE path = ?", (key,)).fetchone()
        if row is None:
            raise StoreError("sample is not in the catalog", file=self.path, sample=key)
        return int(row[0])

    def _ensure(self, path: str | Path) -> int:
        key = _key(path)
        row = self._db.execute("SELECT id FROM samples WHERE path = ?", (key,)).fetchone()
        return int(row[0]) if row else self.add_sample(path)

    def _path_of(self, sample_id: int) -> str:
        row = self._db.execute("SELECT path FROM samples WHERE id = ?", (sample_id,)).fetchone()
        if row is None:
            raise StoreError(f"no sample with id {sample_id}", file=self.path)
        return str(row[0])

    def _select(self, tail: str, params: tuple[Any, ...]) -> list[SampleRecord]:
        query = (
            "SELECT s.id, s.path, s.name, s.kind, s.source, s.model_name, s.graph_hash, s.op_count, s.ops, "
            "s.input_shapes, s.input_dtypes, d.path, s.validation_status, s.provenance, p.path, g.start, g.stop "
            "FROM samples s LEFT JOIN samples d ON d.id = s.duplicate_of "
            "LEFT JOIN subgraphs g ON g.sample_id = s.id LEFT JOIN samples p ON p.id = g.parent_id "
        )
        out = []
        for r in self._db.execute(query + tail, params):
            out.append(
                SampleRecord(
                    id=r[0],
                    path=r[1],
                    name=r[2],
                    kind=r[3],
                    source=r[4],
                    model_name=r[5],
                    graph_hash=r[6],
                    op_count=r[7],
                    ops=json.loads(r[8]),
                    input_shapes=json.loads(r[9]),
                    input_dtypes=json.loads(r[10]),
                    duplicate_of=r[11],
                    validation_status=r[12],
                    provenance=json.loads(r[13]),
                    parent=r[14],
                    op_range=(r[15], r[16]) if r[15] is not None else None,
                )
            )
        return out


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_")


def _str_or_none(value: Any) -> str | None:
    return str(value) if value is not None else None
