#!/usr/bin/env python3
"""What reading the GPU's clocks costs an evaluation child (CUDA machine).

In a fresh process with CUDA initialized, as in a child: the time to open the NVML
monitor (library load, init, device handle, one reading), and the time of one reading
(the median of ``--reads``), which the timing loop takes after each round::

    PYTHONPATH=src python3 benchmarks/nvml_cost.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from passnet.evaluate import open_clock_monitor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    monitor = open_clock_monitor("cuda")
    opened_ms = (time.perf_counter() - t0) * 1e3
    if monitor is None:
        raise SystemExit("NVML did not answer")
    times = []
    for _ in range(args.reads):
        t0 = time.perf_counter()
        monitor.sample()
        times.append((time.perf_counter() - t0) * 1e3)
    print(
        f"open: {opened_ms:.1f} ms; one reading: median {statistics.median(times):.3f} ms, "
        f"max {max(times):.3f} ms over {len(times)}; {monitor.report()}"
    )


if __name__ == "__main__":
    main()
