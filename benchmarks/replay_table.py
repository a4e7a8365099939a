"""Print, per record, the three speedups and each side's medians (e2e, device, replay).

For records of ``passnet eval ... --replay-timing`` (CUDA):

    PYTHONPATH=src python3 benchmarks/replay_table.py OUT/results.jsonl [MORE.jsonl ...]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from passnet.runner import read_records


def _ms(timing: Any, clock: str) -> str:
    stats = getattr(timing, clock) if timing is not None else None
    return f"{stats.median_ms:8.4f}" if stats is not None else "       -"


def _x(value: float | None) -> str:
    return f"{value:6.3f}" if value else "     -"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("records", nargs="*", help="results.jsonl files")
    argv = parser.parse_args(argv).records
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print(
        f"{'compiler':10s} {'graph':40s} {'status':8s} {'speedup e2e/dev/replay':>22s} | "
        f"{'eager ms e2e/dev/replay':>26s} | {'compiled ms e2e/dev/replay':>26s}"
    )
    for path in argv:
        for r in read_records(path):
            sides = " | ".join(
                " ".join(_ms(t, c) for c in ("e2e", "device", "replay"))
                for t in (r.eager, r.compiled)
            )
            note = (r.compiled.replay_error or "")[:80] if r.compiled else ""
            print(
                f"{r.compiler:10s} {r.graph[:40]:40s} {r.status.value:8s} "
                f"{_x(r.speedup_e2e)} {_x(r.speedup_device)} {_x(r.speedup_replay)} | "
                f"{sides} {note}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
