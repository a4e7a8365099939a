#!/usr/bin/env python3
"""Run a command with address-space layout randomization off, for an A/B of layout bias.

Sets the Linux personality flag ADDR_NO_RANDOMIZE (what ``setarch -R`` does; the harness's
own switch, :func:`passnet.isolate.no_randomization_for_exec`) and execs the
command; the flag is inherited by everything it starts, so every process of the run
(the harness, its forkserver, the evaluation children) gets the same layout in every
run of the same command::

    PYTHONPATH=src:. python3 benchmarks/no_aslr.py python3 benchmarks/bench_harness.py \\
        --phase run1 --device cuda --work /tmp/bhA
"""

import os
import sys

from passnet.isolate import no_randomization_for_exec


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    with no_randomization_for_exec() as switched_off:
        if not switched_off:
            sys.exit("personality(ADDR_NO_RANDOMIZE) failed: layouts would stay random")
        os.execvp(sys.argv[1], sys.argv[1:])  # does not return: the flag goes with the exec


if __name__ == "__main__":
    main()
