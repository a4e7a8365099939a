"""passnet's harness beside GraphNet's ``test_compiler`` on the same graphs and machine.

GraphNet's harness (``graph_net_bench/torch/test_compiler.py`` of PaddlePaddle/GraphNet, not
part of passnet: give its checkout with ``--graphnet``) runs once per sample as it is, and
once with ``torch.set_default_device`` made a no-op (the only change: that call puts a
Python mode on every torch call, which slows launch-bound eager graphs). passnet evaluates
the same samples with the same warm-up and trials. One table: eager and compiled medians
(e2e, ms) and speedups of the three.

    PYTHONPATH=src python3 benchmarks/graphnet_compare.py SAMPLE... --graphnet DIR \\
        --work DIR [--compiler inductor] [--warmup 25] [--trials 100]

Each part is kept under ``--work`` (GraphNet's logs, passnet's records) and skipped when
present, so a second call resumes.
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


def passnet_run(samples: list[Path], args: argparse.Namespace) -> dict[str, dict]:
    out = Path(args.work) / "passnet"
    run_evaluations(
        plan_items([str(s) for s in samples]),
        compiler=args.compiler,
        device=args.device,
        settings=EvalSettings(warmup=args.warmup, trials=args.trials),
        out_dir=out,
        jobs=1,
        console=Console(stderr=True),
        echo_logs=False,
    )
    figures = {}
    for r in read_records(out / "results.jsonl"):
        name = Path(r.graph).name
        if r.eager is None or r.compiled is None:
            figures[name] = {"error": r.status.value}
        else:
            figures[name] = {"eager": r.eager.e2e.median_ms, "compiled": r.compiled.e2e.median_ms}
    return figures


def _cells(fig: dict | None) -> str:
    if not fig or "error" in fig:
        return f"{(fig or {}).get('error', 'missing')[:26]:>26}"
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
    args = parser.parse_args()

    gn = {s.name: graphnet_run(s, args, True) for s in args.samples}
    gn_nd = {s.name: graphnet_run(s, args, False) for s in args.samples}
    pn = passnet_run(args.samples, args)
    summary = {"graphnet": gn, "graphnet_no_default_device": gn_nd, "passnet": pn}
    (Path(args.work) / "compare.json").write_text(json.dumps(summary, indent=1) + "\n")
    head = f"{'eager':>8} {'compiled':>8} {'speedup':>8}"
    print(f"{'graph':34} | GraphNet {head} | GraphNet, no default device {head} | passnet {head}")
    for s in args.samples:
        n = s.name
        print(f"{n[-34:]:34} | {_cells(gn[n])} | {_cells(gn_nd[n])} | {_cells(pn.get(n))}")


if __name__ == "__main__":
    main()
