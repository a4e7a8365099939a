"""The result store of a run folder: ``results.jsonl`` (source of truth) mirrored in ``results.sqlite``.

Each record is appended as one line with a single ``write`` and ``fsync``-ed
before the next evaluation starts, so a run killed with SIGKILL loses no finished
record; a torn last line (killed mid-write) is dropped on open. SQLite is rebuilt
from the JSON Lines whenever the two disagree.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from passnet.errors import InputFormatError, StoreError
from passnet.evaluate import EvalRecord, read_records, record_from_json

__all__ = ["ResultStore", "read_records"]

log = logging.getLogger(__name__)

JSONL = "results.jsonl"
SQLITE = "results.sqlite"

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
"""


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
        self._records: dict[tuple[str, ...], EvalRecord] = {}
        if self.jsonl.exists():
            self._repair_tail()
            for rec in read_records(self.jsonl):
                self._records[rec.key] = rec
        self._slots = {rec.slot: key for key, rec in self._records.items()}
        self._db = self._open_db()

    def _repair_tail(self) -> None:
        data = self.jsonl.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            try:
                record_from_json(data[cut:].decode("utf-8"))
            except (InputFormatError, UnicodeDecodeError):
                log.warning(
                    "%s: truncating a torn final record (%d bytes)", self.jsonl, len(data) - cut
                )
                with open(self.jsonl, "r+b") as f:
                    f.truncate(cut)
            else:  # a whole record that only lacks its newline: keep it
                with open(self.jsonl, "ab") as f:
                    f.write(b"\n")

    def _open_db(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.dir / SQLITE, check_same_thread=False)
            db.executescript(_SCHEMA)
            (count,) = db.execute("SELECT COUNT(*) FROM records").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store: {exc}", path=self.dir / SQLITE) from exc
        if count != len(self._records):
            db.execute("DELETE FROM records")
            for rec in self._records.values():
                self._insert(db, rec)
            db.commit()
        return db

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
        line = (rec.to_json() + "\n").encode()
        with self._lock:
            fd = os.open(self.jsonl, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
            stale = self._slots.pop(rec.slot, None)
            if stale is not None:  # superseded, as read_records reads the file
                self._records.pop(stale, None)
            self._records[rec.key] = rec
            self._slots[rec.slot] = rec.key
            self._db.execute(
                "DELETE FROM records WHERE graph=? AND compiler=? AND config_hash=? AND device=?",
                rec.slot,
            )
            self._insert(self._db, rec)
            self._db.commit()

    def close(self) -> None:
        self._db.close()

    def dump_json(self) -> str:
        return json.dumps([r.to_dict() for r in self.records()], indent=1)
