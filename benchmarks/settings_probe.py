"""Which of the harness's settings moves a graph's timing: one evaluation per variant.

Each variant is the default evaluation with one thing changed (an ``EvalSettings`` field or
a compiler option), every one in a fresh child, on the same samples; one table of eager
and compiled medians (e2e, ms) and the speedup per variant and sample:

    PYTHONPATH=src python3 benchmarks/settings_probe.py SAMPLE... --work DIR \\
        [--device cuda] [--compiler inductor] [--variants default warm=false pin_cpu=false]

A variant is ``default``, ``FIELD=VALUE`` for an ``EvalSettings`` field, or
``config:KEY=VALUE`` for a compiler option (VALUE in JSON).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from rich.console import Console

from passnet.evaluate import EvalSettings
from passnet.runner import plan_items, read_records, run_evaluations

DEFAULT_VARIANTS = (
    "default",
    "config:warm=false",
    "pin_cpu=false",
    "poison_allocator=false",
    "pause_gc=false",
    "fixed_layout=false",
)


def _variant(spec: str) -> tuple[EvalSettings, dict]:
    if spec == "default":
        return EvalSettings(), {}
    key, _, value = spec.partition("=")
    if key.startswith("config:"):
        return EvalSettings(), {key.removeprefix("config:"): json.loads(value)}
    return dataclasses.replace(EvalSettings(), **{key: json.loads(value)}), {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="+", type=Path)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compiler", default="inductor")
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS))
    args = parser.parse_args()
    variants = {spec: _variant(spec) for spec in args.variants}  # usage errors first
    table: dict[str, dict[str, tuple[float, float] | str]] = {}
    for spec, (settings, config) in variants.items():
        out = args.work / spec.replace(":", "_").replace("=", "_")
        run_evaluations(
            plan_items([str(s) for s in args.samples]),
            compiler=args.compiler,
            compiler_config=config,
            device=args.device,
            settings=settings,
            out_dir=out,
            jobs=1,
            console=Console(stderr=True),
            echo_logs=False,
        )
        for r in read_records(out / "results.jsonl"):
            cell: tuple[float, float] | str = r.status.value
            if r.eager is not None and r.compiled is not None:
                cell = (r.eager.e2e.median_ms, r.compiled.e2e.median_ms)
            table.setdefault(Path(r.graph).name, {})[spec] = cell
    (args.work / "probe.json").write_text(json.dumps(table, indent=1) + "\n")
    print(f"{'graph':28} {'variant':26} {'eager':>8} {'compiled':>8} {'speedup':>8}")
    for graph, row in table.items():
        for spec, cell in row.items():
            if isinstance(cell, str):
                print(f"{graph[-28:]:28} {spec:26} {cell:>26}")
            else:
                e, c = cell
                print(f"{graph[-28:]:28} {spec:26} {e:8.3f} {c:8.3f} {e / c:8.3f}")


if __name__ == "__main__":
    main()
