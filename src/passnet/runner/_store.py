"""The result store of a run folder: ``results.jsonl`` (source of truth) mirrored in ``results.sqlite``.

Each record is appended as one line with a single ``write`` and ``fsync``-ed
(:func:`passnet.record.append_jsonl`) before the next evaluation starts, so a run killed
with SIGKILL loses no finished record; a torn last line (killed mid-write) is cut off on
open (:func:`passnet.record.repair_jsonl_tail`). SQLite is a mirror:
it remembers the size of the JSON Lines it mirrors, and is rebuilt from them on open
whenever they differ (a kill between the two writes, a line appended by hand, a
mirror that could not be written because a reader held it). A mirror that is not an
SQLite database, or a damaged one, is renamed to ``results.sqlite.corrupt-<UTC time>``
and rebuilt, with a warning. One run at a time may write a folder: the store holds an
exclusive lock on ``.passnet.lock`` while open.
"""

from __future__ import annotations

import datetime
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from passnet.errors import StoreError
from passnet.record import EvalRecord, append_jsonl, read_records, repair_jsonl_tail

try:
    import fcntl
except ImportError:  # not POSIX: no lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["ResultStore", "read_records"]

log = logging.getLogger(__name__)

JSONL = "results.jsonl"
SQLITE = "results.sqlite"
LOCK = ".passnet.lock"
_BUSY_TIMEOUT_S = 30.0
"""How long a write to the SQLite mirror waits for a reader that holds it."""
_COLUMNS = [
    "graph",
    "graph_hash",
    "compiler",
    "config_hash",
    "device",
    "status",
    "speedup_e2e",
    "speedup_device",
    "finished_at",
    "record",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    graph TEXT NOT NULL,
    graph_hash TEXT NOT NULL,
    compiler TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    device TEXT NOT NULL,
    status TEXT NOT NULL,
    speedup_e2e REAL,
    speedup_device REAL,
    finished_at TEXT,
    record TEXT NOT NULL,
    PRIMARY KEY (graph, graph_hash, compiler, config_hash, device)
);
CREATE TABLE IF NOT EXISTS mirror (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
"""SQLite's result codes for a damaged database and for a file that is not a database."""
_SIDECARS = ("-journal", "-wal", "-shm")
"""SQLite's files next to a database, which belong to it (a hot journal is applied on open)."""


def _is_damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether SQLite refused the file itself (not a database, or damaged), rather than access
    to it (locked, unreadable): only such a mirror is rebuilt."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)  # primary code of extended ones
    return str(exc) in ("file is not a database", "database disk image is malformed")


def _move_aside(path: Path) -> Path:
    """Rename ``path`` (and its journal files) to a name of its own, ``NAME.corrupt-<UTC time>``."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while any(aside.with_name(aside.name + s).exists() for s in ("", *_SIDECARS)):
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        os.rename(path, aside)
        for suffix in _SIDECARS:
            sidecar = path.with_name(path.name + suffix)
            if sidecar.exists():
                os.rename(sidecar, aside.with_name(aside.name + suffix))
    except OSError as exc:
        raise StoreError(
            f"the SQLite mirror is damaged and cannot be moved aside to {aside.name}: "
            f"{exc.strerror}",
            path=path,
        ) from exc
    return aside


class ResultStore:
    """Append-only store of evaluation records in a run folder."""

    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create output folder: {exc.strerror}", path=self.dir) from exc
        self.jsonl = self.dir / JSONL
        self._lock = threading.Lock()
        self._lock_fd = self._take_folder()
        self._records: dict[tuple[str, ...], EvalRecord] = {}
        try:
            if self.jsonl.exists() or self.jsonl.is_symlink():
                if not self.jsonl.is_file():
                    raise StoreError("the results file is not a regular file", path=self.jsonl)
                repair_jsonl_tail(self.jsonl)  # a torn last line cut off, a whole one ended
                for rec in read_records(self.jsonl):
                    self._records[rec.key] = rec
            self._slots = {rec.slot: key for key, rec in self._records.items()}
            self._db = self._open_db()
        except OSError as exc:
            self._release()
            raise StoreError(
                f"cannot use the results file: {exc.strerror}", path=self.jsonl
            ) from exc
        except BaseException:
            self._release()
            raise

    def _take_folder(self) -> int | None:
        """Open and lock ``.passnet.lock``: a second run into the same folder is refused."""
        path = self.dir / LOCK
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(
                f"cannot write to the output folder: {exc.strerror}", path=self.dir
            ) from exc
        if fcntl is None:
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            owner = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise StoreError(
                f"another passnet run (pid {owner}) is writing to this folder; wait for it "
                "to finish, or use another --out",
                path=self.dir,
            ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the lock
            self._lock_fd = None

    def _jsonl_size(self) -> int:
        return self.jsonl.stat().st_size if self.jsonl.exists() else 0

    def _open_db(self) -> sqlite3.Connection:
        path = self.dir / SQLITE
        try:
            return self._sync_db(path)
        except sqlite3.DatabaseError as exc:
            if not _is_damaged(exc):
                raise StoreError(f"cannot open SQLite store: {exc}", path=path) from exc
            # The JSON Lines are the records; a mirror that is no database is kept aside
            # (never deleted: it is evidence of what went wrong) and built again.
            aside = _move_aside(path)
            log.warning(
                "%s is not a usable SQLite database (%s): moved to %s, and the mirror is "
                "rebuilt from %s",
                path,
                exc,
                aside,
                self.jsonl,
            )
        try:
            return self._sync_db(path)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store: {exc}", path=path) from exc

    def _sync_db(self, path: Path) -> sqlite3.Connection:
        """Open the mirror and bring it up to date with the records read from the JSON Lines."""
        db = sqlite3.connect(path, check_same_thread=False, timeout=_BUSY_TIMEOUT_S)
        try:
            db.executescript(_SCHEMA)
            columns = [row[1] for row in db.execute("PRAGMA table_info(records)")]
            if columns != _COLUMNS:  # not this mirror's table: it is rebuilt
                log.warning("%s: unexpected records table %s, rebuilt", path, columns)
                db.executescript("DROP TABLE records;" + _SCHEMA)
            (count,) = db.execute("SELECT COUNT(*) FROM records").fetchone()
            row = db.execute("SELECT value FROM mirror WHERE key='jsonl_size'").fetchone()
            if count != len(self._records) or row is None or row[0] != self._jsonl_size():
                db.execute("DELETE FROM records")
                for rec in self._records.values():
                    self._insert(db, rec)
                self._mark(db)
                db.commit()
        except BaseException:
            db.close()
            raise
        return db

    def _mark(self, db: sqlite3.Connection) -> None:
        """Record the size of the JSON Lines the mirror now holds (in the caller's transaction)."""
        db.execute("INSERT OR REPLACE INTO mirror VALUES ('jsonl_size', ?)", (self._jsonl_size(),))

    @staticmethod
    def _insert(db: sqlite3.Connection, rec: EvalRecord) -> None:
        db.execute(
            "INSERT OR REPLACE INTO records VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                *rec.key,
                rec.status.value,
                rec.speedup_e2e,
                rec.speedup_device,
                rec.finished_at,
                rec.to_json(),
            ),
        )

    def __contains__(self, key: tuple[str, ...]) -> bool:
        return key in self._records

    def __len__(self) -> int:
        return len(self._records)

    def get(self, key: tuple[str, ...]) -> EvalRecord | None:
        return self._records.get(key)

    def records(self) -> list[EvalRecord]:
        return list(self._records.values())

    def __iter__(self) -> Iterator[EvalRecord]:
        return iter(self.records())

    def add(self, rec: EvalRecord) -> None:
        """Persist one record durably (JSONL fsync, then SQLite commit)."""
        with self._lock:
            try:
                append_jsonl(self.jsonl, rec.to_dict())
            except OSError as exc:
                raise StoreError(
                    f"cannot append a record: {exc.strerror}", path=self.jsonl
                ) from exc
            stale = self._slots.pop(rec.slot, None)
            if stale is not None:  # superseded, as read_records reads the file
                self._records.pop(stale, None)
            self._records[rec.key] = rec
            self._slots[rec.slot] = rec.key
            try:
                self._db.execute(
                    "DELETE FROM records WHERE graph=? AND compiler=? AND config_hash=? AND device=?",
                    rec.slot,
                )
                self._insert(self._db, rec)
                self._mark(self._db)
                self._db.commit()
            except sqlite3.Error as exc:
                # The record is safe in the JSON Lines; the mirror, left behind, is rebuilt
                # from them when the folder is next opened.
                self._db.rollback()
                log.warning(
                    "%s: the SQLite mirror was not updated (%s); %s holds the record, and "
                    "the mirror is rebuilt from it on the next run",
                    self.dir / SQLITE,
                    exc,
                    self.jsonl,
                )

    def close(self) -> None:
        """Close the mirror and release the folder (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None  # type: ignore[assignment]
        self._release()
