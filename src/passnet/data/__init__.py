"""Data shipped with passnet: the 29 real GraphNet development samples (MIT, see graphnet/LICENSE),
the folder of the packed PassBench-GN evaluation splits (``passbench/``), and where they
are unpacked (the cache folder, the stamp of a verified copy: :mod:`._shipped`)."""

from __future__ import annotations

from pathlib import Path

from passnet.data._shipped import (
    CACHE_DIR_ENV,
    SHIPPED_MANIFEST_FILE,
    STAMP_SCHEMA_VERSION,
    UnpackedStamp,
    cache_dir,
    cache_lock,
    file_sha256,
    read_stamp,
    stamp_path,
    stamped_copy,
    stats_digest,
    write_atomically,
    write_stamp,
)

__all__ = [
    "CACHE_DIR_ENV",
    "SHIPPED_MANIFEST_FILE",
    "STAMP_SCHEMA_VERSION",
    "UnpackedStamp",
    "cache_dir",
    "cache_lock",
    "dev_samples_dir",
    "file_sha256",
    "passbench_dir",
    "quickstart_list",
    "read_stamp",
    "stamp_path",
    "stamped_copy",
    "stats_digest",
    "write_atomically",
    "write_stamp",
]


def dev_samples_dir() -> Path:
    """Folder holding the shipped GraphNet samples (taken unchanged from GraphNet's ``samples/``)."""
    return Path(__file__).parent / "graphnet"


def quickstart_list() -> Path:
    """A list file of a few shipped samples for a first run in minutes (``passnet samples
    --quick``): small graphs that show an ok result, an accuracy failure and a slowdown."""
    return Path(__file__).parent / "quickstart.txt"


def passbench_dir() -> Path:
    """Folder of the shipped PassBench-GN: ``manifest.json.xz`` (every split's files, compressed) and the
    archive of its evaluation splits, ``<name>-<version>.tar.xz`` (``passnet bench pack``).
    It may be absent: an installation without the benchmark (``passnet bench path`` says
    how to build it)."""
    return Path(__file__).parent / "passbench"
