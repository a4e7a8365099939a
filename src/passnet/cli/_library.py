"""``passnet library ...``: list the reference passes, install one, build its task."""

from __future__ import annotations

import argparse
from typing import Any

from passnet.errors import PassnetError

__all__ = ["add_commands"]

LIBRARY_EXAMPLES = """\
examples:
  passnet library list
  passnet library install rms_norm tasks/mine/pass_dir
  passnet library task rms_norm tasks/rms_norm          # real T5 graph in fp32/fp16/bf16 + the pass
  passnet library task rms_norm tasks/rms_sites --scope site   # its sites as subgraphs, 3 shapes x 3 dtypes
  bash tasks/rms_norm/entry.sh --device cuda            # = passnet eval tasks/rms_norm --compiler pass_mgr
"""

TASK_EXAMPLES = """\
examples:
  passnet library task add_layer_norm tasks/add_ln
  passnet library task scale_mask_softmax tasks/softmax --dtypes float16 bfloat16
  passnet library task rms_norm tasks/rms --samples-root path/to/graphnet/samples
  passnet library task add_layer_norm tasks/add_ln_sites --scope site
  passnet library task roll_add_layer_norm tasks/roll_sites --scope site --shape-factors 2 4 8
  passnet library task rms_norm tasks/rms_sites --scope site --shape-factors   # the sites' own shapes only
"""


def _factor(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a shape factor is an integer >= 2, got {text!r}"
        ) from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"a shape factor is an integer >= 2, got {value}")
    return value


def _cmd_list(args: argparse.Namespace, console: Any) -> int:
    from passnet.passes.library import reference_passes

    for p in reference_passes():
        console.print(f"[bold]{p.name}[/bold]  rules: {', '.join(p.rules)}")
        console.print(f"    {p.description}", highlight=False)
        console.print(f"    from: {', '.join(p.source_samples)}", highlight=False)
    return 0


def _cmd_install(args: argparse.Namespace, console: Any) -> int:
    from passnet.passes.library import install_pass

    written = install_pass(args.name, args.pass_dir, overwrite=args.overwrite)
    console.print(f"installed {', '.join(p.name for p in written)} into {args.pass_dir}")
    return 0


def _cmd_task(args: argparse.Namespace, console: Any) -> int:
    import torch

    from passnet.dataset import DEFAULT_DTYPES, DEFAULT_SHAPE_FACTORS, SCOPES, build_reference_task
    from passnet.sample import dtype_from_str

    if args.scope not in SCOPES:
        raise PassnetError(f"--scope must be one of {', '.join(SCOPES)}, got {args.scope!r}")
    if args.shape_factors is not None and args.scope != "site":
        raise PassnetError("--shape-factors needs --scope site (a whole graph keeps its shapes)")
    dtypes = (
        DEFAULT_DTYPES if args.dtypes is None else tuple(dtype_from_str(d) for d in args.dtypes)
    )
    factors = DEFAULT_SHAPE_FACTORS if args.shape_factors is None else tuple(args.shape_factors)
    task = build_reference_task(
        args.name,
        args.out,
        args.samples_root,
        dtypes=dtypes,
        scope=args.scope,
        shape_factors=factors,
    )
    console.print(f"built task {task.name!r}: {len(task.graphs)} graphs at {task.path}")
    device = " --device cuda" if torch.cuda.is_available() else ""
    console.print(f"evaluate with: bash {task.entry}{device}")
    return 0


def add_commands(subparsers: Any) -> None:
    """Register ``passnet library list|install|task``."""
    fmt = argparse.RawDescriptionHelpFormatter
    library = subparsers.add_parser(
        "library",
        help="reference passes: list, install into a pass_dir, build their tasks",
        epilog=LIBRARY_EXAMPLES,
        formatter_class=fmt,
    )
    sub = library.add_subparsers(dest="library_command", metavar="COMMAND", required=True)
    cmd = sub.add_parser("list", help="the reference passes, their rules and source samples")
    cmd.set_defaults(func=_cmd_list)
    cmd = sub.add_parser(
        "install",
        help="copy a reference pass into a pass directory",
        description="Copy the rule files and append them to sorted_output_pass_rule_names.json.",
        epilog=LIBRARY_EXAMPLES,
        formatter_class=fmt,
    )
    cmd.add_argument("name", metavar="NAME", help="a reference pass (passnet library list)")
    cmd.add_argument("pass_dir", metavar="PASS_DIR", help="pass directory (created if missing)")
    cmd.add_argument(
        "--overwrite", action="store_true", help="replace different files of the same name"
    )
    cmd.set_defaults(func=_cmd_install)
    cmd = sub.add_parser(
        "task",
        help="build a reference pass's task from the real graphs it matches",
        description=(
            "The pass's source samples in every dtype (validated eagerly), the pass installed, "
            "entry.sh. With --scope site: the subgraphs around the pass's matches in them "
            "(PassBench's unit), in several shapes and every dtype."
        ),
        epilog=TASK_EXAMPLES,
        formatter_class=fmt,
    )
    cmd.add_argument("name", metavar="NAME", help="a reference pass (passnet library list)")
    cmd.add_argument(
        "out", metavar="OUT", help="task folder to create (must not exist or be empty)"
    )
    cmd.add_argument(
        "--samples-root",
        default=None,
        help="GraphNet samples root (default: the shipped dev samples)",
    )
    cmd.add_argument(
        "--dtypes",
        nargs="+",
        default=None,
        choices=["float32", "float16", "bfloat16"],
        help="dtype variants (default: all three)",
    )
    cmd.add_argument(
        "--scope",
        default="graph",
        help="graph: the whole source samples (default); site: the subgraphs around the pass's matches",
    )
    cmd.add_argument(
        "--shape-factors",
        nargs="*",
        type=_factor,
        default=None,
        metavar="N",
        help="site scope: also each site with its dynamic dimension scaled by these factors "
        "(default: the library's, 2 and 4; none given: the sites' own shapes only)",
    )
    cmd.set_defaults(func=_cmd_task)
