"""The ``passnet`` command line: thin wrappers that parse arguments and call the library."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from passnet.errors import PassnetError

__all__ = ["main"]

log = logging.getLogger("passnet")

TOP_EXAMPLES = """\
examples:
  passnet eval "$(passnet samples)" --compiler inductor --out runs/inductor   # the shipped graphs
  passnet score runs/inductor --json aggregated_score.json
  passnet plot runs/inductor runs/eager --out figures/
  passnet task new bert-task SAMPLE... && passnet eval bert-task --compiler pass_mgr
Each command has its own --help with more examples.
"""

EVAL_EXAMPLES = """\
examples:
  passnet eval src/passnet/data/graphnet --compiler inductor --device cpu --out runs/inductor
  passnet eval timm/resnet18 --compiler eager --warmup 5 --trials 20
  passnet eval samples.txt --compiler inductor --device cuda --jobs 8   # one worker per GPU
  passnet eval TASK_DIR --compiler pass_mgr                              # a PassBench task
Re-running the same command resumes: finished evaluations in --out are skipped.
--out's aggregated_score.json scores all its graphs evaluated with this compiler,
configuration and device, those of earlier commands with other PATHs too (a task: its graphs).
"""

SCORE_EXAMPLES = """\
examples:
  passnet score runs/inductor                       # results folder (results.jsonl)
  passnet score runs/inductor/results.jsonl --b 0.1 --p 0 --json aggregated_score.json
  passnet score eval.log --interpretation mismatch_extended --speedup device
"""

PLOT_EXAMPLES = """\
examples:
  passnet plot runs/inductor runs/eager --out figures/
  passnet plot nlp=runs/nlp cv=runs/cv --out figures/     # NAME=INPUT sets legend names
"""


def _parse_config(items: Sequence[str]) -> dict[str, Any]:
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


def _cmd_eval(args: argparse.Namespace, console: Console) -> int:
    from passnet.evaluate import EvalSettings
    from passnet.runner import plan_items, run_evaluations

    try:
        settings = EvalSettings(
            warmup=args.warmup,
            trials=args.trials,
            seed=args.seed,
            timeout_s=args.timeout,
            num_threads=args.threads,
            time_graphs=not args.no_timing,
            flush_l2=args.flush_l2,
            replay_timing=args.replay_timing,
            profile_kernels=args.profile_kernels,
            fixed_layout=not args.random_layout,
        )
    except ValueError as exc:
        raise PassnetError(f"--warmup/--trials/--timeout/--threads: {exc}") from exc
    from passnet.compilers import COMPILERS

    COMPILERS.get(args.compiler)  # an unknown name fails here, listing the known ones
    config = _parse_config(args.config)
    runs = _eval_targets(args.paths, args.compiler, config, args.out)
    status = 0
    for paths, run_config, out_dir, score_dir in runs:
        items = plan_items(paths)
        if not items:
            raise PassnetError(
                "no samples found (a sample is a folder with model.py)",
                paths=" ".join(map(str, paths)),
            )
        summary = run_evaluations(
            items,
            compiler=args.compiler,
            compiler_config=run_config,
            device=args.device,
            settings=settings,
            out_dir=out_dir,
            jobs=args.jobs,
            console=console,
            echo_logs=not args.quiet,
        )
        _print_summary(summary.records, console)
        # The score describes the results folder: its records of this compiler, configuration
        # and device, earlier commands' too. A task's is the task's: its graph list.
        scored = summary.records if score_dir else summary.folder_records
        if len(scored) > len(summary.records):
            console.print(
                f"score: the {len(scored)} graphs of {out_dir} evaluated with this compiler, "
                f"configuration and device ({len(scored) - len(summary.records)} by earlier "
                "commands)"
            )
        status |= _write_scores(scored, out_dir, score_dir, console)
        console.print(
            f"results: {summary.out_dir / 'results.jsonl'} ({summary.evaluated} new, {summary.resumed} resumed)"
        )
    return status


def _eval_targets(
    paths: list[str], compiler: str, config: dict[str, Any], out: str | None
) -> list[tuple[list[str], dict[str, Any], Path, Path | None]]:
    """Each task folder is its own run (its pass_dir feeds pass compilers); plain paths form one run."""
    from passnet.passes import load_task

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
    for t in tasks:
        task = load_task(t)
        task_cfg = dict(config)
        if compiler.startswith("pass_mgr"):
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

    table = Table(title="evaluations")
    # the replay and kernel columns only where they were asked for (--replay-timing,
    # --profile-kernels)
    replay = any(r.settings.get("replay_timing") for r in records)
    kernels = any(r.settings.get("profile_kernels") for r in records)
    columns = ["graph", "status", "speedup e2e", "speedup device"]
    columns += ["speedup replay"] if replay else []
    columns += ["speedup kernels"] if kernels else []
    for col in (*columns, "max diff", "note"):
        table.add_column(col)
    for r in records:
        cells = [r.graph, r.status.value, _x(r.speedup_e2e), _x(r.speedup_device)]
        cells += [_x(r.speedup_replay)] if replay else []
        cells += [_x(r.speedup_kernels)] if kernels else []
        cells += [f"{r.correctness.max_diff:.2e}" if r.correctness else "-"]
        table.add_row(*cells, _note(r, replay, kernels))
    console.print(table)


def _note(r: Any, replay: bool, kernels: bool) -> str:
    """The error, or else every timing remark that applies (unstable, GPU clock held back,
    no replay, no profile)."""
    if r.error:
        return r.error.message[:60]
    notes = ["unstable timing"] if _unstable(r) else []
    if r.gpu and r.gpu.below_limit_samples:
        why = f" ({', '.join(r.gpu.reasons)})" if r.gpu.reasons else ""
        notes.append(f"GPU clock down to {r.gpu.sm_mhz_min}/{r.gpu.sm_mhz_limit} MHz{why}")
    if replay and r.compiled and r.compiled.replay_error:
        notes.append(r.compiled.replay_error[:60])
    if kernels and r.compiled and r.compiled.kernels_error:
        notes.append(r.compiled.kernels_error[:60])
    return "; ".join(notes)


def _x(speedup: float | None) -> str:
    return f"{speedup:.3f}" if speedup else "-"


def _unstable(r: Any) -> bool:
    return bool((r.eager and r.eager.unstable) or (r.compiled and r.compiled.unstable))


def _write_scores(
    records: list[Any], out_dir: Path, score_dir: Path | None, console: Console
) -> int:
    from passnet.score import compute_scores, score_table, write_score

    scorable = [r for r in records if r.status.value != "sample_error"]
    if not scorable:
        console.print("[yellow]no scorable graphs (all are sample errors): no score written")
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
        path = write_score(report, Path(folder) / "aggregated_score.json")
        console.print(f"score: {path}")
    return 0


def _cmd_score(args: argparse.Namespace, console: Console) -> int:
    from passnet.score import (
        compute_scores,
        default_group_of,
        load_records,
        score_table,
        write_score,
    )

    inputs = _distinct_inputs(args.inputs)
    records, source_of = [], {}
    for src in inputs:
        for r in load_records(src):
            records.append(r)
            source_of[id(r)] = src
    score_id = args.id if args.id is not None else Path(args.inputs[0]).name
    # Several inputs (task folders, say): graphs of different inputs never share a sample.
    group_of = (
        (lambda r: f"{source_of[id(r)]}::{default_group_of(r)}")
        if len(inputs) > 1
        else default_group_of
    )
    try:
        report = compute_scores(
            records,
            b=args.b,
            p=args.p,
            interpretation=args.interpretation,
            speedup_kind=args.speedup,
            count_sample_errors=args.count_sample_errors,
            score_id=score_id,
            group_of=group_of,
        )
    except ValueError as exc:  # b or p out of range, nothing to score, several runs mixed, ...
        raise PassnetError(str(exc), inputs=" ".join(args.inputs)) from exc
    console.print(score_table(report))
    if args.json:
        console.print(f"written: {write_score(report, Path(args.json))}")
    return 0


def _distinct_inputs(inputs: list[str]) -> list[str]:
    """The inputs, each records file once (``r1``, ``r1/`` and ``r1/results.jsonl`` are one)."""
    seen: dict[Path, str] = {}
    for src in inputs:
        from passnet.score._io import RESULTS_FILE

        path = Path(src).resolve()
        if path.is_dir():
            path = path / RESULTS_FILE
        if path in seen:
            log.warning("%s is the same records as %s: read once", src, seen[path])
            continue
        seen[path] = src
    return list(seen.values())


def _cmd_plot(args: argparse.Namespace, console: Console) -> int:
    from passnet.report import plot_score_curves, plot_speedup_violin
    from passnet.score import compute_scores, load_records

    reports, record_sets = {}, {}
    for item in args.inputs:
        name, sep, src = item.partition("=")
        if not sep:
            name, src = Path(item).name or item, item
        if name in record_sets:
            raise PassnetError(
                f"two inputs are named {name!r}: name them apart as NAME=INPUT", inputs=item
            )
        records = load_records(src)
        record_sets[name] = records
        try:
            reports[name] = compute_scores(records, interpretation=args.interpretation)
        except ValueError as exc:  # nothing to score, several runs mixed, ...
            raise PassnetError(str(exc), inputs=src) from exc
    paths = [
        *plot_score_curves(reports, Path(args.out)),
        *plot_speedup_violin(record_sets, Path(args.out)),
    ]
    for p in paths:
        console.print(f"written: {p}")
    return 0


def _cmd_samples(args: argparse.Namespace, console: Console) -> int:
    from passnet.data import dev_samples_dir

    print(dev_samples_dir())
    return 0


_PLUGIN_CLIS = (
    "passnet.passes._cli",
    "passnet.passes.library._cli",
    "passnet.dataset._cli",
    "passnet.dataset._cli_part2",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passnet",
        description="Evaluate compilers and passes on real GraphNet computation graphs; build datasets.",
        epilog=TOP_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
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
    p.add_argument(
        "--compiler", default="inductor", help="registered compiler name (default: inductor)"
    )
    p.add_argument(
        "--device", default="cpu", help="cpu, cuda (all local GPUs) or cuda:N (default: cpu)"
    )
    p.add_argument("--warmup", type=int, default=25, help="warm-up calls per side (default: 25)")
    p.add_argument("--trials", type=int, default=100, help="timed calls per side (default: 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first input draw (default: 0)")
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per evaluation (default: 600)"
    )
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads in each evaluation")
    p.add_argument(
        "--jobs", type=int, default=1, help="concurrent evaluations (on CUDA: spread over GPUs)"
    )
    p.add_argument(
        "--out", default=None, help="results folder (default: ./passnet-out, or TASK/passnet-out)"
    )
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
    p.add_argument("--quiet", action="store_true", help="do not echo the PassNet log lines")
    p.set_defaults(func=_cmd_eval)

    p = sub.add_parser(
        "score",
        help="compute S_t, ES_t, AS, fast_p from records or PassNet/GraphNet logs",
        epilog=SCORE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="results folder, .jsonl file or log file"
    )
    _score_options(p)
    p.add_argument(
        "--count-sample-errors",
        action="store_true",
        help="score sample errors as b instead of excluding them",
    )
    p.add_argument("--json", default=None, metavar="FILE", help="write aggregated_score.json here")
    p.add_argument(
        "--id",
        default=None,
        help='the "id" field of aggregated_score.json (default: the name of the first INPUT)',
    )
    p.set_defaults(func=_cmd_score)

    p = sub.add_parser(
        "plot",
        help="S_t / ES_t curves and speedup violins as PNG",
        epilog=PLOT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="[NAME=]INPUT")
    p.add_argument("--out", required=True, help="folder for the PNG files")
    p.add_argument("--interpretation", default="default", choices=["default", "mismatch_extended"])
    p.set_defaults(func=_cmd_plot)

    p = sub.add_parser(
        "samples", help="print the folder of the 29 GraphNet dev samples shipped with passnet"
    )
    p.set_defaults(func=_cmd_samples)

    for module in _PLUGIN_CLIS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        for fn_name in ("add_commands", "add_part2_commands"):
            add: Callable[[Any], None] | None = getattr(mod, fn_name, None)
            if add is not None:
                add(sub)
    return parser


def _score_options(p: argparse.ArgumentParser) -> None:
    # Ranges are checked once, by ScoreParams; _cmd_score turns its ValueError into an error.
    p.add_argument(
        "--b", type=float, default=0.1, help="failure penalty b in (0, 1] (default: 0.1)"
    )
    p.add_argument("--p", type=float, default=0.0, help="slowdown penalty p >= 0 (default: 0)")
    p.add_argument("--interpretation", default="default", choices=["default", "mismatch_extended"])
    p.add_argument(
        "--speedup", default="e2e", choices=["e2e", "device"], help="which speedup to score"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    console = Console(stderr=False)
    try:
        return int(args.func(args, console) or 0)
    except PassnetError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
