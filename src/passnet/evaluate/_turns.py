"""Timing turns: several evaluations compile at once, one is timed at a time.

With ``--overlap K`` each GPU runs K evaluation children at once. Loading, compiling and
the correctness runs overlap freely; the timed rounds do not: a child about to time takes
a *turn*, which stops (``SIGSTOP``) every other member of the run that its turn covers
until its timed rounds are over (``SIGCONT``). A turn covers the whole host (scope
``host``: nothing else of the run runs while a graph is timed, so the timing sees the
quiet machine a sequential run gives it) or only the evaluations of its own GPU (scope
``device``: other GPUs go on compiling and timing, at some cost in fidelity). Compiling
in the process that then times the graph, the program timed is the one just compiled.

The state lives in a folder the executor owns (:meth:`Turns.create`), shared by the
children through the file system, and changed only under an exclusive lock file:

- ``members/<pid>``: a child of the run, the text its device index;
- ``timing/<pid>``: a member taking its turn;
- ``paused/<pid>``: a member stopped by a turn, continued when no live turn covers it.

A member killed during its turn leaves ``timing/<pid>`` behind; :meth:`Turns.recover`
(the executor calls it whenever a child ends; joining and ending a turn do the same)
drops the entries of dead processes and continues whoever no live turn covers, so a crash
never leaves the run stopped. The state folders of killed runs are removed by the next
:meth:`Turns.create`. A stopped child's time counts against its evaluation's timeout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from passnet.isolate import process_alive
from passnet.record import TurnReport

__all__ = ["SCOPES", "TurnReport", "Turns"]

SCOPES = ("host", "device")
"""What a turn stops: every other member of the run, or those of its own GPU."""


_PREFIX = "passnet-turns-"


def _sweep_stale() -> None:
    """Remove the state folders of runs that were killed (their executor could not): those
    with no live process left among their entries, untouched for a minute."""
    now = time.time()
    for folder in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        try:
            if now - folder.stat().st_mtime < 60:
                continue
            pids = [int(p.name) for p in folder.glob("*/*") if p.name.isdigit()]
        except OSError:
            continue
        if not any(process_alive(pid) for pid in pids):
            shutil.rmtree(folder, ignore_errors=True)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


@dataclasses.dataclass(frozen=True)
class Turns:
    """A run's timing turns (see the module): ``folder`` holds the state, ``scope`` is
    one of :data:`SCOPES`, ``slots`` the evaluations each GPU runs at once. Picklable: it
    travels to the children in their requests."""

    folder: str
    scope: str = "host"
    slots: int = 1
    cores: tuple[int, ...] = ()
    """The run's cores: a ``host`` turn times on any of them (everyone else is stopped),
    not on its slot's few; () leaves the timing thread where it is."""

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"turn scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")

    @classmethod
    def create(cls, scope: str = "host", slots: int = 1, cores: tuple[int, ...] = ()) -> Turns:
        """A fresh state folder in the temp folder (remove it with :meth:`remove`)."""
        _sweep_stale()
        folder = Path(tempfile.mkdtemp(prefix=_PREFIX))
        for part in ("members", "timing", "paused"):
            (folder / part).mkdir()
        return cls(str(folder), scope, slots, tuple(cores))

    def remove(self) -> None:
        """Continue every member still stopped, then delete the state folder (if any)."""
        if not Path(self.folder).is_dir():
            return
        with self._locked():
            for pid in self._pids("paused"):
                _signal(pid, signal.SIGCONT)
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- members ----------------------------------------------------------------------

    def join(self, device_index: int, pid: int | None = None) -> None:
        """Make ``pid`` (default: this process) a member, stopped by others' turns. Waits
        while a live turn covers it: a member never starts work inside another's turn."""
        pid = os.getpid() if pid is None else pid
        with self._locked():
            self._write("members", pid, str(device_index))
        while True:
            with self._locked():
                self._tidy()  # a member killed in its turn: the others go on
                if not self._covering(pid):
                    return
            time.sleep(0.05)

    def leave(self, pid: int | None = None) -> None:
        """``pid`` (default: this process) is no member any more; the others go on."""
        pid = os.getpid() if pid is None else pid
        if not Path(self.folder).is_dir():  # the run ended (or was swept) meanwhile
            return
        with self._locked():
            for part in ("members", "timing", "paused"):
                self._path(part, pid).unlink(missing_ok=True)
            self._continue_uncovered()

    def recover(self) -> None:
        """Drop dead processes' entries; continue the members no live turn covers."""
        with self._locked():
            self._tidy()

    @contextlib.contextmanager
    def turn(self, pid: int | None = None) -> Iterator[TurnReport]:
        """This member's timing turn: stops the members it covers for the block."""
        pid = os.getpid() if pid is None else pid
        report = TurnReport(self.slots, self.scope)
        asked = time.perf_counter()
        with self._locked():  # a member stopped while waiting here gets it once continued
            self._prune()
            self._write("timing", pid, self._device(pid))
            paused = set(self._pids("paused"))
            for other in self._pids("members"):
                if other == pid or other in paused or self._path("timing", other).exists():
                    continue
                if self.scope == "host" or self._device(other) == self._device(pid):
                    _signal(other, signal.SIGSTOP)
                    self._write("paused", other, self._device(other))
                    report.paused += 1
        report.wait_s = time.perf_counter() - asked
        report.began = time.time()
        widened = self.scope == "host" and self.cores and hasattr(os, "sched_setaffinity")
        if widened:  # this thread only: the quiet host's cores for the timing thread
            before = os.sched_getaffinity(0)
            os.sched_setaffinity(0, set(self.cores))
        try:
            yield report
        finally:
            if widened:
                os.sched_setaffinity(0, before)
            report.ended = time.time()
            with self._locked():
                self._path("timing", pid).unlink(missing_ok=True)
                self._tidy()

    # -- the state, always under the lock --------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(Path(self.folder) / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _path(self, part: str, pid: int) -> Path:
        return Path(self.folder) / part / str(pid)

    def _write(self, part: str, pid: int, text: str) -> None:
        self._path(part, pid).write_text(text)

    def _pids(self, part: str) -> list[int]:
        return [int(p.name) for p in (Path(self.folder) / part).iterdir() if p.name.isdigit()]

    def _device(self, pid: int) -> str:
        try:
            return self._path("members", pid).read_text()
        except OSError:
            return ""

    def _covering(self, pid: int) -> bool:
        """Whether a live turn other than ``pid``'s covers ``pid``."""
        mine = self._device(pid)
        for other in self._pids("timing"):
            if other == pid:
                continue
            try:
                theirs = self._path("timing", other).read_text()
            except OSError:
                continue
            if self.scope == "host" or theirs == mine:
                return True
        return False

    def _prune(self) -> None:
        for part in ("timing", "members", "paused"):
            for pid in self._pids(part):
                if not process_alive(pid):
                    self._path(part, pid).unlink(missing_ok=True)

    def _tidy(self) -> None:
        """Drop dead processes' entries; continue the members no live turn covers."""
        self._prune()
        self._continue_uncovered()

    def _continue_uncovered(self) -> None:
        for pid in self._pids("paused"):
            if not self._covering(pid):
                _signal(pid, signal.SIGCONT)
                self._path("paused", pid).unlink(missing_ok=True)
