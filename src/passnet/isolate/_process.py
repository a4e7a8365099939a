"""Run a function in a disposable child process with a timeout.

Children are forked from a *forkserver* that has already imported what its callers
name (``preload``: torch, Dynamo, their own child code), so a child starts in
milliseconds and its first ``torch.compile`` imports less, while each piece of work
(an evaluation, a sample of a dataset stage) still gets a fresh process: a segfault, an abort, a CUDA error, an OOM kill or a hang ends
the child, never the harness. The forkserver itself never touches CUDA, so the
children may initialize it.

The forkserver is started with address-space layout randomization off (``fixed_layout``,
the default; Linux's ``ADDR_NO_RANDOMIZE`` personality, as ``setarch -R`` sets it), so
its children, forked from it, lay out their memory alike in every run of the same
command. With randomized layouts, graphs whose calls take tens of microseconds timed one
side a few per cent faster or slower from one run to the next (H200 measurements in
``benchmarks/results/harness_h200_clocks/``). Candidate code runs in the children
anyway, so randomization protects nothing there.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import json
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import multiprocessing.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from passnet.errors import ChildStartError
from passnet.isolate._memory import mentions_host_oom

__all__ = [
    "TORCH_PRELOAD",
    "ChildOutcome",
    "even_chunks",
    "process_alive",
    "layout_fixed",
    "no_randomization_for_exec",
    "run_isolated",
    "run_isolated_batch",
    "run_isolated_items",
]

log = logging.getLogger(__name__)

TORCH_PRELOAD: tuple[str, ...] = (
    "torch",
    # Modules that the first torch.compile of every child would otherwise import
    # (Dynamo, AOTAutograd, the compile-worker code: about 2 s on the 2-core development
    # CPU). Only modules whose import touches no CUDA: one that queries a device (such as
    # torch._inductor.compile_fx on torch 2.11 with CUDA) marks every later fork as a bad
    # fork, and no child could use the GPU; benchmarks/probe_fork_safety.py checks a
    # module on a CUDA machine. A name that a torch version lacks is skipped.
    "torch._dynamo",
    "torch._functorch.aot_autograd",
    "torch._inductor.async_compile",
    "triton.language",
)
"""The torch modules that a caller whose children compile names in its ``preload``,
before its own child code (:data:`passnet.evaluate.FORKSERVER_PRELOAD`, a dataset
stage's ``preload``)."""
_START_BUDGET_S = 300.0
"""How long a child may take to report its start (forkserver start included)."""
_ctx_lock = threading.Lock()
_ctx: Any = None
_server_layout: bool | None = None
"""Whether the running forkserver was started with ``fixed_layout`` (None: not started)."""
_server_preload: tuple[str, ...] = ()
"""The modules the running forkserver imported before forking (its preload)."""
_wanted_preload: list[str] = []
"""Every module a call of this process asked the forkserver to preload, in first-asked
order: a server started (or restarted) later preloads all of them."""
_live_children = 0

_ADDR_NO_RANDOMIZE = 0x0040000
_PERSONALITY_QUERY = 0xFFFFFFFF


def layout_fixed() -> bool | None:
    """Whether this process runs without address-space randomization (None off Linux)."""
    try:
        with open("/proc/self/personality") as f:
            return bool(int(f.read().strip(), 16) & _ADDR_NO_RANDOMIZE)
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def no_randomization_for_exec() -> Iterator[bool]:
    """Programs this process starts meanwhile run without address-space randomization
    (the personality flag is inherited and takes effect at exec); True if it could be set."""
    libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
    old = libc.personality(_PERSONALITY_QUERY) if libc is not None else -1
    if old == -1 or libc.personality(old | _ADDR_NO_RANDOMIZE) == -1:
        log.warning("cannot switch address-space randomization off: child layouts will vary")
        yield False
        return
    try:
        yield True
    finally:
        libc.personality(old)


def _acquire(fixed_layout: bool | None, preload: Sequence[str] = ()) -> Any:
    """The forkserver context for one more child, its server started with the layout asked
    for (None: any) and having imported ``preload``, the child counted as live
    (:func:`run_isolated` uncounts it).

    A running server with the other layout, or without a module of ``preload``, is
    restarted while no child runs; otherwise the child runs with the server's layout (the
    record says which; a warning says so) and imports what the server lacks itself.
    """
    global _live_children
    with _ctx_lock:
        _live_children += 1
        try:
            return _context(fixed_layout, preload)
        except BaseException:
            _live_children -= 1
            raise


def _context(fixed_layout: bool | None, preload: Sequence[str]) -> Any:
    """:func:`_acquire`'s work, under ``_ctx_lock``."""
    global _ctx, _server_layout, _server_preload
    if _ctx is None:
        _ctx = multiprocessing.get_context("forkserver")
    _wanted_preload.extend(m for m in preload if m not in _wanted_preload)
    want = fixed_layout if fixed_layout is not None else (_server_layout is not False)
    lacking = [m for m in preload if m not in _server_preload]
    if _server_layout is not None and (_server_layout != want or lacking):
        server = multiprocessing.forkserver._forkserver
        stop = getattr(server, "_stop", None)
        if _live_children > 1 or stop is None:  # a restart would end the running children
            if _server_layout != want:
                log.warning(
                    "the forkserver runs with fixed_layout=%s; this child gets that too",
                    _server_layout,
                )
            else:
                log.debug("the forkserver lacks %s: the child imports them itself", lacking)
            return _ctx
        stop()
        _server_layout = None
    if _server_layout is None:
        _server_preload = tuple(_wanted_preload)
        _ctx.set_forkserver_preload(list(_server_preload))
        if want:
            with no_randomization_for_exec():
                multiprocessing.forkserver.ensure_running()
        else:
            multiprocessing.forkserver.ensure_running()
        _server_layout = want  # what was asked: a refused flag is logged, not retried
    return _ctx


@dataclass
class ChildOutcome:
    """What came back from a child: its result (if it finished), last stage, and how it ended."""

    result: dict[str, Any] | None
    last_stage: str
    exitcode: int | None
    timed_out: bool
    started_s: float
    """Seconds from asking for the process to its first message."""
    stages: list[str] = field(default_factory=list)
    from_provisional: bool = False
    """The child died or timed out after sending a provisional result (before optional
    extra work, such as replay timing): ``result`` is that one."""
    stderr_tail: str = ""
    """With ``capture_stderr``: the end of what the child wrote to its stderr (a Python
    traceback, a C++ abort message), or, for a child that never started, why not."""

    @property
    def signal_name(self) -> str | None:
        if self.exitcode is not None and self.exitcode < 0:
            try:
                return signal.Signals(-self.exitcode).name
            except ValueError:
                return f"signal {-self.exitcode}"
        return None

    @property
    def how_ended(self) -> str:
        """The signal that ended the child (``SIGSEGV``), else its exit code (``exit code 1``)."""
        return self.signal_name or f"exit code {self.exitcode}"

    def death(self, timeout_s: float, *, stage: bool = False) -> tuple[str, str]:
        """How a child that gave no final result ended: a kind and a message.

        The kind is ``timeout``, ``out_of_memory`` (its stderr tells of the host's memory
        running out: :func:`~passnet.isolate.mentions_host_oom`) or ``crashed``; the
        message names the time limit (``timeout_s``), or how the child died and the last
        line of its stderr. ``stage``: the message names the last stage too."""
        where = f"in stage {self.last_stage}" if stage else ""
        if self.timed_out:
            limit = f"stopped after {timeout_s:.0f} s (the time limit)"
            return "timeout", limit + (f", {where}" if where else "")
        kind = "out_of_memory" if mentions_host_oom(self.stderr_tail) else "crashed"
        tail = [line for line in self.stderr_tail.splitlines() if line.strip()]
        message = f"the child process died ({self.how_ended})" + (f" {where}" if where else "")
        return kind, message + (f": {tail[-1].strip()}" if tail else "")


_PR_SET_PDEATHSIG = 1


def _die_with_the_harness() -> None:
    """Have the kernel kill this child when its parent, the forkserver, ends.

    The forkserver exits when the write ends of its "alive" pipe are all closed. The
    harness holds one, and multiprocessing hands every child a copy too (so that it
    could use the forkserver itself); evaluation children never do, so the child
    closes its copy. Then a killed ``passnet eval`` (even SIGKILL, its process group
    spared) ends the forkserver, and the kernel ends the child: a child that hangs
    or measures does not outlive its harness or keep a GPU busy. The signal is
    Linux's; elsewhere only the copy is closed.
    """
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    alive_fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(alive_fd, int):
        try:
            os.close(alive_fd)
        except OSError:
            pass
        server._forkserver_alive_fd = None
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl in this libc: nothing to arm
        return
    if os.getppid() != parent:  # the parent ended before the signal was armed
        os._exit(1)


STACKS_DIR_ENV = "PASSNET_STACKS_DIR"
"""A folder where each isolated child writes its Python stacks (``<pid>.txt``) when it gets
``SIGUSR1``; unset, they go to the child's stderr."""

_stacks_file: Any = None  # kept open: faulthandler writes to its descriptor


def _stacks_on_sigusr1() -> None:
    """On ``SIGUSR1``, write every thread's Python stack (:mod:`faulthandler`: from the
    signal handler itself, so also while the main thread waits in C, on a lock or the
    GPU; a stopped process writes once continued)."""
    global _stacks_file
    target: Any = sys.stderr
    folder = os.environ.get(STACKS_DIR_ENV)
    if folder:
        try:
            _stacks_file = open(Path(folder) / f"{os.getpid()}.txt", "a")  # noqa: SIM115
            target = _stacks_file
        except OSError as exc:
            log.warning("no stack file in %s (%s): stacks go to stderr", folder, exc)
    with contextlib.suppress(ValueError, OSError, RuntimeError):  # no usable stderr: none
        faulthandler.register(signal.SIGUSR1, file=target, all_threads=True)


def _entry(conn: Any, target: Any, args: tuple[Any, ...], stderr_path: str | None = None) -> None:
    _die_with_the_harness()
    # What the forkserver imported lives as long as the child: out of the collector's
    # sight, a collection (Python's own during a compile, or between the graphs of a
    # shared child) walks only what the child made (~0.2 s less per full collection)
    gc.freeze()
    if stderr_path is not None:
        fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        sys.stderr.flush()
        os.dup2(fd, 2)
        os.close(fd)
    _stacks_on_sigusr1()

    def send(msg: tuple[str, Any]) -> None:
        conn.send(msg)

    try:
        target(*args, send)
    finally:
        conn.close()


def run_isolated(
    target: Any,
    args: tuple[Any, ...],
    timeout_s: float,
    *,
    preload: Sequence[str] = (),
    fixed_layout: bool | None = None,
    on_stage: Callable[[str], None] | None = None,
    capture_stderr: bool = False,
) -> ChildOutcome:
    """Run ``target(*args, send)`` in a child; ``send(("stage", name))`` / ``send(("result", dict))``.

    ``send(("provisional", dict))`` is a result to keep if the child dies or runs out of
    time before its final one (:attr:`ChildOutcome.from_provisional`). ``fixed_layout``:
    the child's address-space layout is the same in every run (True), randomized (False),
    or whatever the running forkserver gives (None; fixed when it is first started).
    ``preload``: modules the forkserver imports before forking, so that each child has
    them (the caller's child code and what it imports; :data:`TORCH_PRELOAD`); importing
    one may do start-up work for every child (a warm-up). A name that fails with
    ``ImportError`` is skipped. ``on_stage(name)`` is called as each stage message arrives (progress for a person).
    ``capture_stderr``: the child's stderr goes to a file instead of the harness's, and
    its end comes back as :attr:`ChildOutcome.stderr_tail`.

    Raises :class:`~passnet.errors.ChildStartError`, with the cause, when no child can be
    started (the forkserver ended: a module it preloads fails to import, say)."""
    (outcome,) = run_isolated_items(
        target,
        args,
        1,
        timeout_s,
        preload=preload,
        fixed_layout=fixed_layout,
        on_stage=on_stage,
        capture_stderr=capture_stderr,
    )
    return outcome


def run_isolated_items(
    target: Any,
    args: tuple[Any, ...],
    items: int,
    timeout_s: float,
    *,
    preload: Sequence[str] = (),
    fixed_layout: bool | None = None,
    on_stage: Callable[[str], None] | None = None,
    on_outcome: Callable[[ChildOutcome], None] | None = None,
    capture_stderr: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> list[ChildOutcome]:
    """Run ``target(*args, send)`` in one child that works through ``items`` items in turn,
    sending each item's stages and then its ``("result", dict)`` as :func:`run_isolated`'s
    target sends its one.

    Each item has ``timeout_s`` of its own, counted from its first message (the first
    item's, like :func:`run_isolated`'s, from the child's first message); an item's
    :attr:`ChildOutcome.started_s` is the time from the previous item's result (the first
    item: from asking for the process) to its first message. The outcomes come back in
    item order, each also to ``on_outcome`` as it is decided. When the child dies or runs
    out of time during an item, that item's outcome says how (as :func:`run_isolated`'s
    would) and is the last: the items after it were not run, and the caller decides
    where they run next. ``should_stop()``, asked about once a second, ends the child
    early when it answers True: the item in progress gets no outcome. ``preload``: as
    :func:`run_isolated`'s.
    """
    if items < 1:
        raise ValueError(f"items must be >= 1, got {items!r}")
    global _live_children
    ctx = _acquire(fixed_layout, preload)
    try:
        return _run(
            ctx, target, args, timeout_s, on_stage, capture_stderr, items, on_outcome, should_stop
        )
    finally:
        with _ctx_lock:
            _live_children -= 1


T = TypeVar("T")


def run_isolated_batch(
    items: Sequence[T],
    child: Callable[[list[T]], tuple[Any, tuple[Any, ...]]],
    timeout_s: float,
    on_outcome: Callable[[T, ChildOutcome, int, float], bool],
    *,
    preload: Sequence[str] = (),
    fixed_layout: bool | None = None,
    on_stage: Callable[[T, str], None] | None = None,
    capture_stderr: bool = False,
    should_stop: Callable[[], bool] | None = None,
    run_items: Callable[..., list[ChildOutcome]] | None = None,
) -> None:
    """Run every one of ``items`` in children of :func:`run_isolated_items`, a fresh child
    for the items left after one that dies or runs out of time.

    ``child(left)`` gives the target and arguments of a child that works through the
    items ``left``, in turn. ``on_outcome(item, outcome, position, elapsed_s)`` hears each
    item's outcome, its place in its child (0 for the first) and the seconds since the
    child's previous outcome (the first: since the child was asked for); it answers
    whether the item is decided: one it is not goes to the next child, first (the child
    ended before it began, say). ``on_stage(item, name)`` hears the stages.
    ``should_stop()``, asked before each child and by the running one, ends the work
    early: the item in progress and those after it get no outcome. ``run_items`` stands
    in for :func:`run_isolated_items` (default: that). ``preload``: as
    :func:`run_isolated`'s."""
    left = list(items)
    while left and not (should_stop is not None and should_stop()):
        left = _batch_child(
            left,
            child,
            timeout_s,
            on_outcome,
            on_stage,
            run_items or run_isolated_items,
            preload=preload,
            fixed_layout=fixed_layout,
            capture_stderr=capture_stderr,
            should_stop=should_stop,
        )


def _batch_child(
    left: list[T],
    child: Callable[[list[T]], tuple[Any, tuple[Any, ...]]],
    timeout_s: float,
    on_outcome: Callable[[T, ChildOutcome, int, float], bool],
    on_stage: Callable[[T, str], None] | None,
    run_items: Callable[..., list[ChildOutcome]],
    **options: Any,
) -> list[T]:
    """One child of :func:`run_isolated_batch` for the items ``left``; those left after it."""
    position = 0
    t0 = time.perf_counter()
    retry: list[T] = []

    def decided(outcome: ChildOutcome) -> None:
        nonlocal position, t0
        item = left[position]
        now = time.perf_counter()
        if not on_outcome(item, outcome, position, now - t0):
            retry.append(item)
            return
        t0 = now
        position += 1

    def stage(name: str) -> None:
        if on_stage is not None:
            on_stage(left[position], name)

    target, args = child(left)
    outcomes = run_items(
        target, args, len(left), timeout_s, on_stage=stage, on_outcome=decided, **options
    )
    return retry + left[len(outcomes) :]


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a killed process not yet reaped by its parent (a
    zombie) still answers signal 0, but is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (not Linux): signal 0 is all there is
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def even_chunks(items: Sequence[T], most: int, parts: int) -> list[list[T]]:
    """``items`` in order in chunks of one size, the last the rest: the size that makes
    ``max(ceil(n / most), min(n, parts))`` chunks (none holds more than ``most``, and
    ``parts`` workers get work alike; rounding up may make fewer chunks)."""
    if most < 1:
        raise ValueError(f"most must be >= 1, got {most!r}")
    n = len(items)
    if n == 0:
        return []
    count = max(-(-n // most), min(n, parts))
    size = -(-n // count)
    return [list(items[i : i + size]) for i in range(0, n, size)]


_STDERR_TAIL_CHARS = 4000


def _traceback_tail(text: str) -> str:
    """The exception line of a traceback and the innermost place it names."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    places = [line.strip() for line in lines if line.lstrip().startswith('File "')]
    return lines[-1].strip() + (f" ({places[-1]})" if places else "")


def _start_failure(target: Any) -> str:
    """Why a child cannot start, found as the forkserver and the child would meet it: a
    fresh interpreter (same executable, flags, environment and folder as the forkserver)
    imports the forkserver's preloads, then, with this process's ``sys.path`` (what a
    child gets), the target's module. The failing import's exception and file say why."""
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    preload = list(getattr(server, "_preload_modules", None) or _server_preload)
    script = (
        "import importlib, json, sys\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"  # skipped by the forkserver too
        "        pass\n"
        "sys.path[:] = json.loads(sys.argv[2])\n"
        "importlib.import_module(sys.argv[3])\n"
    )
    module = getattr(target, "__module__", None) or "__main__"
    flags = multiprocessing.util._args_from_interpreter_flags()
    try:
        probe = subprocess.run(
            [
                sys.executable,
                *flags,
                "-c",
                script,
                json.dumps(preload),
                json.dumps(sys.path),
                module,
            ],
            capture_output=True,
            text=True,
            timeout=_START_BUDGET_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the forkserver ended, and a probe of its imports could not run ({exc})"
    if probe.returncode != 0:
        return f"importing the modules a child needs fails: {_traceback_tail(probe.stderr)}"
    return (
        "the forkserver ended without starting it, though its modules import in a fresh "
        "interpreter (its own message, if any, is on this process's stderr)"
    )


def _run(
    ctx: Any,
    target: Any,
    args: tuple[Any, ...],
    timeout_s: float,
    on_stage: Callable[[str], None] | None,
    capture_stderr: bool,
    items: int,
    on_outcome: Callable[[ChildOutcome], None] | None,
    should_stop: Callable[[], bool] | None = None,
) -> list[ChildOutcome]:
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    t0 = time.perf_counter()
    stderr_path = (
        os.path.join(tempfile.gettempdir(), f"passnet-child-{os.getpid()}-{uuid.uuid4().hex}.err")
        if capture_stderr
        else None
    )
    proc = ctx.Process(target=_entry, args=(child_conn, target, args, stderr_path), daemon=True)
    try:
        proc.start()
    except (EOFError, ConnectionError, OSError) as exc:
        child_conn.close()
        parent_conn.close()
        raise ChildStartError(
            f"cannot start a child process: {_start_failure(target)}",
            target=f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', target)}",
        ) from exc
    child_conn.close()
    outcomes: list[ChildOutcome] = []
    # The timeout counts from the item's first message: the forkserver's own start
    # (seconds, paid by the first child of a run) is the harness's, not the evaluation's.
    item_t0 = t0
    deadline = t0 + max(timeout_s, _START_BUDGET_S)
    stages: list[str] = []
    started_s = -1.0
    timed_out = False
    provisional: dict[str, Any] | None = None
    any_message = False
    stopped = False
    while len(outcomes) < items:
        if should_stop is not None and should_stop():
            stopped = True
            break
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            timed_out = True
            break
        if not parent_conn.poll(min(remaining, 1.0)):
            if not proc.is_alive() and not parent_conn.poll(0):
                break
            continue
        try:
            kind, payload = parent_conn.recv()
        except (EOFError, OSError):
            break
        any_message = True
        if started_s < 0:
            started_s = time.perf_counter() - item_t0
            deadline = item_t0 + started_s + timeout_s
        if kind == "stage":
            stages.append(payload)
            if on_stage is not None:
                on_stage(payload)
        elif kind == "provisional":
            provisional = payload
        elif kind == "result":
            outcome = ChildOutcome(
                result=payload,
                last_stage=stages[-1] if stages else "start",
                exitcode=None,
                timed_out=False,
                started_s=started_s,
                stages=stages,
            )
            outcomes.append(outcome)
            if len(outcomes) < items and on_outcome is not None:
                on_outcome(outcome)  # the last one's after the child ended
            item_t0 = time.perf_counter()
            deadline = item_t0 + timeout_s
            stages, started_s, provisional = [], -1.0, None
    finished = len(outcomes) == items
    if not finished and proc.is_alive():
        proc.kill()
    proc.join(timeout=30)
    if proc.is_alive():  # done with every item but not ending: nothing more is wanted of it
        proc.kill()
        proc.join(timeout=30)
    parent_conn.close()
    stderr_tail = ""
    if stderr_path is not None:
        stderr_tail = _read_tail(stderr_path)
        if not any_message and not os.path.exists(stderr_path):
            # The child ended before it ran a line of ours: it could not unpickle its
            # target (an import failed) or the forkserver could not fork it.
            stderr_tail = f"the child never started: {_start_failure(target)}"
        with contextlib.suppress(OSError):
            os.unlink(stderr_path)
    if stopped:
        return outcomes
    if finished:
        last = outcomes[-1]
        last.exitcode = proc.exitcode
        last.stderr_tail = stderr_tail
    else:
        last = ChildOutcome(
            result=provisional,
            from_provisional=provisional is not None,
            last_stage=stages[-1] if stages else "start",
            exitcode=proc.exitcode,
            timed_out=timed_out,
            started_s=max(started_s, 0.0),
            stages=stages,
            stderr_tail=stderr_tail,
        )
        outcomes.append(last)
    if on_outcome is not None:
        on_outcome(last)
    return outcomes


def _read_tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _STDERR_TAIL_CHARS))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""
