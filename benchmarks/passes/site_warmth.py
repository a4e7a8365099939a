#!/usr/bin/env python3
"""Why does a replacement cost more between a graph's own ops than in a loop? (GPU)

A lean replacement call costs about 40 µs of host time inside a real graph against
13-20 µs in a loop (docs/results/pass_library_h200.md, "What a replacement costs ...").
This script looks for where that goes, and whether cold caches (CPU caches and TLBs
emptied by the graph's other ops) are the cause. For each case the rewritten graph (lean
launches, as ``pass_mgr`` runs it on CUDA) is stamped around every node
(``site_cost.stamped``) and every replacement call node is made to call, in turn:

* ``pm``: the replacement as ``pass_mgr`` calls it;
* ``pm2``: the same, twice in a row (the second call's result is used), so
  ``pm2 - pm`` is what a call costs right after an identical one;
* ``alloc`` / ``alloc2``: a stand-in that allocates the outputs with ``torch.empty``
  (once / twice);
* ``stub`` / ``stub2``: a stand-in that returns the recorded outputs (a Python call
  and nothing else; once / twice).

The same callables are also timed outside the graph, on the same arguments: ``loop``
(back to back, the median per call of 300 calls, no synchronisation) and ``swept``
(each call after reading a buffer of ``--sweep-mib`` MiB, which empties the CPU caches,
then synchronising; the call alone is timed).

Last, the whole graph without stamps, in ``--rounds`` alternating rounds of ``--reps``
synchronised calls (the collector paused): ``eager`` (the sample's module), ``trace``
(not rewritten) and the rewritten graph with each of the targets above. ``stub`` is
then the rewritten graph with replacements that cost a Python call and nothing else:
what a pass could gain at most on host time. ``raw`` makes the site's recorded Triton C
launches again (same arguments and output buffers) and returns the recorded outputs:
the launch itself, with no Python of the pass or the harness around it.

Usage (torch + triton with a CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/passes/site_warmth.py
    PYTHONPATH=src python3 benchmarks/passes/site_warmth.py --cases linear_bias_gelu:prajjwal1_bert-tiny_float32
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import site_cost  # this folder (the script's own)
import torch
import torch.fx
from profile_rewrite import alternating_medians, synchronize

CASES = (
    "linear_bias_gelu:prajjwal1_bert-tiny_float32",
    "linear_bias_gelu:bge-small-zh_float32",
    "add_layer_norm:bge-small-zh_float32",
    "roll_add_layer_norm:vuiseng9_tiny-random-SwinModel_float32",
)
MODES = ("pm", "pm2", "alloc", "alloc2", "stub", "stub2")
_now = time.perf_counter_ns
_ROUNDS = 9


def _twice(fn: Callable[..., Any]) -> Callable[..., Any]:
    def twice(*args: Any) -> Any:
        fn(*args)
        return fn(*args)

    return twice


def _stub(result: Any) -> Callable[..., Any]:
    def stub(*args: Any) -> Any:
        return result

    return stub


def loop_us(fn: Callable[..., Any], args: tuple[Any, ...], reps: int = 300) -> float:
    """Median host µs per call of ``reps`` back-to-back calls, best of 5 blocks."""
    best = float("inf")
    with torch.no_grad():
        for _ in range(5):
            synchronize()
            t0 = _now()
            for _ in range(reps):
                fn(*args)
            best = min(best, (_now() - t0) / reps / 1e3)
            synchronize()
    return best


def swept_us(
    fn: Callable[..., Any], args: tuple[Any, ...], sweep: np.ndarray, reps: int = 100
) -> float:
    """Median host µs of one call made right after reading ``sweep`` (cold CPU caches)."""
    times = []
    with torch.no_grad():
        for _ in range(reps):
            synchronize()
            sweep.sum()
            t0 = _now()
            fn(*args)
            times.append((_now() - t0) / 1e3)
    synchronize()
    return statistics.median(times)


def _recording_launches(
    rules: list[Any],
    store: list[list[tuple[Callable[..., Any], tuple[Any, ...]]]],
    current: list[int],
) -> contextlib.AbstractContextManager[None]:
    """While active, every lean launch of the rules' kernels is recorded under the site
    ``current[0]`` (and still made)."""
    from passnet.passes import FastRun, kernels_of, rule_namespaces

    runs = [
        run
        for k in kernels_of(rule_namespaces([r.replacement for r in rules]))
        if isinstance(run := k.__dict__.get("run"), FastRun)
    ]

    def recording(launch: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any) -> Any:
            store[current[0]].append((launch, args))
            return launch(*args)

        return record

    @contextlib.contextmanager
    def active() -> Iterator[None]:
        saved = [(run, dict(run.cache)) for run in runs]
        for run in runs:
            for key, entry in run.cache.items():
                run.cache[key] = entry._replace(launch=recording(entry.launch))
        try:
            yield
        finally:
            for run, cache in saved:
                run.cache.clear()
                run.cache.update(cache)

    return active()


def _raw(
    launches: list[tuple[Callable[..., Any], tuple[Any, ...]]], result: Any
) -> Callable[..., Any]:
    """A stand-in that makes the recorded C launches again (same arguments, same output
    buffers) and returns the recorded outputs: the launch without any Python around it."""

    def raw(*args: Any) -> Any:
        for launch, largs in launches:
            launch(*largs)
        return result

    return raw


def measure(case: str, work: Path, tasks: dict[str, Any], sweep: np.ndarray) -> dict[str, Any]:
    from passnet.dataset import build_reference_task
    from passnet.passes import PassManager, accelerate_rules
    from passnet.sample import load_sample, trace_graph

    pass_name, _, graph_name = case.partition(":")
    if pass_name not in tasks:
        tasks[pass_name] = build_reference_task(
            pass_name, work / pass_name, dtypes=(torch.float32, torch.float16, torch.bfloat16)
        )
    path = next(p for p in tasks[pass_name].graphs if p.name == graph_name)
    sample = load_sample(path)
    module = sample.build_module(site_cost._DEVICE)
    inputs = sample.replay_inputs(site_cost._DEVICE, 0)
    manager = PassManager.from_dirs(tasks[pass_name].pass_dir)
    accelerate_rules(manager.rules)

    def rewritten() -> tuple[torch.fx.GraphModule, list[Any]]:
        result = manager.apply(trace_graph(module))
        return result.graph_module, result.sites

    # record each site's pass_mgr target, arguments and outputs on one call, and the
    # Triton C launches (function and arguments) it makes on the lean path
    gm, sites = rewritten()
    calls: list[tuple[Callable[..., Any], tuple[Any, ...], Any]] = [None] * len(sites)  # type: ignore[list-item]
    launches: list[list[tuple[Callable[..., Any], tuple[Any, ...]]]] = [[] for _ in sites]
    current = [0]

    def recorder(i: int, fn: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any) -> Any:
            current[0] = i
            launches[i].clear()
            out = fn(*args)
            calls[i] = (fn, args, out)
            return out

        return record

    for i, site in enumerate(sites):
        site.call.target = recorder(i, site.call.target)
    gm.recompile()
    with torch.no_grad():
        gm(*inputs)  # compiles; later calls take the lean path
        with _recording_launches(manager.rules, launches, current):
            gm(*inputs)
    synchronize()

    def target(mode: str, i: int) -> Callable[..., Any]:
        fn, _, out = calls[i]
        alloc = site_cost._allocator(out)
        return {
            "pm": fn,
            "pm2": _twice(fn),
            "alloc": alloc,
            "alloc2": _twice(alloc),
            "stub": _stub(out),
            "stub2": _twice(_stub(out)),
            "raw": _raw(launches[i], out),
        }[mode]

    row: dict[str, Any] = {"case": case, "calls": len(sites)}
    for mode in MODES:
        gm, sites = rewritten()
        site_nodes = set()
        for i, site in enumerate(sites):
            site.call.target = target(mode, i)
            site_nodes |= {site.call.name} | site_cost.getitems(site.call)
        gm.recompile()
        with torch.no_grad():
            gm(*inputs)
        per_node = site_cost.node_us(gm, inputs)
        row[mode] = sum(v for k, v in per_node.items() if k in site_nodes) / len(sites)
    graphs: dict[str, Any] = {"eager": module, "trace": trace_graph(module)}
    for mode in (*MODES, "raw"):
        gm, sites = rewritten()
        for i, site in enumerate(sites):
            site.call.target = target(mode, i)
        gm.recompile()
        graphs[mode] = gm
    gc.collect()
    gc.disable()
    try:
        e2e, _ = alternating_medians(graphs, inputs, _ROUNDS, site_cost._REPS)
    finally:
        gc.enable()
    row["e2e"] = {k: v * 1e3 for k, v in e2e.items()}
    fn, args, out = calls[0]
    row["launches"] = len(launches[0])
    for label, f in (
        ("pm", fn),
        ("alloc", site_cost._allocator(out)),
        ("stub", _stub(out)),
        ("raw", _raw(launches[0], out)),
    ):
        row[f"loop_{label}"] = loop_us(f, args)
        row[f"swept_{label}"] = swept_us(f, args, sweep)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), metavar="PASS:GRAPH")
    parser.add_argument("--reps", type=int, default=300, help="graph calls per measurement")
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds of the e2e A/B")
    parser.add_argument(
        "--device", default="cuda", help="cpu only to try the script (TRITON_INTERPRET=1)"
    )
    parser.add_argument(
        "--sweep-mib", type=int, default=256, help="buffer read before a swept call"
    )
    args = parser.parse_args(argv)
    site_cost._DEVICE = args.device
    if args.device == "cuda" and not torch.cuda.is_available():
        print("site_warmth needs a CUDA GPU", file=sys.stderr)
        return 2
    global _ROUNDS
    _ROUNDS = args.rounds
    site_cost._REPS = args.reps
    site_cost._LEAN = True
    sweep = np.ones(args.sweep_mib * 2**20 // 8)
    work = Path(tempfile.mkdtemp(prefix="passnet-site-warmth-"))
    tasks: dict[str, Any] = {}
    rows = [measure(case, work, tasks, sweep) for case in args.cases]
    print("\n== host µs per call site, inside the graph (stamped) and outside it ==")
    print("in graph: pm2-pm = a second call right after the first; likewise alloc, stub")
    head = " ".join(f"{m:>6s}" for m in MODES)
    tail = " ".join(f"{m:>11s}" for m in ("loop_pm", "swept_pm", "loop_alloc", "swept_alloc"))
    print(
        f"{'case':56s} {head} {'2nd pm':>6s} {'2nd al':>6s} {'2nd st':>6s} {tail} loop/swept stub"
    )
    for r in rows:
        cells = " ".join(f"{r[m]:6.1f}" for m in MODES)
        second = " ".join(f"{r[m + '2'] - r[m]:6.1f}" for m in ("pm", "alloc", "stub"))
        outside = " ".join(
            f"{r[k]:11.1f}" for k in ("loop_pm", "swept_pm", "loop_alloc", "swept_alloc")
        )
        print(
            f"{r['case'][:56]:56s} {cells} {second} {outside} "
            f"{r['loop_stub']:.2f}/{r['swept_stub']:.2f}"
        )
    print("\nthe recorded C launches of the first site alone (raw, minus stub), µs: loop / swept")
    for r in rows:
        print(
            f"{r['case'][:56]:56s} {r['launches']} launch(es): "
            f"{r['loop_raw'] - r['loop_stub']:.1f} / {r['swept_raw'] - r['swept_stub']:.1f}"
        )
    names = ("eager", "trace", *MODES, "raw")
    print("\n== whole graph, µs (median over alternating rounds; no stamps) ==")
    print(
        f"{'case':56s} " + " ".join(f"{n:>7s}" for n in names) + "  trace-eager stub-eager pm-eager"
    )
    for r in rows:
        e = r["e2e"]
        print(
            f"{r['case'][:56]:56s} "
            + " ".join(f"{e[n]:7.1f}" for n in names)
            + f"  {e['trace'] - e['eager']:11.1f} {e['stub'] - e['eager']:10.1f} {e['pm'] - e['eager']:8.1f}"
            + "  "
            + " ".join(f"{(e[m] - e['stub']) / r['calls']:8.1f}" for m in ("pm", "raw", "alloc"))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
