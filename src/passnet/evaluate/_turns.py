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
- ``paused/<pid>``: a member stopped by a turn, continued when no live turn covers it;
- ``broken/<pid>``: the turn of ``pid`` was broken (below): the epoch second it was, and
  the time of the ``timing`` entry it broke.

A member killed during its turn leaves ``timing/<pid>`` behind; :meth:`Turns.recover`
(the executor calls it whenever a child ends; joining and ending a turn do the same)
drops the entries of dead processes and continues whoever no live turn covers, so a crash
never leaves the run stopped. The state folders of killed runs are removed by the next
:meth:`Turns.create`. A stopped child's time counts against its evaluation's timeout.

A turn that outlasts ``max_turn_s`` is *broken* (:meth:`Turns.break_stalled`, which the
executor runs every second while a run lasts, :meth:`Turns.watching`): it no longer
covers anyone, so the members it stopped are continued, and its holder, which goes on,
finds it in its :class:`TurnReport` (``broken_after_s``). A holder stuck on something a
member it stopped holds (a lock, a pipe; or the state's own lock, held by a stopped
process) is so released, and no run stalls on turns whatever the cause. Where the
state's lock cannot be had within :data:`LOCK_WAIT_S`, the members are continued without
it: no turn can begin meanwhile, since beginning one takes that lock. Every join, leave
and turn, on every GPU, takes the state's lock: where it stays held for
:data:`LOCK_STUCK_S`, the watcher continues its holder if that is a stopped member, and
logs the holder in any case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import math
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from passnet.evaluate._settings import EvalSettings
from passnet.isolate import process_alive
from passnet.record import TurnReport

__all__ = ["LOCK_WAIT_S", "SCOPES", "TURN_MARGIN_S", "TurnReport", "Turns", "turn_bound_s"]

log = logging.getLogger(__name__)

SCOPES = ("host", "device")
"""What a turn stops: every other member of the run, or those of its own GPU."""


_PREFIX = "passnet-turns-"
_PARTS = ("members", "timing", "paused", "broken")

TURN_MARGIN_S = 60.0
"""What a turn may last beyond its graph's bound on measuring (``max_measure_s``): the
warm-up (``min_warmup_s`` and the ``warmup`` calls), the core guard's settling (up to
``host_wait_s``), and a first series, which the bound never stops. The slowest turns of
the 400-graph H200 run that stalled took under 3 s; 60 s is ample for a series of 100
calls per side of a graph of 0.3 s a call."""

LOCK_WAIT_S = 2.0
"""How long :meth:`Turns.break_stalled` waits for the state's lock before it continues a
broken turn's members without it (the lock is held for milliseconds at a time)."""

LOCK_STUCK_S = 10.0
"""The state's lock held this long without a break: :meth:`Turns.watching` continues its
holder where that is a stopped member (every join, leave and turn waits for the lock, on
every GPU, so a stopped holder stops the whole run)."""


def turn_bound_s(settings: EvalSettings) -> float:
    """The longest a timing turn of an evaluation with ``settings`` may last before it is
    broken: its bound on measuring plus :data:`TURN_MARGIN_S`, at most half its timeout (a
    stopped member's time counts against its own timeout: a turn broken at half of it
    leaves the members it stopped half their time to finish)."""
    measure = settings.max_measure_s if settings.max_measure_s is not None else math.inf
    return min(measure + TURN_MARGIN_S, settings.timeout_s / 2)


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
    max_turn_s: float | None = None
    """A turn lasting longer is broken by :meth:`break_stalled` (:func:`turn_bound_s`);
    None: never."""

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"turn scope must be one of {', '.join(SCOPES)}, got {self.scope!r}")
        if self.max_turn_s is not None and not self.max_turn_s > 0:
            raise ValueError(f"max_turn_s must be a positive number, got {self.max_turn_s!r}")

    @classmethod
    def create(
        cls,
        scope: str = "host",
        slots: int = 1,
        cores: tuple[int, ...] = (),
        max_turn_s: float | None = None,
    ) -> Turns:
        """A fresh state folder in the temp folder (remove it with :meth:`remove`)."""
        _sweep_stale()
        folder = Path(tempfile.mkdtemp(prefix=_PREFIX))
        for part in _PARTS:
            (folder / part).mkdir()
        return cls(str(folder), scope, slots, tuple(cores), max_turn_s)

    def remove(self) -> None:
        """Continue every member still stopped, then delete the state folder (if any)."""
        if not Path(self.folder).is_dir():
            return
        with self._locked(wait_s=LOCK_WAIT_S):  # held by a stopped process: continue it too
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
            for part in _PARTS:
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
            self._path("broken", pid).unlink(missing_ok=True)
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
                broken_at = self._broken_at(pid)
                if broken_at is not None:
                    report.broken_after_s = round(max(0.0, broken_at - report.began), 3)
                self._path("timing", pid).unlink(missing_ok=True)
                self._path("broken", pid).unlink(missing_ok=True)
                self._tidy()

    # -- breaking stalled turns ---------------------------------------------------------

    def break_stalled(self, now: float | None = None) -> list[int]:
        """Break every live turn older than ``max_turn_s`` (from its ``timing`` entry's
        time): mark it, so that it covers no one, and continue the members no other turn
        covers. Returns the pids whose turns it broke now. Safe to call at any time, from
        any process; never blocks for long (see the module)."""
        if self.max_turn_s is None or not Path(self.folder).is_dir():
            return []
        now = time.time() if now is None else now
        broke = []
        for pid in self._pids("timing"):
            try:
                began = self._path("timing", pid).stat().st_mtime
            except OSError:  # the turn ended meanwhile
                continue
            if now - began <= self.max_turn_s or self._broken_at(pid) is not None:
                continue
            if not process_alive(pid):
                continue  # recover drops it
            # atomic: its holder may read it at any moment; with the turn's time, so that a
            # turn begun since (the holder's next) is not taken for the broken one
            tmp = self._path("broken", pid).with_name(f".{pid}.tmp")
            tmp.write_text(f"{now:.6f} {began!r}")
            os.replace(tmp, self._path("broken", pid))
            broke.append(pid)
        if not broke:
            return []
        with self._locked(wait_s=LOCK_WAIT_S) as locked:
            continued = self._continue_uncovered()
        if not locked:
            continued += self.continue_lock_holders(LOCK_WAIT_S)
        for pid in broke:  # a holder stopped itself (by whatever) would never end its turn
            if _process_state(pid) == "T":
                _signal(pid, signal.SIGCONT)
                continued.append(pid)
        for pid in broke:
            log.warning(
                "the timing turn of process %d outlasted %.0f s: broken, %d stopped "
                "evaluation(s) continued%s",
                pid,
                self.max_turn_s,
                len(continued),
                "" if locked else " (the turn state's lock was held: continued without it)",
            )
        return broke

    @contextlib.contextmanager
    def watching(self, interval_s: float = 1.0) -> Iterator[None]:
        """For the block, a thread that calls :meth:`break_stalled` every ``interval_s``."""
        if self.max_turn_s is None:
            yield
            return
        done = threading.Event()

        def watch() -> None:
            busy_since: float | None = None
            while not done.wait(interval_s):
                try:
                    self.break_stalled()
                    if self._lock_free():
                        busy_since = None
                        continue
                    busy_since = busy_since or time.monotonic()
                    if time.monotonic() - busy_since >= LOCK_STUCK_S:
                        self.continue_lock_holders(LOCK_STUCK_S)
                        busy_since = None  # again after as long, if still held
                except OSError as exc:  # the folder removed under it at the run's end
                    log.debug("watching timing turns: %s", exc)

        thread = threading.Thread(target=watch, name="passnet-turn-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def continue_lock_holders(self, held_s: float) -> list[int]:
        """Continue the members that hold the state's lock while stopped (whatever stopped
        them): the run cannot go on while they do. ``held_s``: for at least how long it has
        been held (for the log). Returns them; logs every holder."""
        members = set(self._pids("members"))
        continued = []
        for pid in _flock_holders(Path(self.folder) / "lock"):
            state = _process_state(pid)
            if pid in members and state == "T":
                _signal(pid, signal.SIGCONT)
                self._path("paused", pid).unlink(missing_ok=True)
                continued.append(pid)
            log.warning(
                "the turn state's lock has been held for %.0f s or more by process %d (state %s%s)",
                held_s,
                pid,
                state or "unknown",
                ", a stopped member: continued" if pid in continued else "",
            )
        return continued

    def _lock_free(self) -> bool:
        """Whether the state's lock can be had right now (taken and let go at once)."""
        with self._locked(wait_s=0.0) as got:
            return got

    # -- the state, always under the lock --------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, wait_s: float | None = None) -> Iterator[bool]:
        """The state's exclusive lock for the block; with ``wait_s``, the block runs after
        that long without it where it could not be had (it gets False)."""
        with open(Path(self.folder) / "lock", "a") as lock:
            if wait_s is None:
                fcntl.flock(lock, fcntl.LOCK_EX)
                got = True
            else:
                got = _try_lock(lock.fileno(), wait_s)
            try:
                yield got
            finally:
                if got:
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

    def _broken_at(self, pid: int) -> float | None:
        """When the live turn of ``pid`` was broken; None if it was not."""
        try:
            at, began = map(float, self._path("broken", pid).read_text().split())
            if began != self._path("timing", pid).stat().st_mtime:
                return None  # a mark left for an earlier turn of the same process
        except (OSError, ValueError):
            return None
        return at

    def _covering(self, pid: int) -> bool:
        """Whether a live turn other than ``pid``'s, not broken, covers ``pid``."""
        mine = self._device(pid)
        for other in self._pids("timing"):
            if other == pid or self._broken_at(other) is not None:
                continue
            try:
                theirs = self._path("timing", other).read_text()
            except OSError:
                continue
            if self.scope == "host" or theirs == mine:
                return True
        return False

    def _prune(self) -> None:
        for part in ("timing", "broken", "members", "paused"):
            for pid in self._pids(part):
                if not process_alive(pid):
                    self._path(part, pid).unlink(missing_ok=True)

    def _tidy(self) -> None:
        """Drop dead processes' entries; continue the members no live turn covers."""
        self._prune()
        self._continue_uncovered()

    def _continue_uncovered(self) -> list[int]:
        continued = []
        for pid in self._pids("paused"):
            if not self._covering(pid):
                _signal(pid, signal.SIGCONT)
                self._path("paused", pid).unlink(missing_ok=True)
                continued.append(pid)
        return continued


def _process_state(pid: int) -> str:
    """The state letter of process ``pid`` (``/proc/<pid>/stat``: ``T`` stopped, ``D`` in an
    uninterruptible wait, ...); "" where unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return ""


def _flock_holders(path: Path) -> list[int]:
    """The processes holding a lock on ``path`` (Linux ``/proc/locks``; waiters, marked
    ``->``, are not holders); [] where unknown."""
    try:
        inode = path.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    holders = []
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":
            continue
        try:
            if int(fields[5].split(":")[2]) == inode:
                holders.append(int(fields[4]))
        except (IndexError, ValueError):
            continue
    return holders


def _try_lock(fd: int, wait_s: float) -> bool:
    """Take an exclusive ``flock`` on ``fd`` within ``wait_s`` seconds; whether it was had."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
