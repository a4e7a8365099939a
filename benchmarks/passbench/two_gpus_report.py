"""The table of ``two_gpus_h200x2.sh``: graphs per minute in each phase, and A/A.

    python3 benchmarks/passbench/two_gpus_report.py RESULTS [--json FILE]

RESULTS holds ``phases.json`` (each phase's window) and ``fusible/``, ``classical/``,
``aa/results.jsonl``. A phase's graphs are the records of its run finished in its window
(resumed records are older than every window). Per phase: graphs finished, the window's
rate (graphs over the window, start-up included), the steady rate (from the first graph
finished in the window to the last: the start-up every phase pays once left out), the
statuses, and the records whose timing turn was broken. A/A: |speedup - 1| of eager
against eager, over every correct graph and over those whose eager median is at least
50 us (below that, one call's jitter is a large share of it).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
from datetime import datetime
from pathlib import Path


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _read(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _phase(records: list[dict], window: dict) -> dict:
    began, ended = window["began"], window["ended"]
    mine = [r for r in records if began <= _ts(r["finished_at"]) <= ended + 1]
    ends = sorted(_ts(r["finished_at"]) for r in mine)
    steady = 60 * (len(ends) - 1) / (ends[-1] - ends[0]) if len(ends) > 2 else None
    broken = [r for r in mine if (r.get("turn") or {}).get("broken_after_s") is not None]
    return {
        "window_s": round(ended - began, 1),
        "graphs": len(mine),
        "per_min_window": round(60 * len(mine) / (ended - began), 2),
        "per_min_steady": round(steady, 2) if steady else None,
        "statuses": dict(collections.Counter(r.get("status") for r in mine)),
        "broken_turns": len(broken),
    }


def _aa(records: list[dict]) -> dict:
    ok = [r for r in records if r.get("speedup_e2e")]
    big = [r for r in ok if ((r.get("eager") or {}).get("e2e") or {}).get("median_ms", 0) >= 0.05]
    out = {}
    for name, rows in (("all", ok), ("eager_ge_50us", big)):
        dev = sorted(abs(r["speedup_e2e"] - 1) for r in rows)
        out[name] = {
            "graphs": len(dev),
            "median_abs_dev": round(statistics.median(dev), 5) if dev else None,
            "within_1pct": sum(d <= 0.01 for d in dev),
            "within_2pct": sum(d <= 0.02 for d in dev),
            "worst": round(dev[-1], 4) if dev else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    phases = json.loads((args.results / "phases.json").read_text())
    runs = {
        name: _read(args.results / name / "results.jsonl")
        for name in ("fusible", "classical", "aa")
    }
    table = {}
    for phase, run in (("one-gpu", "fusible"), ("one-gpu", "classical"), ("host", "fusible"),
                       ("device", "fusible"), ("aa", "aa")):  # fmt: skip
        window = phases.get(phase, {})
        if "began" in window and "ended" in window:
            table[f"{phase}/{run}"] = _phase(runs[run], window)
    one = (table.get("one-gpu/fusible") or {}).get("per_min_steady")
    print(f"{'phase/run':<22} {'window s':>8} {'graphs':>6} {'/min window':>11} {'/min steady':>11} "
          f"{'vs one GPU':>10}  broken  statuses")  # fmt: skip
    for name, row in table.items():
        ratio = f"{row['per_min_steady'] / one:.2f}x" if one and row["per_min_steady"] else "-"
        print(f"{name:<22} {row['window_s']:>8} {row['graphs']:>6} {row['per_min_window']:>11} "
              f"{row['per_min_steady'] or '-':>11} {ratio:>10}  {row['broken_turns']:>6}  {row['statuses']}")  # fmt: skip
    aa = _aa(runs["aa"])
    for name, row in aa.items():
        print(f"A/A {name}: {row}")
    if args.json:
        args.json.write_text(json.dumps({"phases": table, "aa": aa}, indent=1))


if __name__ == "__main__":
    main()
