#!/usr/bin/env python3
"""What does one replacement cost inside a real graph, and where does it go? (GPU)

For task graphs of the reference passes, every node of the graph is bracketed by
host-clock stamps (a ``perf_counter_ns`` call node inserted before each node), the
graph is run 300 times (synchronised after each call), and the median host
microseconds of every node are summed into

* ``site``: the nodes the rewrite removed (trace) or the replacement calls and their
  ``getitem`` nodes (rewritten), per call site;
* ``rest``: every other node, so a replacement that slows the nodes around it (cold
  caches after Triton's launch path) shows up here.

The rewritten graph runs in four variants:

* ``pm``: as ``pass_mgr`` runs it (the pass manager's call wrapper, the dispatch
  guard's inactive check, the pass's Python wrapper, Triton's JIT launch);
* ``direct``: the call nodes call the pass's replacement function itself;
* ``nolaunch``: as ``direct``, with every Triton kernel of the pass module replaced by
  a stub whose launch does nothing (the wrapper's own Python, allocation included);
* and, per graph, the e2e median (300 synchronised calls, no stamps) of the trace and
  of each variant.

So ``pm - direct`` is the pass manager's own per-call cost, ``direct - nolaunch`` the
launch through Triton's JIT, ``nolaunch`` minus one stamp interval the wrapper.

Usage (torch + triton with a CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/passes/site_cost.py
    PYTHONPATH=src python3 benchmarks/passes/site_cost.py --cases linear_bias_gelu:bge-small-zh_float32
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.fx

CASES = (
    "linear_bias_gelu:prajjwal1_bert-tiny_float32",
    "linear_bias_gelu:bge-small-zh_float32",
    "add_layer_norm:bge-small-zh_float32",
    "scale_mask_softmax:yujiepan_tiny-random-swin-patch4-window7-224_float32",
    "roll_add_layer_norm:vuiseng9_tiny-random-SwinModel_float32",
    "rms_norm:t5-efficient-large-el2_float32",
    "masked_mean_pooling:splade-mini_float32",
)

_STAMPS: list[int] = []
_now = time.perf_counter_ns
_DEVICE = "cuda"
_REPS = 300


def _sync() -> None:
    if _DEVICE == "cuda":
        torch.cuda.synchronize()


def _stamp() -> None:
    _STAMPS.append(_now())


def stamped(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, list[str]]:
    """``gm`` with a stamp before every computing node and before the output.

    Returns the module and the names of the timed nodes; interval ``k`` of a call
    (``stamps[k + 1] - stamps[k]``) is node ``k``'s host time, and the first name,
    ``<empty>``, is an interval with nothing in it (the cost of a stamp).
    """
    graph = gm.graph
    names = ["<empty>"]
    nodes = [n for n in graph.nodes if n.op not in ("placeholder", "output")]
    first = nodes[0] if nodes else next(n for n in graph.nodes if n.op == "output")
    with graph.inserting_before(first):
        graph.call_function(_stamp)
    for node in [*nodes, next(n for n in graph.nodes if n.op == "output")]:
        with graph.inserting_before(node):
            graph.call_function(_stamp)
        if node.op != "output":
            names.append(node.name)
    gm.recompile()
    return gm, names


def node_us(gm: torch.fx.GraphModule, inputs: list[Any], reps: int = 0) -> dict[str, float]:
    """Median host µs per timed node of a stamped module."""
    reps = reps or _REPS
    gm, names = stamped(gm)
    samples: list[list[int]] = []
    with torch.no_grad():
        for i in range(reps + min(30, reps)):
            _STAMPS.clear()
            gm(*inputs)
            _sync()
            if i >= min(30, reps):
                samples.append([b - a for a, b in zip(_STAMPS, _STAMPS[1:])])
    return {name: statistics.median(s[k] for s in samples) / 1e3 for k, name in enumerate(names)}


def e2e_ms(fn: Callable[..., Any], inputs: list[Any], n: int = 0) -> float:
    n = n or _REPS
    times = []
    with torch.no_grad():
        for i in range(n + min(30, n)):
            _sync()
            t0 = _now()
            fn(*inputs)
            _sync()
            if i >= min(30, n):
                times.append((_now() - t0) / 1e6)
    return statistics.median(times)


class _NoLaunch:
    """Stands in for a Triton kernel: ``kernel[grid](...)`` does nothing."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return self._launch

    @staticmethod
    def _launch(*args: Any, **kwargs: Any) -> None:
        return None


@contextlib.contextmanager
def no_launch(functions: list[Callable[..., Any]]) -> Iterator[None]:
    """Replace every Triton kernel in the modules of ``functions`` by :class:`_NoLaunch`."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    swapped: list[tuple[dict[str, Any], str, Any]] = []
    for fn in functions:
        namespace = fn.__globals__
        for key, value in list(namespace.items()):
            if isinstance(value, (JITFunction, InterpretedFunction)):
                swapped.append((namespace, key, value))
                namespace[key] = _NoLaunch()
    try:
        yield
    finally:
        for namespace, key, value in swapped:
            namespace[key] = value


def measure(case: str, work: Path, tasks: dict[str, Any]) -> dict[str, Any] | None:
    from passnet.passes import PassManager, trace_graph
    from passnet.passes.library import build_reference_task
    from passnet.sample import load_sample

    pass_name, _, graph_name = case.partition(":")
    if pass_name not in tasks:
        tasks[pass_name] = build_reference_task(
            pass_name, work / pass_name, dtypes=(torch.float32, torch.float16, torch.bfloat16)
        )
    task = tasks[pass_name]
    path = next((p for p in task.graphs if p.name == graph_name), None)
    if path is None:
        print(f"{case}: not a graph of this task", file=sys.stderr)
        return None
    sample = load_sample(path)
    module = sample.build_module(_DEVICE)
    inputs = sample.replay_inputs(_DEVICE, 0)
    manager = PassManager.from_dirs(task.pass_dir)

    def rewrite(direct: bool) -> tuple[torch.fx.GraphModule, set[str], list[Any]]:
        result = manager.apply(trace_graph(module))
        gm = result.graph_module
        site_nodes = {s.call.name for s in result.sites}
        for site in result.sites:
            site_nodes |= {u.name for u in site.call.users}  # getitem of multi-output passes
            if direct:
                site.call.target = site.rule.replacement
        gm.recompile()
        return gm, site_nodes, [s.rule.replacement for s in result.sites]

    trace = trace_graph(module)
    pm, sites, functions = rewrite(direct=False)
    direct, _, _ = rewrite(direct=True)
    with torch.no_grad():  # compile the kernels before anything is timed
        pm(*inputs)
        _sync()
    removed = {n.name for n in trace.graph.nodes} - {n.name for n in pm.graph.nodes}
    t_trace = node_us(trace_graph(module), inputs)
    out: dict[str, Any] = {
        "case": case,
        "calls": len(functions),
        "stamp_us": t_trace["<empty>"],
        "trace": _row(e2e_ms(trace, inputs), t_trace, removed),
    }
    for label, gm, ctx in (
        ("pm", pm, contextlib.nullcontext),
        ("direct", direct, contextlib.nullcontext),
        ("nolaunch", direct, lambda: no_launch(functions)),
    ):
        with ctx():
            e2e = e2e_ms(gm, inputs)
            t = node_us(rewrite(direct=label != "pm")[0], inputs)
        out[label] = _row(e2e, t, sites)
    return out


def _row(e2e: float, node_times: dict[str, float], site_nodes: set[str]) -> dict[str, float]:
    return {
        "e2e": e2e,
        "site": sum(v for k, v in node_times.items() if k in site_nodes),
        "rest": sum(v for k, v in node_times.items() if k not in site_nodes and k != "<empty>"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), metavar="PASS:GRAPH")
    parser.add_argument(
        "--device", default="cuda", help="cpu only to try the script (TRITON_INTERPRET=1)"
    )
    parser.add_argument("--reps", type=int, default=300, help="timed calls per measurement")
    args = parser.parse_args(argv)
    global _DEVICE, _REPS
    _DEVICE, _REPS = args.device, args.reps
    if _DEVICE == "cuda" and not torch.cuda.is_available():
        print("site_cost needs a CUDA GPU", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="passnet-site-cost-"))
    tasks: dict[str, Any] = {}
    rows = [r for case in args.cases if (r := measure(case, work, tasks)) is not None]
    print("\n== e2e median ms (no stamps) ==")
    print(f"{'case':62s} {'trace':>7s} {'pm':>7s} {'direct':>7s} {'nolaunch':>8s}")
    for r in rows:
        print(
            f"{r['case'][:62]:62s} {r['trace']['e2e']:7.3f} {r['pm']['e2e']:7.3f} "
            f"{r['direct']['e2e']:7.3f} {r['nolaunch']['e2e']:8.3f}"
        )
    print("\n== host µs per graph call, summed node medians: site nodes | all other nodes ==")
    print("(site: trace = the removed nodes; a stamp interval costs 'stamp' µs per node)")
    print(
        f"{'case':62s} {'n':>2s} {'stamp':>5s} "
        f"{'site:trace':>10s} {'pm':>6s} {'direct':>6s} {'nolnch':>6s} "
        f"{'rest:trace':>10s} {'pm':>7s} {'direct':>7s} {'nolnch':>7s}"
    )
    for r in rows:
        print(
            f"{r['case'][:62]:62s} {r['calls']:2d} {r['stamp_us']:5.2f} "
            f"{r['trace']['site']:10.1f} {r['pm']['site']:6.1f} {r['direct']['site']:6.1f} "
            f"{r['nolaunch']['site']:6.1f} {r['trace']['rest']:10.1f} {r['pm']['rest']:7.1f} "
            f"{r['direct']['rest']:7.1f} {r['nolaunch']['rest']:7.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
