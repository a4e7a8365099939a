"""Data shipped with passnet: the 29 real GraphNet development samples (MIT, see graphnet/LICENSE)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["dev_samples_dir"]


def dev_samples_dir() -> Path:
    """Folder holding the shipped GraphNet samples (taken unchanged from GraphNet's ``samples/``)."""
    return Path(__file__).parent / "graphnet"
