#!/usr/bin/env python3
"""What a slow evaluation child looks like from inside (repeat-run diagnosis, part 2).

``host_episodes.py`` found that some evaluation children time both sides 1.25-1.9x
slower than other children of the same graph, for their whole timing, while short
probe processes around them are not slow. This script looks inside such children. Each
child is forked from the harness's forkserver (``run_isolated``), loads a graph,
compiles it with Inductor, pins its timing thread as the harness does and times both
sides with the harness's own loop (``measure_interleaved``, warmup 25, trials 100).
Around the timing it reads what the kernel says about the timing thread and the
process:

* ``rq_ms``: time the timing thread was runnable but waiting for its core (schedstat);
* ``steal_ms``: the hypervisor's steal time on the pinned core (/proc/stat);
* ``others_ms``: CPU time of the child's other threads, with the busiest one named;
* ``nivcsw``: involuntary context switches of the timing thread.

Then, still in the child, three short probes on the pinned core (a Python loop, a CPU
``torch.add``, a one-element CUDA ``add`` launch), the same probes and a short eager
timing on another core, and the eager timing again on the first core: does the slow
state follow the process or the core?

Usage (CUDA GPU)::

    PYTHONPATH=src:. python3 benchmarks/child_host_state.py --reps 6 --json $OUT/child_host_state.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

GRAPHS = (
    "transformers-auto-model/falcon-tiny-random",
    "transformers-auto-model/opt-tiny-random",
    "transformers-auto-model/bge-small-zh",
    "torchgeometric/GAE",
)


def _schedstat(path: str) -> tuple[int, int]:
    run_ns, wait_ns, _ = Path(path).read_text().split()
    return int(run_ns), int(wait_ns)


def _steal() -> dict[int, int]:
    """Steal jiffies per CPU (/proc/stat's eighth value)."""
    found = {}
    for line in Path("/proc/stat").read_text().splitlines():
        parts = line.split()
        if parts[0].startswith("cpu") and parts[0] != "cpu":
            found[int(parts[0][3:])] = int(parts[8])
    return found


def _threads() -> dict[str, tuple[str, int]]:
    """tid -> (name, on-CPU ns) for every thread of this process."""
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            found[tid] = (name, _schedstat(f"/proc/self/task/{tid}/schedstat")[0])
        except OSError:
            continue
    return found


def _snapshot() -> dict[str, Any]:
    return {
        "t": time.perf_counter_ns(),
        "me": _schedstat("/proc/thread-self/schedstat"),
        "steal": _steal(),
        "threads": _threads(),
        "nivcsw": resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw,
    }


def _delta(a: dict[str, Any], b: dict[str, Any], core: int) -> dict[str, Any]:
    main_tid = os.readlink("/proc/thread-self").rsplit("/", 1)[-1]  # /proc's own numbering
    others = {}
    for tid, (name, ns) in b["threads"].items():
        if tid == main_tid:
            continue
        before = a["threads"].get(tid, (name, 0))[1]
        others[f"{name}:{tid}"] = (ns - before) / 1e6
    busiest = max(others.items(), key=lambda kv: kv[1], default=("", 0.0))
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    return {
        "wall_ms": (b["t"] - a["t"]) / 1e6,
        "run_ms": (b["me"][0] - a["me"][0]) / 1e6,
        "rq_ms": (b["me"][1] - a["me"][1]) / 1e6,
        "steal_ms": (b["steal"].get(core, 0) - a["steal"].get(core, 0)) * tick_ms,
        "steal_all_ms": (sum(b["steal"].values()) - sum(a["steal"].values())) * tick_ms,
        "others_ms": sum(others.values()),
        "busiest": f"{busiest[0]} {busiest[1]:.1f}",
        "threads": len(b["threads"]),
        "nivcsw": b["nivcsw"] - a["nivcsw"],
    }


def _probes(device: str) -> dict[str, float]:
    import torch

    def py_loop() -> None:
        acc = 0
        for i in range(20_000):
            acc += i & 7

    best_py = min(_timed(py_loop) for _ in range(5)) / 20_000 * 1e9
    x = torch.ones(1)
    best_cpu = min(_timed(lambda: [torch.add(x, 1) for _ in range(500)]) for _ in range(5))
    if device != "cuda":
        return {"py_ns": best_py, "cpu_add_us": best_cpu / 500 * 1e6, "launch_us": float("nan")}
    y = torch.ones(1, device="cuda")
    torch.cuda.synchronize()

    def launches() -> None:
        for _ in range(200):
            torch.add(y, 1)
        torch.cuda.synchronize()

    best_cuda = min(_timed(launches) for _ in range(5))
    return {
        "py_ns": best_py,
        "cpu_add_us": best_cpu / 500 * 1e6,
        "launch_us": best_cuda / 200 * 1e6,
    }


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _eager_ms(module: Any, inputs: list[Any], timer: Any, calls: int = 300) -> float:
    import torch

    with torch.no_grad():
        for _ in range(25):
            module(*inputs)
        return statistics.median(timer(module, inputs)[0] for _ in range(calls))


def child(graph: str, device: str, send: Any) -> None:
    import torch

    from passnet.compilers import create_compiler
    from passnet.data import dev_samples_dir
    from passnet.evaluate import (
        EvalSettings,
        cpu_timer,
        cuda_timer,
        gc_paused,
        measure_sides,
        pin_to_one_core,
    )
    from passnet.sample import load_sample

    out: dict[str, Any] = {"graph": Path(graph).name}
    timer = cuda_timer if device == "cuda" else cpu_timer
    torch.ones(1, device=device)
    out["probe_start"] = _probes(device)
    sample = load_sample(dev_samples_dir() / graph)
    module = sample.build_module(device)
    inputs = sample.replay_inputs(device, 0)
    compiled = create_compiler("inductor").compile(module, list(inputs))
    with torch.no_grad():
        compiled(*inputs)
        module(*inputs)
    pin_to_one_core(device)
    if device != "cuda":  # the harness pins only for CUDA; pin here all the same
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    core_a = next(iter(os.sched_getaffinity(0)))
    out["core_a"] = core_a
    s = EvalSettings()
    before = _snapshot()
    with gc_paused(True):  # the harness's timing, on the one pinned core (no guard)
        timings = measure_sides(compiled, module, inputs, device, s, mutating=False)
    out["timing_host"] = _delta(before, _snapshot(), core_a)
    out["eager_ms"] = timings["eager"].e2e.median_ms
    out["compiled_ms"] = timings["compiled"].e2e.median_ms
    out["speedup"] = out["eager_ms"] / out["compiled_ms"]
    out["probe_a"] = _probes(device)
    cores = list(range(os.cpu_count() or 1))
    core_b = cores[len(cores) // 2] if core_a != cores[len(cores) // 2] else cores[1]
    os.sched_setaffinity(0, {core_b})
    out["core_b"] = core_b
    out["probe_b"] = _probes(device)
    before = _snapshot()
    out["eager_b_ms"] = _eager_ms(module, inputs, timer)
    out["eager_b_host"] = _delta(before, _snapshot(), core_b)
    os.sched_setaffinity(0, {core_a})
    out["eager_a2_ms"] = _eager_ms(module, inputs, timer)
    send(("result", out))


def main() -> int:
    from passnet.evaluate import FORKSERVER_PRELOAD
    from passnet.isolate import run_isolated

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--graphs", nargs="*", default=list(GRAPHS))
    args = parser.parse_args()
    rows = []
    for rep in range(args.reps):
        for rel in args.graphs:
            outcome = run_isolated(
                child, (rel, args.device), timeout_s=300, preload=FORKSERVER_PRELOAD
            )
            row = outcome.result or {"graph": Path(rel).name, "failed": outcome.last_stage}
            row["rep"] = rep
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(
        f"\n{'graph':19} {'rep':>3} {'eager/med':>9} {'comp/med':>8} {'speedup':>7} "
        f"{'rq ms':>6} {'steal':>6} {'others':>7} {'ivcs':>5} {'launchA':>7} {'pyA':>5} "
        f"{'launchB':>7} {'pyB':>5} {'eagB/A':>6} {'eagA2/A':>7} {'launch0':>7}"
    )
    for g in dict.fromkeys(r["graph"] for r in rows):
        mine = [r for r in rows if r["graph"] == g and "eager_ms" in r]
        if not mine:
            continue
        me = statistics.median(r["eager_ms"] for r in mine)
        mc = statistics.median(r["compiled_ms"] for r in mine)
        for r in mine:
            h = r["timing_host"]
            print(
                f"{g[:19]:19} {r['rep']:3d} {r['eager_ms'] / me:9.2f} {r['compiled_ms'] / mc:8.2f} "
                f"{r['speedup']:7.3f} {h['rq_ms']:6.1f} {h['steal_ms']:6.0f} {h['others_ms']:7.1f} "
                f"{h['nivcsw']:5d} {r['probe_a']['launch_us']:7.2f} {r['probe_a']['py_ns']:5.1f} "
                f"{r['probe_b']['launch_us']:7.2f} {r['probe_b']['py_ns']:5.1f} "
                f"{r['eager_b_ms'] / r['eager_ms']:6.2f} {r['eager_a2_ms'] / r['eager_ms']:7.2f} "
                f"{r['probe_start']['launch_us']:7.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
