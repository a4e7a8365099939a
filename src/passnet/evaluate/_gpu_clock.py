"""What the GPU's clocks did while a graph was timed (CUDA only).

A GPU changes its clocks by itself: it idles low, boosts under load, and is held back
by power and temperature limits. A side whose time is spent in kernels runs slower at a
lower SM clock, while a launch-bound side does not notice, so a change of clock between
two runs moves a speedup. This module reads the clocks through NVML, the management
library every NVIDIA driver installs (``libnvidia-ml.so.1``, called through ``ctypes``:
no extra dependency), between the rounds of timed calls, and the record keeps what it
saw (:class:`~passnet.record._schema.GpuReport`). It only reads: clocks and limits are
never changed. Where NVML or the device cannot be found, :func:`open_clock_monitor`
returns ``None`` and the record's ``gpu`` stays null.
"""

from __future__ import annotations

import ctypes
import logging
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from passnet.record import GpuReport

__all__ = ["REASONS", "ClockMonitor", "ClockSample", "open_clock_monitor", "reason_names"]

log = logging.getLogger(__name__)

_SUCCESS = 0
_CLOCK_SM = 1
_CLOCK_MEM = 2
_TEMPERATURE_GPU = 0

REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""NVML's clock event reasons (``nvmlClocksEventReason*``): why the clocks are below their
maximum."""


@dataclass(frozen=True)
class ClockSample:
    """One reading of the device: clocks in MHz, temperature, power, and the reasons bitmask
    (None where the driver does not report it)."""

    sm_mhz: int
    mem_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    reasons: int | None = None


def reason_names(mask: int) -> list[str]:
    """NVML's reason bits by name; unknown bits as hexadecimal."""
    names = [name for bit, name in REASONS.items() if mask & bit]
    unknown = mask & ~sum(REASONS)
    return names + ([f"0x{unknown:x}"] if unknown else [])


class ClockMonitor:
    """Collects :class:`ClockSample` readings and summarizes them as a :class:`GpuReport`.

    ``read`` gives one sample; ``sm_limit_mhz`` is the device's maximum SM clock. A read
    that raises is counted in ``failed`` and skipped: the timing goes on.
    """

    def __init__(self, read: Callable[[], ClockSample], sm_limit_mhz: int | None) -> None:
        self._read = read
        self.sm_limit_mhz = sm_limit_mhz
        self.samples: list[ClockSample] = []
        self.failed = 0

    def sample(self) -> None:
        try:
            self.samples.append(self._read())
        except OSError as exc:
            self.failed += 1
            log.debug("reading the GPU clocks failed: %s", exc)

    def report(self) -> GpuReport | None:
        if not self.samples:
            return None
        sm = [s.sm_mhz for s in self.samples]

        def median(values: list[float | int | None]) -> float | None:
            known = [v for v in values if v is not None]
            return float(statistics.median(known)) if known else None

        temps = [s.temperature_c for s in self.samples if s.temperature_c is not None]
        mask = 0
        for s in self.samples:
            mask |= s.reasons or 0
        power = median([s.power_w for s in self.samples])
        return GpuReport(
            samples=len(sm),
            sm_mhz_median=float(statistics.median(sm)),
            sm_mhz_min=min(sm),
            sm_mhz_max=max(sm),
            sm_mhz_limit=self.sm_limit_mhz,
            mem_mhz_median=median([s.mem_mhz for s in self.samples]),
            temperature_c_max=max(temps) if temps else None,
            power_w_median=round(power, 1) if power is not None else None,
            reasons=reason_names(mask),
            below_limit_samples=(
                sum(v < self.sm_limit_mhz for v in sm) if self.sm_limit_mhz else None
            ),
        )


def _load_nvml() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as exc:
        log.debug("NVML is not available: %s", exc)
        return None
    if lib.nvmlInit_v2() != _SUCCESS:
        log.debug("NVML did not initialize")
        return None
    return lib


def _handle(lib: ctypes.CDLL, index: int) -> ctypes.c_void_p | None:
    """NVML's handle of CUDA device ``index``: by PCI address or UUID, which NVML and CUDA
    agree on whatever ``CUDA_VISIBLE_DEVICES`` says; by index only where nothing is hidden."""
    import torch

    props = torch.cuda.get_device_properties(index)
    handle = ctypes.c_void_p()
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        address = (
            f"{getattr(props, 'pci_domain_id', 0):08X}:{bus:02X}:"
            f"{getattr(props, 'pci_device_id', 0):02X}.0"
        )
        if lib.nvmlDeviceGetHandleByPciBusId_v2(address.encode(), ctypes.byref(handle)) == _SUCCESS:
            return handle
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid:
        name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        if lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) == _SUCCESS:
            return handle
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == _SUCCESS:
            return handle
    return None


def _uint(fn: Callable[..., int], *args: object) -> int | None:
    value = ctypes.c_uint()
    return value.value if fn(*args, ctypes.byref(value)) == _SUCCESS else None


def open_clock_monitor(device: str) -> ClockMonitor | None:
    """A :class:`ClockMonitor` reading CUDA ``device`` through NVML, or None where NVML, the
    device's handle or its SM clock cannot be had."""
    if not device.startswith("cuda"):
        return None
    lib = _load_nvml()
    if lib is None:
        return None
    import torch

    index = torch.device(device).index
    handle = _handle(lib, torch.cuda.current_device() if index is None else index)
    if handle is None:
        log.debug("NVML has no handle for %s", device)
        return None
    reasons_fn = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )

    def reasons() -> int | None:
        if reasons_fn is None:
            return None
        mask = ctypes.c_ulonglong()
        return mask.value if reasons_fn(handle, ctypes.byref(mask)) == _SUCCESS else None

    def read() -> ClockSample:
        sm = _uint(lib.nvmlDeviceGetClockInfo, handle, _CLOCK_SM)
        if sm is None:
            raise OSError("nvmlDeviceGetClockInfo failed")
        power_mw = _uint(lib.nvmlDeviceGetPowerUsage, handle)
        return ClockSample(
            sm_mhz=sm,
            mem_mhz=_uint(lib.nvmlDeviceGetClockInfo, handle, _CLOCK_MEM),
            temperature_c=_uint(lib.nvmlDeviceGetTemperature, handle, _TEMPERATURE_GPU),
            power_w=power_mw / 1000 if power_mw is not None else None,
            reasons=reasons(),
        )

    monitor = ClockMonitor(read, _uint(lib.nvmlDeviceGetMaxClockInfo, handle, _CLOCK_SM))
    monitor.sample()
    if not monitor.samples:
        return None
    monitor.samples.clear()  # the first reading only proved the device answers
    return monitor
