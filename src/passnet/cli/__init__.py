"""The ``passnet`` command line: thin wrappers that parse arguments and call the library.

One module per command group, registered in pipeline order: :mod:`._eval` (eval,
samples), :mod:`._score` (score, plot), :mod:`._task` (task), :mod:`._library`
(library), :mod:`._dataset` (extract ... bench build), :mod:`._agent` (agent run,
agent export, serve). Commands import the library
when they run, so ``passnet --help`` starts without torch.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from passnet.cli import _agent, _dataset, _eval, _library, _score, _task
from passnet.errors import PassnetError

__all__ = ["build_parser", "main"]

TOP_EXAMPLES = """\
examples:
  passnet eval "$(passnet samples)" --compiler inductor --out runs/inductor   # the shipped graphs
  passnet score runs/inductor --json aggregated_score.json
  passnet plot runs/inductor runs/eager --out figures/
  passnet task new bert-task SAMPLE... && passnet eval bert-task --compiler pass_mgr
Each command has its own --help with more examples.
"""


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
    for group in (_eval, _score, _task, _library, _dataset, _agent):
        group.add_commands(sub)
    return parser


_FILE_WIDTH = 1000
"""Columns of output that goes to a file or a pipe: tables keep their natural width there
(rich would cut them to 80 columns) and each log line stays one line."""


def _console() -> Console:
    terminal = Console(stderr=False)
    return terminal if terminal.is_terminal else Console(stderr=False, width=_FILE_WIDTH)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    console = _console()
    terminated = []

    def stop(signum: int, _frame: object) -> None:
        # SIGTERM (a scheduler's time limit, `timeout`, `kill`) stops a command as Ctrl-C
        # does: evaluations in flight are ended, finished results are kept, the run's
        # state is cleaned up.
        terminated.append(signum)
        raise KeyboardInterrupt

    # (a handler can only be set from the main thread: a command run from another keeps
    # the default, SIGTERM ends the process)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, stop) if main_thread else None
    try:
        return int(args.func(args, console) or 0)
    except PassnetError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        return 128 + signal.SIGTERM if terminated else 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
