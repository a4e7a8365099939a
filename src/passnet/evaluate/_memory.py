"""Will a sample fit? Decided from its metadata, before any of its tensors exists.

An evaluation holds a sample's tensors about three times at once: the first input draw,
the second (the fresh-input re-check) and the clones each call gets. A sample whose
tensors alone would not fit that many times in the memory the device has free is not
evaluated: it ends as ``too_large`` (:class:`~passnet.errors.TooLarge`), where running it
would end in an out-of-memory kill of the child (or, on a machine without swap
headroom, of whatever else the kernel picks). Activations come on top and are not
known from metadata: a sample that passes can still run out of memory. On the CPU the
child therefore bounds its own data segment to the memory available when it starts
(:func:`bound_memory`): an allocation beyond it fails inside the child, which ends as
``too_large`` naming the stage, instead of the kernel's OOM killer ending the child with
SIGKILL (or ending something else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passnet.errors import TooLarge
from passnet.isolate import host_available_bytes, limit_data_segment

if TYPE_CHECKING:
    from passnet.sample import Sample

__all__ = [
    "COPIES",
    "available_bytes",
    "bound_memory",
    "check_fits",
]

COPIES = 3
"""How many times an evaluation holds a sample's tensors at once (two draws, call clones)."""


def available_bytes(device: str) -> int | None:
    """Memory free for new tensors on ``device``: on the CPU the kernel's ``MemAvailable``
    (what can be allocated without swapping), on CUDA the device's free memory (this
    creates the CUDA context: call it where the evaluation will run); None where it
    cannot be told."""
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    return host_available_bytes()


def check_fits(sample: Sample, device: str, copies: int = COPIES) -> None:
    """Raise :class:`~passnet.errors.TooLarge` when ``copies`` times the sample's tensors
    (from its metadata) exceed the memory free on ``device``."""
    available = available_bytes(device)
    needed = copies * sample.tensor_bytes
    if available is None or needed <= available:
        return
    raise TooLarge(
        f"its tensors take {_gib(sample.tensor_bytes)}, and an evaluation holds them "
        f"{copies} times ({_gib(needed)}); {device} has {_gib(available)} free: "
        "not evaluated (run it on a machine with more memory)",
        sample=sample.path,
        device=device,
        needed_bytes=needed,
        available_bytes=available,
    )


def bound_memory(device: str) -> int | None:
    """On the CPU, limit this process's data segment (``RLIMIT_DATA``) to the memory
    available now, so that running out fails an allocation here instead of drawing the
    kernel's OOM killer; the limit set (bytes), or None (CUDA, or nothing to go by)."""
    if device.startswith("cuda"):
        return None
    available = available_bytes(device)
    return limit_data_segment(available) if available else None


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"
