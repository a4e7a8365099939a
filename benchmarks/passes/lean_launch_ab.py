#!/usr/bin/env python3
"""Triton's JIT launch against the harness's lean launch, on the reference tasks' graphs (GPU).

For every graph of the chosen reference tasks, in one process: the eager module and
the ``pass_mgr`` compiler's rewritten graph three times: ``jit`` with ``lean_launch``
off (every pass kernel launched through Triton's JIT), ``launcher`` with lean keys
but every launch through the compiled kernel's Python launcher (the lean path before
direct launches: the same rewrite, each kernel given a
:class:`~passnet.passes.FastRun` without direct launches), and ``lean`` as ``pass_mgr``
runs (:func:`~passnet.passes.accelerate_rules`, direct launches where the probe allows
them). The four are timed in alternating
rounds (the order reversed every round), each round the median e2e of ``--reps``
synchronised calls; the table gives the median over rounds, the speedups vs eager,
``lean/jit`` and ``lean/lnch`` (the lean graph's time over the other two's). The
rewritten graphs' outputs are compared for bitwise equality on the same inputs.

Usage (torch + triton with a CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/passes/lean_launch_ab.py
    PYTHONPATH=src python3 benchmarks/passes/lean_launch_ab.py --passes add_layer_norm --dtypes float32

With ``OUT`` set the rows are also written to ``$OUT/lean_launch_ab.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from profile_rewrite import alternating_medians  # this folder (the script's own)

from passnet.sample import flatten_outputs

PASSES = (
    "add_layer_norm",
    "linear_bias_gelu",
    "scale_mask_softmax",
    "roll_add_layer_norm",
    "rms_norm",
    "masked_mean_pooling",
)


def launcher_graph(module: Any, inputs: list[Any], pass_dir: Path) -> Any:
    """The rewritten graph as ``pass_mgr`` makes it, its pass kernels launched with lean
    keys but through Triton's Python launcher (a :class:`FastRun` without direct launches,
    given where ``accelerate_rules`` would give one); run once, as the compiler does."""
    from passnet.passes import (
        FastRun,
        PassManager,
        fast_launch_available,
        kernels_of,
        rule_namespaces,
    )
    from passnet.sample import trace_graph

    manager = PassManager.from_dirs(pass_dir)
    if fast_launch_available()[0]:
        for fn in kernels_of(rule_namespaces([r.replacement for r in manager.rules])):
            if isinstance(fn.__dict__.get("run"), FastRun) or getattr(fn, "pre_run_hooks", None):
                continue
            fn.run = FastRun(fn, direct=False)
    result = manager.apply(trace_graph(module))
    result.raise_if_unmatched()
    with torch.no_grad():
        result.graph_module(*inputs)
    return result.graph_module


def measure_graph(path: Path, pass_dir: Path, rounds: int, reps: int) -> dict[str, Any]:
    from passnet.compilers import create_compiler
    from passnet.passes import direct_launch_available, fast_launch_available
    from passnet.sample import load_sample

    sample = load_sample(path)
    module = sample.build_module("cuda")
    inputs = sample.replay_inputs("cuda", 0)

    def pass_mgr(lean: bool) -> Any:
        compiler = create_compiler("pass_mgr", pass_dir=str(pass_dir), lean_launch=lean)
        return compiler.compile(module, inputs)

    fns: dict[str, Any] = {"eager": module}
    fns["jit"] = pass_mgr(lean=False)
    fns["launcher"] = launcher_graph(module, inputs, pass_dir)  # lean keys, Python launcher
    fns["lean"] = pass_mgr(lean=True)
    with torch.no_grad():
        jit = flatten_outputs(fns["jit"](*inputs))
        equal = all(
            torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
            for name in ("launcher", "lean")
            for a, b in zip(jit, flatten_outputs(fns[name](*inputs)))
        )
    med, times = alternating_medians(fns, inputs, rounds, reps)
    return {
        "graph": path.name,
        "eager_ms": med["eager"],
        "jit_ms": med["jit"],
        "lean_ms": med["lean"],
        "launcher_ms": med["launcher"],
        "speedup_jit": med["eager"] / med["jit"],
        "speedup_launcher": med["eager"] / med["launcher"],
        "speedup_lean": med["eager"] / med["lean"],
        "lean_over_jit": med["lean"] / med["jit"],
        "lean_over_launcher": med["lean"] / med["launcher"],
        "outputs_equal": equal,
        "lean_available": fast_launch_available()[0],
        "direct_available": direct_launch_available(),
        "rounds_ms": times,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", nargs="+", default=list(PASSES))
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=200, help="timed calls per round")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("lean_launch_ab needs a CUDA GPU", file=sys.stderr)
        return 2
    from passnet.dataset import build_reference_task
    from passnet.passes import direct_launch_available, fast_launch_available

    print(
        "lean launch available:",
        fast_launch_available(),
        "direct:",
        direct_launch_available(),
    )
    dtypes = [getattr(torch, d) for d in args.dtypes]
    work = Path(tempfile.mkdtemp(prefix="passnet-lean-ab-"))
    rows: list[dict[str, Any]] = []
    for name in args.passes:
        task = build_reference_task(name, work / name, dtypes=dtypes)
        for path in task.graphs:
            row = {"pass": name, **measure_graph(path, task.pass_dir, args.rounds, args.reps)}
            rows.append(row)
            print(
                f"{name:20s} {row['graph'][:46]:46s} eager {row['eager_ms']:.3f} "
                f"jit {row['jit_ms']:.3f} launcher {row['launcher_ms']:.3f} "
                f"lean {row['lean_ms']:.3f} ms",
                flush=True,
            )
    print("\n== e2e median ms (median of rounds); speedup vs eager; lean/jit, lean/launcher ==")
    print(
        f"{'pass':20s} {'graph':46s} {'eager':>7s} {'jit':>7s} {'lnch':>7s} {'lean':>7s} "
        f"{'s_jit':>6s} {'s_lnch':>6s} {'s_lean':>6s} {'lean/jit':>8s} {'lean/lnch':>9s} {'equal':>5s}"
    )
    for r in rows:
        print(
            f"{r['pass']:20s} {r['graph'][:46]:46s} {r['eager_ms']:7.3f} {r['jit_ms']:7.3f} "
            f"{r['launcher_ms']:7.3f} {r['lean_ms']:7.3f} {r['speedup_jit']:6.3f} "
            f"{r['speedup_launcher']:6.3f} {r['speedup_lean']:6.3f} "
            f"{r['lean_over_jit']:8.3f} {r['lean_over_launcher']:9.3f} {str(r['outputs_equal']):>5s}"
        )
    for key in ("speedup_launcher", "speedup_lean", "lean_over_launcher"):
        print(f"median {key}: {statistics.median(r[key] for r in rows):.3f}")
    out = os.environ.get("OUT")
    if out:
        Path(out, "lean_launch_ab.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
