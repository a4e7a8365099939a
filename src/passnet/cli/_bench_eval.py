"""``passnet bench eval`` and ``passnet bench table``: evaluate a benchmark split, tabulate runs."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from rich.console import Console

from passnet.cli._eval import (
    NOTHING_RAN,
    add_eval_options,
    check_executor_options,
    echo_logs,
    eval_settings,
    parse_config,
)
from passnet.cli._executors import make_executor
from passnet.cli._output import print_warning
from passnet.errors import PassnetError

__all__ = ["add_commands", "default_out", "split_line", "write_bench_results"]

EVAL_EXAMPLES = """\
examples:
  passnet bench eval bench/eval-fusible --compiler inductor --device cuda --out runs/inductor
  passnet bench eval bench --split eval-classical --compiler eager --device cuda
  passnet bench eval eval-fusible --compiler inductor --device cuda   # the shipped benchmark
  passnet bench eval bench/eval-fusible --pass my_passes/ --device cuda # one pass dir, every task
  passnet bench eval bench/eval-fusible --compiler pass_mgr             # each task's own pass_dir
  passnet bench eval eval-classical --compiler inductor --device cuda --tasks 40  # a sample
Every graph of every task is evaluated as `passnet eval` evaluates (the same records, eval.log,
resume, executors); tasks.json in --out says which task each graph belongs to. Re-running the
same command resumes. At the end: the run's benchmark table (passnet bench table), its
aggregated_score.json and report.html. With --tasks K, a sample of the split's tasks in a
fixed order stratified by source family: every compiler's sample of K is the same tasks,
and the table gives G-mean and AS with 95% bootstrap intervals over tasks. docs/bench.md.
"""

TABLE_EXAMPLES = """\
examples:
  passnet bench table runs/eager runs/inductor runs/inductor-scg
  passnet bench table inductor=runs/a cudagraphs=runs/b --markdown      # for docs
  passnet bench table runs/* --json table.json --tolerance -3
Columns (PassNet's Table 1): fast_1, the share of all subgraphs correct with speedup >= 1.0;
Samp. CR, the share of tasks whose every subgraph is correct; Sub. CR, the share of
subgraphs correct; G-mean, the geometric-mean speedup over correct subgraphs; AS over all
subgraphs; then the correct subgraphs' speedups in bins < 1.0, 1.0-1.2, 1.2-2.0, >= 2.0 (a
bin holds its lower bound). Correct: allclose at tolerance level t (default -5, the
baseline of passnet score), as in ES_t. docs/bench.md.
"""


def split_line(split: Any) -> str:
    """``eval-fusible: a sample of 20 of its 200 tasks, 125 graphs (FOLDER)``: what a
    benchmark command is about to run, for its first line."""
    tasks = f"{len(split.tasks)} tasks"
    if split.sampled_from is not None:
        tasks = f"a sample of {len(split.tasks)} of its {split.sampled_from} tasks"
    n_graphs = sum(len(t.graphs) for t in split.tasks)
    return f"{split.name}: {tasks}, {n_graphs} graphs ({split.path})"


def default_out(split: str, compiler: str, pass_dir: str | None) -> Path:
    """``passnet-bench/<split>.<compiler>`` (``.<pass dir name>`` with --pass; an agent
    run on a split: ``.<policy>``)."""
    what = Path(pass_dir).resolve().name if pass_dir else compiler
    return Path("passnet-bench") / f"{split}.{re.sub(r'[^A-Za-z0-9_.+-]', '_', what)}"


def _cmd_bench_eval(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import open_split
    from passnet.evaluate import check_compiler
    from passnet.runner import plan_split, run_split
    from passnet.task import TASK_COMPILER

    _check_tolerance(args)
    request = check_executor_options(args)
    settings = eval_settings(args)
    compiler = args.compiler
    if compiler is None:
        if args.pass_dir is None:
            raise PassnetError("give --compiler NAME, or --pass DIR to apply passes to every task")
        compiler = TASK_COMPILER
    if args.pass_dir is not None and not Path(args.pass_dir).is_dir():
        raise PassnetError("--pass: no such pass directory", path=args.pass_dir)
    check_compiler(compiler, check_config=False)
    split = open_split(args.split_path, args.split, args.tasks)
    plan = plan_split(
        split,
        compiler,
        args.device,
        parse_config(args.config),
        Path(args.pass_dir) if args.pass_dir else None,
    )
    out = Path(args.out) if args.out else default_out(split.name, compiler, args.pass_dir)
    console.print(f"{split_line(split)} → {out}", highlight=False)
    executor = make_executor(args, request)
    try:
        summary = run_split(
            plan,
            out_dir=out,
            device=args.device,
            settings=settings,
            executor=executor,
            console=console,
            jobs=args.jobs or 1,
            prepare_workers=args.prepare_workers,
            overlap=args.overlap,
            overlap_scope=args.overlap_scope,
            echo_logs=echo_logs(args, console),
        )
    finally:
        if executor is not None:
            executor.close()
    console.print(
        f"results: {summary.out_dir / 'results.jsonl'} ({summary.evaluated} new, "
        f"{summary.resumed} resumed; tasks.json names each graph's task)"
    )
    status = 0
    if not any(r.status.ran for r in summary.records):
        print_warning(
            "no graph could be evaluated: every one failed (see results.jsonl's error for "
            "each graph's message and traceback)"
        )
        status = NOTHING_RAN
    if all(r.settings.get("time_graphs") is False for r in summary.records):
        console.print("[yellow]--no-timing: correctness only, no table or score written")
        return status
    label = f"{compiler} on {summary.index.device}"
    write_bench_results(summary, label, args.tolerance, console)
    return status


def write_bench_results(summary: Any, label: str, tolerance: int, console: Console) -> None:
    """A benchmark run's table, aggregated_score.json and report.html (with the
    leaderboard), at the end of ``bench eval`` and of ``agent run`` on a split: ``summary``
    has the run's ``index``, ``records`` and ``out_dir``."""
    from passnet.report import write_html_report
    from passnet.score import BenchRun, bench_row, bench_table, write_score

    run = BenchRun(label, summary.records, summary.index, str(summary.out_dir))
    try:
        row = bench_row(run, tolerance=tolerance)
    except ValueError as exc:  # nothing scorable (every graph a sample error, ...)
        print_warning(f"no table or score: {exc}")
        return
    console.print(bench_table([row], title=f"{summary.index.split}: {label}"))
    console.print(f"score: {write_score(row.score, summary.out_dir)}")
    page = summary.out_dir / "report.html"
    write_html_report(
        {label: summary.records},
        {label: row.score},
        page,
        title=f"passnet: {summary.index.split} with {label}",
        leaderboard=[row],
    )
    console.print(f"report: {page} (passnet bench table / passnet report compare runs)")


def _named_runs(inputs: list[str]) -> list[tuple[str, str]]:
    """(name, path) of each ``[NAME=]RUN``: a name defaults to the folder's; runs whose
    folders are alike in name are named by the path given."""
    pairs = []
    for item in inputs:
        name, sep, src = item.partition("=")
        pairs.append((name, src) if sep else (None, item))
    defaults = [Path(src).name or src for name, src in pairs if name is None]
    named = []
    for name, src in pairs:
        if name is None:
            name = Path(src).name or src
            if defaults.count(name) > 1:
                name = src
        if any(n == name for n, _ in named):
            raise PassnetError(
                f"two runs are named {name!r}: name them apart as NAME=RUN", inputs=item
            )
        named.append((name, src))
    return named


def _cmd_bench_table(args: argparse.Namespace, console: Console) -> int:
    from passnet.score import (
        bench_markdown,
        bench_row,
        bench_table,
        bench_table_dict,
        load_bench_runs,
    )

    _check_tolerance(args)
    runs = [run for name, src in _named_runs(args.runs) for run in load_bench_runs(name, src)]
    rows = []
    for run in runs:
        try:
            rows.append(bench_row(run, tolerance=args.tolerance, speedup_kind=args.speedup))
        except ValueError as exc:  # a bad level, nothing scorable, no device speedups, ...
            raise PassnetError(str(exc), run=run.path) from exc
    if args.markdown:
        console.print(bench_markdown(rows), markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(bench_table(rows))
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(bench_table_dict(rows), indent=2) + "\n", encoding="utf-8")
        console.print(f"written: {path}")
    return 0


def _check_tolerance(args: argparse.Namespace) -> None:
    """``--tolerance``, the baseline level where not given; another level than a numeric
    correctness level is a usage error."""
    from passnet.record import BASELINE_T, TOLERANCE_LEVELS

    if args.tolerance is None:
        args.tolerance = BASELINE_T
    if args.tolerance not in TOLERANCE_LEVELS:
        raise PassnetError(
            f"--tolerance must be a level of numeric correctness, {TOLERANCE_LEVELS[0]}.."
            f"{TOLERANCE_LEVELS[-1]}, got {args.tolerance}"
        )


def _tolerance_option(p: argparse.ArgumentParser) -> None:
    # (the default is resolved when the command runs: the tolerance tables import torch)
    p.add_argument(
        "--tolerance",
        type=int,
        default=None,
        metavar="T",
        help="tolerance level t (-10..1) at which a subgraph counts as correct (default: "
        "-5, the strict-correctness baseline of passnet score)",
    )


def add_commands(bench_sub: Any) -> None:
    """Register ``bench eval`` and ``bench table`` on the ``bench`` command's subparsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = bench_sub.add_parser(
        "eval",
        help="evaluate a compiler (or a pass directory) on every task of a benchmark split",
        epilog=EVAL_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument(
        "split_path",
        metavar="SPLIT",
        help="a split folder (BENCH/eval-fusible), a benchmark folder with --split, or a "
        "split name of the shipped benchmark (eval-fusible)",
    )
    p.add_argument("--split", default=None, metavar="NAME", help="the split of benchmark SPLIT")
    p.add_argument(
        "--pass",
        dest="pass_dir",
        default=None,
        metavar="DIR",
        help="apply this pass directory to every task (instead of each task's own pass_dir; "
        "compiler default: pass_mgr)",
    )
    p.add_argument(
        "--tasks",
        type=int,
        default=None,
        metavar="K",
        help="evaluate a sample of K tasks: the first K of the split's sample order, spread "
        "over the source families in proportion (the same tasks for every compiler; a larger "
        "K resumes a run of a smaller one); the table gives 95%% intervals (default: all)",
    )
    add_eval_options(
        p,
        compiler_default=None,
        compiler_help="registered compiler name, or path/file.py:Class (imported only in "
        "child processes); a pass compiler (pass_mgr) applies each task's own pass_dir, or "
        "--pass DIR",
        out_help="results folder (default: ./passnet-bench/SPLIT.COMPILER, or SPLIT.DIR "
        "with --pass)",
    )
    _tolerance_option(p)
    p.set_defaults(func=_cmd_bench_eval)

    p = bench_sub.add_parser(
        "table",
        help="PassNet's Table 1 (fast_1, Samp./Sub. CR, G-mean, AS) and speedup bins per run",
        epilog=TABLE_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument(
        "runs",
        nargs="+",
        metavar="[NAME=]RUN",
        help="a results folder of passnet bench eval (or passnet eval, a records .jsonl or "
        "log file: tasks read from graph paths); NAME= names its row",
    )
    _tolerance_option(p)
    p.add_argument(
        "--speedup", default="e2e", choices=["e2e", "device"], help="which speedup (default: e2e)"
    )
    p.add_argument("--json", default=None, metavar="FILE", help="also write the table as JSON")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs)")
    p.set_defaults(func=_cmd_bench_table)
