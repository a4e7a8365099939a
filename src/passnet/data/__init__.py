"""Data shipped with passnet: the 29 real GraphNet development samples (MIT, see graphnet/LICENSE),
and the folder of the packed PassBench-GN evaluation splits (``passbench/``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["dev_samples_dir", "passbench_dir", "quickstart_list"]


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
