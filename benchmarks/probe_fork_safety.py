"""Which modules may the evaluation forkserver preload? A module may not, if importing it
touches CUDA: torch then marks every process forked afterwards as a "bad fork", and the
child's first CUDA call fails with "Cannot re-initialize CUDA in forked subprocess".

For each module, a fresh process imports torch and the module, forks, and the fork
initialises CUDA; the table says whether that worked and how long the import took::

    PYTHONPATH=src python3 benchmarks/probe_fork_safety.py torch._dynamo torch._inductor.compile_fx

It prints ``SAFE <names>`` last: the modules whose import left forks usable.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

PROBE = r"""
import os, sys, time
import torch
t = time.perf_counter()
__import__(sys.argv[1])
dt = time.perf_counter() - t
pid = os.fork()
if pid == 0:
    try:
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        os._exit(0)
    except Exception as e:
        print(type(e).__name__, str(e)[:80], file=sys.stderr)
        os._exit(3)
_, status = os.waitpid(pid, 0)
print(f"{dt:.2f}", os.waitstatus_to_exitcode(status))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="*", help="modules to import before the fork")
    safe = []
    for name in parser.parse_args().modules:
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, name], capture_output=True, text=True, check=False
        )
        parts = proc.stdout.split()
        ok = proc.returncode == 0 and len(parts) == 2 and parts[1] == "0"
        import_s = parts[0] if parts else "?"
        why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        print(
            f"{name:45s} import {import_s:>6s} s  fork {'usable' if ok else 'BROKEN'}  {why[:90]}"
        )
        if ok:
            safe.append(name)
    print("SAFE " + " ".join(safe))


if __name__ == "__main__":
    main()
