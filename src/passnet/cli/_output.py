"""Where the command line writes: results to stdout, errors and warnings to stderr.

A command's output (tables, scores, paths written) can be piped or redirected without
the messages about what went wrong mixed into it, and a failure is seen on a terminal
even when the output goes to a file.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

__all__ = ["FILE_WIDTH", "make_console", "print_error", "print_warning"]

FILE_WIDTH = 1000
"""Columns of output that goes to a file or a pipe: tables keep their natural width there
(rich would cut them to 80 columns) and each log line stays one line."""


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's width on a terminal, else
    :data:`FILE_WIDTH`."""
    terminal = Console(stderr=stderr)
    return terminal if terminal.is_terminal else Console(stderr=stderr, width=FILE_WIDTH)


def print_error(message: str) -> None:
    """``error: message`` on stderr (``message`` is plain text, not markup)."""
    make_console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False)


def print_warning(message: str) -> None:
    """``warning: message`` on stderr (``message`` is plain text, not markup)."""
    make_console(stderr=True).print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)
