"""Fusible-subgraph discovery: one Inductor compilation vs the every-prefix reference.

For every sample: time to find the fusible spans and the number of compilations
with ``one-compile`` (Inductor's code generation once, kernels mapped back to FX
nodes) and with ``every-prefix`` (code generation for each prefix of the graph,
PassNet's prefix analysis), capped at ``--timeout`` seconds per graph (reported
as "> T s"); whether both give the same spans where the reference finished.
Then the number of subgraph samples per kind that ``decompose`` writes from all
samples. Prints tables and writes JSON.

    PYTHONPATH=src python3 benchmarks/dataset/bench_fusible.py --timeout 20 --json bench_fusible.json
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from passnet.data import dev_samples_dir
from passnet.dataset import (
    SubgraphStatus,
    analyze_fusible,
    decompose_samples,
    fusible_ranges,
    trace_parent,
)
from passnet.sample import find_samples


def _fmt_s(seconds: float | None, complete: bool = True, cap: float | None = None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f}" if complete else f"> {cap:g} s"


def measure(path: Path, timeout_s: float, device: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "sample": str(path.relative_to(path.parents[1])) if len(path.parents) > 1 else path.name
    }
    t0 = time.perf_counter()
    try:
        parent = trace_parent(path, device)
    except Exception as exc:  # noqa: BLE001 - recorded in the table
        row["error"] = f"trace: {type(exc).__name__}: {exc}"
        return row
    row["trace_s"] = time.perf_counter() - t0
    row["units"] = len(parent.units)
    try:
        fast = analyze_fusible(parent, "one-compile")
    except Exception as exc:  # noqa: BLE001
        row["error"] = f"one-compile: {type(exc).__name__}: {str(exc).splitlines()[0]}"
        return row
    row.update(
        one_compile_s=fast.elapsed_s,
        one_compile_compilations=fast.compilations,
        kernels=len(fast.kernels),
        segments=len(fast.segments),
        fusible_ranges=len(fusible_ranges(fast)),
    )
    try:
        slow = analyze_fusible(parent, "every-prefix", deadline_s=timeout_s)
    except Exception as exc:  # noqa: BLE001
        row["prefix_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        return row
    row.update(
        every_prefix_s=slow.elapsed_s,
        every_prefix_compilations=slow.compilations,
        every_prefix_complete=slow.complete,
    )
    # A capped run closed its spans up to some unit: compare those; a complete run: all.
    covered = slow.segments[-1].stop if slow.segments else 0
    fast_part = [
        (seg, gen)
        for seg, gen in zip(fast.segments, fast.fused, strict=True)
        if seg.stop <= covered
    ]
    slow_part = list(zip(slow.segments, slow.fused, strict=True))
    fast_ranges = {seg for seg in fusible_ranges(fast) if seg.stop <= covered}
    slow_ranges = set(fusible_ranges(slow))
    row.update(
        compared_units=covered,
        agree=fast_part == slow_part,
        range_jaccard=len(fast_ranges & slow_ranges) / len(fast_ranges | slow_ranges)
        if fast_ranges | slow_ranges
        else 1.0,
    )
    return row


def count_subgraphs(paths: list[Path], out: Path, device: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    results = decompose_samples(
        paths, out, ["fusible", "classical", "single-op"], resume=False, device=device
    )
    counts: dict[str, dict[str, int]] = {}
    tally = Counter((r.kind, r.status.value) for res in results for r in res.subgraphs)
    for (kind, status), n in sorted(tally.items()):
        counts.setdefault(kind, {s.value: 0 for s in SubgraphStatus})[status] = n
    errors = [
        {"sample": res.sample, "stage": e.stage, "message": e.message.splitlines()[0]}
        for res in results
        for e in res.errors
    ]
    return {
        "elapsed_s": time.perf_counter() - t0,
        "samples": len(results),
        "counts": counts,
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("paths", nargs="*", help="samples (default: the 29 shipped dev samples)")
    parser.add_argument(
        "--timeout", type=float, default=20.0, help="cap of the every-prefix run per graph, s"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default="bench_fusible.json", help="where to write the results")
    parser.add_argument(
        "--out", default=None, help="folder for the decomposition (default: a temp folder)"
    )
    parser.add_argument("--skip-counts", action="store_true", help="only the timing comparison")
    args = parser.parse_args()

    paths = find_samples(args.paths or [dev_samples_dir()])
    # Warm-up: the first Inductor run in a process pays for imports and initialization.
    analyze_fusible(
        trace_parent(
            dev_samples_dir() / "transformers-auto-model" / "sadhaklal_mlp-iris", args.device
        )
    )

    rows = []
    header = f"{'sample':58s} {'units':>5s} {'one-compile s':>13s} {'#c':>3s} {'every-prefix s':>14s} {'#c':>4s} {'ranges':>6s} agree"
    print(header)
    for path in paths:
        row = measure(path, args.timeout, args.device)
        rows.append(row)
        if "error" in row:
            print(f"{row['sample'][:58]:58s} {row.get('units', '-'):>5} error: {row['error'][:80]}")
            continue
        prefix = _fmt_s(
            row.get("every_prefix_s"), row.get("every_prefix_complete", True), args.timeout
        )
        agree = {True: "yes", False: "no"}.get(row.get("agree"), "-")
        if not row.get("every_prefix_complete", True) and "compared_units" in row:
            agree += f" (first {row['compared_units']})"
        print(
            f"{row['sample'][:58]:58s} {row['units']:5d} {row['one_compile_s']:13.2f} {row['one_compile_compilations']:3d} "
            f"{prefix:>14s} {row.get('every_prefix_compilations', 0):4d} {row['fusible_ranges']:6d} {agree}",
            flush=True,
        )
    ok = [r for r in rows if "one_compile_s" in r]
    done = [r for r in ok if r.get("every_prefix_complete")]
    summary = {
        "samples": len(rows),
        "one_compile_total_s": sum(r["one_compile_s"] for r in ok),
        "one_compile_compilations": sum(r["one_compile_compilations"] for r in ok),
        "every_prefix_finished": len(done),
        "every_prefix_capped": sum(1 for r in ok if r.get("every_prefix_complete") is False),
        "every_prefix_compilations": sum(r.get("every_prefix_compilations", 0) for r in ok),
        "agree_where_finished": sum(1 for r in done if r.get("agree")),
        "agree_on_compared_prefix": sum(1 for r in ok if r.get("agree")),
        "compared": sum(1 for r in ok if "agree" in r),
    }
    print(json.dumps(summary, indent=1))
    result: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": torch.get_num_threads(),
            "torch": torch.__version__,
            "device": args.device,
        },
        "timeout_s": args.timeout,
        "rows": rows,
        "summary": summary,
    }
    if not args.skip_counts:
        out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="passnet-decompose-"))
        counts = count_subgraphs(paths, out, args.device)
        result["subgraph_counts"] = counts
        print(
            f"subgraphs per kind from {counts['samples']} samples ({counts['elapsed_s']:.0f} s), in {out}:"
        )
        for kind, by_status in counts["counts"].items():
            print(f"  {kind:10s} " + "  ".join(f"{k} {v}" for k, v in by_status.items()))
        for e in counts["errors"]:
            print(f"  error {e['sample']} [{e['stage']}]: {e['message'][:100]}")
    Path(args.json).write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"written {args.json}")


if __name__ == "__main__":
    main()
