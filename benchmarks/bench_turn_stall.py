"""Where a `passnet eval --overlap` run stalls: every process's stacks while it does.

Runs one `passnet eval` (the arguments after ``--``, its ``--out`` set here) with
``PASSNET_STACKS_DIR`` set, so that each evaluation child writes its Python stacks on
``SIGUSR1`` (``passnet.isolate``), and watches the run's timing-turn state
(``/tmp/passnet-turns-*``). When a turn has lasted ``--stall-s`` seconds, or no record
has been written for that long while evaluations run, it takes a snapshot:

* ``snapshots/<n>.txt``: the turn state (members, their GPU, who holds a turn and for how
  long, who is stopped, which turns are broken); for every member and each of its own
  child processes (compile workers), its state and every thread's state, kernel wait
  channel and system call; every ``flock``/``fcntl`` lock those processes hold or wait
  for (``/proc/locks``, the turn state's own lock named); ``nvidia-smi``'s compute
  processes;
* ``stacks/<pid>.txt``: each member's Python stacks, all threads (``SIGUSR1``). A stopped
  member writes its stacks only when continued: by the end of the turn that stopped it,
  or when the executor breaks that turn (``max_measure_s`` + 60 s, at most half the
  timeout), so take snapshots before then (``--stall-s`` below that bound).

Then it waits for records to come again (or ``--stall-s`` more) before the next snapshot,
at most ``--max-snapshots``. At the end it prints the records' statuses, the broken
turns and the snapshots taken. The stall seen on two H200s:

    PYTHONPATH=src python benchmarks/bench_turn_stall.py --out /tmp/turn-stall \\
        --stall-s 30 -- list.txt --compiler inductor --device cuda --jobs 2 \\
        --graphs-per-child 16 --overlap 4 --overlap-scope device --trials 100 --timeout 180
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STACKS_DIR_ENV = "PASSNET_STACKS_DIR"  # passnet.isolate.STACKS_DIR_ENV (no import: no torch)


def _children() -> dict[int, list[int]]:
    """Every live process's children (Linux /proc)."""
    found: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        found.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return found


def _descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    out, frontier = [], [pid]
    while frontier:
        kids = children.get(frontier.pop(), [])
        out += kids
        frontier += kids
    return out


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError as exc:
        return f"<{type(exc).__name__}>"


def _turn_folder(run_pid: int, started: float) -> Path | None:
    """The state folder of the run's turns: made after it started, its members the run's."""
    mine = set(_descendants(run_pid, _children()))
    for folder in sorted(Path(tempfile.gettempdir()).glob("passnet-turns-*")):
        try:
            if folder.stat().st_ctime < started - 1:
                continue
            pids = {int(p.name) for p in (folder / "members").iterdir() if p.name.isdigit()}
        except OSError:
            continue
        if pids & mine or not pids:
            return folder
    return None


def _entries(folder: Path, part: str) -> dict[int, tuple[str, float]]:
    """pid -> (text, mtime) of the state folder's ``part``."""
    found = {}
    try:
        paths = list((folder / part).iterdir())
    except OSError:
        return {}
    for path in paths:
        if path.name.isdigit():
            try:
                found[int(path.name)] = (path.read_text(), path.stat().st_mtime)
            except OSError:
                continue
    return found


def _threads(pid: int) -> list[str]:
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*"), key=lambda p: int(p.name)):
        stat = _read(task / "stat")
        state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
        name = _read(task / "comm")
        lines.append(
            f"    thread {task.name} {name!r}: state {state}, wchan {_read(task / 'wchan')!r}, "
            f"syscall {_read(task / 'syscall')[:60]!r}"
        )
    return lines


def _locks(pids: set[int], turn_lock_inode: int | None) -> list[str]:
    """``/proc/locks`` lines of ``pids`` and of the turn state's lock (``->``: waiting)."""
    out = []
    for line in _read("/proc/locks").splitlines():
        fields = line.split()
        if len(fields) > 1 and fields[1] == "->":
            fields = [fields[0], *fields[2:]]
        try:
            pid, inode = int(fields[4]), fields[5].split(":")[2]
        except (IndexError, ValueError):
            continue
        ours = turn_lock_inode is not None and inode == str(turn_lock_inode)
        if pid in pids or ours:
            out.append(f"  {line}" + ("  (the turn state's lock)" if ours else ""))
    return out


def _snapshot(path: Path, folder: Path | None, run_pid: int, why: str) -> list[int]:
    """Write the snapshot; send SIGUSR1 to every member (holders first). Returns them."""
    now = time.time()
    children = _children()
    lines = [f"{datetime.datetime.now(datetime.timezone.utc).isoformat()}: {why}"]
    members = _entries(folder, "members") if folder else {}
    timing = _entries(folder, "timing") if folder else {}
    paused = _entries(folder, "paused") if folder else {}
    broken = _entries(folder, "broken") if folder else {}
    lines.append(f"turn state: {folder}")
    every: set[int] = {run_pid}
    for pid, (device, _) in sorted(members.items()):
        role = []
        if pid in timing:
            role.append(f"IN ITS TURN for {now - timing[pid][1]:.1f} s")
        if pid in paused:
            role.append(f"stopped for {now - paused[pid][1]:.1f} s")
        if pid in broken:
            role.append(f"turn broken ({broken[pid][0]})")
        lines.append(f"member {pid} gpu {device}: {', '.join(role) or 'running'}")
        lines.append(f"  state: {_read(f'/proc/{pid}/status').splitlines()[2:3]}")
        lines += _threads(pid)
        every.add(pid)
        for kid in _descendants(pid, children):
            every.add(kid)
            cmd = _read(f"/proc/{kid}/cmdline").replace("\0", " ")[:120]
            lines.append(f"  child {kid}: {cmd}")
            lines += _threads(kid)
    inode = None
    if folder is not None:
        try:
            inode = (folder / "lock").stat().st_ino
        except OSError:
            pass
    lines.append("locks (/proc/locks; '->': waiting):")
    lines += _locks(every, inode) or ["  none"]
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        lines.append("nvidia-smi compute processes:\n" + smi.stdout.strip())
    except (OSError, subprocess.TimeoutExpired) as exc:
        lines.append(f"nvidia-smi: {type(exc).__name__}")
    path.write_text("\n".join(lines) + "\n")
    signalled = []
    for pid in sorted(members, key=lambda p: p not in timing):  # holders first
        try:
            os.kill(pid, signal.SIGUSR1)
            signalled.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return signalled


def _records(path: Path) -> list[dict]:
    out = []
    try:
        text = path.read_text()
    except OSError:
        return []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="work folder (made)")
    parser.add_argument("--stall-s", type=float, default=30.0, help="snapshot after this long")
    parser.add_argument("--max-snapshots", type=int, default=10)
    parser.add_argument("eval_args", nargs=argparse.REMAINDER, help="-- passnet eval arguments")
    args = parser.parse_args()
    eval_args = args.eval_args[1:] if args.eval_args[:1] == ["--"] else args.eval_args
    if not eval_args or "--out" in eval_args:
        parser.error("give passnet eval's arguments after --, without --out")
    if args.stall_s <= 0:
        parser.error("--stall-s must be positive")
    stacks, snapshots = args.out / "stacks", args.out / "snapshots"
    for folder in (stacks, snapshots):
        folder.mkdir(parents=True, exist_ok=True)
    run_dir = args.out / "run"
    env = {**os.environ, STACKS_DIR_ENV: str(stacks.resolve())}
    command = [sys.executable, "-m", "passnet.cli", "eval", *eval_args, "--out", str(run_dir)]
    print("running:", " ".join(command), flush=True)
    started = time.time()
    with open(args.out / "console.log", "w") as console:
        run = subprocess.Popen(command, env=env, stdout=console, stderr=subprocess.STDOUT)
        folder, taken = None, 0
        seen, progress_at, armed_at = 0, time.time(), 0.0
        try:
            while run.poll() is None:
                time.sleep(1.0)
                folder = folder if folder and folder.exists() else _turn_folder(run.pid, started)
                count = len(_records(run_dir / "results.jsonl"))
                now = time.time()
                if count != seen:
                    seen, progress_at = count, now
                    armed_at = 0.0  # records come again: the next stall gets a snapshot
                if folder is None or taken >= args.max_snapshots:
                    continue
                timing = _entries(folder, "timing")
                oldest = max((now - t for _, t in timing.values()), default=0.0)
                members = _entries(folder, "members")
                idle = now - progress_at
                why = ""
                if oldest >= args.stall_s:
                    why = f"a turn has lasted {oldest:.0f} s"
                elif members and idle >= args.stall_s:
                    why = f"no record for {idle:.0f} s"
                if why and now - armed_at >= args.stall_s:
                    taken += 1
                    path = snapshots / f"{taken:02d}.txt"
                    pids = _snapshot(path, folder, run.pid, why)
                    armed_at = now
                    print(f"{why}: {path}; SIGUSR1 to {pids}", flush=True)
        except KeyboardInterrupt:
            run.send_signal(signal.SIGINT)
        finally:
            code = run.wait()
    records = _records(run_dir / "results.jsonl")
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    broken = [r for r in records if (r.get("turn") or {}).get("broken_after_s") is not None]
    print(f"passnet eval ended with {code} after {time.time() - started:.0f} s: {statuses}")
    for r in broken:
        turn = r["turn"]
        print(
            f"  turn broken after {turn['broken_after_s']:.0f} s of {turn['ended'] - turn['began']:.0f} s "
            f"({', '.join(turn.get('broken_turns') or [])}): {r['graph']}"
        )
    print(
        f"snapshots: {taken} in {snapshots}; stacks: {stacks} ({len(list(stacks.glob('*.txt')))} files)"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
