"""``passnet bench verify | path | pack``: the shipped benchmark, added to the ``bench``
command group of :mod:`._dataset` (which holds ``bench build``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from passnet.cli._output import print_error, print_warning

__all__ = ["add_bench_commands"]

SPLITS_TEXT = "eval-fusible, eval-classical, train-fusible, train-classical, single-op"

VERIFY_EXAMPLES = """\
examples:
  passnet bench verify bench/                                  # a build against its manifest
  passnet bench verify "$(passnet bench path)"                 # the shipped copy
  passnet bench verify rebuilt/ --manifest "$(passnet bench path)/manifest.json" --split train-fusible
Hashes every file the manifest lists for the splits present (a split without a folder is
reported absent, not missing), lists missing, changed and extra files, and checks the
manifest: each split's counts against its tasks and files, each task's task.json graphs.
Exit status 0: everything present matches; 1: a mismatch; 2: no folder or no manifest.
"""

PATH_EXAMPLES = """\
examples:
  passnet bench path                     # the folder of the shipped PassBench-GN
  passnet bench path eval-fusible        # one split's folder: one task per subfolder
  passnet eval "$(passnet bench path eval-fusible)/TASK" --compiler inductor
The package ships the evaluation splits packed; the first call unpacks them into
$PASSNET_CACHE_DIR (default $XDG_CACHE_HOME/passnet or ~/.cache/passnet), verified, and
later calls reuse that copy: they compare its files' sizes and times with those it had when
verified, and hash them against the manifest only when one differs (unpacked again if a file
no longer matches).
"""

PACK_EXAMPLES = """\
examples:
  passnet bench pack bench/ --out src/passnet/data/passbench     # the archive the package ships
  passnet bench pack bench/ --out dist/ --split eval-fusible
Writes OUT/<name>-<version>.tar.xz (the splits and manifest.json; sorted members, no
times or owners: the same folder gives the same bytes) and OUT/manifest.json. The folder
is verified first (splits it lacks aside); one that does not match its manifest is refused.
"""

SHIPPED_LIMIT_BYTES = 40 * 1000 * 1000
"""What the repository may hold of the packed benchmark."""

_SHOWN = 50
"""Problems listed of each kind (the count says how many more)."""


def _listing(console: Console, label: str, items: list[str]) -> None:
    for item in items[:_SHOWN]:
        console.print(f"{label} {escape(item)}", highlight=False)
    if len(items) > _SHOWN:
        console.print(f"... and {len(items) - _SHOWN} more {label}", highlight=False)


def _cmd_verify(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import verify_bench

    result = verify_bench(args.dir, manifest=args.manifest, splits=args.split)
    console.print(
        f"{result.name} {result.version}: {escape(result.path)} against {escape(result.manifest)}",
        highlight=False,
    )
    table = Table("split", "folder", "files", "match", "missing", "changed", "extra")
    for s in result.splits:
        if s.present:
            row = [str(v) for v in (s.files, s.matched, s.missing, s.changed, s.extra)]
            table.add_row(s.name, "present", *row)
        else:
            table.add_row(s.name, "absent", str(s.files), "-", "-", "-", "-")
    console.print(table)
    _listing(console, "manifest:", result.manifest_errors)
    _listing(console, "missing:", result.missing)
    _listing(
        console,
        "changed:",
        [f"{c.path} (sha256 {c.actual}, manifest {c.expected})" for c in result.changed],
    )
    _listing(console, "extra:", result.extra)
    if result.requested is not None and result.absent:
        print_error(f"split(s) asked for but absent: {', '.join(result.absent)}")
    if not result.present:
        print_error(f"no split of the manifest is in {result.path}")
    verdict = "ok" if result.ok else "MISMATCH"
    console.print(f"{verdict}: {result.summary()}", highlight=False)
    return 0 if result.ok else 1


def _cmd_path(args: argparse.Namespace, console: Console) -> int:
    from passnet.data import stamped_copy

    # A copy verified before and unchanged since needs neither torch nor the manifest
    # (passnet.dataset imports both): answered from its stamp in a fraction of a second.
    path = stamped_copy(args.split)
    if path is None:
        from passnet.dataset import bench_path

        path = bench_path(args.split)
    # plain print: the path alone on stdout, for $(passnet bench path) (no wrapping)
    print(path)
    return 0


def _cmd_pack(args: argparse.Namespace, console: Console) -> int:
    from passnet.dataset import EVAL_SPLITS, SHIPPED_MANIFEST_FILE, pack_bench

    splits = args.split or list(EVAL_SPLITS)
    archive = pack_bench(args.bench_dir, args.out, splits=splits)
    size = archive.stat().st_size
    console.print(f"packed {', '.join(splits)}: {archive} ({size / 1e6:.1f} MB)")
    console.print(f"manifest: {archive.parent / SHIPPED_MANIFEST_FILE}")
    others = sorted(p.name for p in archive.parent.glob("*.tar.xz") if p.name != archive.name)
    if others:
        print_warning(
            f"{archive.parent} also holds {', '.join(others)}: only {archive.name} "
            "matches the manifest; remove the others"
        )
    if size > SHIPPED_LIMIT_BYTES:
        print_warning(
            f"{archive.name} is {size / 1e6:.1f} MB, more than the "
            f"{SHIPPED_LIMIT_BYTES / 1e6:.0f} MB the repository may hold"
        )
    return 0


def _check_dir(value: str) -> str:
    """An argparse type: the folder must exist (a usage error, exit 2, before any work)."""
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"not a folder: {value}")
    return value


def add_bench_commands(bench_sub: Any) -> None:
    """Register ``bench verify``, ``bench path`` and ``bench pack`` on the ``bench``
    command group's subparsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = bench_sub.add_parser(
        "verify",
        help="check a benchmark folder against its manifest (file hashes, tasks, counts)",
        description="Check a benchmark folder (or the splits of it present) against a "
        "manifest: every file's sha256, files missing or extra, and the manifest itself.",
        epilog=VERIFY_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("dir", metavar="DIR", type=_check_dir, help="the benchmark folder")
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="check against this manifest (default: DIR/manifest.json); e.g. the shipped "
        "one, for a split rebuilt from the corpus",
    )
    p.add_argument(
        "--split",
        action="append",
        metavar="SPLIT",
        help=f"only this split, which must be present (repeatable; {SPLITS_TEXT})",
    )
    p.set_defaults(func=_cmd_verify)

    p = bench_sub.add_parser(
        "path",
        help="print the folder of the shipped PassBench-GN (unpacked once)",
        description="Print the folder of the PassBench-GN evaluation splits shipped with "
        "passnet, or of one split, unpacking the shipped archive the first time.",
        epilog=PATH_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument(
        "split",
        metavar="SPLIT",
        nargs="?",
        help="one split: eval-fusible or eval-classical (the train and single-op splits are "
        "rebuilt from the corpus, not shipped)",
    )
    p.set_defaults(func=_cmd_path)

    p = bench_sub.add_parser(
        "pack",
        help="pack a benchmark's evaluation splits into the archive the package ships",
        description="Pack splits of a verified benchmark folder into a deterministic "
        "<name>-<version>.tar.xz, with its manifest beside it.",
        epilog=PACK_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("bench_dir", metavar="BENCH_DIR", type=_check_dir, help="benchmark folder")
    p.add_argument("--out", required=True, help="folder to write the archive and manifest to")
    p.add_argument(
        "--split",
        action="append",
        metavar="SPLIT",
        help="a split to pack (repeatable; default: eval-fusible and eval-classical)",
    )
    p.set_defaults(func=_cmd_pack)
