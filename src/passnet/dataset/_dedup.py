"""Deduplicate samples by canonical graph hash: keep one per hash, record the others.

The sample kept is the first in the order given (``find_samples`` sorts folders), so
the outcome is deterministic. Samples that cannot be hashed are listed as errors and
neither kept nor dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from passnet.dataset._hash import HashResult, hash_samples
from passnet.errors import InputFormatError
from passnet.status import Status

__all__ = ["DEDUP_SCHEMA_VERSION", "DedupGroup", "DedupReport", "dedup"]

DEDUP_SCHEMA_VERSION = 1


@dataclass
class DedupGroup:
    """Samples sharing one graph hash."""

    graph_hash: str
    kept: str
    duplicates: list[str] = field(default_factory=list)


@dataclass
class DedupReport:
    """The outcome of one deduplication."""

    groups: list[DedupGroup]
    errors: list[HashResult] = field(default_factory=list)
    schema_version: int = DEDUP_SCHEMA_VERSION

    @property
    def kept(self) -> list[str]:
        return [g.kept for g in self.groups]

    @property
    def duplicates(self) -> dict[str, str]:
        """Duplicate sample → the sample kept in its place."""
        return {d: g.kept for g in self.groups for d in g.duplicates}

    @property
    def total(self) -> int:
        return sum(1 + len(g.duplicates) for g in self.groups) + len(self.errors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "total": self.total,
            "unique": len(self.groups),
            "duplicates": sum(len(g.duplicates) for g in self.groups),
            "errors": [e.to_dict() for e in self.errors],
            "groups": [
                {"graph_hash": g.graph_hash, "kept": g.kept, "duplicates": g.duplicates}
                for g in self.groups
            ],
        }

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def read(cls, path: str | Path) -> DedupReport:
        try:
            d = json.loads(Path(path).read_text())
            if d.get("schema_version", 1) > DEDUP_SCHEMA_VERSION:
                raise InputFormatError(
                    f"dedup report schema {d['schema_version']} is newer than this passnet",
                    file=path,
                )
            groups = [
                DedupGroup(g["graph_hash"], g["kept"], list(g["duplicates"])) for g in d["groups"]
            ]
            errors = [
                HashResult(
                    e["sample"],
                    Status(e["status"]),
                    e.get("graph_hash", ""),
                    e.get("op_count", 0),
                    e.get("error", ""),
                )
                for e in d.get("errors", [])
            ]
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise InputFormatError(f"not a dedup report: {exc}", file=path) from exc
        return cls(groups, errors)


def group_by_hash(results: Iterable[HashResult]) -> DedupReport:
    """Group hash results: the first sample of each hash is kept."""
    groups: dict[str, DedupGroup] = {}
    errors = []
    for r in results:
        if r.status is not Status.OK:
            errors.append(r)
        elif r.graph_hash in groups:
            groups[r.graph_hash].duplicates.append(r.sample)
        else:
            groups[r.graph_hash] = DedupGroup(r.graph_hash, r.sample)
    return DedupReport(list(groups.values()), errors)


def dedup(
    paths: Iterable[str | Path], on_result: Callable[[HashResult], None] | None = None
) -> DedupReport:
    """Hash every sample and keep the first of each hash (see the module doc)."""
    return group_by_hash(hash_samples(paths, on_result=on_result))
