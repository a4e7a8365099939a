#!/usr/bin/env python3
"""Where does a rewritten graph's time go? A diagnostic for the reference passes (GPU).

Two measurements, in one process, printed as two tables:

A. Host cost of one Triton launch: a trivial kernel launched through the JIT
   (``kernel[grid](...)``, what pass code does), through the compiled kernel's
   runner, and through its raw launcher; eager torch ops for comparison. Host
   microseconds per call in a loop without synchronisation (the best of 5 loops).

B. For task graphs of the reference passes (float32): the end-to-end median
   (300 calls, synchronised) of

   * ``eager``: the sample's ``GraphModule`` from ``model.py``, as the harness runs it;
   * ``folded``: a plain FX trace, which runs constant factory calls
     (``torch.arange(0, 12)``, ``torch.zeros(...)``) at trace time and keeps only
     their results — what the pass manager traced before it kept them as nodes;
   * ``traced``: the pass manager's trace (:func:`passnet.sample.trace_graph`), not rewritten;
   * ``rewritten``: that trace after the pass directory's rewrite (what ``pass_mgr`` runs);

   and, per node (``torch.fx.Interpreter`` with a host clock around each node), the
   host microseconds of the eager nodes the rewrite removed against those of the
   replacement calls that took their place.

``traced`` vs ``eager`` shows what tracing alone changes; ``rewritten`` vs ``traced``
is what the passes change.

C. For the same graphs, host-bound or device-bound? ``torch.profiler`` (CUDA activity)
   over 20 calls of ``traced`` and ``rewritten``: kernels and device microseconds per
   call, the host microseconds per call to enqueue the graph without synchronising,
   and the device time of the kernels the rewrite removed against the kernels it added
   (top three of each by time). A graph whose enqueue time is below its device time is
   device-bound, and only device time can speed it up.

Usage (torch + triton with a CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/passes/profile_rewrite.py
    PYTHONPATH=src python3 benchmarks/passes/profile_rewrite.py --cases rms_norm:t5-efficient-large-el2_float32
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.fx
import triton
import triton.language as tl

CASES = (
    "add_layer_norm:prajjwal1_bert-tiny_float32",
    "add_layer_norm:bge-small-zh_float32",
    "linear_bias_gelu:bge-small-zh_float32",
    "scale_mask_softmax:yujiepan_tiny-random-swin-patch4-window7-224_float32",
    "scale_mask_softmax:vuiseng9_tiny-random-SwinModel_float32",
    "roll_add_layer_norm:vuiseng9_tiny-random-SwinModel_float32",
    "rms_norm:t5-efficient-large-el2_float32",
    "masked_mean_pooling:splade-mini_float32",
)


@triton.jit
def _add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


def host_us_per_call(fn: Callable[[], Any], n: int = 4000) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    loops = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        loops.append((time.perf_counter_ns() - t0) / n / 1e3)
        torch.cuda.synchronize()
    return min(loops)


def launch_overhead() -> None:
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    compiled = _add_one[(1,)](x, y, 1024, 1024)  # the JIT returns the compiled kernel
    torch.cuda.synchronize()
    runner = compiled[(1, 1, 1)]
    rows: list[tuple[str, Callable[[], Any]]] = [
        ("jit: kernel[grid](...)", lambda: _add_one[(1,)](x, y, 1024, 1024)),
        ("compiled kernel runner", lambda: runner(x, y, 1024, 1024)),
    ]
    try:  # the raw launcher's signature is Triton-version specific
        stream = torch.cuda.current_stream().cuda_stream
        fn, meta = compiled.function, compiled.packed_metadata
        compiled.run(1, 1, 1, stream, fn, meta, None, None, None, x, y, 1024, 1024)
        rows.append(
            (
                "raw launcher",
                lambda: compiled.run(1, 1, 1, stream, fn, meta, None, None, None, x, y, 1024, 1024),
            )
        )
    except Exception as exc:  # noqa: BLE001 - report and go on
        print(f"(raw launcher not measured: {type(exc).__name__}: {exc})")
    rows += [
        ("torch.add(x, 1, out=y)", lambda: torch.add(x, 1.0, out=y)),
        ("x + 1", lambda: x + 1.0),
        ("torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("F.layer_norm [8, 128]", lambda: torch.nn.functional.layer_norm(x.view(8, 128), (128,))),
    ]
    print(f"== A: host µs per call, no synchronisation (Triton {triton.__version__}) ==")
    for name, f in rows:
        print(f"{name:28s} {host_us_per_call(f):7.2f}")


def synchronize() -> None:
    """Wait for the GPU when CUDA is in use (a no-op on a CPU-only run)."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def e2e_ms(fn: Callable[..., Any], args: list[Any], n: int = 300, warmup: int = 30) -> float:
    """Median ms of ``n`` synchronised calls after ``warmup`` calls."""
    times = []
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        for _ in range(n):
            synchronize()
            t0 = time.perf_counter_ns()
            fn(*args)
            synchronize()
            times.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(times)


def alternating_medians(
    fns: dict[str, Callable[..., Any]], args: list[Any], rounds: int, reps: int
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Each of ``fns`` timed in ``rounds`` alternating rounds (the order reversed every
    round), a round being :func:`e2e_ms` of ``reps`` calls; the median over rounds per
    name, and the rounds themselves."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            times[name].append(e2e_ms(fns[name], args, n=reps, warmup=20))
    return {name: statistics.median(v) for name, v in times.items()}, times


class _TimedInterpreter(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.host_us: dict[str, list[float]] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        t0 = time.perf_counter_ns()
        out = super().run_node(n)
        self.host_us.setdefault(n.name, []).append((time.perf_counter_ns() - t0) / 1e3)
        return out


def node_host_us(gm: torch.fx.GraphModule, args: list[Any], reps: int = 200) -> dict[str, float]:
    it = _TimedInterpreter(gm)
    with torch.no_grad():
        for _ in range(reps):
            it.run(*args)
            torch.cuda.synchronize()
    return {k: statistics.median(v[reps // 10 :]) for k, v in it.host_us.items()}


def enqueue_us(fn: Callable[..., Any], args: list[Any], n: int = 50) -> float:
    """Host microseconds per call when calls are only enqueued (one synchronisation at the end)."""
    with torch.no_grad():
        for _ in range(10):
            fn(*args)
        loops = []
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn(*args)
            loops.append((time.perf_counter_ns() - t0) / n / 1e3)
            torch.cuda.synchronize()
    return min(loops)


def device_kernels(fn: Callable[..., Any], args: list[Any], n: int = 20) -> dict[str, list[float]]:
    """Kernel name -> [launches per call, device µs per call] under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(10):
            fn(*args)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                fn(*args)
            torch.cuda.synchronize()
    kernels: dict[str, list[float]] = {}
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        entry = kernels.setdefault(ev.name, [0.0, 0.0])
        entry[0] += 1 / n
        entry[1] += ev.time_range.elapsed_us() / n
    return kernels


def _short(name: str, width: int = 34) -> str:
    name = re.sub(r"\(.*", "", name.replace("void ", "")).split("::")[-1]
    return name[:width]


def device_side(cases: list[tuple[str, Any, Any, list[Any]]]) -> None:
    print("\n== C: device µs per call (torch.profiler), host µs to enqueue one call ==")
    print(
        f"{'pass':20s} {'graph':34s} {'k.trc':>5s} {'k.rew':>5s} {'dev.trc':>8s} {'dev.rew':>8s} "
        f"{'enq.trc':>8s} {'enq.rew':>8s} {'removed':>8s} {'added':>8s}"
    )
    details = []
    for label, traced, rewritten, inputs in cases:
        before, after = device_kernels(traced, inputs), device_kernels(rewritten, inputs)
        removed = {k: before[k][1] - after.get(k, [0, 0])[1] for k in before}
        removed = {k: v for k, v in removed.items() if v > 0.05}
        added = {k: after[k][1] - before.get(k, [0, 0])[1] for k in after}
        added = {k: v for k, v in added.items() if v > 0.05}
        pass_name, graph_name = label.split(":")
        print(
            f"{pass_name:20s} {graph_name[:34]:34s} "
            f"{sum(v[0] for v in before.values()):5.0f} {sum(v[0] for v in after.values()):5.0f} "
            f"{sum(v[1] for v in before.values()):8.1f} {sum(v[1] for v in after.values()):8.1f} "
            f"{enqueue_us(traced, inputs):8.1f} {enqueue_us(rewritten, inputs):8.1f} "
            f"{sum(removed.values()):8.1f} {sum(added.values()):8.1f}"
        )
        top = sorted(removed.items(), key=lambda kv: -kv[1])[:3]
        new = sorted(added.items(), key=lambda kv: -kv[1])[:3]
        details.append(
            f"  {label[:60]}\n    removed: "
            + ", ".join(f"{_short(k)} {v:.1f}" for k, v in top)
            + "\n    added:   "
            + ", ".join(f"{_short(k)} {v:.1f}" for k, v in new)
        )
    print("\n".join(details))


def decompose(cases: list[str], lean: bool = False) -> list[tuple[str, Any, Any, list[Any]]]:
    from passnet.dataset import build_reference_task
    from passnet.passes import PassManager, accelerate_rules
    from passnet.sample import load_sample, trace_graph

    work = Path(tempfile.mkdtemp(prefix="passnet-profile-"))
    tasks: dict[str, Any] = {}
    kept: list[tuple[str, Any, Any, list[Any]]] = []
    print("\n== B: whole graph, e2e median ms; host µs of removed eager nodes vs replacements ==")
    print(
        f"{'pass':20s} {'graph':44s} {'eager':>7s} {'folded':>7s} {'traced':>7s} {'rewrit':>7s} "
        f"{'rew/trc':>7s} {'removed':>8s} {'replace':>8s} {'calls':>5s}"
    )
    for case in cases:
        pass_name, _, graph_name = case.partition(":")
        if pass_name not in tasks:
            tasks[pass_name] = build_reference_task(
                pass_name, work / pass_name, dtypes=(torch.float32,)
            )
        task = tasks[pass_name]
        path = next((p for p in task.graphs if p.name == graph_name), None)
        if path is None:
            print(f"{pass_name:20s} {graph_name[:44]:44s} (not a graph of this task)")
            continue
        sample = load_sample(path)
        module = sample.build_module("cuda")
        inputs = sample.replay_inputs("cuda", 0)
        folded = trace_graph(module, locations=False, keep_factories=False)
        traced = trace_graph(module)
        manager = PassManager.from_dirs(task.pass_dir)
        if lean:  # as pass_mgr launches on CUDA (passes/_launch.py)
            accelerate_rules(manager.rules)
        result = manager.apply(trace_graph(module))
        rewritten = result.graph_module
        t_eager, t_folded = e2e_ms(module, inputs), e2e_ms(folded, inputs)
        t_traced, t_rewritten = e2e_ms(traced, inputs), e2e_ms(rewritten, inputs)
        before, after = node_host_us(traced, inputs), node_host_us(rewritten, inputs)
        removed = sum(v for k, v in before.items() if k not in after)
        calls = {site.call.name for site in result.sites}
        replaced = sum(v for k, v in after.items() if k in calls)
        print(
            f"{pass_name:20s} {graph_name[:44]:44s} {t_eager:7.3f} {t_folded:7.3f} {t_traced:7.3f} "
            f"{t_rewritten:7.3f} {t_traced / t_rewritten:7.3f} {removed:8.1f} {replaced:8.1f} "
            f"{len(calls):5d}"
        )
        kept.append((case, traced, rewritten, inputs))
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), metavar="PASS:GRAPH")
    parser.add_argument("--skip-launch", action="store_true", help="no table A")
    parser.add_argument(
        "--lean", action="store_true", help="pass kernels through the lean launcher, as pass_mgr"
    )
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("profile_rewrite needs a CUDA GPU", file=sys.stderr)
        return 2
    if not args.skip_launch:
        launch_overhead()
    device_side(decompose(args.cases, lean=args.lean))
    return 0


if __name__ == "__main__":
    sys.exit(main())
