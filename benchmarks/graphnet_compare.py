"""passnet's harness beside GraphNet's ``test_compiler`` on the same graphs and machine.

GraphNet's harness (``graph_net_bench/torch/test_compiler.py`` of PaddlePaddle/GraphNet, not
part of passnet: give its checkout with ``--graphnet``) runs once per sample as it is, and
once with ``torch.set_default_device`` made a no-op (the only change: that call puts a
Python mode on every torch call, which slows launch-bound eager graphs). passnet evaluates
the same samples with the same warm-up and trials. One table: eager and compiled medians
(e2e, ms) and speedups of the three.

    PYTHONPATH=src python3 benchmarks/graphnet_compare.py SAMPLE... --graphnet DIR \\
        --work DIR [--compiler inductor] [--config KEY=VALUE...] [--warmup 25] [--trials 100]

GraphNet's harness imports its extractor, which turns on Dynamo's
``capture_dynamic_output_shape_ops`` and ``capture_scalar_outputs`` (and three more) for
the whole process: ``--config dynamo.capture_dynamic_output_shape_ops=true
dynamo.capture_scalar_outputs=true`` compiles passnet's side the same way.

Samples run one after the other, each through the harnesses in turn, so that a row is
one stretch of one machine. Each part is kept under ``--work`` (GraphNet's logs, passnet's
records per sample, ``compare.json`` after every sample) and skipped when present, so a
second call resumes. ``--no-published`` skips GraphNet's harness as published.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from passnet.cli import parse_config
from passnet.compilers import COMPILERS
from passnet.evaluate import EvalSettings
from passnet.runner import plan_items, read_records, run_evaluations

_PERF = re.compile(r"\[Performance\]\[(eager|compiled)\]: (\{.*\})")
# set_default_device made a no-op before GraphNet's harness starts, nothing else changed
_NO_DEFAULT_DEVICE = (
    "import runpy, sys, torch; torch.set_default_device = lambda device: None; "
    "sys.argv[0] = 'test_compiler'; "
    "runpy.run_module('graph_net_bench.torch.test_compiler', run_name='__main__')"
)


def graphnet_run(sample: Path, args: argparse.Namespace, default_device: bool) -> dict:
    """GraphNet's medians for one sample: {"eager": ms, "compiled": ms} or {"error": ...}."""
    tag = "gn" if default_device else "gn_nodefault"
    log = Path(args.work) / tag / f"{sample.name}.log"
    if not log.exists():
        log.parent.mkdir(parents=True, exist_ok=True)
        cli = ["--model-path", str(sample.resolve()), "--compiler", args.compiler]
        cli += ["--device", args.device, "--warmup", str(args.warmup), "--trials", str(args.trials)]
        if default_device:
            cmd = [sys.executable, "-m", "graph_net_bench.torch.test_compiler", *cli]
        else:
            cmd = [sys.executable, "-c", _NO_DEFAULT_DEVICE, *cli]
        env = {**os.environ, "PYTHONPATH": str(Path(args.graphnet).resolve())}
        proc = subprocess.run(
            cmd, cwd=args.graphnet, env=env, capture_output=True, text=True, timeout=args.timeout
        )
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "Trial " not in ln]
        log.write_text("\n".join(lines) + "\n")
    found = {}
    for m in _PERF.finditer(log.read_text()):
        found[m.group(1)] = json.loads(m.group(2))["e2e"]["median"]
    if len(found) < 2:
        return {"error": log.read_text().strip().splitlines()[-1][:60]}
    return found


def passnet_run(sample: Path, args: argparse.Namespace) -> dict:
    """passnet's medians for one sample, as :func:`graphnet_run` gives GraphNet's."""
    out = Path(args.work) / "passnet" / sample.name
    if not (out / "results.jsonl").exists():
        run_evaluations(
            plan_items([str(sample)]),
            compiler=args.compiler,
            compiler_config=args.compiler_config,
            device=args.device,
            settings=EvalSettings(warmup=args.warmup, trials=args.trials),
            out_dir=out,
            jobs=1,
            console=Console(stderr=True),
            echo_logs=False,
        )
    for r in read_records(out / "results.jsonl"):
        if r.eager is None or r.compiled is None:
            return {"error": r.status.value}
        return {"eager": r.eager.e2e.median_ms, "compiled": r.compiled.e2e.median_ms}
    return {"error": "no record"}


def _cells(fig: dict | None) -> str:
    if not fig or "error" in fig:
        return f"{(fig or {}).get('error', 'not run')[:26]:>26}"
    e, c = fig["eager"], fig["compiled"]
    return f"{e:8.3f} {c:8.3f} {e / c:8.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="+", type=Path)
    parser.add_argument("--graphnet", required=True, help="a checkout of PaddlePaddle/GraphNet")
    parser.add_argument("--work", required=True)
    parser.add_argument("--compiler", default="inductor")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--warmup", type=int, default=25)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument(
        "--config",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="passnet's compiler config, as `passnet eval --config` takes it",
    )
    parser.add_argument(
        "--no-published",
        action="store_true",
        help="skip GraphNet's harness as published (with torch.set_default_device)",
    )
    args = parser.parse_args()
    # a mistake in the config stops the command before GraphNet's harness runs
    args.compiler_config = parse_config(args.config)
    COMPILERS.get(args.compiler).check_config(args.compiler_config)

    # sample by sample, the harnesses one after the other: a row is one stretch of one
    # machine, and a call that ends early keeps its finished rows (compare.json)
    summary: dict[str, dict[str, dict]] = {"graphnet": {}, "graphnet_no_default_device": {}}
    summary["passnet"] = {}
    for s in args.samples:
        if not args.no_published:
            summary["graphnet"][s.name] = graphnet_run(s, args, True)
        summary["graphnet_no_default_device"][s.name] = graphnet_run(s, args, False)
        summary["passnet"][s.name] = passnet_run(s, args)
        (Path(args.work) / "compare.json").write_text(json.dumps(summary, indent=1) + "\n")
    head = f"{'eager':>8} {'compiled':>8} {'speedup':>8}"
    print(f"{'graph':34} | GraphNet {head} | GraphNet, no default device {head} | passnet {head}")
    for s in args.samples:
        n = s.name
        cells = [_cells(summary[k].get(n)) for k in summary]
        print(f"{n[-34:]:34} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
