"""Memory bounds of a child process and how to tell that the host ran out.

A child that bounds its own data segment (:func:`limit_data_segment`) fails an allocation
beyond the bound inside itself, where it can report it, instead of drawing the kernel's
OOM killer (which ends the child with SIGKILL, or ends something else). What the child
then raises or writes to its stderr names the failed allocation
(:func:`mentions_host_oom`, :func:`out_of_host_memory`).
"""

from __future__ import annotations

import resource
from pathlib import Path

from passnet.errors import exception_chain

__all__ = [
    "host_available_bytes",
    "limit_data_segment",
    "mentions_host_oom",
    "out_of_host_memory",
]

_MEMINFO = Path("/proc/meminfo")


def host_available_bytes() -> int | None:
    """The kernel's ``MemAvailable`` (what can be allocated without swapping), in bytes;
    None where it cannot be told."""
    try:
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def limit_data_segment(limit: int) -> int:
    """Set this process's ``RLIMIT_DATA`` soft limit to ``limit`` bytes (never above the
    hard limit): an allocation beyond it fails in the process. Returns the limit set."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    return soft


_OOM_MARKS = ("can't allocate memory", "cannot allocate memory", "not enough memory", "bad_alloc")


def mentions_host_oom(text: str) -> bool:
    """``text`` (an error message, a child's stderr) says a host allocation failed."""
    lowered = text.lower()
    return any(mark in lowered for mark in _OOM_MARKS)


def out_of_host_memory(exc: BaseException) -> bool:
    """An allocation in host memory failed somewhere in the exception's chain."""
    return any(
        isinstance(e, MemoryError) or mentions_host_oom(str(e)) for e in exception_chain(exc)
    )
