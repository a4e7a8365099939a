"""The dataset pipeline over a set of corpus samples: validate → decompose → generalize → bench.

Each stage runs as the ``passnet`` command a user would type, under ``/usr/bin/time -v``
(its maximum resident set size is the command's own process; the isolated children of
``validate`` and ``decompose`` report their own peaks in their records). Per stage: wall
time, per-sample median and maximum (from the records), peak memory, counts. Stages
resume from their records, so a stopped run continues; ``--stages`` picks some.

    PYTHONPATH=src python3 benchmarks/dataset/corpus_pipeline.py SAMPLES.txt --out /tmp/pipeline \\
        --json benchmarks/dataset/results/corpus_pipeline_24.json

``SAMPLES.txt`` lists sample folders, absolute or relative to ``--root``
(``benchmarks/dataset/samples_24.txt``: the 24-sample set of issue 28;
``benchmarks/dataset/source_set.txt``: the benchmark's source set). ``--root`` is the corpus
folder the output names are relative to.
``--sample N --seed S`` draws N samples of the corpus under ``--root`` at random instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

STAGES = ("validate", "decompose", "generalize", "bench")


def _run(argv: list[str], log: Path) -> dict[str, Any]:
    """Run one command under ``/usr/bin/time -v``: wall seconds, exit code, max RSS (MB)."""
    t0 = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(
            ["/usr/bin/time", "-v", sys.executable, "-m", "passnet.cli", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
        )
    text = log.read_text(errors="replace")
    rss = re.findall(r"Maximum resident set size \(kbytes\): (\d+)", text)
    return {
        "command": "passnet " + " ".join(argv),
        "wall_s": round(time.perf_counter() - t0, 1),
        "exit_code": done.returncode,
        "max_rss_mb": round(int(rss[-1]) / 1024, 1) if rss else None,
    }


def _spread(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median_s": round(statistics.median(values), 2),
        "max_s": round(max(values), 2),
        "sum_s": round(sum(values), 1),
    }


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_sample: dict[str, dict[str, Any]] = {}
    for r in rows:
        by_sample[r["sample"]] = r
    return list(by_sample.values())


def summarize(out: Path) -> dict[str, Any]:
    """Per-stage figures from the records the stages wrote under ``out``."""
    summary: dict[str, Any] = {}
    reports = _latest(_jsonl(out / "validation.jsonl"))
    summary["validate"] = {
        **_spread([r.get("elapsed_s", 0.0) for r in reports]),
        "statuses": dict(Counter(r.get("status") for r in reports)),
    }
    records = _latest(_jsonl(out / "subgraphs" / "decompose.jsonl"))
    written = Counter()
    for r in records:
        for s in r.get("subgraphs", []):
            written[(s["kind"], s["status"])] += 1
    lost = [r for r in records if any(s.get("symbols_unknown") for s in r.get("subgraphs", []))]
    summary["decompose"] = {
        **_spread([r.get("elapsed_s", 0.0) for r in records]),
        "statuses": dict(Counter(r.get("status") for r in records)),
        "subgraphs": {f"{k}/{s}": n for (k, s), n in sorted(written.items())},
        "child_peak_rss_mb_max": max((r.get("peak_rss_mb", 0.0) for r in records), default=0.0),
        "child_peak_rss_mb_median": round(
            statistics.median([r.get("peak_rss_mb", 0.0) for r in records]), 1
        )
        if records
        else 0.0,
        "samples_with_symbols_lost": len(lost),
        "per_sample": [
            {
                "sample": r.get("name") or r["sample"],
                "status": r.get("status"),
                "elapsed_s": round(r.get("elapsed_s", 0.0), 1),
                "peak_rss_mb": round(r.get("peak_rss_mb", 0.0), 1),
                "units": r.get("units"),
                "written": sum(s["status"] == "written" for s in r.get("subgraphs", [])),
            }
            for r in records
        ],
    }
    results = _latest(_jsonl(out / "variants" / "generalize.jsonl"))
    variants = Counter(v["status"] for r in results for v in r.get("variants", []))
    summary["generalize"] = {
        **_spread([r.get("elapsed_s", 0.0) for r in results if r.get("status") != "duplicate"]),
        "statuses": dict(Counter(r.get("status") for r in results)),
        "variants": dict(variants),
    }
    manifest = out / "bench" / "manifest.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        summary["bench"] = {"counts": m["counts"], "skipped": len(m.get("skipped", []))}
    return summary


def _draw(root: Path, n: int, seed: int) -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from passnet.sample import find_samples

    everything = [str(p) for p in find_samples([root])]
    return sorted(random.Random(seed).sample(everything, min(n, len(everything))))


def under_root(listing: str, root: Path) -> str:
    """A list of sample folders with each relative line taken under ``root``
    (``benchmarks/dataset/source_set.txt``), absolute lines kept, blank and ``#`` lines
    dropped: the run's copy of the list lives in another folder, and a list file's
    relative lines are read relative to the list's own folder."""
    lines = [ln.strip() for ln in listing.splitlines()]
    return "".join(f"{root / ln}\n" for ln in lines if ln and not ln.startswith("#"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="?", help="list file of sample folders")
    parser.add_argument("--root", default="/work/corpus", help="corpus folder (names, --sample)")
    parser.add_argument("--sample", type=int, help="draw this many corpus samples at random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="folder for every stage's output")
    parser.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--decompose-args", default="", help="extra arguments for decompose")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    listing = out / "samples.txt"
    if args.sample:
        listing.write_text("\n".join(_draw(Path(args.root), args.sample, args.seed)) + "\n")
    elif args.samples:
        listing.write_text(under_root(Path(args.samples).read_text(), Path(args.root)))
    else:
        parser.error("give SAMPLES or --sample N")
    commands = {
        "validate": ["validate", str(listing), "--out", str(out / "validation.jsonl")],
        "decompose": [
            "decompose",
            str(listing),
            "--out",
            str(out / "subgraphs"),
            "--root",
            args.root,
            *args.decompose_args.split(),
        ],
        "generalize": [
            "generalize",
            str(out / "subgraphs"),
            "--out",
            str(out / "variants"),
            "--root",
            str(out / "subgraphs"),
        ],
        "bench": [
            "bench",
            "build",
            str(out / "subgraphs"),
            str(out / "variants"),
            "--out",
            str(out / "bench"),
            "--overwrite",
        ],
    }
    runs: dict[str, Any] = {}
    for stage in args.stages:
        runs[stage] = _run(commands[stage], out / f"{stage}.log")
        print(json.dumps({stage: runs[stage]}), flush=True)
    figures = {
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg(),
        },
        "samples": len(listing.read_text().split()),
        "runs": runs,
        "summary": summarize(out),
    }
    try:
        import torch

        figures["machine"]["torch"] = torch.__version__
    except ImportError:
        pass
    text = json.dumps(figures, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
