"""The progress bar of the batch dataset functions (generalize, decompose, bench)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = ["progress_bar"]


def progress_bar(verb: str, enabled: bool) -> Progress:
    """A transient bar ``<verb> <current item>  ━━━  done/total  elapsed``; silent unless ``enabled``.

    Set the current item with ``bar.update(task, description=name)``.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(f"{verb} {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        disable=not enabled,
    )
