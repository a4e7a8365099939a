"""Timing turns on the CPU: how long each graph holds its turn, and how fast a run stops.

``passnet eval --overlap`` is for CUDA; the executor underneath runs on the CPU as well,
which is enough to watch a turn's length (a turn stops the run's other evaluations for as
long as its graph is measured) and what Ctrl-C does to a run with a turn in progress:

    PYTHONPATH=src python3 benchmarks/overlap_cpu_turns.py --out /tmp/turns \
        [--max-measure-s 60] [--interrupt-after 40] [--overlap 3]

evaluates the shipped graphs with inductor, ``--overlap`` at a time on the CPU (warmup 5,
trials 200, adaptive), and prints each finished graph's measuring seconds and status.
With ``--interrupt-after S`` it interrupts itself (SIGINT, as Ctrl-C) after S seconds and
prints how long the run took to return, the turn state at the interrupt, and whether any
process of the run or turn state was left behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

from passnet.data import dev_samples_dir
from passnet.evaluate import EvalSettings
from passnet.record import read_records
from passnet.runner import LocalExecutor, plan_items, run_evaluations


def _turn_state() -> str:
    parts = []
    for folder in Path(tempfile.gettempdir()).glob("passnet-turns-*"):
        for part in ("timing", "paused"):
            pids = sorted(p.name for p in (folder / part).glob("*"))
            parts.append(f"{part} {len(pids)}")
    return ", ".join(parts) or "none"


def _parents() -> dict[int, int]:
    """Every live process's parent (Linux /proc)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found[int(stat.parent.name)] = int(fields[1])
    return found


def _evaluation_processes(pid: int) -> int:
    """Processes below ``pid``'s own helpers (multiprocessing's forkserver and resource
    tracker, its children, live as long as it does): the evaluation children and theirs."""
    parents = _parents()
    helpers = {p for p, parent in parents.items() if parent == pid}
    below, frontier = set(), helpers
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - below
        below |= frontier
    return len(below)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--overlap", type=int, default=3)
    ap.add_argument("--max-measure-s", type=float, default=None)
    ap.add_argument("--interrupt-after", type=float, default=None)
    args = ap.parse_args()
    settings = EvalSettings(
        warmup=5, trials=200, min_warmup_s=0.0, max_measure_s=args.max_measure_s
    )
    interrupted: dict[str, object] = {}

    def interrupt() -> None:
        interrupted["state"] = _turn_state()
        interrupted["at"] = time.perf_counter()
        os.kill(os.getpid(), signal.SIGINT)

    if args.interrupt_after is not None:
        threading.Timer(args.interrupt_after, interrupt).start()
    try:
        run_evaluations(
            plan_items([dev_samples_dir()]),
            compiler="inductor",
            device="cpu",
            settings=settings,
            out_dir=args.out,
            executor=LocalExecutor(["cpu"], overlap=args.overlap),
            echo_logs=False,
        )
    except KeyboardInterrupt:
        took = time.perf_counter() - float(interrupted["at"])  # type: ignore[arg-type]
        time.sleep(1.0)
        print(
            f"interrupted with turns: {interrupted['state']}; returned in {took:.1f} s; "
            f"evaluation processes left: {_evaluation_processes(os.getpid())}; turn state left: {_turn_state()}"
        )
    results = args.out / "results.jsonl"
    for rec in read_records(results) if results.is_file() else []:
        measure = rec.phases_s.get("measure")
        shown = f"{measure:6.1f} s" if measure is not None else "     -  "
        print(f"{shown}  {rec.status.value:10s} {rec.graph}")


if __name__ == "__main__":
    main()
