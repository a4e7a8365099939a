#!/usr/bin/env python3
"""Where a sync-heavy graph's run-to-run spread comes from: raw per-call times of one
graph, eager vs Inductor, in several fresh processes and CUDA wait modes.

Each process loads the sample, compiles it with Inductor, settles on a core as the
harness's child does (:class:`~passnet.evaluate.CoreGuard`), warms up, and times
``--rounds`` alternating rounds of ``--per-round`` calls per side, keeping every call's
start time and its e2e and device milliseconds (re-measured rounds included, marked).
The CUDA wait mode (``cudaSetDeviceFlags`` before the context exists) is one of
``default``, ``spin``, ``yield``, ``blocking``. Processes run with address-space layout
randomization off, as the harness's children do. Before and after every round three host
probes run (the guard's loop, a walk over 2.4 MiB of Python ints, a numpy sum over
32 MiB), and the CPU time of the process's threads over the timing is kept.

The summary compares, per variant, how much the speedup moves between processes under
several estimators (the harness's: eager median / compiled median), and how the slow
calls are spread in time (lag-1 autocorrelation of the compiled side's times); it
correlates the probes with the rounds' medians and, across processes, with the speedup,
and compares each process's first and second half. ``--rejection`` adds what dropping
slow rounds would do to the spread; ``--round-table FILE`` lists one process's rounds.
Results (H200, 2026-11-22):
``benchmarks/results/sync_study_h200/``::

    PYTHONPATH=src python3 benchmarks/sync_study.py \\
        ../shared/data/graphnet/ultralytics/yolov8n-cls --procs 3 \\
        --variants default,spin,blocking --out /tmp/sync_study
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

FLAGS = {"default": None, "spin": 1, "yield": 2, "blocking": 4}


def _cudart() -> ctypes.CDLL | None:
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libcudart.so" in path:
                return ctypes.CDLL(path)
    return None


def _threads() -> dict[str, list]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            comm = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
            out[tid] = [comm, int(fields[11]) + int(fields[12]), int(fields[36])]
        except OSError:
            continue
    return out


def _probes(guard, big: list[int], mem) -> list[float]:
    """The guard's core-speed probe (ns per loop), a pointer-chasing Python loop over a
    few MiB (ns per element: sensitive to cache contention) and a numpy sum over 32 MiB
    (ns per MiB: memory bandwidth)."""
    small = guard.probe() if guard is not None else math.nan
    t0 = time.perf_counter_ns()
    acc = 0
    for x in big:
        acc += x
    t1 = time.perf_counter_ns()
    mem.sum()
    t2 = time.perf_counter_ns()
    return [small, (t1 - t0) / len(big), (t2 - t1) / 32]


def child(args: argparse.Namespace) -> None:
    import torch

    flag = FLAGS[args.variant]
    flags_read = None
    if flag is not None:
        lib = _cudart()  # loaded with torch, before any CUDA context exists
        if lib is None:
            sys.exit("libcudart is not loaded in this process")
        rc = lib.cudaSetDeviceFlags(ctypes.c_uint(flag))
        if rc != 0:
            sys.exit(f"cudaSetDeviceFlags({flag}) returned {rc}")
    from passnet.compilers import create_compiler
    from passnet.evaluate import CoreGuard, cuda_timer, timing_cores
    from passnet.sample import load_sample

    device = "cuda"
    sample = load_sample(args.sample)
    module = sample.build_module(device)
    inputs = sample.replay_inputs(device, 0)
    if flag is not None:
        lib = _cudart()
        got = ctypes.c_uint(0)
        lib.cudaGetDeviceFlags(ctypes.byref(got))
        flags_read = got.value
    t0 = time.perf_counter()
    compiled = create_compiler("inductor").compile(module, list(inputs))
    with torch.no_grad():
        compiled(*inputs)
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    fns = {"compiled": compiled, "eager": module}
    share = timing_cores(device)
    guard = CoreGuard(share) if share else None
    calls: list[list] = []  # [side, round, attempt, t_start_s, e2e_ms, device_ms]
    probes: list[list] = []  # [round, attempt, before..., after...] (see _probes)
    import gc
    import random

    import numpy as np

    big = [1000 + i for i in range(60_000)]
    random.Random(0).shuffle(big)  # the ints were allocated in order: visit them at random
    mem = np.ones(4 * 2**20)

    gc.collect()
    gc.disable()
    with torch.no_grad():
        if guard is not None:
            guard.settle()
        for _ in range(args.warmup):
            for fn in fns.values():
                cuda_timer(fn, inputs)
        threads_before = _threads()
        start = time.perf_counter()
        for r in range(args.rounds):
            order = list(fns) if r % 2 == 0 else list(fns)[::-1]
            for attempt in range(3):
                if guard is not None and guard.ensure_fast():
                    for fn in fns.values():
                        cuda_timer(fn, inputs)
                before = _probes(guard, big, mem)
                for name in order:
                    for _ in range(args.per_round):
                        t = time.perf_counter() - start
                        e2e, dev = cuda_timer(fns[name], inputs)
                        calls.append([name, r, attempt, round(t, 6), e2e, dev])
                probes.append([r, attempt, *before, *_probes(guard, big, mem)])
                if guard is None or attempt == 2 or guard.still_fast():
                    break
        threads_after = _threads()
    busy = {
        threads_after[t][0] + f"[{t}]": threads_after[t][1] - threads_before[t][1]
        for t in threads_after
        if t in threads_before and threads_after[t][1] != threads_before[t][1]
    }
    out = {
        "variant": args.variant,
        "flags_read": flags_read,
        "compile_s": compile_s,
        "threads": len(threads_after),
        "busy_threads_ticks": busy,
        "host": guard.report().__dict__ if guard is not None else None,
        "calls": calls,
        "probes": probes,
    }
    Path(args.json).write_text(json.dumps(out))


def _load(p: Path) -> dict:
    """A child's JSON, gzipped or not (the stored results are gzipped)."""
    if p.suffix == ".gz":
        return json.loads(gzip.decompress(p.read_bytes()))
    return json.loads(p.read_text())


def _kept(calls: list[list]) -> list[list]:
    """The calls of each round's last attempt (what the harness keeps)."""
    last: dict[int, int] = {}
    for c in calls:
        last[c[1]] = max(last.get(c[1], 0), c[2])
    return [c for c in calls if c[2] == last[c[1]]]


def _side(calls: list[list], side: str, clock: int = 4) -> list[float]:
    return [c[clock] for c in calls if c[0] == side]


def _lag1(xs: list[float]) -> float:
    m = statistics.fmean(xs)
    num = sum((a - m) * (b - m) for a, b in zip(xs, xs[1:]))
    den = sum((a - m) ** 2 for a in xs)
    return num / den if den else 0.0


def _trimmed(xs: list[float], cut: float = 0.25) -> float:
    s = sorted(xs)
    k = int(len(s) * cut)
    return statistics.fmean(s[k : len(s) - k])


def estimators(calls: list[list]) -> dict[str, float]:
    kept = _kept(calls)
    e, c = _side(kept, "eager"), _side(kept, "compiled")
    rounds = sorted({k[1] for k in kept})
    per_round = []
    for r in rounds:
        er = [k[4] for k in kept if k[1] == r and k[0] == "eager"]
        cr = [k[4] for k in kept if k[1] == r and k[0] == "compiled"]
        per_round.append(statistics.median(er) / statistics.median(cr))
    return {
        "median": statistics.median(e) / statistics.median(c),
        "min": min(e) / min(c),
        "p10": sorted(e)[len(e) // 10] / sorted(c)[len(c) // 10],
        "mean": statistics.fmean(e) / statistics.fmean(c),
        "midmean": _trimmed(e) / _trimmed(c),
        "round_ratio_median": statistics.median(per_round),
        "eager_median_ms": statistics.median(e),
        "compiled_median_ms": statistics.median(c),
        "compiled_iqr_rel": (
            (sorted(c)[3 * len(c) // 4] - sorted(c)[len(c) // 4]) / statistics.median(c)
        ),
        "compiled_lag1": _lag1(_side(calls, "compiled")),
        "eager_lag1": _lag1(_side(calls, "eager")),
        "remeasured": len({k[1] for k in calls if k[2] > 0}),
    }


def _corr(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    den = math.sqrt(sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys))
    return num / den if den else math.nan


def _probe_table(runs: list[tuple[str, dict]]) -> None:
    """Per process: how each probe (mean of before and after a round) follows the round's
    median time per side (Pearson r over rounds); then the same across processes."""
    kinds = ["core", "cache", "memory"]
    print("\nr(round median, probe) per process: compiled / eager")
    print("process                      " + " ".join(f"{k:>14s}" for k in kinds))
    per_proc = []
    for name, d in runs:
        if not d.get("probes"):
            continue
        med = {}
        for side in ("compiled", "eager"):
            for r, a in {(c[1], c[2]) for c in d["calls"]}:
                xs = [c[4] for c in d["calls"] if c[0] == side and c[1] == r and c[2] == a]
                med[side, r, a] = statistics.median(xs)
        rows = d["probes"]
        cells = []
        for k in range(3):
            pv = [(row[2 + k] + row[5 + k]) / 2 for row in rows]
            rc = _corr([med["compiled", row[0], row[1]] for row in rows], pv)
            re_ = _corr([med["eager", row[0], row[1]] for row in rows], pv)
            cells.append(f"{rc:+.2f} / {re_:+.2f}")
        print(f"{name:28s} " + " ".join(f"{c:>14s}" for c in cells))
        est = estimators(d["calls"])
        per_proc.append(
            [est["median"], est["compiled_median_ms"], est["eager_median_ms"]]
            + [statistics.median((row[2 + k] + row[5 + k]) / 2 for row in rows) for k in range(3)]
        )
    if len(per_proc) >= 3:
        print("across processes, r(probe median, x): speedup / compiled / eager")
        for k, kind in enumerate(kinds):
            pv = [row[3 + k] for row in per_proc]
            rs = [_corr([row[j] for row in per_proc], pv) for j in range(3)]
            lo, hi = min(pv), max(pv)
            print(
                f"  {kind:7s} {rs[0]:+.2f} / {rs[1]:+.2f} / {rs[2]:+.2f}  (probe {lo:.1f}-{hi:.1f})"
            )


def _halves(runs: list[tuple[str, dict]]) -> None:
    """Each process's speedup (medians) from its first and its second half of rounds."""
    print("\nwithin a process: speedup of rounds 0-19 and 20-39")
    for name, d in runs:
        calls = _kept(d["calls"])
        n = 1 + max(c[1] for c in calls)
        parts = [[c for c in calls if lo <= c[1] < hi] for lo, hi in ((0, n // 2), (n // 2, n))]
        s = [
            statistics.median(_side(k, "eager")) / statistics.median(_side(k, "compiled"))
            for k in parts
        ]
        print(f"  {name:28s} {s[0]:.4f} {s[1]:.4f}  |log| {100 * abs(math.log(s[0] / s[1])):.2f} %")


def _rejection_table(runs: list[tuple[str, dict]]) -> None:
    """Would dropping disturbed rounds steady the speedup? Each process's rounds are cut
    into segments (as if each were a run); within a segment a round whose median, on either
    side, exceeds that side's median of round medians by more than ``tol`` is dropped; the
    table gives the pairwise |log| spread of the segments' speedups (medians of the rest)."""
    print("\ndropping rounds slower than the segment's typical round by > tol")
    print("segment  tol    runs  pair |log| median / p90 / max   rounds kept")
    rounds_of = []
    for _, d in runs:
        calls = _kept(d["calls"])
        rounds_of.append(
            [
                (
                    [c[4] for c in calls if c[1] == r and c[0] == "eager"],
                    [c[4] for c in calls if c[1] == r and c[0] == "compiled"],
                )
                for r in sorted({c[1] for c in calls})
            ]
        )
    n = min(len(rs) for rs in rounds_of)
    for seg in (n // 4, n // 2, n):
        for tol in (None, 0.25, 0.15, 0.10, 0.05):
            values, kept = [], []
            for rs in rounds_of:
                for i in range(0, n - seg + 1, seg):
                    part = rs[i : i + seg]
                    if tol is not None:
                        le = statistics.median(statistics.median(e) for e, _ in part)
                        lc = statistics.median(statistics.median(c) for _, c in part)
                        part = [
                            (e, c)
                            for e, c in part
                            if statistics.median(e) <= le * (1 + tol)
                            and statistics.median(c) <= lc * (1 + tol)
                        ]
                    e_all = [x for e, _ in part for x in e]
                    c_all = [x for _, c in part for x in c]
                    values.append(statistics.median(e_all) / statistics.median(c_all))
                    kept.append(len(part) / seg)
            pairs = sorted(
                100 * abs(math.log(a / b)) for i, a in enumerate(values) for b in values[i + 1 :]
            )
            if not pairs:
                continue
            print(
                f"{seg:7d}  {'-' if tol is None else f'{tol:.2f}':5s} {len(values):5d}  "
                f"{statistics.median(pairs):5.2f} / {pairs[int(0.9 * len(pairs))]:5.2f} / "
                f"{pairs[-1]:5.2f} %          {statistics.fmean(kept):.2f}"
            )


def round_table(path: Path) -> None:
    """One line per round and attempt of one process: when it started, each side's median
    and the compiled side's extremes (e2e ms)."""
    calls = _load(path)["calls"]
    print(f"{path.name}: round.attempt  start s  eager  compiled  (compiled min-max)")
    for r, a in sorted({(c[1], c[2]) for c in calls}):
        here = [c for c in calls if c[1] == r and c[2] == a]
        e, k = _side(here, "eager"), _side(here, "compiled")
        print(
            f"  r{r:02d}.{a} {min(c[3] for c in here):6.1f}  {statistics.median(e):6.3f}  "
            f"{statistics.median(k):6.3f}  ({min(k):.2f}-{max(k):.2f})"
        )


def summarize(paths: list[Path], rejection: bool = False) -> None:
    by_variant: dict[str, list[dict]] = {}
    runs = [(p.name, _load(p)) for p in paths]  # each file read once
    for name, d in runs:
        est = estimators(d["calls"])
        by_variant.setdefault(d["variant"], []).append(est)
        busy = sorted(d["busy_threads_ticks"].items(), key=lambda kv: -kv[1])[:3]
        print(
            f"{name:28s} flags={d['flags_read']} compile {d['compile_s']:.1f}s "
            f"speedup {est['median']:.4f} eager {est['eager_median_ms']:.3f} compiled {est['compiled_median_ms']:.3f} ms "
            f"IQR/med {est['compiled_iqr_rel']:.3f} lag1 c/e {est['compiled_lag1']:+.2f}/"
            f"{est['eager_lag1']:+.2f} rounds again {est['remeasured']} threads {d['threads']} "
            f"busy {busy}"
        )
    _probe_table(runs)
    _halves(runs)
    if rejection:
        _rejection_table(runs)
    names = ["median", "min", "p10", "mean", "midmean", "round_ratio_median"]
    print("\nspread between processes: max |log(s_i/s_j)| in %, per estimator")
    print("variant     procs " + " ".join(f"{n:>18s}" for n in names))
    for variant, ests in by_variant.items():
        cells = []
        for n in names:
            vals = [e[n] for e in ests]
            spread = 100 * (math.log(max(vals)) - math.log(min(vals)))
            cells.append(f"{statistics.median(vals):.4f} ±{spread:4.2f}%")
        print(f"{variant:11s} {len(ests):5d} " + " ".join(f"{c:>18s}" for c in cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sample", nargs="?")
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--variants", default="default")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--per-round", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--out", type=Path, default=Path("/tmp/sync_study"))
    ap.add_argument("--summarize", nargs="*", type=Path, help="only summarize these JSON files")
    ap.add_argument(
        "--rejection", action="store_true", help="with --summarize: the round-dropping table"
    )
    ap.add_argument("--round-table", type=Path, help="print one process's rounds, then stop")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variant", default="default", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if args.round_table:
        round_table(args.round_table)
        return
    if args.summarize:
        summarize(args.summarize, args.rejection)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    variants = args.variants.split(",")
    for v in variants:
        if v not in FLAGS:
            sys.exit(f"unknown variant {v!r}: one of {', '.join(FLAGS)}")
    paths = []
    for i in range(args.procs):
        for v in variants:  # variants interleaved, so drift of the host hits each alike
            path = args.out / f"{v}_{i}.json"
            cmd = [sys.executable, __file__, args.sample, "--child", "--variant", v]
            cmd += ["--json", str(path), "--rounds", str(args.rounds)]
            cmd += ["--per-round", str(args.per_round), "--warmup", str(args.warmup)]
            cmd = [sys.executable, str(Path(__file__).with_name("no_aslr.py")), *cmd]
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{path.name}: rc {proc.returncode}\n{proc.stderr[-2000:]}", flush=True)
                continue
            print(f"{path.name}: {time.perf_counter() - t:.1f}s", flush=True)
            paths.append(path)
    summarize(paths)


if __name__ == "__main__":
    main()
