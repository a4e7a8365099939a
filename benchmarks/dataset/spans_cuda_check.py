"""Fusible spans found on CPU (Triton-style scheduling) against those found on CUDA.

``analyze_fusible`` schedules a graph for Triton on every device: on CPU it has
Inductor schedule the CPU tensors for Triton, with an H200's device properties and one
thread. This script measures how close that comes to the real thing: for each sample
of a list (paths relative to the corpus root), the one-compile spans on ``cpu`` and on
``cuda``, and whether the written fusible spans (2..35 operators, a kernel that fuses)
and the whole partition into spans are equal. Prints a table and writes JSON.

    PYTHONPATH=src python3 benchmarks/dataset/spans_cuda_check.py --corpus /path/to/corpus \
        --json spans_cuda_check.json

Needs a CUDA GPU; no network. Samples are taken in list order until ``--budget-s``
has passed (the rest are reported as not run).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

from passnet.dataset import analyze_fusible, fusible_ranges, trace_parent

DEFAULT_LIST = Path(__file__).with_name("spans_check_samples.txt")


def read_list(path: Path) -> list[str]:
    """The sample paths of a list file: one a line, ``#`` comments and blank lines ignored."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def spans_on(path: Path, device: str) -> dict[str, Any]:
    """Trace ``path`` on ``device`` and find its fusible spans (one compilation)."""
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        parent = trace_parent(path, device, 0)
        analysis = analyze_fusible(parent, "one-compile")
    except Exception as exc:  # noqa: BLE001 - recorded in the table
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        out["error"] = f"{type(exc).__name__}: {first}"[:300]
        return out
    out["units"] = len(parent.units)
    out["segments"] = [[s.start, s.stop] for s in analysis.segments]
    out["fused"] = list(analysis.fused)
    out["spans"] = [[s.start, s.stop] for s in fusible_ranges(analysis)]
    out["kernels"] = len(analysis.kernels)
    out["analysis_s"] = round(analysis.elapsed_s, 3)
    out["total_s"] = round(time.perf_counter() - t0, 3)
    return out


def compare(cpu: dict[str, Any], cuda: dict[str, Any]) -> dict[str, Any]:
    """Equal written spans, equal partitions, and the Jaccard index of the written spans."""
    if "spans" not in cpu or "spans" not in cuda:
        return {}
    a = {tuple(s) for s in cpu["spans"]}
    b = {tuple(s) for s in cuda["spans"]}
    return {
        "spans_equal": a == b,
        "partition_equal": cpu["segments"] == cuda["segments"] and cpu["fused"] == cuda["fused"],
        "span_jaccard": round(len(a & b) / len(a | b), 3) if a | b else 1.0,
        "only_cpu": sorted(a - b),
        "only_cuda": sorted(b - a),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, required=True, help="the corpus root")
    ap.add_argument("--samples", type=Path, default=DEFAULT_LIST, help="list of sample paths")
    ap.add_argument("--json", type=Path, default=Path("spans_cuda_check.json"))
    ap.add_argument("--budget-s", type=float, default=330.0, help="stop starting samples after")
    ap.add_argument("--cuda-device", default="cuda", help="the CUDA device (default: cuda)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    if not args.corpus.is_dir():
        print(f"error: --corpus {args.corpus}: not a folder", file=sys.stderr)
        return 2
    names = read_list(args.samples)
    missing = [n for n in names if not (args.corpus / n / "model.py").is_file()]
    if missing:
        print(f"error: not samples under {args.corpus}: {', '.join(missing)}", file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    rows: list[dict[str, Any]] = []
    print(f"{'sample':<70} {'cpu':>4} {'cuda':>4} {'equal':>6} {'same partition':>6}")
    for name in names:
        if time.perf_counter() - t_start > args.budget_s:
            rows.append({"sample": name, "not_run": "budget spent"})
            continue
        path = args.corpus / name
        cpu = spans_on(path, "cpu")
        cuda = spans_on(path, args.cuda_device)
        torch.cuda.empty_cache()
        rows.append({"sample": name, "cpu": cpu, "cuda": cuda, **compare(cpu, cuda)})
        r = rows[-1]
        print(
            f"{name:<70} {len(cpu.get('spans', [])):>4} {len(cuda.get('spans', [])):>4} "
            f"{r.get('spans_equal', '-')!s:>6} {r.get('partition_equal', '-')!s:>6} "
            f"{cpu.get('error', '')}{cuda.get('error', '')}",
            flush=True,
        )
    compared = [r for r in rows if "spans_equal" in r]
    summary = {
        "samples": len(rows),
        "compared": len(compared),
        "spans_equal": sum(r["spans_equal"] for r in compared),
        "partition_equal": sum(r["partition_equal"] for r in compared),
        "mean_span_jaccard": round(sum(r["span_jaccard"] for r in compared) / len(compared), 3)
        if compared
        else None,
        "errors": sum("error" in r.get("cpu", {}) or "error" in r.get("cuda", {}) for r in rows),
        "not_run": sum("not_run" in r for r in rows),
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    print()
    print("| sample | spans cpu | spans cuda | equal | same partition | Jaccard |")
    print("|---|---:|---:|---|---|---:|")
    for r in rows:
        if "not_run" in r:
            print(f"| {r['sample']} | - | - | not run | - | - |")
            continue
        cpu_n = len(r["cpu"]["spans"]) if "spans" in r["cpu"] else "error"
        cuda_n = len(r["cuda"]["spans"]) if "spans" in r["cuda"] else "error"
        equal = "yes" if r.get("spans_equal") else ("no" if "spans_equal" in r else "-")
        same = "yes" if r.get("partition_equal") else ("no" if "partition_equal" in r else "-")
        print(
            f"| {r['sample']} | {cpu_n} | {cuda_n} | {equal} | {same} | "
            f"{r.get('span_jaccard', '-')} |"
        )
    print()
    print(json.dumps(summary))
    machine = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_device": torch.cuda.get_device_name(args.cuda_device),
        "cpu_threads": torch.get_num_threads(),
    }
    args.json.write_text(
        json.dumps({"machine": machine, "summary": summary, "rows": rows}, indent=1) + "\n"
    )
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
