"""``passnet decompose | generalize | bench build``: thin commands over :mod:`passnet.dataset`."""

from __future__ import annotations

import argparse
from collections import Counter
from contextlib import nullcontext
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["add_part2_commands"]

DECOMPOSE_EXAMPLES = """\
examples:
  passnet decompose src/passnet/data/graphnet --out subgraphs --kind fusible
  passnet decompose samples/resnet18 --out subgraphs --kind fusible classical single-op
  passnet decompose samples/ --out subgraphs --kind classical --min-ops 4 --max-ops 62
  passnet decompose samples/ --out subgraphs --kind fusible --method every-prefix   # slow reference
  passnet decompose samples/ --out subgraphs --catalog catalog.sqlite
Writes OUT/<sample>/<kind>/<start>-<stop>/ (GraphNet samples; provenance in graph_net.json)
and OUT/decompose.jsonl (one record per sample). Re-running resumes: samples already
recorded there are skipped (--no-resume redoes them). Classical motifs are folded over
all given samples together (OUT/folding.json).
"""

GENERALIZE_EXAMPLES = """\
examples:
  passnet generalize subgraphs/ --out variants
  passnet generalize samples/bert --out variants --dtypes float16 --shape-factors 2 4 8
  passnet generalize subgraphs/ --out variants --no-shapes --device cuda
Writes OUT/<sample>/<dtype>[_<symbol>-<value>]/ for every variant that runs with finite
outputs, and OUT/generalize.jsonl; failing variants are listed with the reason.
"""

BENCH_EXAMPLES = """\
examples:
  passnet bench build subgraphs/ --out bench --seed 0
  passnet bench build subgraphs/ variants/ --out bench --kind fusible --stride 2 --eval-fraction 0.1
  passnet bench build subgraphs/ --out bench --catalog catalog.sqlite --overwrite
Writes OUT/{train,eval}/<task>/ (graph_list.txt, graphs/<dtype>/<shape-bucket>/<graph>/,
pass_dir/, entry.sh) and OUT/manifest.json. Same inputs and seed give identical files;
no operator sequence is in both train and eval.
"""


def _catalog(path: str | None) -> Any:
    if not path:
        return nullcontext(None)
    from passnet.dataset import Catalog

    return Catalog(path)


def _cmd_decompose(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset._decompose import SubgraphKind, SubgraphStatus, decompose_samples

    kinds = [SubgraphKind.parse(k) for k in args.kind]
    bounds = None
    if args.min_ops is not None or args.max_ops is not None:
        from passnet.dataset._decompose import DEFAULT_OP_BOUNDS

        bounds = {
            k.value: (
                args.min_ops if args.min_ops is not None else DEFAULT_OP_BOUNDS[k][0],
                args.max_ops if args.max_ops is not None else DEFAULT_OP_BOUNDS[k][1],
            )
            for k in kinds
        }
    with _catalog(args.catalog) as catalog:
        results = decompose_samples(
            args.paths,
            args.out,
            kinds,
            resume=not args.no_resume,
            progress=console.is_terminal,
            catalog=catalog,
            op_bounds=bounds,
            method=args.method,
            device=args.device,
            seed=args.seed,
        )
    counts = Counter((r.kind, r.status) for res in results for r in res.subgraphs)
    table = Table("kind", *[s.value for s in SubgraphStatus])
    for k in kinds:
        table.add_row(k.value, *[str(counts[(k.value, s)]) for s in SubgraphStatus])
    console.print(table)
    failed = [res for res in results if res.status != "ok"]
    for res in failed:
        for e in res.errors:
            where = ", ".join(f"{k}={v}" for k, v in e.context.items())
            console.print(
                f"[red]{e.stage}[/red] {escape(res.sample)}: {escape(e.message)} [{escape(where)}]"
            )
    console.print(
        f"decompose: {len(results) - len(failed)} of {len(results)} samples without errors; "
        f"records in {args.out}/decompose.jsonl"
    )
    return 1 if failed else 0


def _cmd_generalize(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset._generalize import VariantStatus, generalize_samples

    results = generalize_samples(
        args.paths,
        args.out,
        resume=not args.no_resume,
        progress=console.is_terminal,
        dtypes=args.dtypes,
        shape_factors=[] if args.no_shapes else args.shape_factors,
        cross=not args.no_cross,
        device=args.device,
        seed=args.seed,
    )
    table = Table("sample", "symbols", "written", "failed")
    for res in results:
        written = sum(v.status is VariantStatus.WRITTEN for v in res.variants)
        symbols = ", ".join(f"{k}={v}" for k, v in res.symbols.items()) + (
            " (probed)" if res.probed else ""
        )
        table.add_row(
            escape(res.sample[-60:]), symbols or "-", str(written), str(len(res.variants) - written)
        )
    console.print(table)
    errors = 0
    for res in results:
        if res.error is not None:
            errors += 1
            console.print(f"[red]error[/red] {escape(res.sample)}: {escape(res.error.message)}")
        for v in res.variants:
            if v.status is VariantStatus.FAILED:
                console.print(
                    f"[yellow]variant failed[/yellow] {escape(res.sample)} {v.name}: {escape(v.reason)}"
                )
    return 1 if errors else 0


def _cmd_bench_build(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset._bench import build_bench

    with _catalog(args.catalog) as catalog:
        result = build_bench(
            args.paths,
            args.out,
            seed=args.seed,
            stride=args.stride,
            eval_fraction=args.eval_fraction,
            max_graphs_per_task=args.max_graphs,
            kinds=args.kind,
            overwrite=args.overwrite,
            catalog=catalog,
            progress=console.is_terminal,
        )
    manifest = result.manifest()
    table = Table("split", "tasks", "graphs")
    for split in ("train", "eval"):
        table.add_row(
            split, str(manifest["counts"][split]["tasks"]), str(manifest["counts"][split]["graphs"])
        )
    console.print(table)
    for s in result.skipped:
        console.print(f"[yellow]skipped[/yellow] {escape(s['path'])}: {escape(s['reason'])}")
    console.print(f"written: {args.out} (manifest.json)")
    return 0


def add_part2_commands(subparsers: Any) -> None:
    """Register ``decompose``, ``generalize`` and ``bench build``."""
    fmt = argparse.RawDescriptionHelpFormatter
    paths_help = "sample folder, folder searched for samples, or a text file listing samples"
    kinds = ["fusible", "classical", "single-op", "single_op"]

    p = subparsers.add_parser(
        "decompose",
        help="cut samples into fusible / classical / single-op subgraph samples",
        epilog=DECOMPOSE_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help=paths_help)
    p.add_argument("--out", required=True, help="folder for the subgraph samples")
    p.add_argument(
        "--kind",
        nargs="+",
        default=["fusible", "classical", "single-op"],
        choices=kinds,
        help="subgraph kinds (default: all three)",
    )
    p.add_argument(
        "--min-ops",
        type=int,
        default=None,
        help="fewest operators per subgraph (default: fusible 2, classical 4)",
    )
    p.add_argument(
        "--max-ops",
        type=int,
        default=None,
        help="most operators per subgraph (default: fusible 35, classical 62)",
    )
    p.add_argument(
        "--method",
        default="one-compile",
        choices=["one-compile", "every-prefix"],
        help="fusible analysis: one Inductor compilation (default) or the every-prefix reference",
    )
    p.add_argument(
        "--device",
        default="cpu",
        help="device for runs and Inductor code generation (default: cpu)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the replayed inputs (default: 0)")
    p.add_argument("--catalog", help="record subgraphs (parent, range) in this SQLite catalog")
    p.add_argument(
        "--no-resume", action="store_true", help="redo samples already in decompose.jsonl"
    )
    p.set_defaults(func=_cmd_decompose)

    p = subparsers.add_parser(
        "generalize",
        help="dtype and shape variants of samples, each validated by running it",
        epilog=GENERALIZE_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help=paths_help)
    p.add_argument("--out", required=True, help="folder for the variants")
    p.add_argument(
        "--dtypes",
        nargs="*",
        default=["float16", "bfloat16"],
        choices=["float16", "bfloat16"],
        help="target dtypes of float32 tensors (default: float16 bfloat16)",
    )
    p.add_argument(
        "--shape-factors",
        nargs="+",
        type=int,
        default=[2, 4],
        help="scale each dynamic dimension by these factors (default: 2 4)",
    )
    p.add_argument("--no-shapes", action="store_true", help="dtype variants only")
    p.add_argument("--no-cross", action="store_true", help="shape variants in float32 only")
    p.add_argument(
        "--device", default="cpu", help="device the variants are validated on (default: cpu)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the replayed inputs (default: 0)")
    p.add_argument(
        "--no-resume", action="store_true", help="redo samples already in generalize.jsonl"
    )
    p.set_defaults(func=_cmd_generalize)

    bench = subparsers.add_parser(
        "bench", help="PassBench-style benchmark tasks", epilog=BENCH_EXAMPLES, formatter_class=fmt
    )
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="COMMAND", required=True)
    p = bench_sub.add_parser(
        "build",
        help="bucket subgraphs into tasks with a leak-free train/eval split",
        epilog=BENCH_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument(
        "paths", metavar="SUBGRAPHS", nargs="+", help="subgraph samples (folders or list files)"
    )
    p.add_argument("--out", required=True, help="benchmark folder to write (absent or empty)")
    p.add_argument("--seed", type=int, default=0, help="seed of sampling and split (default: 0)")
    p.add_argument(
        "--stride", type=int, default=1, help="sampling stride σ within an op sequence (default: 1)"
    )
    p.add_argument(
        "--eval-fraction",
        type=float,
        default=0.2,
        help="share of op sequences held out for eval (default: 0.2)",
    )
    p.add_argument("--max-graphs", type=int, default=16, help="most graphs per task (default: 16)")
    p.add_argument(
        "--kind",
        nargs="+",
        default=None,
        choices=[*kinds, "graph"],
        help="only subgraphs of these kinds (default: all)",
    )
    p.add_argument("--catalog", help="record tasks in this SQLite catalog")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")
    p.set_defaults(func=_cmd_bench_build)
