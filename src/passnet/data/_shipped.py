"""Where the shipped PassBench-GN is unpacked, and the cheap check of that copy.

``passnet.dataset.bench_path`` unpacks the packed evaluation splits (:func:`passbench_dir
<passnet.data.passbench_dir>`) once into :func:`cache_dir`, verifies the copy in full
against the manifest and stamps it (:func:`write_stamp`, :class:`UnpackedStamp`). This
module writes and reads that stamp: :func:`stamped_copy` returns the copy when the shipped archive and
manifest are those it was unpacked from and no file of it changed size or modification
time since it was verified. It needs the standard library only (no torch), so
``passnet bench path`` answers in a fraction of a second; anything else is left to
``bench_path``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "CACHE_DIR_ENV",
    "SHIPPED_MANIFEST_FILE",
    "STAMP_SCHEMA_VERSION",
    "UnpackedStamp",
    "cache_dir",
    "cache_lock",
    "file_sha256",
    "read_stamp",
    "stamp_path",
    "stamped_copy",
    "stats_digest",
    "write_atomically",
    "write_stamp",
]

CACHE_DIR_ENV = "PASSNET_CACHE_DIR"
"""Where passnet keeps what it unpacks or measures once (the same variable as the
roofline ceilings' cache); default ``$XDG_CACHE_HOME/passnet``, else ``~/.cache/passnet``."""
SHIPPED_MANIFEST_FILE = "manifest.json.xz"
"""The manifest beside the shipped archive, compressed (it lists every split's files)."""
STAMP_SCHEMA_VERSION = 1
"""Of the stamp beside an unpacked copy (:class:`UnpackedStamp`)."""
_CHUNK = 1 << 20


def file_sha256(path: str | Path) -> str:
    """The sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def cache_dir() -> Path:
    """passnet's cache folder: ``$PASSNET_CACHE_DIR``, else ``$XDG_CACHE_HOME/passnet``,
    else ``~/.cache/passnet``."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "passnet"
    return Path.home() / ".cache" / "passnet"


@contextlib.contextmanager
def cache_lock(target: Path) -> Iterator[None]:
    """Hold the exclusive lock of an unpacked copy (a file beside it): one unpacker or
    checker at a time, across processes."""
    with open(target.with_name(f".{target.name}.lock"), "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def stamp_path(target: Path) -> Path:
    """Beside the unpacked folder: what it was unpacked from and the stats of its files
    when last verified (written once it is in place)."""
    return target.with_name(f".{target.name}.unpacked.json")


@dataclass(frozen=True)
class UnpackedStamp:
    """What a verified copy (``cache_dir()/<folder>``) was unpacked from (the archive's
    file name and SHA-256, the shipped manifest's SHA-256), its splits, the files checked
    (the manifest and those it lists for the splits and outside them) and the digest of
    their stats when they were (:func:`stats_digest`)."""

    folder: str
    archive: str
    archive_sha256: str
    manifest_sha256: str
    splits: tuple[str, ...]
    files: tuple[str, ...]
    stats_sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": STAMP_SCHEMA_VERSION, **asdict(self)}

    def holds(self, target: Path) -> bool:
        """Whether every file it lists is in ``target`` with the size and modification
        time it had when the copy was verified (stats only, nothing hashed)."""
        return target.is_dir() and stats_digest(target, self.files) == self.stats_sha256


def read_stamp(path: Path) -> UnpackedStamp | None:
    """The stamp at ``path``; None when it is missing, unreadable, of another schema,
    malformed or not named for its folder (the copy is then checked in full)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema_version") != STAMP_SCHEMA_VERSION:
            return None
        stamp = UnpackedStamp(
            str(data["folder"]),
            str(data["archive"]),
            str(data["archive_sha256"]),
            str(data["manifest_sha256"]),
            tuple(str(x) for x in data["splits"]),
            tuple(str(x) for x in data["files"]),
            str(data["stats_sha256"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    named = path.name == stamp_path(path.parent / stamp.folder).name
    return stamp if named and stamp.splits and stamp.files else None


def stats_digest(target: Path, files: Sequence[str]) -> str | None:
    """One SHA-256 over the path, size and modification time (ns) of each file under
    ``target``, in order; None when one cannot be read (missing)."""
    digest = hashlib.sha256()
    for rel in files:
        try:
            st = os.stat(target / rel)
        except OSError:
            return None
        digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def write_atomically(target: Path, write: Callable[[BinaryIO], object], mode: int = 0o644) -> None:
    """``write(file)`` into a temporary file beside ``target``, then give it ``mode`` and
    rename it there."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_stamp(
    target: Path,
    archive: str,
    digests: tuple[str, str],
    splits: Sequence[str],
    files: Sequence[str],
) -> None:
    """Stamp ``target``, a copy just verified in full: unpacked from ``archive`` (its file
    name; ``digests``: the archive's and the shipped manifest's SHA-256), holding
    ``splits``, and the stats of ``files`` now. No stamp when one of them went missing
    since the check (the copy is then checked again next time)."""
    stats = stats_digest(target, files)
    if stats is None:
        stamp_path(target).unlink(missing_ok=True)
        return
    stamp = UnpackedStamp(target.name, archive, *digests, tuple(splits), tuple(files), stats)
    record = json.dumps(stamp.to_dict()).encode() + b"\n"
    write_atomically(stamp_path(target), lambda f: f.write(record))


def stamped_copy(split: str | None = None) -> Path | None:
    """The unpacked shipped benchmark (or its ``split``) when its stamp says it was
    unpacked from the shipped archive and manifest (their SHA-256 now) and none of its
    files changed size or modification time since it was verified; None otherwise, and
    for a split it does not hold (``passnet.dataset.bench_path`` then checks in full, or
    says why). Reads no manifest and hashes no cached file."""
    import passnet.data

    folder = passnet.data.passbench_dir()
    manifest = folder / SHIPPED_MANIFEST_FILE
    root = cache_dir()
    try:
        if not manifest.is_file() or not root.is_dir():
            return None
        manifest_sha256 = file_sha256(manifest)
        for path in sorted(root.glob(".*.unpacked.json")):
            stamp = read_stamp(path)
            if stamp is None or stamp.manifest_sha256 != manifest_sha256:
                continue
            if split is not None and split not in stamp.splits:
                return None
            archive, target = folder / stamp.archive, root / stamp.folder
            with cache_lock(target):
                fresh = archive.is_file() and file_sha256(archive) == stamp.archive_sha256
                if fresh and stamp.holds(target):
                    return target / split if split is not None else target
            return None
    except OSError:
        return None  # bench_path reports what cannot be read or written
    return None
