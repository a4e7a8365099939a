"""Progress of a run that a person can follow: on a terminal, a live bar with the stage of
each running graph and one line per finished graph; in a log file (or any output that is not
a terminal), one timestamped line when a graph starts, when each of its stages ends (how
long it took, what runs now), and when the graph is done."""

from __future__ import annotations

import threading
import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from passnet.record import EvalRecord
from passnet.runner._labels import label_width, short_labels

__all__ = ["RunProgress"]


class RunProgress:
    """Progress of ``total`` evaluations titled ``title`` on ``console``.

    :meth:`stage` may be called from several threads at once (one per device slot). On a
    terminal, graphs are named by :func:`short_labels` of ``labels`` (the run's graphs):
    what tells them apart stays in view.
    """

    def __init__(
        self, console: Console, title: str, total: int, labels: list[str] | None = None
    ) -> None:
        self.console = console
        self.title = title
        self.total = total
        self.done = 0
        self.live = console.is_terminal
        names = list(labels or [])
        width = label_width(console.width)
        self._short = dict(zip(names, short_labels(names, width), strict=True))
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}
        self._current: dict[str, tuple[str, float]] = {}
        """Per running graph: its current stage and when that stage began."""
        self._bar: Progress | None = None
        self._task = None

    def __enter__(self) -> RunProgress:
        if self.live:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[now]}"),
                console=self.console,
                transient=False,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.title, total=self.total, now="")
        else:
            self._line(f"{self.title}: {self.total} evaluation(s)")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(kind, exc, tb)

    def _line(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        self.console.print(f"{stamp} {text}", markup=False, highlight=False, soft_wrap=True)

    def _refresh(self) -> None:
        if self._bar is not None and self._task is not None:
            now = "; ".join(f"{self._name(g)}: {s}" for g, (s, _) in self._current.items())
            # the bar, count and clock take about 60 columns: the stages get the rest
            room = max(20, self.console.width - 60)
            self._bar.update(self._task, now=now if len(now) <= room else now[: room - 1] + "…")

    def _name(self, graph: str) -> str:
        return self._short.get(graph, graph) if self.live else graph

    def stage(self, graph: str, name: str) -> None:
        """``graph``'s evaluation entered stage ``name`` (``start`` when it got a device,
        ``done`` when its child finished)."""
        with self._lock:
            now = time.perf_counter()
            previous = self._current.get(graph)
            if name == "start":
                self._started[graph] = now
            self._current[graph] = (name, now)
            if self.live:
                self._refresh()
                return
            if name == "start":
                self._line(f"{graph}: started")
            elif previous is not None and previous[0] != "start":
                took = f"{previous[0]} took {now - previous[1]:.1f} s"
                self._line(f"    {graph}: {took}" + ("" if name == "done" else f", now {name}"))

    def finished(self, record: EvalRecord, log_lines: list[str] | None = None) -> None:
        """``record`` is stored: one line says how it ended; ``log_lines`` (its PassNet
        log) are echoed before it when given."""
        with self._lock:
            self.done += 1
            started = self._started.pop(record.graph, None)
            self._current.pop(record.graph, None)
            for line in log_lines or []:
                # soft_wrap: one log line stays one line when piped (entry.sh >> LOG)
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
            took = f", {time.perf_counter() - started:.1f} s" if started is not None else ""
            speedup = f", speedup {record.speedup_e2e:.3f}" if record.speedup_e2e else ""
            self._line(
                f"[{self.done}/{self.total}] {self._name(record.graph)}: "
                f"{record.status.value}{speedup}{took}"
            )
            if self._bar is not None and self._task is not None:
                self._bar.update(self._task, advance=1)
                self._refresh()
