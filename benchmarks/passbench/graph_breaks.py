"""Where Dynamo breaks PassBench-GN's evaluation graphs, and what a break costs Inductor.

Each graph of the given split folders is traced by ``torch._dynamo.explain`` on the CPU
(Dynamo only, no Inductor: a graph runs eagerly, graph by graph), under Dynamo's default
options and under the options GraphNet's harness runs with. A graph that Dynamo splits is
compiled as several graphs, each with its guards, its wrapper and its launches: on a graph
of a few microseconds of work, that is the cost that makes Inductor slower than eager.
With ``--records``, the split's evaluation records (a ``passnet bench eval`` run) are
joined by graph hash, and the speedups of graphs with and without breaks are compared::

    python3 benchmarks/passbench/graph_breaks.py "$(passnet bench path)/eval-fusible" \\
        --records benchmarks/passbench/results/baselines_h200/eval-fusible-inductor-dynamic_false/results.jsonl \\
        --jobs 2 --json breaks.json

Prints the counts by split, the break reasons, and the speedup table; ``--json`` writes
every graph's figures.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any


def _explain(module: Any, inputs: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    import logging

    import torch

    torch._logging.set_logs(dynamo=logging.ERROR)  # each break's warning: the reasons are kept
    torch._dynamo.reset()
    with torch._dynamo.config.patch(options), torch.no_grad():
        found = torch._dynamo.explain(module)(*inputs)
    return {
        "graphs": found.graph_count,
        "breaks": found.graph_break_count,
        "reasons": [_reason(str(r.reason)) for r in found.break_reasons],
    }


def _reason(text: str) -> str:
    """A break reason without its per-graph details (names, sizes, line numbers)."""
    first = text.strip().splitlines()[0] if text.strip() else "unknown"
    first = re.sub(r"\(.*?\)|'[^']*'|\"[^\"]*\"|\d+", "…", first)
    return first[:90]


def trace(graph: str) -> dict[str, Any]:
    """One graph's Dynamo graphs and breaks, under both sets of options."""
    from passnet.compilers import GRAPHNET_DYNAMO_OPTIONS
    from passnet.sample import load_sample

    out: dict[str, Any] = {"graph": graph}
    try:
        sample = load_sample(graph)
        module = sample.build_module("cpu")
        inputs = sample.replay_inputs("cpu", 0)
        out["graph_hash"] = sample.graph_hash
        out["default"] = _explain(module, inputs, {})
        out["graphnet"] = _explain(module, inputs, dict(GRAPHNET_DYNAMO_OPTIONS))
    except Exception as exc:  # noqa: BLE001 - a graph that cannot be traced here is a finding
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return out


def _speedups(rows: list[dict[str, Any]]) -> str:
    values = [r["speedup"] for r in rows if r.get("speedup")]
    if not values:
        return "no timed graph"
    slow = sum(v < 1.0 for v in values)
    gmean = statistics.geometric_mean(values)
    return (
        f"{len(values)} timed, median speedup {statistics.median(values):.3f}, "
        f"G-mean {gmean:.3f}, slower than eager {slow} ({100 * slow / len(values):.0f} %)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("splits", nargs="+", type=Path, help="split folders (task folders in)")
    parser.add_argument("--records", type=Path, nargs="*", default=[], help="results.jsonl")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    for split in args.splits:
        if not split.is_dir():
            parser.error(f"{split}: not a folder")

    from passnet.record import read_records

    speedup: dict[str, float | None] = {}
    for path in args.records:
        for r in read_records(path):
            speedup[r.graph_hash] = r.speedup_e2e if r.status.value == "ok" else None

    graphs = {
        split.name: sorted(str(p.parent) for p in split.rglob("model.py")) for split in args.splits
    }
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        traced = {name: list(pool.map(trace, paths, chunksize=8)) for name, paths in graphs.items()}
    for split in args.splits:
        for row in traced[split.name]:
            row["graph"] = str(Path(row["graph"]).relative_to(split))  # no machine's path
            if row.get("graph_hash") in speedup:
                row["speedup"] = speedup[row["graph_hash"]]
    if args.json:
        args.json.write_text(json.dumps(traced, indent=1) + "\n")

    for name, rows in traced.items():
        ok = [r for r in rows if "error" not in r]
        print(f"{name}: {len(rows)} graphs, {len(rows) - len(ok)} not traced on this machine")
        for options in ("default", "graphnet"):
            broken = [r for r in ok if r[options]["breaks"]]
            extra = sum(r[options]["graphs"] - 1 for r in ok)
            print(
                f"  {options} Dynamo options: {len(broken)} graphs broken "
                f"({100 * len(broken) / max(len(ok), 1):.1f} %), {extra} extra Dynamo graphs"
            )
        reasons = collections.Counter(reason for r in ok for reason in set(r["default"]["reasons"]))
        for reason, n in reasons.most_common(6):
            print(f"    {n:5d} graphs: {reason}")
        errors = collections.Counter(r["error"].split(":")[0] for r in rows if "error" in r)
        if errors:
            print(f"  not traced: {dict(errors)}")
        if speedup:
            whole = [r for r in ok if not r["default"]["breaks"]]
            split_ = [r for r in ok if r["default"]["breaks"]]
            print(f"  whole (one Dynamo graph): {_speedups(whole)}")
            print(f"  broken:                   {_speedups(split_)}")


if __name__ == "__main__":
    main()
