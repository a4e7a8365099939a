"""What the agent's reward costs, and what the library policy scores beside Inductor.

1. ``pass_evaluator`` latency: a PassEnv episode on one task (default: the reference task
   of ``add_layer_norm``, its 3 BERT graphs in 3 dtypes = 9 graphs) calls the evaluator
   ``--calls`` times on the task's own pass; each call's wall time is printed beside how
   its evaluations split (from the records' ``phases_s``, summed over the graphs):
   ``compile`` (load + compile; ``load`` alone beside it), ``timing`` (the timed calls),
   ``check`` (correctness calls and comparisons), ``start`` (the evaluation children's
   start) and the rest (scoring, the results folder). ``--graphs-per-child 1`` times the
   evaluator with a fresh child per graph, for comparison.
2. The library policy (``--policy library``, no model) on the reference tasks, each
   started from an empty pass_dir, with its final AS beside Inductor's AS on the same
   graphs and the task's own reference pass's AS (the first evaluator call).

On a GPU (figures in docs/results/agent_latency.md; target: <= 20 s per call on one H100)::

    PYTHONPATH=src python3 benchmarks/agent_latency.py --device cuda --work /tmp/agent-lat

On the CPU (Triton interpreted; a small task, correctness checks more than timing)::

    TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/agent_latency.py \\
        --reference masked_mean_pooling --dtypes float32 --calls 2 \\
        --policy-tasks masked_mean_pooling --warmup 1 --trials 3 --work /tmp/agent-lat
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path

import torch
from rich.console import Console

from passnet.agent import (
    EnvConfig,
    LibraryPolicy,
    PassEnv,
    ToolCall,
    evaluate_pass_dir,
    quick_settings,
    read_trajectories,
    run_agent,
)
from passnet.dataset import build_reference_task
from passnet.evaluate import EvalSettings
from passnet.passes.library import install_pass, reference_passes
from passnet.runner import WorkItem, run_evaluations
from passnet.score import compute_scores
from passnet.task import MANIFEST_FILE, Task, load_task, write_manifest


def _settings(args: argparse.Namespace) -> EvalSettings:
    if args.warmup is None and args.trials is None:
        return EvalSettings(num_threads=args.threads)
    return EvalSettings(
        warmup=args.warmup or 25,
        trials=args.trials or 100,
        min_warmup_s=0.0,
        adaptive=False,
        num_threads=args.threads,
    )


def _task(name: str, work: Path, dtypes: list[torch.dtype], scope: str) -> Task:
    folder = work / f"task-{name}-{scope}-{'-'.join(str(d).removeprefix('torch.') for d in dtypes)}"
    if (folder / "graph_list.txt").is_file():
        return load_task(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return build_reference_task(name, folder, dtypes=dtypes, scope=scope)


def latency(task: Task, args: argparse.Namespace, final: EvalSettings) -> float | None:
    """Call pass_evaluator ``args.calls`` times; print each call's split; the first call's AS."""
    quick = quick_settings(final) if args.quick else final
    if args.graphs_per_child is not None:
        quick = dataclasses.replace(quick, graphs_per_child=args.graphs_per_child)
    config = EnvConfig(device=args.device, final_settings=final, eval_settings=quick)
    env = PassEnv(config, workdir=args.work / "latency")
    env.reset(task)
    print(
        f"\n== pass_evaluator on {task.name}: {len(task.graphs)} graphs, {args.device}, "
        f"{quick.warmup} warm-up + {quick.trials} timed calls per side"
        f"{'' if quick.adaptive else ' (exactly)'}, up to {quick.graphs_per_child} graphs per "
        "evaluation child"
    )
    print(
        f"{'call':>4s} {'wall s':>8s} {'start s':>8s} {'compile s':>10s} {'(load s)':>9s} "
        f"{'timing s':>9s} {'check s':>8s} {'other s':>8s} {'AS':>8s}  statuses"
    )
    first_as = None
    for i in range(1, args.calls + 1):
        t0 = time.perf_counter()
        _, _, _, _, info = env.step(ToolCall(f"c{i}", "pass_evaluator", "{}"))
        wall = time.perf_counter() - t0
        ev = info["evaluation"]
        phases = ev.phase_seconds()
        other = wall - phases["start"] - phases["compile"] - phases["timing"] - phases["check"]
        statuses = json.dumps(
            {
                s: sum(r.status.value == s for r in ev.records)
                for s in sorted({r.status.value for r in ev.records})
            }
        )
        score = ev.as_score if ev.as_score is not None else float("nan")
        first_as = score if first_as is None else first_as
        load = sum(r.phases_s.get("load", 0.0) for r in ev.records)
        print(
            f"{i:4d} {wall:8.2f} {phases['start']:8.2f} {phases['compile']:10.2f} {load:9.2f} "
            f"{phases['timing']:9.2f} {phases['check']:8.2f} {other:8.2f} {score:8.4f}  {statuses}"
        )
    env.close()
    return first_as


def inductor_as(task: Task, args: argparse.Namespace, final: EvalSettings) -> float:
    items = [WorkItem(p, e) for p, e in zip(task.graphs, task.graph_entries)]
    summary = run_evaluations(
        items,
        compiler="inductor",
        device=args.device,
        settings=final,
        out_dir=args.work / "inductor" / task.name,
        console=Console(quiet=True),
    )
    return compute_scores(summary.records, group_of=lambda r: task.name).score


def library_policy(
    task: Task, args: argparse.Namespace, final: EvalSettings
) -> tuple[float, int, float]:
    """The library policy's episode on the task started from an empty pass_dir:
    (reward, steps, wall seconds)."""
    for path in task.pass_dir.iterdir():
        if path.name != MANIFEST_FILE and path.is_file():
            path.unlink()
    write_manifest(task.pass_dir, [])
    config = EnvConfig(
        device=args.device,
        final_settings=final,
        eval_settings=quick_settings(final) if args.quick else final,
    )
    summary = run_agent([task.path], LibraryPolicy, args.work / "library", config=config)
    if summary.failed:
        raise RuntimeError(summary.failed)
    if not summary.trajectories:  # resumed: the episode is already in the folder
        done = [
            t
            for t in read_trajectories(args.work / "library" / "trajectories.jsonl")
            if t.task == str(task.path.resolve())
        ]
        t = done[-1]
    else:
        (t,) = summary.trajectories
    return t.reward, t.steps, t.wall_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", default="add_layer_norm", help="task of this reference pass")
    parser.add_argument("--scope", default="graph", choices=("graph", "site"))
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--work", type=Path, default=Path("/tmp/passnet-agent-latency"))
    parser.add_argument("--warmup", type=int, default=None, help="default: the harness's")
    parser.add_argument("--trials", type=int, default=None, help="default: the harness's")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--quick",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the evaluator's quick timing (5 + 20 calls), as in episodes (default: on)",
    )
    parser.add_argument(
        "--graphs-per-child",
        type=int,
        default=None,
        help="graphs per evaluation child in pass_evaluator calls (default: the evaluator's)",
    )
    parser.add_argument(
        "--policy-tasks",
        nargs="*",
        default=[p.name for p in reference_passes()],
        help="reference passes whose tasks the library policy runs on (default: all)",
    )
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("--device cuda, but torch sees no GPU", file=sys.stderr)
        return 2
    dtypes = [getattr(torch, d) for d in args.dtypes]
    final = _settings(args)
    args.work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    task = _task(args.reference, args.work, dtypes, args.scope)
    print(
        f"task {task.name}: {len(task.graphs)} graphs ({time.perf_counter() - t0:.1f} s to build)"
    )
    latency(task, args, final)
    if args.policy_tasks:
        print(
            f"\n== library policy vs Inductor ({args.device}; final evaluation: "
            f"{final.warmup} warm-up + {final.trials} timed calls)"
        )
        print(
            f"{'task':40s} {'graphs':>6s} {'reference AS':>12s} {'library AS':>10s} "
            f"{'steps':>5s} {'wall s':>7s} {'Inductor AS':>11s}"
        )
        for name in args.policy_tasks:
            ptask = _task(name, args.work / "policy", dtypes, "graph")
            reference = reference_as(name, ptask, args, final)
            reward, steps, wall = library_policy(ptask, args, final)
            inductor = inductor_as(ptask, args, final)
            print(
                f"{ptask.name:40s} {len(ptask.graphs):6d} {reference:12.4f} {reward:10.4f} "
                f"{steps:5d} {wall:7.1f} {inductor:11.4f}"
            )
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


def reference_as(name: str, task: Task, args: argparse.Namespace, final: EvalSettings) -> float:
    """AS of reference pass ``name`` itself on the task (a copy of it, not the task's pass_dir)."""
    folder = args.work / "reference" / name
    shutil.rmtree(folder, ignore_errors=True)
    install_pass(name, folder / "pass_dir")
    ev = evaluate_pass_dir(
        task, folder / "pass_dir", folder / "eval", settings=final, device=args.device
    )
    return ev.as_score if ev.as_score is not None else float("nan")


if __name__ == "__main__":
    sys.exit(main())
