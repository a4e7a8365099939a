"""``passnet task ...``: create a PassBench task folder, check one (layout + static integrity)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_commands"]

TASK_EXAMPLES = """\
examples:
  passnet task new tasks/pooling src/passnet/data/graphnet/transformers-auto-model/splade-mini
  passnet task new tasks/pooling samples.txt --name masked_mean_pooling
  passnet task check tasks/pooling      # layout + static integrity rules; imports no pass code
  bash tasks/pooling/entry.sh           # = passnet eval tasks/pooling --compiler pass_mgr
"""

NEW_EXAMPLES = """\
examples:
  passnet task new tasks/pooling path/to/sample_a path/to/sample_b
  passnet task new tasks/pooling graphs_folder/ --name masked_mean_pooling
Then write pass files into tasks/pooling/pass_dir/ and list them in
pass_dir/sorted_output_pass_rule_names.json (see docs/passes.md).
"""

CHECK_EXAMPLES = """\
examples:
  passnet task check tasks/pooling
Exit status 0: layout valid and no integrity finding; 1: findings (printed, file:line).
"""


def _cmd_new(args: argparse.Namespace, console: Any) -> int:
    from passnet.task import create_task

    task = create_task(args.out, args.samples, name=args.name)
    console.print(f"created task {task.name!r}: {len(task.graphs)} graphs at {task.path}")
    console.print(f"write passes into {task.pass_dir} and evaluate with: bash {task.entry}")
    return 0


def _cmd_check(args: argparse.Namespace, console: Any) -> int:
    from passnet.passes.integrity import inspect_pass_dir
    from passnet.task import load_task

    task = load_task(args.task)
    console.print(f"task {task.name!r}: {len(task.graphs)} graphs, passes {list(task.pass_names)}")
    findings = inspect_pass_dir(task.pass_dir, task.pass_names)
    for finding in findings:
        console.print(f"pass_dir/{finding}", markup=False, highlight=False, soft_wrap=True)
        if finding.code:
            console.print(f"    {finding.code}", markup=False, highlight=False, soft_wrap=True)
    if findings:
        console.print(f"{len(findings)} finding(s): these passes would be rejected (pass_rejected)")
        return 1
    console.print("no integrity finding")
    return 0


def add_commands(subparsers: Any) -> None:
    """Register ``passnet task new`` and ``passnet task check``."""
    fmt = argparse.RawDescriptionHelpFormatter
    task = subparsers.add_parser(
        "task", help="PassBench tasks: new, check", epilog=TASK_EXAMPLES, formatter_class=fmt
    )
    sub = task.add_subparsers(dest="task_command", metavar="COMMAND", required=True)
    new = sub.add_parser(
        "new",
        help="create a task folder from samples",
        description="Copy samples into OUT/graphs/, write graph_list.txt, an empty pass_dir and entry.sh.",
        epilog=NEW_EXAMPLES,
        formatter_class=fmt,
    )
    new.add_argument(
        "out", metavar="OUT", help="task folder to create (must not exist or be empty)"
    )
    new.add_argument(
        "samples",
        metavar="SAMPLE",
        nargs="+",
        help="sample folder, folder of samples, or list file",
    )
    new.add_argument("--name", help="task name (default: the folder name)")
    new.set_defaults(func=_cmd_new)
    check = sub.add_parser(
        "check",
        help="validate a task's layout and statically inspect its pass_dir",
        epilog=CHECK_EXAMPLES,
        formatter_class=fmt,
    )
    check.add_argument("task", metavar="TASK", help="task folder")
    check.set_defaults(func=_cmd_check)
