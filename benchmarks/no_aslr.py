#!/usr/bin/env python3
"""Run a command with address-space layout randomization off, for an A/B of layout bias.

Sets the Linux personality flag ADDR_NO_RANDOMIZE (what ``setarch -R`` does) and execs
the command; the flag is inherited by everything it starts, so every process of the run
(the harness, its forkserver, the evaluation children) gets the same layout in every
run of the same command::

    PYTHONPATH=src:. python3 benchmarks/no_aslr.py python3 benchmarks/bench_harness.py \\
        --phase run1 --device cuda --work /tmp/bhA
"""

import ctypes
import os
import sys

ADDR_NO_RANDOMIZE = 0x0040000


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    libc = ctypes.CDLL(None, use_errno=True)
    current = libc.personality(0xFFFFFFFF)  # 0xffffffff only reads it
    if current == -1 or libc.personality(current | ADDR_NO_RANDOMIZE) == -1:
        sys.exit(f"personality(ADDR_NO_RANDOMIZE) failed: errno {ctypes.get_errno()}")
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
