#!/usr/bin/env python3
"""Which rules of a reference pass pay off? An in-process A/B over rule subsets (GPU).

For every graph of one reference task, in one process, timed in alternating rounds
(the order reversed every round; each round the median e2e of ``--reps`` synchronised
calls, Python's collector paused as the harness pauses it):

* ``eager``: the sample's module, as the harness runs it;
* ``traced``: the pass manager's trace of it, not rewritten (what tracing alone costs);
* one ``pass_mgr`` graph per ``--sets`` entry: the task's pass directory with only
  those rules (comma-separated, in the task's order; the other rule files removed,
  so a rule that imports from another needs it in the set), lean launches on.

The table gives the median over rounds and each variant's speedup vs eager, so a
rule whose sites cost more than the eager ops they remove shows as a set that is
slower than the set without it.

Usage (torch + triton with a CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/passes/rule_set_ab.py --pass roll_add_layer_norm \\
        --sets FusedRollAddLayerNorm FusedWindowReverseAddLayerNorm,FusedRollAddLayerNorm \\
               FusedWindowReverseRollAddLayerNorm,FusedWindowReverseAddLayerNorm,FusedRollAddLayerNorm

With ``OUT`` set the rows are also written to ``$OUT/rule_set_ab_<pass>.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from profile_rewrite import alternating_medians  # this folder (the script's own)


def _subset_dir(pass_dir: Path, rules: list[str], where: Path) -> Path:
    """A copy of ``pass_dir`` with only ``rules``: the other rule files are left out (a
    file in pass_dir that is not a listed rule is a helper, and a helper may not compute
    with torch, as a pattern does), so a kept rule must not import from a left-out one."""
    order = json.loads((pass_dir / "sorted_output_pass_rule_names.json").read_text())
    unknown = [r for r in rules if r not in order]
    if unknown:
        raise SystemExit(f"rules not in the pass: {unknown}; known: {order}")
    shutil.copytree(pass_dir, where)
    for rule in set(order) - set(rules):
        (where / f"{rule}.py").unlink()
    (where / "sorted_output_pass_rule_names.json").write_text(json.dumps(rules))
    return where


def measure_graph(path: Path, dirs: dict[str, Path], rounds: int, reps: int) -> dict[str, Any]:
    from passnet.compilers import create_compiler
    from passnet.sample import load_sample, trace_graph

    sample = load_sample(path)
    module = sample.build_module("cuda")
    inputs = sample.replay_inputs("cuda", 0)
    fns: dict[str, Any] = {"eager": module, "traced": trace_graph(module)}
    for name, pass_dir in dirs.items():
        compiler = create_compiler("pass_mgr", pass_dir=str(pass_dir), lean_launch=True)
        fns[name] = compiler.compile(module, inputs)
    gc.collect()
    gc.disable()
    try:
        med, times = alternating_medians(fns, inputs, rounds, reps)
    finally:
        gc.enable()
    return {
        "graph": path.name,
        "median_ms": med,
        "speedup": {name: med["eager"] / m for name, m in med.items()},
        "rounds_ms": times,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pass", dest="pass_name", required=True)
    parser.add_argument(
        "--sets", nargs="+", required=True, help="rule subsets, each comma-separated"
    )
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reps", type=int, default=200, help="timed calls per round")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("rule_set_ab needs a CUDA GPU", file=sys.stderr)
        return 2
    from passnet.dataset import build_reference_task

    work = Path(tempfile.mkdtemp(prefix="passnet-rule-ab-"))
    task = build_reference_task(
        args.pass_name, work / "task", dtypes=[getattr(torch, d) for d in args.dtypes]
    )
    dirs = {
        f"set{i}": _subset_dir(task.pass_dir, s.split(","), work / f"set{i}")
        for i, s in enumerate(args.sets)
    }
    for name, s in zip(dirs, args.sets):
        print(f"{name}: {s}")
    rows = []
    for path in task.graphs:
        row = measure_graph(path, dirs, args.rounds, args.reps)
        rows.append(row)
        print(
            row["graph"][:50],
            " ".join(f"{k} {v:.3f}" for k, v in row["median_ms"].items()),
            flush=True,
        )
    names = list(rows[0]["median_ms"])
    print("\n== e2e median ms over rounds (speedup vs eager) ==")
    print(f"{'graph':50s} " + " ".join(f"{n:>16s}" for n in names))
    for r in rows:
        cells = " ".join(
            f"{r['median_ms'][n]:7.3f} ({r['speedup'][n]:.3f})".rjust(16) for n in names
        )
        print(f"{r['graph'][:50]:50s} {cells}")
    out = os.environ.get("OUT")
    if out:
        Path(out, f"rule_set_ab_{args.pass_name}.json").write_text(
            json.dumps({"sets": dict(zip(dirs, args.sets)), "rows": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
