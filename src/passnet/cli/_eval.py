"""``passnet eval`` and ``passnet samples``: evaluate a compiler on samples or tasks."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from passnet.cli._executors import add_executor_arguments, executor_request, make_executor
from passnet.cli._output import print_warning
from passnet.errors import PassnetError

if TYPE_CHECKING:
    from passnet.evaluate import EvalSettings

__all__ = [
    "add_commands",
    "add_eval_options",
    "check_executor_options",
    "echo_logs",
    "eval_settings",
    "parse_config",
]

EVAL_EXAMPLES = """\
examples:
  passnet eval src/passnet/data/graphnet --compiler inductor --device cpu --out runs/inductor
  passnet eval timm/resnet18 --compiler eager --warmup 5 --trials 20
  passnet eval samples.txt --compiler inductor --device cuda --jobs 8   # one worker per GPU
  passnet eval samples.txt --device cuda --executor ray --ray-address HEAD:6379  # a Ray cluster
  passnet eval TASK_DIR --compiler pass_mgr                              # a PassBench task
Re-running the same command resumes: finished evaluations in --out are skipped.
--out's aggregated_score.json scores all its graphs evaluated with this compiler,
configuration and device, those of earlier commands with other PATHs too (a task: its graphs).
On a terminal each graph gets one line as it ends (--log-lines: its PassNet log too); in a
file or pipe the PassNet log lines are echoed (--quiet: not). eval.log keeps them always.
Exit status 1: no graph of the command could be evaluated (all failed); records are kept.
"""

NOTHING_RAN = 1
"""Exit status of an eval in which no graph ran (every one a sample error, compile error,
...): a script or CI job sees the failure, though records, log and score are written."""


OVERLAP_MEASURE_S = 60.0
"""``--max-measure-s`` under ``--overlap`` unless given: a timing turn stops the run's other
evaluations while it lasts (benchmarks/overlap_cpu_turns.py: without a bound one turn
held a loaded 2-core run for minutes)."""


def parse_config(items: Sequence[str]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PassnetError(f"--config expects KEY=VALUE, got {item!r}")
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value
    return config


def eval_settings(args: argparse.Namespace) -> EvalSettings:
    """The :class:`~passnet.evaluate.EvalSettings` of an evaluating command's options
    (:func:`add_eval_options`); values out of range are a usage error."""
    from passnet.evaluate import EvalSettings

    defaults = EvalSettings()
    try:
        # An explicit --warmup / --trials is what is done, nothing more: warm-up calls
        # without a minimum time, and exactly that many timed calls per side (unless
        # --adaptive asks for adaptive repetition on top).
        return EvalSettings(
            warmup=defaults.warmup if args.warmup is None else args.warmup,
            trials=defaults.trials if args.trials is None else args.trials,
            min_warmup_s=defaults.min_warmup_s if args.warmup is None else 0.0,
            adaptive=args.trials is None or args.adaptive,
            seed=args.seed,
            timeout_s=args.timeout,
            num_threads=args.threads,
            time_graphs=not args.no_timing,
            flush_l2=args.flush_l2,
            replay_timing=args.replay_timing,
            profile_kernels=args.profile_kernels,
            fixed_layout=not args.random_layout,
            graphs_per_child=args.graphs_per_child,
            max_measure_s=(
                OVERLAP_MEASURE_S
                if args.max_measure_s is None and args.overlap > 1
                else args.max_measure_s
            ),
        )
    except ValueError as exc:
        raise PassnetError(
            f"--warmup/--trials/--timeout/--threads/--graphs-per-child/--max-measure-s: {exc}"
        ) from exc


def echo_logs(args: argparse.Namespace, console: Console) -> bool:
    """Whether to echo each graph's PassNet log: in a file or pipe (entry.sh >> LOG) unless
    --quiet; on a terminal only when asked (--log-lines): there, progress and one line per
    graph."""
    return bool(args.log_lines or (not args.quiet and not console.is_terminal))


def _cmd_eval(args: argparse.Namespace, console: Console) -> int:
    from passnet.runner import plan_items, run_evaluations

    request = check_executor_options(args)
    settings = eval_settings(args)
    from passnet.evaluate import check_compiler

    # An unknown name fails here, listing the known ones; a file.py:Class is imported and
    # checked in a child process, never in this one.
    check_compiler(args.compiler, check_config=False)
    config = parse_config(args.config)
    runs = _eval_targets(args.paths, args.compiler, config, args.out)
    # Every error of the command stops it before any graph runs: the configuration of
    # each run (a pass compiler's pass_dir and manifest, the packages its passes import)
    # and each run's samples are checked first.
    planned = []
    for paths, run_config, out_dir, score_dir in runs:
        check_compiler(args.compiler, run_config)
        items = plan_items(paths)
        if not items:
            raise PassnetError(
                "no samples found (a sample is a folder with model.py)",
                paths=" ".join(map(str, paths)),
            )
        planned.append((items, run_config, out_dir, score_dir))
    executor = make_executor(args, request)
    status = 0
    ran = 0
    try:
        for items, run_config, out_dir, score_dir in planned:
            summary = run_evaluations(
                items,
                compiler=args.compiler,
                compiler_config=run_config,
                device=args.device,
                settings=settings,
                out_dir=out_dir,
                jobs=args.jobs or 1,
                prepare_workers=args.prepare_workers,
                overlap=args.overlap,
                overlap_scope=args.overlap_scope,
                executor=executor,
                console=console,
                echo_logs=echo_logs(args, console),
            )
            _print_summary(summary.records, console)
            ran += sum(r.status.ran for r in summary.records)
            # The score describes the results folder: its records of this compiler, configuration
            # and device, earlier commands' too. A task's is the task's: its graph list.
            scored = summary.records if score_dir else summary.folder_records
            if len(scored) > len(summary.records):
                console.print(
                    f"score: the {len(scored)} graphs of {out_dir} evaluated with this compiler, "
                    f"configuration and device ({len(scored) - len(summary.records)} by earlier "
                    "commands)"
                )
            status |= _write_scores(scored, out_dir, score_dir, args.compiler, console)
            console.print(
                f"results: {summary.out_dir / 'results.jsonl'} ({summary.evaluated} new, {summary.resumed} resumed)"
            )
    finally:
        if executor is not None:
            executor.close()
    if not ran:
        print_warning(
            "no graph could be evaluated: every one failed (see the note column, and "
            "results.jsonl's error for the whole message and traceback)"
        )
        status |= NOTHING_RAN
    return status


def check_executor_options(args: argparse.Namespace) -> Any:
    """The executor request of an evaluating command; options that do not fit together
    (here, or for the executor named) stop the command before anything runs."""
    if args.prepare_workers < 0:
        raise PassnetError(f"--prepare-workers must be 0 or more, got {args.prepare_workers}")
    if args.overlap < 1:
        raise PassnetError(f"--overlap must be 1 or more, got {args.overlap}")
    if args.overlap > 1 and not args.device.startswith("cuda"):
        raise PassnetError(
            f"--overlap runs several evaluations per GPU (--device cuda), got --device "
            f"{args.device}: on the CPU, timing uses every core"
        )
    return executor_request(
        args,
        "evaluations",
        device=args.device,
        prepare_workers=args.prepare_workers,
        overlap=args.overlap,
        graphs_per_child=args.graphs_per_child,
    )


def _eval_targets(
    paths: list[str], compiler: str, config: dict[str, Any], out: str | None
) -> list[tuple[list[str], dict[str, Any], Path, Path | None]]:
    """Each task folder is its own run (its pass_dir feeds pass compilers); plain paths form one run."""
    from passnet.task import load_task

    tasks = [
        p
        for p in paths
        if (Path(p) / "graph_list.txt").is_file() and (Path(p) / "pass_dir").is_dir()
    ]
    plain = [p for p in paths if p not in tasks]
    several = len(tasks) + bool(plain) > 1
    if out and several:
        names = [Path(t).resolve().name for t in tasks]
        clash = sorted({n for n in names if names.count(n) > 1})
        if clash:
            raise PassnetError(
                f"several tasks are named {clash[0]!r}: their results would share "
                f"{Path(out) / clash[0]}; evaluate them with separate --out folders"
            )
    runs = []
    from passnet.evaluate import check_compiler

    applies_passes = check_compiler(compiler, check_config=False).applies_passes
    for t in tasks:
        task = load_task(t)
        task_cfg = dict(config)
        if applies_passes:
            task_cfg = {**task.compiler_config(), **config}
        out_dir = (
            Path(out) / task.path.name
            if out and several
            else Path(out or task.path / "passnet-out")
        )
        runs.append(([t], task_cfg, out_dir, task.path))
    if plain:
        runs.append((plain, config, Path(out or "passnet-out"), None))
    return runs


def _print_summary(records: list[Any], console: Console) -> None:
    from rich.table import Table

    from passnet.runner import label_width, short_labels

    table = Table(title="evaluations")
    # the replay and kernel columns only where they were asked for (--replay-timing,
    # --profile-kernels)
    replay = any(r.settings.get("replay_timing") for r in records)
    kernels = any(r.settings.get("profile_kernels") for r in records)
    # device time only where there is any (CUDA): on the CPU the column is all "-"
    device = any(r.speedup_device for r in records)
    columns = ["graph", "status", "speedup e2e"]
    columns += ["speedup device"] if device else []
    columns += ["speedup replay"] if replay else []
    columns += ["speedup kernels"] if kernels else []
    # Graph names keep what tells them apart (their tail) in a quarter of the width; rich
    # would cut them at the end, where names of one run are alike. The note wraps.
    names = short_labels([r.graph for r in records], label_width(console.width))
    table.add_column("graph", no_wrap=True, min_width=max(map(len, names), default=5))
    for col in (*columns[1:], "max diff", "floor"):
        table.add_column(col)
    table.add_column("note", ratio=1)
    for r, name in zip(records, names, strict=True):
        cells = [name, r.status.value, _x(r.speedup_e2e)]
        cells += [_x(r.speedup_device)] if device else []
        cells += [_x(r.speedup_replay)] if replay else []
        cells += [_x(r.speedup_kernels)] if kernels else []
        cells += [f"{r.correctness.max_diff:.2e}" if r.correctness else "-"]
        table.add_row(*cells, _floor(r), _note(r, replay, kernels))
    contended = sum(1 for r in records if r.cpu_contention and r.cpu_contention.contended)
    broken = sum(1 for r in records if r.turn and r.turn.disturbed)
    captions = []
    if contended:
        captions.append(
            f"{contended} of {len(records)} graphs were timed while other processes competed "
            "for the CPU: their speedups are not theirs alone (measure them again on a quiet "
            "machine)"
        )
    if broken:
        captions.append(
            f"{broken} of {len(records)} graphs' timing turns were broken for lasting too "
            "long: the evaluations they had stopped ran during their timing (measure them "
            "again)"
        )
    if captions:
        table.caption = "\n".join(captions)
    console.print(table)


def _floor(r: Any) -> str:
    """The graph's bound and the fraction of its hardware floor the compiled side reached."""
    roof = r.roofline
    if roof is None or roof.compiled_fraction is None:
        return "-"
    return f"{roof.bound} {roof.share(roof.compiled_fraction)}"


def _note(r: Any, replay: bool, kernels: bool) -> str:
    """The error, or else every timing remark that applies (unstable, GPU clock held back,
    no replay, no profile)."""
    if r.error:
        return _error_note(r.error)
    notes = r.timing_remarks()
    if r.gpu and r.gpu.below_limit_samples:
        why = f" ({', '.join(r.gpu.reasons)})" if r.gpu.reasons else ""
        notes.append(f"GPU clock down to {r.gpu.sm_mhz_min}/{r.gpu.sm_mhz_limit} MHz{why}")
    if replay and r.compiled and r.compiled.replay_error:
        notes.append(r.compiled.replay_error[:60])
    if kernels and r.compiled and r.compiled.kernels_error:
        notes.append(r.compiled.kernels_error[:60])
    return "; ".join(notes)


NOTE_CHARS = 200
"""An error's first line is shown up to this many characters (records keep it whole)."""


def _error_note(error: Any) -> str:
    """The error's headline (where it happened first), cut to :data:`NOTE_CHARS`."""
    note = error.headline()
    return note if len(note) <= NOTE_CHARS else note[: NOTE_CHARS - 1] + "…"


def _x(speedup: float | None) -> str:
    return f"{speedup:.3f}" if speedup else "-"


def _result_file(stem: str, suffix: str, compiler: str, task: bool) -> str:
    """``<stem><suffix>`` (``aggregated_score.json``, ``report.html``); in a task's folders,
    only for the evaluation of the task's own passes (what its entry.sh runs): another
    compiler's on the task's graphs (a baseline) is ``<stem>.<compiler><suffix>``, so
    neither overwrites the other."""
    from passnet.task import TASK_COMPILER

    return f"{stem}.{compiler}{suffix}" if task and compiler != TASK_COMPILER else stem + suffix


def _write_scores(
    records: list[Any], out_dir: Path, score_dir: Path | None, compiler: str, console: Console
) -> int:
    from passnet.score import compute_scores, score_table, write_score

    scorable = [r for r in records if r.status.value not in ("sample_error", "too_large")]
    if not scorable:
        print_warning("no scorable graphs (all are sample errors or too large): no score written")
        return 0
    if all(r.settings.get("time_graphs") is False for r in scorable):
        # Correctness only: a score would charge every graph as untimed (a failure).
        console.print("[yellow]--no-timing: correctness only, no score written")
        return 0
    # All graphs of a task form one sample for the sample correctness ratio.
    group = (lambda r: score_dir.name) if score_dir else None
    kwargs = {"group_of": group} if group else {}
    report = compute_scores(records, score_id=(score_dir or out_dir).name, **kwargs)
    console.print(score_table(report))
    for folder in {out_dir, *([score_dir] if score_dir else [])}:
        name = _result_file("aggregated_score", ".json", compiler, score_dir is not None)
        console.print(f"score: {write_score(report, Path(folder) / name)}")
    from passnet.report import write_html_report

    run = f"{compiler} on {records[0].device}"
    page = Path(out_dir) / _result_file("report", ".html", compiler, score_dir is not None)
    write_html_report({run: records}, {run: report}, page, title=f"passnet: {out_dir}")
    console.print(f"report: {page} (open it in a browser; passnet report compares runs)")
    return 0


def _cmd_samples(args: argparse.Namespace, console: Console) -> int:
    from passnet.data import dev_samples_dir, quickstart_list

    print(quickstart_list() if args.quick else dev_samples_dir())
    return 0


def add_eval_options(
    p: argparse.ArgumentParser, *, compiler_default: str | None, compiler_help: str, out_help: str
) -> None:
    """Add the options of an evaluating command (``eval``, ``bench eval``): the compiler,
    device, timing, executor, output and echo options (:func:`eval_settings` reads them)."""
    p.add_argument("--compiler", default=compiler_default, help=compiler_help)
    p.add_argument(
        "--device", default="cpu", help="cpu, cuda (all local GPUs) or cuda:N (default: cpu)"
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="warm-up calls per side (default: 25, and at least 0.2 s)",
    )
    p.add_argument(
        "--trials",
        type=int,
        default=None,
        help="timed calls per side, exactly (default: 100, with adaptive repetition: more "
        "series until the speedup is precise, at most 3 s more, and unstable ones again)",
    )
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="with --trials: adaptive repetition on top of the trials asked for",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the first input draw (default: 0)")
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per evaluation (default: 600)"
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads in each evaluation")
    p.add_argument(
        "--prepare-workers",
        type=int,
        default=0,
        metavar="N",
        help="compile upcoming graphs in N workers while others are timed, on cores the "
        "timing threads do not use (CUDA; default: 0, each evaluation compiles itself)",
    )
    p.add_argument(
        "--overlap",
        type=int,
        default=1,
        metavar="K",
        help="run K evaluations at once on each GPU, each on its share of the cores: they "
        "compile side by side and are timed one at a time, the others stopped meanwhile "
        "(default: 1)",
    )
    p.add_argument(
        "--max-measure-s",
        type=float,
        default=None,
        metavar="S",
        help="bound one graph's measuring after warm-up: no extra series or re-measurement "
        "starts that would end past S seconds (default: none; with --overlap, "
        f"{OVERLAP_MEASURE_S:g}, since a timed graph stops the others)",
    )
    p.add_argument(
        "--overlap-scope",
        choices=("host", "device"),
        default="host",
        help="with --overlap, what a timed graph stops: every other evaluation of the run "
        "(host, default) or only those of its GPU (device)",
    )
    p.add_argument(
        "--graphs-per-child",
        type=int,
        default=1,
        metavar="N",
        help="evaluate up to N graphs in turn in one evaluation child, paying its start (CUDA "
        "context, imports) once (default: 1, each graph in a fresh process; records give "
        "each graph's child_position)",
    )
    add_executor_arguments(
        p,
        "evaluations",
        "concurrent evaluations (default: 1; on CUDA: spread over GPUs; with --executor "
        "ray: at most this many, default as many as the cluster's GPUs or CPUs hold)",
    )
    p.add_argument("--out", default=None, help=out_help)
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="compiler option (repeatable)",
    )
    p.add_argument("--no-timing", action="store_true", help="check correctness only")
    p.add_argument(
        "--flush-l2",
        action="store_true",
        help="CUDA: evict the GPU's L2 cache before every timed call (cold-cache timing)",
    )
    p.add_argument(
        "--replay-timing",
        action="store_true",
        help="CUDA: also time each side replayed as a CUDA graph (the device floor)",
    )
    p.add_argument(
        "--profile-kernels",
        action="store_true",
        help="CUDA: also record what the GPU ran per call, under the CUDA profiler",
    )
    p.add_argument(
        "--random-layout",
        action="store_true",
        help="let the kernel randomize each run's child address-space layout (default: the "
        "same layout in every run, for comparable runs)",
    )
    echo = p.add_mutually_exclusive_group()
    echo.add_argument(
        "--log-lines",
        action="store_true",
        help="echo each graph's PassNet log lines on a terminal too (default there: progress "
        "and one line per graph; eval.log in --out has them all)",
    )
    echo.add_argument(
        "--quiet",
        action="store_true",
        help="do not echo the PassNet log lines where output is not a terminal (a file, a pipe)",
    )


def add_commands(subparsers: Any) -> None:
    """Register ``eval`` and ``samples``."""
    p = subparsers.add_parser(
        "eval",
        help="evaluate a compiler on samples or tasks (eager vs compiled, correctness, timing)",
        epilog=EVAL_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="sample folder, folder searched recursively, list file, or task",
    )
    add_eval_options(
        p,
        compiler_default="inductor",
        compiler_help="registered compiler name, or path/file.py:Class (imported only in "
        "child processes) (default: inductor)",
        out_help="results folder (default: ./passnet-out, or TASK/passnet-out)",
    )
    p.set_defaults(func=_cmd_eval)

    p = subparsers.add_parser(
        "samples",
        help="print the folder of the 29 GraphNet dev samples shipped with passnet",
        description="Print the folder of the 29 real GraphNet samples shipped with passnet "
        "(or, with --quick, a list file of a few of them for a first run in minutes); give "
        "it to passnet eval as PATH.",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a list file of four small samples that show ok, accuracy and slowdown cases",
    )
    p.set_defaults(func=_cmd_samples)
