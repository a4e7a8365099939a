"""A roofline for every graph: the hardware floor of its work, and how close each side got.

The floor of a graph on a device is the larger of its compute time and its memory time
at the device's measured ceilings (a roofline, Williams et al. 2009):

* **work**: the FLOPs of one call (torch's ``FlopCounterMode``: matmuls, convolutions,
  attention; elementwise work is not counted, so the compute floor is a lower bound)
  and the fewest bytes one call must move — its inputs (weights included) read once and
  its outputs written once;
* **ceilings**, measured once per machine and cached (:func:`ceilings`), with when and
  under what load they were measured: the rate of a
  large device-to-device copy (bytes read and written), the rate of a large matrix
  product per floating dtype (on CUDA also float32 on TF32 tensor cores, the rate of a
  float32 graph where PyTorch lets it use them, as it does for convolutions by default),
  and the time of one small operation call (the launch
  overhead every kernel pays, on CUDA a launch, on the CPU a dispatch).

A graph is *launch-bound* when its floor is below two such calls' time (no run can get
near it: launches decide), else *compute-* or *memory-bound* by which time is larger.
Each side's *fraction of the floor* is floor / measured median (1 would be the hardware
limit). A side above 1 ran faster than the hardware allows, so a ceiling is wrong: most
often measured while other work shared the machine. :func:`checked_roofline` then
measures the ceilings again (at most once per :data:`REMEASURE_INTERVAL_S` per machine,
keeping the better of old and new rates) and, if a side is still above 1, marks the
roofline ``floor_exceeded``. Figures are estimates by construction; they tell a pass
author where the time goes, not a guarantee.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from passnet.evaluate._contention import ContentionMonitor, open_contention_monitor
from passnet.record import Roofline

__all__ = [
    "REMEASURE_INTERVAL_S",
    "Ceilings",
    "ceilings",
    "checked_roofline",
    "graph_work",
    "measure_ceilings",
    "remeasure_ceilings",
    "roofline",
    "tf32_switches",
    "Work",
]

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "PASSNET_CACHE_DIR"
"""Where measured ceilings are kept (default: ``~/.cache/passnet``)."""

_MATMUL_DTYPES = ("float32", "float16", "bfloat16")

REMEASURE_INTERVAL_S = 600.0
"""Ceilings measured less than this long ago are not measured again when a graph beats its
floor (the graph is marked instead): one re-measurement per ten minutes per machine, however
many graphs beat their floors."""


@dataclasses.dataclass(frozen=True)
class Ceilings:
    """What one device can do, measured: copy bandwidth, matrix-product rate per dtype,
    and the time of one small operation call."""

    device: str
    """The device's name (``NVIDIA H100 80GB HBM3``, or the CPU's model)."""
    copy_gbps: float
    """Bytes read plus bytes written per second of a large copy, in GB/s."""
    matmul_tflops: dict[str, float]
    """Matrix-product TFLOP/s per dtype name (``float32``, ``float16``, ``bfloat16``; on
    CUDA also ``tfloat32``, float32 on TF32 tensor cores)."""
    launch_us: float
    """Microseconds of one small operation call, synchronized (the per-kernel floor)."""
    torch_version: str = ""
    measured_at: str = ""
    """When (UTC, ISO 8601); "" in caches written before this was kept."""
    loadavg_1min: float | None = None
    """The machine's one-minute load average then (``os.getloadavg``), of ``cpus`` cores."""
    cpus: int | None = None
    wait_fraction: float | None = None
    """CPU: the share of the measuring threads' time spent waiting for a core
    (:mod:`passnet.evaluate._contention`); None on CUDA or where unknown."""
    merged: int = 0
    """Measurements merged into these (each rate the best seen, the call time the least):
    0 for a first measurement."""

    def age_s(self, now: datetime.datetime | None = None) -> float:
        """Seconds since the measurement (infinite where unknown)."""
        if not self.measured_at:
            return float("inf")
        then = datetime.datetime.fromisoformat(self.measured_at)
        now = now or datetime.datetime.now(datetime.timezone.utc)
        return (now - then).total_seconds()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _best_seconds(fn: Callable[[], Any], device: str, repeats: int) -> float:
    fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def _copy_seconds(nbytes: int, device: str) -> float:
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return _best_seconds(lambda: dst.copy_(src), device, 5)


TF32 = "tfloat32"
"""The rate of float32 matrix products on TF32 tensor cores (CUDA): what float32 work may
run at where PyTorch allows TF32 (convolutions do by default:
``torch.backends.cudnn.allow_tf32``)."""


def _matmul_tflops(device: str, dtype: torch.dtype, *, tf32: bool = False) -> float:
    """The rate of a large ``dtype`` matrix product on ``device``; a float32 one on TF32
    tensor cores with ``tf32``, else without them, whatever the process's switch says."""
    cuda = device.startswith("cuda")
    # large enough to reach the rate; on a CPU, half precision is emulated and slow
    n = 8192 if cuda else (1024 if dtype == torch.float32 else 384)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    allowed = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        seconds = _best_seconds(lambda: torch.mm(a, b), device, 3 if cuda else 1)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed
    return 2 * n**3 / seconds / 1e12


def tf32_switches() -> tuple[bool, bool]:
    """Whether this process lets float32 (convolutions, matrix products) run on TF32
    tensor cores (``torch.backends.cudnn.allow_tf32``, on by default;
    ``torch.backends.cuda.matmul.allow_tf32``, off by default)."""
    return bool(torch.backends.cudnn.allow_tf32), bool(torch.backends.cuda.matmul.allow_tf32)


def measure_ceilings(device: str) -> Ceilings:
    """Measure ``device``'s ceilings now (about a second on a GPU, a few on a CPU), with
    when and under what load."""
    cuda = device.startswith("cuda")
    monitor = open_contention_monitor(device)
    if monitor is not None:
        monitor.sample()
    copy_bytes = (1 << 30) if cuda else (64 << 20)
    copy_s = _copy_seconds(copy_bytes, device)
    rates = {}
    for name in _MATMUL_DTYPES:
        try:
            rates[name] = _matmul_tflops(device, getattr(torch, name))
        except RuntimeError as exc:  # a dtype this device cannot multiply
            log.info("no %s matrix product on %s: %s", name, device, exc)
    if cuda and "float32" in rates:
        rates[TF32] = _matmul_tflops(device, torch.float32, tf32=True)
    small = torch.zeros(16, device=device)
    launch_s = _best_seconds(lambda: small.add_(1), device, 200)
    name = torch.cuda.get_device_name(device) if cuda else (platform.processor() or "cpu")
    return Ceilings(
        device=name,
        copy_gbps=2 * copy_bytes / copy_s / 1e9,
        matmul_tflops=rates,
        launch_us=launch_s * 1e6,
        torch_version=torch.__version__,
        measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        loadavg_1min=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        cpus=os.cpu_count(),
        wait_fraction=_waited(monitor),
    )


def _waited(monitor: ContentionMonitor | None) -> float | None:
    if monitor is None:
        return None
    monitor.sample()
    report = monitor.report()
    return report.wait_fraction if report is not None else None


def _cache_file(device: str) -> Path:
    root = Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "passnet")
    if device.startswith("cuda"):
        what = torch.cuda.get_device_name(device)
    else:
        what = f"cpu-{os.cpu_count()}-{platform.processor() or platform.machine()}"
    key = f"{platform.node()}-{what}-torch{torch.__version__}".replace("/", "_").replace(" ", "_")
    return root / f"ceilings-{key}.json"


def _store(path: Path, found: Ceilings) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:
            json.dump(dataclasses.asdict(found), tmp)
        os.replace(tmp.name, path)  # atomic: children measuring at once keep one file
    except OSError as exc:
        log.info("ceilings not cached (%s): measured again next time", exc)


def ceilings(device: str) -> Ceilings:
    """``device``'s ceilings from this machine's cache, measured and cached on first use."""
    path = _cache_file(device)
    try:
        cached = Ceilings(**json.loads(path.read_text()))
        if not device.startswith("cuda") or TF32 in cached.matmul_tflops:
            return cached  # (ceilings cached before the TF32 rate was measured: again)
    except (OSError, ValueError, TypeError):
        pass
    found = measure_ceilings(device)
    _store(path, found)
    return found


def remeasure_ceilings(device: str, stale: Ceilings) -> Ceilings | None:
    """Measure ``device``'s ceilings again because a graph beat the floor of ``stale``; the
    cache keeps each rate's best and the least call time of the two measurements (a
    ceiling is a maximum: load only ever lowers what is measured). None, measuring
    nothing, where the ceilings in the cache were measured less than
    :data:`REMEASURE_INTERVAL_S` ago (another graph's re-measurement, or a recent first
    one): the bound on re-measuring."""
    path = _cache_file(device)
    try:
        current = Ceilings(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        current = stale
    if current.age_s() < REMEASURE_INTERVAL_S:
        return None
    fresh = measure_ceilings(device)
    rates = dict(current.matmul_tflops)
    for name, rate in fresh.matmul_tflops.items():
        rates[name] = max(rate, rates.get(name, 0.0))
    merged = dataclasses.replace(
        fresh,
        copy_gbps=max(fresh.copy_gbps, current.copy_gbps),
        matmul_tflops=rates,
        launch_us=min(fresh.launch_us, current.launch_us),
        merged=current.merged + 1,
    )
    log.info(
        "a graph ran faster than its floor: ceilings measured again (copy %.3g -> %.3g GB/s)",
        current.copy_gbps,
        merged.copy_gbps,
    )
    _store(path, merged)
    return merged


class Work(NamedTuple):
    """One call's work: its FLOPs, the part of them in convolutions, and the fewest bytes
    it moves (inputs read once, outputs written once)."""

    flops: float
    min_bytes: int
    conv_flops: float = 0.0


_CONVOLUTIONS = ("convolution", "_convolution", "cudnn_convolution", "conv2d", "conv1d", "conv3d")


def graph_work(fn: Callable[..., Any], inputs: Sequence[Any]) -> Work:
    """The work of one call ``fn(*inputs)`` (torch's ``FlopCounterMode``)."""
    from torch.utils.flop_counter import FlopCounterMode

    from passnet.sample import flatten_outputs

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = fn(*inputs)
    tensors = [t for t in (*inputs, *flatten_outputs(out)) if isinstance(t, torch.Tensor)]
    moved = sum(t.numel() * t.element_size() for t in tensors)
    by_op = counter.get_flop_counts().get("Global", {})
    conv = sum(n for op, n in by_op.items() if _op_name(op) in _CONVOLUTIONS)
    return Work(float(counter.get_total_flops()), int(moved), float(conv))


def _op_name(op: Any) -> str:
    """``aten.convolution`` (an overload packet) as ``convolution``."""
    return str(getattr(op, "__name__", op)).split(".")[0]


def roofline(
    flops: float,
    min_bytes: int,
    dtype: torch.dtype,
    limits: Ceilings,
    *,
    eager_ms: float | None,
    compiled_ms: float | None,
    conv_flops: float = 0.0,
    tf32: tuple[bool, bool] | None = None,
) -> Roofline:
    """The floor of a graph with this work on a device with ``limits``, its bound, and the
    fraction of the floor each side's median reached. A float32 graph's work that PyTorch
    lets run on TF32 tensor cores is held to the TF32 rate where the device has one: its
    convolutions (``conv_flops``) where cuDNN may use TF32, the rest where matrix products
    may (``tf32`` = (convolutions, matrix products); default: PyTorch's switches now). A
    floor must not be above what the work can run at."""
    math = str(dtype).removeprefix("torch.")
    rate = limits.matmul_tflops.get(math)
    if rate is None and limits.matmul_tflops:
        math, rate = min(limits.matmul_tflops.items(), key=lambda kv: kv[1])  # unmeasured
    fast = 0.0  # the FLOPs that may run at the TF32 rate
    if dtype == torch.float32 and math == "float32" and TF32 in limits.matmul_tflops:
        convs, products = tf32_switches() if tf32 is None else tf32
        fast = (conv_flops if convs else 0.0) + (flops - conv_flops if products else 0.0)
    if fast and rate:
        rate_fast = limits.matmul_tflops[TF32]
        compute_ms = ((flops - fast) / rate + fast / rate_fast) / 1e9
        math = TF32 if fast >= flops else f"float32+{TF32}"
        rate = flops / (compute_ms * 1e9)  # the rate the floor amounts to
    else:
        compute_ms = flops / (rate * 1e12) * 1e3 if rate else 0.0
    memory_ms = min_bytes / (limits.copy_gbps * 1e9) * 1e3
    floor_ms = max(compute_ms, memory_ms)
    launch_ms = limits.launch_us / 1e3
    if floor_ms < 2 * launch_ms:
        bound = "launch"
    else:
        bound = "compute" if compute_ms >= memory_ms else "memory"

    def fraction(ms: float | None) -> float | None:
        return floor_ms / ms if ms and ms > 0 else None

    return Roofline(
        flops=flops,
        min_bytes=min_bytes,
        compute_ms=compute_ms,
        memory_ms=memory_ms,
        floor_ms=floor_ms,
        bound=bound,
        eager_fraction=fraction(eager_ms),
        compiled_fraction=fraction(compiled_ms),
        device=limits.device,
        copy_gbps=limits.copy_gbps,
        matmul_tflops=rate or 0.0,
        math=math if rate else "",
        launch_us=limits.launch_us,
    )


def checked_roofline(
    work: Work,
    dtype: torch.dtype,
    device: str,
    *,
    eager_ms: float | None,
    compiled_ms: float | None,
) -> Roofline:
    """:func:`roofline` at ``device``'s cached ceilings, checked: where a side ran faster
    than the floor, the ceilings are measured again (:func:`remeasure_ceilings`) and the
    floor recomputed; a side still faster marks the roofline ``floor_exceeded``."""
    limits = ceilings(device)

    def floor(at: Ceilings) -> Roofline:
        found = roofline(
            work.flops,
            work.min_bytes,
            dtype,
            at,
            eager_ms=eager_ms,
            compiled_ms=compiled_ms,
            conv_flops=work.conv_flops,
        )
        found.ceilings_measured_at = at.measured_at
        return found

    found = floor(limits)
    if not _beaten(found):
        return found
    better = remeasure_ceilings(device, limits)
    if better is not None:
        found = floor(better)
        found.ceilings_remeasured = True
    found.floor_exceeded = _beaten(found)
    if found.floor_exceeded:
        log.warning(
            "a side ran faster than its %s floor of %.4g ms (ceilings measured %s): the floor "
            "is marked exceeded",
            found.bound,
            found.floor_ms,
            found.ceilings_measured_at or "before their time was kept",
        )
    return found


def _beaten(found: Roofline) -> bool:
    return any(f is not None and f > 1 for f in (found.eager_fraction, found.compiled_fraction))
