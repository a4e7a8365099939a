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
  guard's inactive check, the pass's Python wrapper, Triton's JIT launch, or with
  ``--lean`` the lean launcher ``pass_mgr`` uses on CUDA, ``passes/_launch.py``);
* ``direct``: the call nodes call the pass's replacement function itself;
* ``nolaunch``: as ``direct``, with every Triton kernel of the pass module replaced by
  a stub whose launch does nothing (the wrapper's own Python, allocation included);
* and, per graph, the e2e median (300 synchronised calls, no stamps) of the trace and
  of each variant.

So ``pm - direct`` is the pass manager's own per-call cost, ``direct - nolaunch`` the
launch (through Triton's JIT, or lean), ``nolaunch`` minus one stamp interval the wrapper.

Usage (torch + triton with a CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/passes/site_cost.py
    PYTHONPATH=src python3 benchmarks/passes/site_cost.py --cases linear_bias_gelu:bge-small-zh_float32
    PYTHONPATH=src python3 benchmarks/passes/site_cost.py --lean
"""

from __future__ import annotations

import argparse
import contextlib
import operator
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.fx
from profile_rewrite import e2e_ms, synchronize  # this folder (the script's own)

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
_LEAN = False


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
            synchronize()
            if i >= min(30, reps):
                samples.append([b - a for a, b in zip(_STAMPS, _STAMPS[1:])])
    return {name: statistics.median(s[k] for s in samples) / 1e3 for k, name in enumerate(names)}


class _NoLaunch:
    """Stands in for a Triton kernel: ``kernel[grid](...)`` does nothing."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return self._launch

    @staticmethod
    def _launch(*args: Any, **kwargs: Any) -> None:
        return None


def _pass_namespaces(functions: list[Callable[..., Any]]) -> list[dict[str, Any]]:
    """The globals of the pass modules ``functions`` use, followed through the functions
    and modules of the same package (a pass importing its kernel from a helper file)."""
    seen: dict[int, dict[str, Any]] = {}
    todo = [fn.__globals__ for fn in functions]
    packages = {fn.__module__.partition(".")[0] for fn in functions}
    while todo:
        namespace = todo.pop()
        if id(namespace) in seen:
            continue
        seen[id(namespace)] = namespace
        for value in namespace.values():
            if isinstance(value, types.FunctionType):
                if value.__module__ and value.__module__.partition(".")[0] in packages:
                    todo.append(value.__globals__)
            elif isinstance(value, types.ModuleType):
                if value.__name__.partition(".")[0] in packages:
                    todo.append(value.__dict__)
    return list(seen.values())


@contextlib.contextmanager
def no_launch(functions: list[Callable[..., Any]]) -> Iterator[None]:
    """Replace every Triton kernel in the pass modules of ``functions`` by :class:`_NoLaunch`."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    swapped: list[tuple[dict[str, Any], str, Any]] = []
    for namespace in _pass_namespaces(functions):
        for key, value in list(namespace.items()):
            if isinstance(value, (JITFunction, InterpretedFunction)):
                swapped.append((namespace, key, value))
                namespace[key] = _NoLaunch()
    try:
        yield
    finally:
        for namespace, key, value in swapped:
            namespace[key] = value


def _allocator(example: Any) -> Callable[..., Any]:
    """A replacement that only allocates outputs shaped like ``example`` (the real one's)."""
    values = example if isinstance(example, (tuple, list)) else [example]
    specs = [(tuple(v.shape), v.dtype, v.device) for v in values]
    if not isinstance(example, (tuple, list)):
        shape, dtype, device = specs[0]

        def allocate_one(*args: Any) -> Any:
            return torch.empty(shape, dtype=dtype, device=device)

        return allocate_one

    def allocate(*args: Any) -> Any:
        return tuple(torch.empty(s, dtype=d, device=dev) for s, d, dev in specs)

    return allocate


def measure(case: str, work: Path, tasks: dict[str, Any]) -> dict[str, Any] | None:
    from passnet.dataset import build_reference_task
    from passnet.passes import PassManager, accelerate_rules
    from passnet.sample import load_sample, trace_graph

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
    if _LEAN:  # as pass_mgr launches on CUDA: "launch" is then the lean launcher's cost
        accelerate_rules(manager.rules)

    examples: dict[int, Any] = {}

    def rewrite(mode: str) -> tuple[torch.fx.GraphModule, set[str], list[Any], set[str]]:
        """The rewritten trace with its call nodes calling per ``mode``; also the names of
        its site nodes, the replacement functions, and the names of the erased trace nodes."""
        gm = trace_graph(module)
        before = list(gm.graph.nodes)
        result = manager.apply(gm)
        gm = result.graph_module
        alive = set(gm.graph.nodes)
        erased = {n.name for n in before if n not in alive}
        site_nodes = {s.call.name for s in result.sites}
        for i, site in enumerate(result.sites):
            site_nodes |= getitems(site.call)  # of multi-output passes
            if mode == "direct":
                site.call.target = site.rule.replacement
            elif mode == "alloc":
                site.call.target = _allocator(examples[i])
            elif mode == "record":
                site.call.target = _recorder(site.rule.replacement, examples, i)
        gm.recompile()
        return gm, site_nodes, [s.rule.replacement for s in result.sites], erased

    trace = trace_graph(module)
    pm, sites, functions, removed = rewrite("pm")
    direct = rewrite("direct")[0]
    with torch.no_grad():  # compile the kernels before anything is timed
        pm(*inputs)
        rewrite("record")[0](*inputs)
        synchronize()
    t_trace = node_us(trace_graph(module), inputs)
    out: dict[str, Any] = {
        "case": case,
        "calls": len(functions),
        "removed": len(removed),
        "stamp_us": t_trace["<empty>"],
        "trace": _row(e2e_ms(trace, inputs, _REPS, min(30, _REPS)), t_trace, removed),
    }
    for label, gm, ctx in (
        ("pm", pm, contextlib.nullcontext),
        ("direct", direct, contextlib.nullcontext),
        ("nolaunch", direct, lambda: no_launch(functions)),
        ("alloc", rewrite("alloc")[0], contextlib.nullcontext),
    ):
        with ctx():
            e2e = e2e_ms(gm, inputs, _REPS, min(30, _REPS))
            t = node_us(
                rewrite("pm" if label == "pm" else label.replace("nolaunch", "direct"))[0], inputs
            )
        out[label] = _row(e2e, t, sites)
    return out


def getitems(node: torch.fx.Node) -> set[str]:
    """The names of the ``operator.getitem`` nodes that unpack ``node``'s outputs.

    Only those: the other users of a single-output replacement are the graph's own
    ops that consume its result, whose time is not the replacement's.
    """
    return {u.name for u in node.users if u.op == "call_function" and u.target is operator.getitem}


def _recorder(fn: Callable[..., Any], store: dict[int, Any], index: int) -> Callable[..., Any]:
    def record(*args: Any) -> Any:
        store[index] = fn(*args)
        return store[index]

    return record


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
    parser.add_argument(
        "--lean", action="store_true", help="pass kernels through the lean launcher, as pass_mgr"
    )
    args = parser.parse_args(argv)
    global _DEVICE, _REPS, _LEAN
    _DEVICE, _REPS, _LEAN = args.device, args.reps, args.lean
    if _DEVICE == "cuda" and not torch.cuda.is_available():
        print("site_cost needs a CUDA GPU", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="passnet-site-cost-"))
    tasks: dict[str, Any] = {}
    rows = [r for case in args.cases if (r := measure(case, work, tasks)) is not None]
    variants = ("trace", "pm", "direct", "nolaunch", "alloc")
    print("\n== e2e median ms (no stamps) ==")
    print(f"{'case':62s} " + " ".join(f"{v:>8s}" for v in variants))
    for r in rows:
        print(f"{r['case'][:62]:62s} " + " ".join(f"{r[v]['e2e']:8.3f}" for v in variants))
    print("\n== host µs per graph call (sum of node medians): site nodes / all nodes ==")
    print("site: trace = the erased nodes; otherwise the replacement calls (and their getitems)")
    print(
        f"{'case':62s} {'rm':>3s} {'n':>2s} {'stamp':>5s} "
        + " ".join(f"{v:>15s}" for v in variants)
    )
    for r in rows:
        cells = " ".join(
            f"{r[v]['site']:6.1f} / {r[v]['site'] + r[v]['rest']:6.1f}" for v in variants
        )
        print(
            f"{r['case'][:62]:62s} {r['removed']:3d} {r['calls']:2d} {r['stamp_us']:5.2f} {cells}"
        )
    print("\n== per call site, µs: eager nodes it removed, and the replacement's parts ==")
    print("(pass manager = pm - direct; launch = direct - nolaunch; wrapper = nolaunch - alloc)")
    print(
        f"{'case':62s} {'eager':>6s} {'pm':>6s} {'passmgr':>7s} {'launch':>6s} {'wrapper':>7s} {'alloc':>6s}"
    )
    for r in rows:
        n = r["calls"]
        site = {v: r[v]["site"] / n for v in variants}
        print(
            f"{r['case'][:62]:62s} {site['trace']:6.1f} {site['pm']:6.1f} "
            f"{site['pm'] - site['direct']:7.1f} {site['direct'] - site['nolaunch']:6.1f} "
            f"{site['nolaunch'] - site['alloc']:7.1f} {site['alloc']:6.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
