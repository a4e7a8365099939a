"""Start-up time of the command line: ``passnet --help`` and ``passnet eval --help``, each
run ``--repeat`` times in a fresh process (wall clock, the interpreter's start included)::

    python3 benchmarks/cli_startup.py --repeat 20

It prints, per command, the median, min and max seconds. The commands run through the
installed ``passnet`` script when it is on PATH, else as ``python -m passnet.cli``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def _command(args: list[str]) -> list[str]:
    script = shutil.which("passnet")
    return [script, *args] if script else [sys.executable, "-m", "passnet.cli", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="runs per command (default: 20)")
    opts = parser.parse_args()
    for args in (["--help"], ["eval", "--help"]):
        seconds = []
        for _ in range(opts.repeat):
            t0 = time.perf_counter()
            subprocess.run(_command(args), check=True, stdout=subprocess.DEVNULL)
            seconds.append(time.perf_counter() - t0)
        print(
            f"passnet {' '.join(args):12s} median {statistics.median(seconds):.3f} s  "
            f"min {min(seconds):.3f} s  max {max(seconds):.3f} s  (n={opts.repeat})"
        )


if __name__ == "__main__":
    main()
