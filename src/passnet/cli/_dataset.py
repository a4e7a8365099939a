"""``passnet extract | validate | hash | dedup | db | decompose | motifs | generalize | bench
build``: thin commands over :mod:`passnet.dataset`, in pipeline order."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from passnet.cli import _bench_eval
from passnet.cli._bench import add_bench_commands
from passnet.cli._executors import add_executor_arguments, executor_request, make_executor
from passnet.cli._output import print_error, print_warning
from passnet.errors import PassnetError, StoreError

__all__ = ["add_commands"]

EXTRACT_EXAMPLES = """\
examples:
  passnet extract models/mlp.py --out samples              # -> samples/mlp/
  passnet extract models/*.py --out samples --catalog samples/catalog.sqlite
  passnet extract models/bert.py --name bert-tiny --dynamic --source huggingface_hub
A model file defines get_model() (the nn.Module) and get_inputs() (a tuple/list of
positional inputs, a dict of keyword inputs, or one tensor); optional GRAPH_NET = {...}
adds graph_net.json fields. A graph break gives OUT/NAME/subgraph_<i>/.
Re-running skips models whose folder already holds samples (--force re-extracts).
"""

VALIDATE_EXAMPLES = """\
examples:
  passnet validate samples/                          # every sample under samples/
  passnet validate samples/ --out validation.jsonl   # one JSON report per line; re-run resumes
  passnet validate list.txt --catalog catalog.sqlite
Constraints: runnable, serializable, decomposable, statically_analyzable,
custom_op_accessible (reload -> run -> re-extract -> compare). Exit status 1 if any fails.
"""

HASH_EXAMPLES = """\
examples:
  passnet hash src/passnet/data/graphnet
  passnet hash samples/ --json hashes.json
  passnet hash samples/ --write          # rewrite graph_hash.txt with the canonical hash
"""

DEDUP_EXAMPLES = """\
examples:
  passnet dedup samples/ --out dedup.json
  passnet dedup samples/ other/ --kept unique.txt     # list file: feed it to other commands
  passnet dedup samples/ --catalog catalog.sqlite     # records duplicate_of in the catalog
The first sample of each hash (in path order) is kept; the others are recorded, not deleted.
"""

DB_EXAMPLES = """\
examples:
  passnet db catalog.sqlite add samples/
  passnet db catalog.sqlite counts --by source
  passnet db catalog.sqlite counts --by op_count --unique
  passnet db catalog.sqlite find --ops linear,gelu            # samples containing linear -> gelu
  passnet db catalog.sqlite find --ops F.layer_norm,F.linear --kind fusible
An op matches a canonical name exactly (F.linear, Tensor.view, operator.add) or by its
last part (linear, view, add).
"""


DECOMPOSE_EXAMPLES = """\
examples:
  passnet decompose src/passnet/data/graphnet --out subgraphs --kind fusible
  passnet decompose samples/resnet18 --out subgraphs --kind fusible classical single-op
  passnet decompose samples/ --out subgraphs --kind classical --min-ops 4 --max-ops 62
  passnet decompose samples/ --out subgraphs --kind fusible --method every-prefix   # slow reference
  passnet decompose samples/ --out subgraphs --catalog catalog.sqlite
  passnet decompose corpus/mmseg --out subgraphs --root corpus    # a chunk of a corpus
  passnet motifs subgraphs/decompose.jsonl --out motifs.json      # fold the corpus's op sequences
  passnet decompose corpus/ --out classical --kind classical --motifs motifs.json
Writes OUT/<name>/<kind>/<start>-<stop>/ (GraphNet samples; provenance in graph_net.json,
the parent named <name>), <name> being the sample's path relative to --root (default: the
root OUT's records name, else the common folder of the samples' parents), and
OUT/decompose.jsonl (one record per sample). Each sample runs in its own process, stopped after --timeout seconds and limited to
--memory-limit-gb: a crash, hang or out-of-memory is that sample's status. Re-running
resumes: samples already recorded there are skipped (--retry-failed redoes those that did
not end ok, --no-resume all). The classical kind folds each sample alone, or applies the
motif table --motifs (the same in every chunk).
"""

MOTIFS_EXAMPLES = """\
examples:
  passnet motifs subgraphs/decompose.jsonl --out motifs.json
  passnet motifs chunk1/decompose.jsonl chunk2/decompose.jsonl --out motifs.json --max-ops 62
Folds the op sequences recorded by decompose (every sample once) into one table of motifs
(recursive folding, like byte-pair encoding); decompose --kind classical --motifs TABLE
writes their occurrences in each sample.
"""

GENERALIZE_EXAMPLES = """\
examples:
  passnet generalize subgraphs/ --out variants
  passnet generalize samples/bert --out variants --dtypes float16 --shape-factors 2 4 8
  passnet generalize subgraphs/ --out variants --no-shapes --device cuda
  passnet generalize subgraphs/mmseg --out variants --root subgraphs --catalog catalog.sqlite
  passnet generalize subgraphs/ --out variants --jobs 8 --timeout 300
Writes OUT/<name>/<dtype>[_<symbol>-<value>]/ for every variant that runs with finite
outputs (<name>: the sample's path relative to --root, as for decompose; graph_net.json
names the parent so), and OUT/generalize.jsonl; failing variants are listed with the reason, and scaled shapes
over --max-variant-mb are counted as too large (reasons in generalize.jsonl). Samples
run in child processes (up to 32 in turn in one), each stopped after --timeout seconds:
a hang or a crash is that sample's status (timeout, crashed, out_of_memory).
"""

BENCH_EXAMPLES = """\
examples:
  passnet bench build subgraphs/ --out bench --seed 0
  passnet bench build subgraphs/ variants/ --out bench --kind fusible --stride 2 --eval-fraction 0.1
  passnet bench build subgraphs/ --out bench --catalog catalog.sqlite --overwrite
  passnet bench build subgraphs/ --out draft --sources used.txt   # then: generalize used.txt,
  passnet bench build subgraphs/ variants/ --out bench              # and build with the variants
  passnet bench build run/subgraphs run/variants --out run/bench --candidates run/reps.txt
  passnet eval run/reps.txt --compiler inductor --device cuda --out run/inductor   # on a GPU
  passnet bench build run/subgraphs run/variants --out run/bench --overwrite \\
      --measurements run/inductor/results.jsonl --eval-tasks 200 --version 1
Writes OUT/{eval,train}-{fusible,classical}/<task>/ and OUT/single-op/<task>/
(graph_list.txt, graphs/<dtype>/<shape-bucket>/<graph>/, pass_dir/, entry.sh, task.json)
and OUT/manifest.json (provenance and the SHA-256 of every file). Same inputs, records
and seed give identical files, wherever they lie; no operator sequence is in both a
train and an eval split. With --measurements (Inductor records of the representatives
--candidates lists) the long-tail rule chooses --eval-tasks per kind.
"""


@contextmanager
def _progress(console: Console, label: str, total: int) -> Iterator[Any]:
    columns = (
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(
        *columns, console=console, transient=True, disable=not console.is_terminal
    ) as progress:
        task = progress.add_task("", total=total)

        def advance(description: str = "") -> None:
            progress.update(task, advance=1, description=description)

        yield advance


def _catalog(path: str | None) -> Any:
    if not path:
        return nullcontext(None)
    from passnet.dataset import Catalog

    return Catalog(path)


def _existing_catalog(path: str) -> Any:
    if not Path(path).is_file():
        raise StoreError(
            "catalog does not exist (fill one with --catalog or 'passnet db PATH add')", file=path
        )
    from passnet.dataset import Catalog

    return Catalog(path)


def _short(path: str | Path, width: int = 70) -> str:
    text = str(path)
    return text if len(text) <= width else "…" + text[-(width - 1) :]


# --------------------------------------------------------------------------- extract


def _cmd_extract(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import ExtractOptions, extract_file

    if args.name and len(args.files) > 1:
        raise PassnetError("--name needs exactly one FILE")
    options = ExtractOptions(dynamic=args.dynamic, source=args.source, overwrite=args.force)
    results = []
    with (
        _catalog(args.catalog) as catalog,
        _progress(console, "extract", len(args.files)) as advance,
    ):
        for file in args.files:
            result = extract_file(
                file, args.out, name=args.name, options=options, resume=not args.force
            )
            results.append(result)
            if catalog is not None:
                for graph in result.graphs:
                    try:
                        catalog.add_sample(
                            graph.path, provenance={"tool": "passnet extract", "file": str(file)}
                        )
                    except PassnetError as exc:
                        print_warning(f"not catalogued {graph.path}: {exc}")
            advance(Path(file).name)
    table = Table("model", "samples", "repeats", "outcome")
    for r in results:
        outcome = (
            "skipped (exists)"
            if r.skipped
            else ("ok" if r.ok else "; ".join(str(f) for f in r.failures))
        )
        table.add_row(r.model, str(len(r.graphs)), str(len(r.duplicates)), outcome)
    console.print(table)
    if args.json:
        from passnet.dataset import dump_results

        Path(args.json).write_text(dump_results(results) + "\n")
        console.print(f"written: {args.json}")
    return 0 if all(r.ok for r in results) else 1


# --------------------------------------------------------------------------- validate


def _cmd_validate(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import ValidateStage, run_stage

    if not args.timeout > 0:
        raise PassnetError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    executor = _stage_executor(args)
    out = Path(args.out) if args.out else None
    if out is not None and args.no_resume:
        out.open("w").close()  # --no-resume starts afresh
    try:
        with _catalog(args.catalog) as catalog:
            run = run_stage(
                ValidateStage(timeout_s=args.timeout, seed=args.seed),
                args.paths,
                None,
                records_path=out,
                root=args.root,
                resume=not args.no_resume,
                executor=executor,
                progress=console.is_terminal,
                catalog=catalog,
            )
    finally:
        executor.close()
    reports = run.records
    if run.resumed:
        console.print(f"resuming: {run.resumed} of {len(reports)} samples already in {out}")
    table = Table("sample", "status", "constraint", "where", "why")
    for r in reports:
        if r.ok:
            table.add_row(_short(r.sample), "[green]ok", "", "", "; ".join(r.notes))
        for check in r.failed:
            table.add_row(
                _short(r.sample),
                "[red]failed",
                check.constraint.value,
                check.where(),
                check.message,
            )
    console.print(table)
    bad = sum(not r.ok for r in reports)
    console.print(f"{len(reports)} samples: {len(reports) - bad} valid, {bad} failed")
    return 1 if bad else 0


# --------------------------------------------------------------------------- hash / dedup


def _cmd_hash(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import hash_samples
    from passnet.sample import find_samples

    paths = find_samples(args.paths)
    with _progress(console, "hash", len(paths)) as advance:
        results = hash_samples(paths, on_result=lambda r: advance(Path(r.sample).name))
    table = Table("ops", "sample", "canonical hash", "graph_hash.txt")
    table.columns[2].no_wrap = True
    table.columns[3].no_wrap = True
    table.caption = (
        "canonical hash: passnet's structural hash of the graph, the same for graphs that "
        "differ only in names (what dedup compares); graph_hash.txt: the sample's own hash, "
        "which evaluation records carry as graph_hash (--write replaces it with the canonical one)"
    )
    for r in results:
        table.add_row(
            str(r.op_count) if r.graph_hash else "",
            _short(r.sample, 50),
            r.graph_hash or f"[red]{r.error}",
            "same" if r.file_hash == r.graph_hash else r.file_hash,
        )
        if args.write and r.graph_hash:
            Path(r.sample, "graph_hash.txt").write_text(r.graph_hash)
    console.print(table)
    hashes = {r.graph_hash for r in results if r.graph_hash}
    errors = sum(not r.graph_hash for r in results)
    console.print(f"{len(results)} samples, {len(hashes)} unique hashes, {errors} errors")
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in results], indent=2) + "\n")
        console.print(f"written: {args.json}")
    return 1 if errors else 0


def _cmd_dedup(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import dedup
    from passnet.sample import find_samples

    paths = find_samples(args.paths)
    with _progress(console, "hash", len(paths)) as advance:
        report = dedup(paths, on_result=lambda r: advance(Path(r.sample).name))
    if args.catalog:
        with _catalog(args.catalog) as catalog:
            for group in report.groups:
                for sample in [group.kept, *group.duplicates]:
                    try:
                        catalog.add_sample(sample)
                    except PassnetError as exc:
                        print_warning(f"not catalogued {sample}: {exc}")
                        continue
                    catalog.mark_duplicate(sample, group.kept if sample != group.kept else None)
    table = Table("kept", "duplicates", "graph_hash")
    for group in report.groups:
        if group.duplicates:
            table.add_row(
                _short(group.kept, 50),
                "\n".join(_short(d, 50) for d in group.duplicates),
                group.graph_hash[:16],
            )
    if table.row_count:
        console.print(table)
    for error in report.errors:
        print_error(f"cannot hash {error.sample}: {error.error}")
    summary = report.to_dict()
    console.print(
        f"{summary['total']} samples: {summary['unique']} unique, {summary['duplicates']} duplicates, "
        f"{len(report.errors)} errors"
    )
    if args.out:
        report.write(args.out)
        console.print(f"written: {args.out}")
    if args.kept:
        Path(args.kept).write_text("".join(f"{Path(k).resolve()}\n" for k in report.kept))
        console.print(f"written: {args.kept}")
    return 1 if report.errors else 0


# --------------------------------------------------------------------------- db


def _cmd_db_add(args: argparse.Namespace, console: Console) -> int:
    from passnet.sample import find_samples

    paths = find_samples(args.paths)
    failed = 0
    with _catalog(args.catalog) as catalog, _progress(console, "add", len(paths)) as advance:
        for path in paths:
            try:
                catalog.add_sample(path, kind=args.kind, source=args.source)
            except PassnetError as exc:
                failed += 1
                print_error(f"not added {path}: {exc}")
            advance(path.name)
    console.print(f"{len(paths) - failed} samples recorded in {args.catalog}")
    return 1 if failed else 0


def _cmd_db_counts(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import COUNT_KEYS

    if args.by not in COUNT_KEYS:
        raise PassnetError(f"--by must be one of {', '.join(COUNT_KEYS)}, got {args.by!r}")
    with _existing_catalog(args.catalog) as catalog:
        rows = catalog.counts(args.by, unique=args.unique)
    table = Table(args.by, "samples")
    for key, n in rows:
        table.add_row(key, str(n))
    table.add_row("[bold]total", f"[bold]{sum(n for _, n in rows)}")
    console.print(table)
    return 0


def _cmd_db_find(args: argparse.Namespace, console: Console) -> int:
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    if not ops:
        raise PassnetError("--ops needs at least one op name")
    with _existing_catalog(args.catalog) as catalog:
        found = catalog.find(ops, kind=args.kind)
    if args.json:
        console.out(json.dumps([{**r.to_dict(), "position": i} for r, i in found], indent=2))
        return 0
    table = Table("sample", "kind", "ops", "at", "matched")
    for record, i in found:
        table.add_row(
            _short(record.path),
            record.kind,
            str(record.op_count),
            str(i),
            " → ".join(record.ops[i : i + len(ops)]),
        )
    console.print(table)
    console.print(f"{len(found)} samples contain {' → '.join(ops)}")
    return 0


# --------------------------------------------------------------------------- decompose, generalize, bench


def _stage_executor(args: argparse.Namespace) -> Any:
    """The executor of a dataset stage (``--executor``, ``--jobs``, the executor's own
    options), checked and made before any sample runs."""
    from passnet.runner import LocalExecutor

    request = executor_request(args, "samples", device="cpu")
    executor = make_executor(args, request)
    return executor if executor is not None else LocalExecutor(["cpu"] * (args.jobs or 1))


def _cmd_decompose(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import DecomposeStatus, SubgraphKind, SubgraphStatus, decompose_samples

    kinds = [SubgraphKind.parse(k) for k in args.kind]
    bounds = None
    if args.min_ops is not None or args.max_ops is not None:
        from passnet.dataset import DEFAULT_OP_BOUNDS

        bounds = {
            k.value: (
                args.min_ops if args.min_ops is not None else DEFAULT_OP_BOUNDS[k][0],
                args.max_ops if args.max_ops is not None else DEFAULT_OP_BOUNDS[k][1],
            )
            for k in kinds
        }
    executor = _stage_executor(args)
    with executor, _catalog(args.catalog) as catalog:
        results = decompose_samples(
            args.paths,
            args.out,
            kinds,
            root=args.root,
            motifs=args.motifs,
            resume=not args.no_resume,
            retry_failed=args.retry_failed,
            progress=console.is_terminal,
            catalog=catalog,
            executor=executor,
            **({"timeout_s": args.timeout} if args.timeout is not None else {}),
            **(
                {"memory_limit_gb": args.memory_limit_gb or None}
                if args.memory_limit_gb is not None
                else {}
            ),
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
    failed = [res for res in results if res.status != DecomposeStatus.OK.value]
    for res in failed:
        for e in res.errors:
            where = ", ".join(f"{k}={v}" for k, v in e.context.items())
            print_error(f"{res.status} {res.sample} ({e.stage}): {e.message} [{where}]")
    lost = [res for res in results if res.symbols_unknown]
    for res in lost:
        written = res.count(status=SubgraphStatus.WRITTEN)
        why = "; ".join(f"{s}: {r}" for s, r in sorted(res.symbols_lost.items()))
        print_warning(
            f"symbols lost {res.name or res.sample}: "
            f"{res.symbols_unknown} of {written} written subgraphs ({why})"
        )
    statuses = Counter(res.status for res in results)
    console.print(
        f"decompose: {statuses[DecomposeStatus.OK.value]} of {len(results)} samples ok"
        + "".join(f", {n} {s}" for s, n in sorted(statuses.items()) if s != "ok")
        + f"; {len(lost)} with symbolic dims lost; records in {args.out}/decompose.jsonl"
    )
    return 1 if failed else 0


def _cmd_motifs(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import build_motif_table

    table = build_motif_table(args.records, max_ops=args.max_ops, min_count=args.min_count)
    Path(args.out).write_text(table.to_json() + "\n")
    console.print(
        f"{len(table.symbols)} motifs folded from {len(table.sequence_ids)} samples: {args.out}"
    )
    return 0


def _cmd_generalize(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import VariantStatus, generalize_samples

    if not args.timeout > 0:
        raise PassnetError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.memory_limit_gb < 0:
        raise PassnetError(
            f"--memory-limit-gb must be 0 (no limit) or more, got {args.memory_limit_gb}"
        )
    executor = _stage_executor(args)
    with executor, _catalog(args.catalog) as catalog:
        results = generalize_samples(
            args.paths,
            args.out,
            root=args.root,
            resume=not args.no_resume,
            progress=console.is_terminal,
            catalog=catalog,
            dtypes=args.dtypes,
            shape_factors=[] if args.no_shapes else args.shape_factors,
            cross=not args.no_cross,
            device=args.device,
            seed=args.seed,
            max_variant_mb=args.max_variant_mb or None,
            executor=executor,
            timeout_s=args.timeout,
            memory_limit_gb=args.memory_limit_gb or None,
            unique=not args.keep_duplicates,
        )
    table = Table("sample", "symbols", "written", "failed", "too large")
    duplicates = [res for res in results if res.status == "duplicate"]
    for res in results:
        if res.status == "duplicate":
            continue
        count = Counter(v.status for v in res.variants)
        symbols = ", ".join(f"{k}={v}" for k, v in res.symbols.items()) + (
            " (probed)" if res.probed else ""
        )
        table.add_row(
            escape(res.sample[-60:]),
            symbols or "-",
            str(count[VariantStatus.WRITTEN]),
            str(count[VariantStatus.FAILED]),
            str(count[VariantStatus.TOO_LARGE]),
        )
    console.print(table)
    if duplicates:
        console.print(
            f"{len(duplicates)} duplicate(s) not generalized (the graph hash of another "
            "sample; generalize.jsonl names it)"
        )
    errors = 0
    for res in results:
        if res.error is not None:
            errors += 1
            print_error(f"{res.sample}: {res.error.message}")
        for v in res.variants:
            if v.status is VariantStatus.FAILED:
                print_warning(f"variant failed {res.sample} {v.name}: {v.reason}")
    return 1 if errors else 0


def _cmd_bench_build(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import LONG_TAIL_CATEGORIES, build_bench, write_candidate_list

    if not args.timeout > 0:
        raise PassnetError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.measurements and args.eval_fraction is not None:
        raise PassnetError(
            "--eval-fraction and --measurements exclude each other: with measurements the "
            "long-tail rule chooses --eval-tasks evaluation tasks per kind"
        )
    if args.eval_tasks < 0:
        raise PassnetError(f"--eval-tasks must be 0 or more, got {args.eval_tasks}")
    out = Path(args.out).resolve()
    for option, value in (("--candidates", args.candidates), ("--sources", args.sources)):
        if value and out in Path(value).resolve().parents:
            raise PassnetError(
                f"{option} {value} lies inside --out: the benchmark folder holds only what "
                "its manifest lists"
            )
    executor = _stage_executor(args)
    with executor, _catalog(args.catalog) as catalog:
        result = build_bench(
            args.paths,
            args.out,
            seed=args.seed,
            stride=args.stride,
            eval_fraction=args.eval_fraction,
            eval_tasks=args.eval_tasks,
            measurements=args.measurements or (),
            max_graphs_per_task=args.max_graphs,
            kinds=args.kind,
            root=args.root,
            version=args.bench_version,
            overwrite=args.overwrite,
            catalog=catalog,
            progress=console.is_terminal,
            executor=executor,
            isolated=True,
            timeout_s=args.timeout,
        )
    table = Table("split", "tasks", "graphs", "MB")
    for split, counts in result.manifest()["splits"].items():
        table.add_row(
            split, str(counts["tasks"]), str(counts["graphs"]), f"{counts['bytes'] / 1e6:.1f}"
        )
    console.print(table)
    if result.selection_summary:
        chosen = Table(
            "kind", "family", *LONG_TAIL_CATEGORIES, title="long-tail selection: eval / candidates"
        )
        for kind, summary in result.selection_summary.items():
            for family, counts in summary["families"].items():
                chosen.add_row(
                    kind,
                    escape(family),
                    *[
                        f"{counts[c]['eval']}/{counts[c]['candidates']}"
                        for c in LONG_TAIL_CATEGORIES
                    ],
                )
        console.print(chosen)
    for s in result.skipped:
        print_warning(f"skipped {s['path']}: {s['reason']}")
    for message in result.warnings:
        print_warning(message)
    console.print(f"written: {args.out} (manifest.json)")
    if args.sources:
        sources = result.sources()
        Path(args.sources).write_text("".join(f"{path}\n" for path in sources))
        console.print(f"the {len(sources)} source samples of the tasks' graphs: {args.sources}")
    if args.candidates:
        write_candidate_list(result, args.candidates)
        console.print(
            f"the {len(result.representatives())} candidate tasks' representatives: "
            f"{args.candidates} (measure them with passnet eval {args.candidates} "
            "--compiler inductor)"
        )
    return 0


# --------------------------------------------------------------------------- registration


def add_commands(subparsers: Any) -> None:
    """Register ``extract``, ``validate``, ``hash``, ``dedup``, ``db``, ``decompose``,
    ``motifs``, ``generalize`` and ``bench build``."""
    fmt = argparse.RawDescriptionHelpFormatter
    paths_help = "sample folder, folder searched for samples, or a text file listing samples"

    p = subparsers.add_parser(
        "extract",
        help="extract GraphNet samples from model files",
        epilog=EXTRACT_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument(
        "files",
        metavar="FILE.py",
        nargs="+",
        help="Python file defining get_model() and get_inputs()",
    )
    p.add_argument("--out", default="extracted", help="output folder (default: extracted)")
    p.add_argument("--name", help="sample name (default: the file's stem; one FILE only)")
    p.add_argument("--dynamic", action="store_true", help="symbolic shapes (SymInt placeholders)")
    p.add_argument("--source", default="passnet.extract", help="graph_net.json source field")
    p.add_argument(
        "--force", action="store_true", help="re-extract models whose output folder exists"
    )
    p.add_argument("--catalog", help="record the samples in this SQLite catalog")
    p.add_argument("--json", help="write the extraction results as JSON")
    p.set_defaults(func=_cmd_extract)

    p = subparsers.add_parser(
        "validate",
        help="check samples against the five dataset constraints",
        epilog=VALIDATE_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help=paths_help)
    p.add_argument("--out", help="append one JSON report per sample (JSON Lines); resumes from it")
    p.add_argument(
        "--no-resume", action="store_true", help="start --out afresh instead of resuming from it"
    )
    p.add_argument("--catalog", help="record outcomes in this SQLite catalog")
    p.add_argument("--seed", type=int, default=0, help="seed of the replayed inputs")
    p.add_argument(
        "--root",
        help="name each sample in the reports by its path relative to ROOT (as decompose)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds per sample before it is stopped (default: 600)",
    )
    add_executor_arguments(
        p,
        "samples",
        "samples at once, each child with its share of the cores (default: 1; with "
        "--executor ray: at most this many, default as many as the cluster's CPUs hold)",
    )
    p.set_defaults(func=_cmd_validate)

    p = subparsers.add_parser(
        "hash", help="canonical graph hash of samples", epilog=HASH_EXAMPLES, formatter_class=fmt
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help=paths_help)
    p.add_argument("--json", help="write the hashes as JSON")
    p.add_argument(
        "--write", action="store_true", help="write each hash into the sample's graph_hash.txt"
    )
    p.set_defaults(func=_cmd_hash)

    p = subparsers.add_parser(
        "dedup", help="keep one sample per graph hash", epilog=DEDUP_EXAMPLES, formatter_class=fmt
    )
    p.add_argument("paths", metavar="PATH", nargs="+", help=paths_help)
    p.add_argument("--out", help="write the dedup report (JSON)")
    p.add_argument("--kept", help="write the kept samples as a list file")
    p.add_argument("--catalog", help="record samples and duplicate_of in this SQLite catalog")
    p.set_defaults(func=_cmd_dedup)

    db = subparsers.add_parser(
        "db", help="query the dataset catalog (SQLite)", epilog=DB_EXAMPLES, formatter_class=fmt
    )
    db.add_argument("catalog", metavar="PATH.sqlite", help="catalog file")
    db_sub = db.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    q = db_sub.add_parser(
        "counts", help="number of samples per group", epilog=DB_EXAMPLES, formatter_class=fmt
    )
    q.add_argument(
        "--by", default="source", help="what to group by: source, op_count, ... (default: source)"
    )
    q.add_argument("--unique", action="store_true", help="leave duplicates out")
    q.set_defaults(func=_cmd_db_counts)
    q = db_sub.add_parser(
        "find", help="samples containing an op sequence", epilog=DB_EXAMPLES, formatter_class=fmt
    )
    q.add_argument("--ops", required=True, help="comma-separated op names, in order")
    q.add_argument("--kind", help="only samples of this kind (graph, fusible, ...)")
    q.add_argument("--json", action="store_true", help="print JSON records")
    q.set_defaults(func=_cmd_db_find)
    q = db_sub.add_parser(
        "add", help="record samples in the catalog", epilog=DB_EXAMPLES, formatter_class=fmt
    )
    q.add_argument("paths", metavar="PATH", nargs="+", help=paths_help)
    q.add_argument("--kind", default="graph", help="sample kind (default: graph)")
    q.add_argument("--source", help="source (default: graph_net.json's)")
    q.set_defaults(func=_cmd_db_add)
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
        "--root",
        help="name each sample's output folder by its path relative to ROOT (default: the "
        "root OUT's records name, else the common folder of the samples' parents)",
    )
    p.add_argument(
        "--motifs",
        help="classical kind: occurrences of this motif table's motifs (passnet motifs) "
        "instead of the sample's own repeats",
    )
    add_executor_arguments(
        p,
        "samples",
        "samples at once, each child with its share of the cores (default: 1; with "
        "--executor ray: at most this many, default as many as the cluster's CPUs hold)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per sample before it is stopped (default: 900)",
    )
    p.add_argument(
        "--memory-limit-gb",
        type=float,
        default=None,
        help="data memory per sample; beyond it the sample ends out_of_memory "
        "(default: 8; 0: no limit)",
    )
    p.add_argument(
        "--no-resume", action="store_true", help="redo samples already in decompose.jsonl"
    )
    p.add_argument(
        "--retry-failed",
        action="store_true",
        help="redo the samples recorded with a status other than ok",
    )
    p.set_defaults(func=_cmd_decompose)

    p = subparsers.add_parser(
        "motifs",
        help="fold the op sequences of decompose records into a motif table",
        epilog=MOTIFS_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("records", metavar="DECOMPOSE.jsonl", nargs="+", help="decompose records")
    p.add_argument("--out", required=True, help="motif table to write (JSON)")
    p.add_argument("--max-ops", type=int, default=62, help="most operators per motif (default: 62)")
    p.add_argument(
        "--min-count", type=int, default=2, help="fewest occurrences of a motif (default: 2)"
    )
    p.set_defaults(func=_cmd_motifs)

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
        "--max-variant-mb",
        type=float,
        default=64.0,
        help="skip (status too_large) a scaled shape whose inputs and outputs take more than "
        "this many MB (10^6 bytes) in float32, in every dtype; 0: no bound (default: 64)",
    )
    p.add_argument(
        "--device", default="cpu", help="device the variants are validated on (default: cpu)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the replayed inputs (default: 0)")
    p.add_argument(
        "--root",
        help="name each sample's output folder by its path relative to ROOT (as decompose)",
    )
    p.add_argument("--catalog", help="record the written variants in this SQLite catalog")
    add_executor_arguments(
        p,
        "samples",
        "samples at once, each child with its share of the cores (default: 1; with "
        "--executor ray: at most this many, default as many as the cluster's CPUs hold)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds per sample before it is stopped, status timeout (default: 600)",
    )
    p.add_argument(
        "--memory-limit-gb",
        type=float,
        default=8.0,
        help="data memory of each child process (default: 8; 0: no limit)",
    )
    p.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="generalize a sample even when another one of the batch (or in OUT) has its "
        "graph hash (default: record it as that one's duplicate)",
    )
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
        help="bucket subgraphs into PassBench-GN tasks with leak-free train/eval splits per kind",
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
        default=None,
        help="without --measurements: share of each kind's op sequences drawn for eval by "
        "the seed (default: 0.2)",
    )
    p.add_argument(
        "--measurements",
        nargs="+",
        metavar="FILE",
        help="Inductor records (results.jsonl or results folders of passnet eval "
        "--compiler inductor on the --candidates list): the long-tail rule chooses the "
        "eval tasks",
    )
    p.add_argument(
        "--eval-tasks",
        type=int,
        default=200,
        help="with --measurements: eval tasks per kind (default: 200)",
    )
    p.add_argument(
        "--candidates",
        metavar="FILE",
        help="also write each non-single-op task's representative graph (in OUT), one per "
        "line relative to FILE's folder: the list passnet eval measures for --measurements",
    )
    p.add_argument(
        "--root",
        help="folder the graphs' sources are recorded relative to (default: the common "
        "folder of the samples' parent folders)",
    )
    p.add_argument(
        "--version",
        dest="bench_version",
        default="0",
        help="the benchmark's version, recorded in manifest.json (default: 0)",
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
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds to read one input sample's bucket keys, each in its own child "
        "process (default: 600)",
    )
    add_executor_arguments(
        p,
        "samples",
        "input samples read at once (default: 1; with --executor ray: at most this many)",
    )
    p.add_argument(
        "--sources",
        metavar="FILE",
        help="also write the sample folders the tasks' graphs came from, one per line: "
        "the subgraphs worth generalizing",
    )
    p.set_defaults(func=_cmd_bench_build)
    add_bench_commands(bench_sub)
    _bench_eval.add_commands(bench_sub)
