"""The ``passnet`` command line: thin wrappers that parse arguments and call the library.

One module per command group, registered in pipeline order: :mod:`._eval` (eval,
samples), :mod:`._score` (score, plot), :mod:`._task` (task), :mod:`._library`
(library), :mod:`._dataset` (extract ... bench build; bench eval and bench
table from :mod:`._bench_eval`), :mod:`._agent` (agent run,
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

from passnet.cli import _agent, _dataset, _eval, _library, _score, _task
from passnet.cli._eval import parse_config
from passnet.cli._output import make_console, print_error
from passnet.errors import PassnetError

__all__ = ["EXIT_CODES", "build_parser", "main", "parse_config"]

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
        epilog=TOP_EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (_eval, _score, _task, _library, _dataset, _agent):
        group.add_commands(sub)
    return parser


EXIT_CODES = """\
exit status:
  0  done
  1  the work ran and failed: eval, no graph of the command could be evaluated (every
     one a broken sample, a compile error, ...; records, log and score are written all
     the same); task check, integrity findings; validate, hash, dedup, db add,
     decompose, generalize, agent run: a sample or task failed (each is named)
  2  a usage error (bad option, unknown compiler or config key, unreadable input),
     refused before any work starts; also `passnet` without a command (help printed)
  130, 143  interrupted (Ctrl-C, SIGTERM): finished results are kept
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``passnet`` command ``argv`` (default: the process's arguments); return its
    exit status (:data:`EXIT_CODES`). Errors and warnings go to stderr, results to stdout."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        # bare `passnet`: the help, on stderr as argparse's usage errors are, status 2
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(argv)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    console = make_console()
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
        print_error(str(exc))
        return 2
    except KeyboardInterrupt:
        return 128 + signal.SIGTERM if terminated else 130
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
