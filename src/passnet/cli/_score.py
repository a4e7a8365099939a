"""``passnet score`` and ``passnet plot``: scores and figures from records or logs."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from rich.console import Console

from passnet.cli._output import print_warning
from passnet.errors import PassnetError

__all__ = ["add_commands"]

log = logging.getLogger("passnet")

SCORE_EXAMPLES = """\
examples:
  passnet score runs/inductor                       # results folder (results.jsonl)
  passnet score runs/inductor/results.jsonl --b 0.1 --p 0 --json aggregated_score.json
  passnet score eval.log --interpretation mismatch_extended --speedup device
  passnet score runs/inductor --weights graphnet    # AS with GraphNet's level weights
"""

PLOT_EXAMPLES = """\
examples:
  passnet plot runs/inductor runs/eager --out figures/
  passnet plot nlp=runs/nlp cv=runs/cv --out figures/     # NAME=INPUT sets legend names
"""


def _cmd_score(args: argparse.Namespace, console: Console) -> int:
    from passnet.score import (
        aggregate_weights,
        compute_scores,
        default_group_of,
        load_records,
        score_table,
        write_score,
    )

    try:  # a usage error, found before any input is read
        aggregate_weights(args.interpretation, args.weights)
    except ValueError as exc:
        raise PassnetError(f"--weights {args.weights}: {exc}") from exc
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
            weights=args.weights,
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
        from passnet.score import RESULTS_FILE

        path = Path(src).resolve()
        if path.is_dir():
            path = path / RESULTS_FILE
        if path in seen:
            log.warning("%s is the same records as %s: read once", src, seen[path])
            continue
        seen[path] = src
    return list(seen.values())


REPORT_EXAMPLES = """\
examples:
  passnet report runs/inductor --out report.html
  passnet report inductor=runs/inductor cudagraphs=runs/cg --out compare.html   # side by side
The page is self-contained (no network needed to view it): scores per run, S_t/ES_t
curves, speedup violins, and every graph in one sortable, filterable table. Runs of passnet
bench eval (a tasks.json) also get a leaderboard: PassNet's Table 1 columns, best AS first,
and each run's speedup distribution.
"""


def _named_sources(inputs: list[str]) -> dict[str, str]:
    """Each ``[NAME=]INPUT`` (a results folder, .jsonl or log file), by name."""
    sources: dict[str, str] = {}
    for item in inputs:
        name, sep, src = item.partition("=")
        if not sep:
            name, src = Path(item).name or item, item
        if name in sources:
            raise PassnetError(
                f"two inputs are named {name!r}: name them apart as NAME=INPUT", inputs=item
            )
        sources[name] = src
    return sources


def _named_inputs(inputs: list[str]) -> dict[str, list[Any]]:
    """Records of each ``[NAME=]INPUT`` (a results folder, .jsonl or log file), by name."""
    from passnet.score import load_records

    return {name: load_records(src) for name, src in _named_sources(inputs).items()}


def _leaderboard(
    sources: dict[str, str], runs: dict[str, list[Any]], interpretation: str
) -> list[Any]:
    """The benchmark table rows of the runs that are benchmark runs (a tasks.json)."""
    from passnet.record import read_bench_index
    from passnet.score import BenchRun, bench_row

    rows = []
    for name, src in sources.items():
        index = read_bench_index(src)
        if index is None:
            continue
        try:
            rows.append(
                bench_row(BenchRun(name, runs[name], index, src), interpretation=interpretation)
            )
        except ValueError as exc:  # nothing scorable yet
            log.warning("%s: not in the leaderboard (%s)", name, exc)
    return rows


def _scores(runs: dict[str, list[Any]], interpretation: str, *, strict: bool) -> dict[str, Any]:
    """Each run's ScoreReport; a run that cannot be scored is an error (``strict``) or None."""
    from passnet.score import compute_scores

    reports: dict[str, Any] = {}
    for name, records in runs.items():
        timed = any(r.settings.get("time_graphs", True) for r in records)
        try:
            if not timed:
                raise ValueError("its records are untimed (--no-timing): correctness only")
            reports[name] = compute_scores(records, interpretation=interpretation)
        except ValueError as exc:  # nothing to score, several runs mixed, untimed, ...
            if strict:
                raise PassnetError(str(exc), inputs=name) from exc
            log.warning("%s: no score (%s)", name, exc)
            reports[name] = None
    return reports


def _cmd_plot(args: argparse.Namespace, console: Console) -> int:
    from passnet.report import plot_score_curves, plot_speedup_violin

    runs = _named_inputs(args.inputs)
    reports = _scores(runs, args.interpretation, strict=True)
    paths = [
        *plot_score_curves(reports, Path(args.out)),
        *plot_speedup_violin(runs, Path(args.out)),
    ]
    for p in paths:
        console.print(f"written: {p}")
    return 0


def _cmd_report(args: argparse.Namespace, console: Console) -> int:
    from passnet.report import graph_rows, write_html_report

    out = Path(args.out)
    if out.is_dir():
        raise PassnetError("--out names a folder; give the HTML file to write", file=out)
    from passnet.score import load_records

    sources = _named_sources(args.inputs)
    runs = {name: load_records(src) for name, src in sources.items()}
    reports = _scores(runs, args.interpretation, strict=False)
    path = write_html_report(
        runs,
        reports,
        out,
        title=args.title,
        leaderboard=_leaderboard(sources, runs, args.interpretation),
    )
    rows = graph_rows(runs)
    if len(runs) > 1 and not any(len(row.records) > 1 for row in rows):
        print_warning(
            f"the {len(runs)} runs share no graph (by graph_hash or name): the report lists "
            "each run's graphs apart, and their scores are over different graphs"
        )
    console.print(f"written: {path} ({len(runs)} run(s), {len(rows)} graphs)")
    return 0


INPUT_HELP = (
    "a results folder (its results.jsonl), a records .jsonl file, or a PassNet/GraphNet log file"
)
NAMED_INPUT_HELP = (
    INPUT_HELP + "; NAME= names the run in tables and legends (default: the folder or file name)"
)


def _interpretation_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--interpretation",
        default="default",
        choices=["default", "mismatch_extended"],
        help="how failures map to ES_t error codes: default, GraphNet's (accuracy 1; runtime, "
        "dtype, shape, nonfinite, timeout 2; compile 3) or mismatch_extended (accuracy 1; "
        "dtype, shape, nonfinite 2; runtime, timeout 3; compile 4); docs/scoring.md",
    )


def _score_options(p: argparse.ArgumentParser) -> None:
    # Ranges are checked once, by ScoreParams; _cmd_score turns its ValueError into an error.
    p.add_argument(
        "--b", type=float, default=0.1, help="failure penalty b in (0, 1] (default: 0.1)"
    )
    p.add_argument("--p", type=float, default=0.0, help="slowdown penalty p >= 0 (default: 0)")
    _interpretation_option(p)
    p.add_argument(
        "--speedup", default="e2e", choices=["e2e", "device"], help="which speedup to score"
    )


def add_commands(subparsers: Any) -> None:
    """Register ``score`` and ``plot``."""
    p = subparsers.add_parser(
        "score",
        help="compute S_t, ES_t, AS, fast_p from records or PassNet/GraphNet logs",
        epilog=SCORE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help=INPUT_HELP)
    _score_options(p)
    p.add_argument(
        "--count-sample-errors",
        action="store_true",
        help="score sample errors as b instead of excluding them",
    )
    p.add_argument(
        "--weights",
        default="passnet",
        choices=["passnet", "graphnet"],
        help="AS's weights over the levels t: PassNet appendix E (default) or those of "
        "GraphNet's aggregate_es_scores (t = -10..4, interpretation default only)",
    )
    p.add_argument("--json", default=None, metavar="FILE", help="write aggregated_score.json here")
    p.add_argument(
        "--id",
        default=None,
        help='the "id" field of aggregated_score.json (default: the name of the first INPUT)',
    )
    p.set_defaults(func=_cmd_score)

    p = subparsers.add_parser(
        "plot",
        help="S_t / ES_t curves and speedup violins as PNG",
        epilog=PLOT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="[NAME=]INPUT", help=NAMED_INPUT_HELP)
    p.add_argument("--out", required=True, help="folder for the PNG files")
    _interpretation_option(p)
    p.set_defaults(func=_cmd_plot)

    p = subparsers.add_parser(
        "report",
        help="one self-contained HTML page of one or several runs (scores, figures, every graph)",
        epilog=REPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("inputs", nargs="+", metavar="[NAME=]INPUT", help=NAMED_INPUT_HELP)
    p.add_argument("--out", default="report.html", help="HTML file to write (default: report.html)")
    p.add_argument("--title", default="passnet report", help="the page's title")
    _interpretation_option(p)
    p.set_defaults(func=_cmd_report)
