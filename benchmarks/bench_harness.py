"""Harness benchmark (figures in docs/results/harness_h200.md).

On the 29 dev samples, eager vs a compiler (default inductor), warmup 25, trials 100:
  * wall time per graph and its split (process start, load, compile, measure);
  * A/A test: eager vs eager, every "speedup" should be within 1.00 ± 0.02;
  * repeat-run stability: the same evaluation twice, per-graph |log(s1/s2)|.

Each phase is resumable (results persist in --work), so the phases can run in
separate invocations that each stay under a time limit:

    PYTHONPATH=src python3 benchmarks/bench_harness.py --phase run1 --device cuda
    PYTHONPATH=src python3 benchmarks/bench_harness.py --phase run2 --device cuda
    PYTHONPATH=src python3 benchmarks/bench_harness.py --phase aa   --device cuda
    PYTHONPATH=src python3 benchmarks/bench_harness.py --phase report

``--phase cache`` is a diagnostic of Inductor's caches: for a few graphs it times
the compiled program after a cold compile and after a cache hit, with the
compiler's ``warm`` option off and on, each in its own process with its own
``TORCHINDUCTOR_CACHE_DIR``, and prints one table.

``--phase repeat`` evaluates a few graphs several times back to back, each time
in a fresh child (``--repeats``, default 5), and prints the spread of the speedup
between consecutive processes, to tell process-to-process variation from slow
drift between runs minutes apart.

``--phase prewarm`` fills Inductor's caches before ``run1``: every graph is compiled
and checked once, untimed, in ``--jobs`` parallel children (default 8); its
records are not used. With it, ``run1`` and ``run2`` both start from warm caches, and
the compile time reported for ``run1`` is that of a cache hit.

``--phase report`` prints the tables and writes ``harness_report.json`` (and copies
results to $OUT when that variable is set).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from passnet.data import dev_samples_dir
from passnet.evaluate import EvalSettings
from passnet.runner import plan_items, read_records, run_evaluations

PHASES = {"run1": "inductor", "run2": "inductor", "aa": "eager", "unguarded": "inductor"}
"""``unguarded`` is ``run1`` without the core guard (one fixed core, no waiting), for an
A/B of the guard on the same machine start."""


def run_phase(phase: str, args: argparse.Namespace) -> None:
    compiler = args.compiler if phase != "aa" else "eager"
    settings = EvalSettings(warmup=args.warmup, trials=args.trials, timeout_s=args.timeout)
    if phase == "unguarded":
        settings = dataclasses.replace(settings, core_guard=False, host_wait_s=0.0)
    jobs = 1
    if phase == "prewarm":
        settings = EvalSettings(
            warmup=1, trials=3, timeout_s=args.timeout, time_graphs=False, pin_cpu=False
        )
        jobs = args.jobs
    items = plan_items([args.samples])
    run_evaluations(
        items,
        compiler=compiler,
        device=args.device,
        settings=settings,
        out_dir=Path(args.work) / phase,
        jobs=jobs,
        console=Console(stderr=True),
        echo_logs=False,
    )


CACHE_GRAPHS = (
    "transformers-auto-model/vuiseng9_tiny-random-SwinModel",
    "torchvision/mobilenet_v3_small",
    "torchvision/resnet18",
)
# (label, fresh cache dir?, warm option): each row runs in its own process.
CACHE_MODES = (
    ("cold", True, False),
    ("hit", False, False),
    ("warm-cold", True, True),
    ("warm-hit", False, True),
)


def run_cache_phase(args: argparse.Namespace) -> None:
    work = Path(args.work) / "cache"
    cache_dir = None
    for label, fresh, warm in CACHE_MODES:
        if fresh or cache_dir is None:
            cache_dir = tempfile.mkdtemp(prefix="passnet-inductor-cache-")
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
        cmd = [sys.executable, __file__, "--phase", "cache-one", "--label", label]
        cmd += ["--device", args.device, "--samples", args.samples, "--work", args.work]
        cmd += ["--warmup", str(args.warmup), "--trials", str(args.trials)]
        cmd += ["--warm" if warm else "--no-warm"]
        subprocess.run(cmd, env=env, check=True)
    print(f"{'graph':56s} {'mode':>10s} {'eager ms':>9s} {'compiled ms':>11s} {'speedup':>8s}")
    for graph in CACHE_GRAPHS:
        for label, _, _ in CACHE_MODES:
            recs = _load(work, label)
            # Records are labelled relative to the sample folder planned: compare names.
            r = next((v for k, v in recs.items() if Path(k).name == Path(graph).name), None)
            if r is None or r.compiled is None or r.eager is None:
                print(f"{graph[-56:]:56s} {label:>10s} {'-':>9s} {'-':>11s} {'-':>8s}")
                continue
            print(
                f"{graph[-56:]:56s} {label:>10s} {r.eager.e2e.median_ms:9.3f} "
                f"{r.compiled.e2e.median_ms:11.3f} {r.speedup_e2e:8.3f}"
            )
    if os.environ.get("OUT"):
        for label, _, _ in CACHE_MODES:
            src = work / label / "results.jsonl"
            if src.exists():
                shutil.copy(src, Path(os.environ["OUT"]) / f"cache_{label}.jsonl")


def run_cache_one(args: argparse.Namespace) -> None:
    settings = EvalSettings(warmup=args.warmup, trials=args.trials, timeout_s=args.timeout)
    items = plan_items([str(Path(args.samples) / g) for g in CACHE_GRAPHS])
    run_evaluations(
        items,
        compiler="inductor",
        compiler_config={"warm": args.warm},
        device=args.device,
        settings=settings,
        out_dir=Path(args.work) / "cache" / args.label,
        jobs=1,
        console=Console(stderr=True),
        echo_logs=False,
    )


REPEAT_GRAPHS = (
    "transformers-auto-model/prajjwal1_bert-tiny",
    "torchvision/mobilenet_v3_small",
    "transformers-auto-model/yujiepan_tiny-random-swin-patch4-window7-224",
    "torchvision/squeezenet1_1",
)


def _stats(timing) -> dict | None:
    """Median, IQR/median and sample count of a side's e2e times (None when not timed)."""
    e2e = timing.e2e if timing else None
    if e2e is None or not e2e.median_ms:
        return None
    return {"median_ms": e2e.median_ms, "iqr_rel": e2e.iqr_ms / e2e.median_ms, "n": e2e.n}


def run_repeat_phase(args: argparse.Namespace) -> None:
    from passnet.evaluate import evaluate_sample

    settings = EvalSettings(warmup=args.warmup, trials=args.trials, timeout_s=args.timeout)
    # With --compare-pause-gc every graph alternates processes with and without the
    # collector paused while timing, so both see the same machine at the same time.
    variants = {"": settings}
    if args.compare_pause_gc:
        variants = {
            "gc on": dataclasses.replace(settings, pause_gc=False),
            "gc paused": dataclasses.replace(settings, pause_gc=True),
        }
    rows = []
    for graph in REPEAT_GRAPHS:
        speedups: dict[str, list[float]] = {label: [] for label in variants}
        for _ in range(args.repeats):
            for label, s in variants.items():
                r = evaluate_sample(
                    Path(args.samples) / graph, args.compiler, device=args.device, settings=s
                )
                if r.speedup_e2e:
                    speedups[label].append(r.speedup_e2e)
                rows.append(
                    {
                        "graph": graph,
                        "variant": label,
                        "speedup_e2e": r.speedup_e2e,
                        "status": r.status.value,
                        # within-process spread, to tell a noisier timing from a shifted one
                        "eager_e2e": _stats(r.eager),
                        "compiled_e2e": _stats(r.compiled),
                    }
                )
        for label, ok in speedups.items():
            logs = [math.log(x) for x in ok]
            spread = (max(logs) - min(logs)) if logs else float("nan")
            pairs = [abs(a - b) for a, b in zip(logs, logs[1:])]
            median_pair = statistics.median(pairs) * 100 if pairs else float("nan")
            iqr = [
                row["eager_e2e"]["iqr_rel"]
                for row in rows
                if row["graph"] == graph and row["variant"] == label and row["eager_e2e"]
            ]
            print(
                f"{graph[-50:]:50s} {label:9s} "
                + " ".join(f"{x:.4f}" for x in ok)
                + f"  range {spread * 100:.2f}%  consecutive median {median_pair:.2f}%"
                + (f"  eager IQR/median {statistics.median(iqr) * 100:.2f}%" if iqr else "")
            )
    if os.environ.get("OUT"):
        (Path(os.environ["OUT"]) / "repeat.json").write_text(json.dumps(rows, indent=1))


def _load(work: Path, phase: str) -> dict:
    path = work / phase / "results.jsonl"
    return {r.graph: r for r in read_records(path)} if path.exists() else {}


def _mean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x == x]
    return statistics.mean(xs) if xs else None


def _median_abs(xs: list[float | None]) -> float | None:
    xs = [abs(x) for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _median(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _gpu_summary(gpus: list) -> dict:
    """What the GPU's clocks did over a phase (records' ``gpu``; absent without NVML); also
    used by ``records_summary.py``."""
    if not gpus:
        return {}
    powers = [g.power_w_median for g in gpus if g.power_w_median is not None]
    return {
        "gpu_graphs": len(gpus),
        "gpu_readings": sum(g.samples for g in gpus),
        "gpu_sm_mhz_median": _median([g.sm_mhz_median for g in gpus]),
        "gpu_sm_mhz_min": min(g.sm_mhz_min for g in gpus),
        "gpu_sm_mhz_max": max(g.sm_mhz_max for g in gpus),
        "gpu_sm_mhz_limit": _median([g.sm_mhz_limit for g in gpus]),
        "gpu_graphs_below_limit": sum(bool(g.below_limit_samples) for g in gpus),
        "gpu_power_w_median": _median(powers),
        "gpu_power_w_median_range": [min(powers), max(powers)] if powers else None,
        "gpu_temperature_c_max": max((g.temperature_c_max or 0) for g in gpus),
        "gpu_reasons": sorted({r for g in gpus for r in g.reasons}),
    }


def _guard_summary(work: Path, r1: dict, r2: dict) -> dict:
    """Per timed phase: measuring time, dispersion, re-measurements and what the core guard
    did; and, with an ``unguarded`` phase, how far its speedups are from ``run2``'s."""
    phases = {"run1": r1, "run2": r2, "unguarded": _load(work, "unguarded")}
    found: dict = {}
    for name, recs in phases.items():
        timed = [r for r in recs.values() if r.eager and r.compiled]
        if not timed:
            continue
        hosts = [r.host for r in timed if r.host]
        found[name] = {
            "graphs": len(timed),
            "mean_measure_s": _mean([r.phases_s.get("measure", 0.0) for r in timed]),
            "median_eager_rel_iqr": statistics.median(r.eager.e2e.relative_iqr for r in timed),
            "graphs_remeasured_unstable": sum(r.eager.retries > 0 for r in timed),
            "graphs_flagged_unstable": sum(r.eager.unstable or r.compiled.unstable for r in timed),
            "guard_moves": sum(h.moves for h in hosts),
            "guard_remeasured_rounds": sum(h.remeasured_rounds for h in hosts),
            "guard_all_slow_graphs": sum(h.all_slow > 0 for h in hosts),
            "guard_waited_s": round(sum(h.waited_s for h in hosts), 2),
            "guard_probe_ns_median": statistics.median(h.probe_ns for h in hosts if h.probe_ns)
            if hosts
            else None,
            "guard_round_probe_ns_median": _median([h.probe_median_ns for h in hosts]),
            **_gpu_summary([r.gpu for r in timed if r.gpu]),
        }
    other = phases["unguarded"]
    d = [
        abs(math.log(other[g].speedup_e2e / r2[g].speedup_e2e))
        for g in other
        if g in r2 and other[g].speedup_e2e and r2[g].speedup_e2e
    ]
    if d:
        found["unguarded_vs_run2"] = {
            "median_abs_log": statistics.median(d),
            "max_abs_log": max(d),
            "n": len(d),
        }
    return found


def report(args: argparse.Namespace) -> int:
    work = Path(args.work)
    r1, r2, aa = _load(work, "run1"), _load(work, "run2"), _load(work, "aa")
    rows, out = [], {"graphs": {}}
    for g in sorted(set(r1) | set(r2) | set(aa)):
        a, b, c = r1.get(g), r2.get(g), aa.get(g)
        ph = a.phases_s if a else {}
        compile_s = ph.get("compile", 0.0)
        total = ph.get("total", float("nan"))
        measure = sum(
            ph.get(k, 0.0)
            for k in (
                "compiled_run",
                "eager",
                "compare",
                "measure",
                "compiled_recheck",
                "eager_recheck",
                "compare_recheck",
            )
        )
        s1 = a.speedup_e2e if a else None
        s2 = b.speedup_e2e if b else None
        d12 = abs(math.log(s1 / s2)) if s1 and s2 else None
        # How far each side's own median moved between the runs (machine drift shows
        # here; the speedup cancels only the part that moves both sides alike).
        drift = {
            side: math.log(getattr(a, side).e2e.median_ms / getattr(b, side).e2e.median_ms)
            if a and b and getattr(a, side) and getattr(b, side)
            else None
            for side in ("eager", "compiled")
        }
        aa_s = c.speedup_e2e if c else None
        unstable = [
            n
            for n, r in (("run1", a), ("run2", b), ("aa", c))
            if r and ((r.eager and r.eager.unstable) or (r.compiled and r.compiled.unstable))
        ]
        row = {
            "status1": a.status.value if a else "-",
            "status2": b.status.value if b else "-",
            "total_s": total,
            "process_start_s": ph.get("process_start", 0.0),
            "load_s": ph.get("load", 0.0),
            "compile_s": compile_s,
            "measure_s": measure,
            "total_excl_compile_s": total - compile_s,
            "speedup1": s1,
            "speedup2": s2,
            "abs_log_ratio": d12,
            "eager_log_drift": drift["eager"],
            "compiled_log_drift": drift["compiled"],
            "aa_speedup": aa_s,
            "aa_total_s": c.phases_s.get("total") if c else None,
            "unstable": unstable,
            "retries": [r.eager.retries for r in (a, b, c) if r and r.eager],
        }
        out["graphs"][g] = row
        rows.append((g, row))

    def fmt(x, spec=".3f"):
        return format(x, spec) if isinstance(x, (int, float)) and x == x else "-"

    print(
        f"{'graph':58s} {'st':>8s} {'total':>6s} {'start':>5s} {'load':>5s} {'comp':>6s} {'meas':>5s} {'s1':>6s} {'s2':>6s} {'|dlog|':>7s} {'A/A':>6s}"
    )
    for g, r in rows:
        print(
            f"{g[:58]:58s} {r['status1'][:8]:>8s} {fmt(r['total_s'], '.1f'):>6s} {fmt(r['process_start_s'], '.2f'):>5s} {fmt(r['load_s'], '.2f'):>5s} {fmt(r['compile_s'], '.1f'):>6s} {fmt(r['measure_s'], '.2f'):>5s} {fmt(r['speedup1']):>6s} {fmt(r['speedup2']):>6s} {fmt(r['abs_log_ratio'], '.4f'):>7s} {fmt(r['aa_speedup']):>6s}"
        )
    vals = list(out["graphs"].values())
    excl = [
        v["total_excl_compile_s"]
        for v in vals
        if v["total_excl_compile_s"] == v["total_excl_compile_s"]
    ]
    d = [v["abs_log_ratio"] for v in vals if v["abs_log_ratio"] is not None]
    aa_dev = [abs(v["aa_speedup"] - 1) for v in vals if v["aa_speedup"]]
    aa_tot = [v["aa_total_s"] for v in vals if v["aa_total_s"]]
    summary = {
        "graphs": len(vals),
        "mean_total_s": _mean([v["total_s"] for v in vals]),
        "mean_total_excl_compile_s": _mean(excl),
        "max_total_excl_compile_s": max(excl) if excl else None,
        "mean_aa_total_s": _mean(aa_tot),
        "aa_max_abs_deviation": max(aa_dev) if aa_dev else None,
        "aa_within_2pct": sum(x <= 0.02 for x in aa_dev),
        "aa_n": len(aa_dev),
        "repeat_median_abs_log": statistics.median(d) if d else None,
        "run1_vs_run2_eager_median_abs_log": _median_abs([v["eager_log_drift"] for v in vals]),
        "run1_vs_run2_compiled_median_abs_log": _median_abs(
            [v["compiled_log_drift"] for v in vals]
        ),
        "repeat_max_abs_log": max(d) if d else None,
        "repeat_n": len(d),
        "unstable_graphs": sum(bool(v["unstable"]) for v in vals),
    }
    summary["guard"] = _guard_summary(work, r1, r2)
    out["summary"] = summary
    print(json.dumps(summary, indent=1))
    (work / "harness_report.json").write_text(json.dumps(out, indent=1))
    if os.environ.get("OUT"):
        dest = Path(os.environ["OUT"])
        shutil.copy(work / "harness_report.json", dest / "harness_report.json")
        for phase in PHASES:
            src = work / phase / "results.jsonl"
            if src.exists():
                shutil.copy(src, dest / f"{phase}.jsonl")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--phase",
        required=True,
        choices=[*PHASES, "prewarm", "report", "cache", "cache-one", "repeat"],
    )
    p.add_argument("--jobs", type=int, default=8, help="prewarm phase: parallel children")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--compare-pause-gc",
        action="store_true",
        help="repeat phase: alternate processes with the garbage collector on / paused while timing",
    )
    p.add_argument("--label", default="cold", help=argparse.SUPPRESS)
    p.add_argument("--warm", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--compiler", default="inductor")
    p.add_argument("--samples", default=str(dev_samples_dir()))
    p.add_argument("--warmup", type=int, default=25)
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--work", default="/tmp/passnet-bench-harness")
    args = p.parse_args()
    if args.phase == "report":
        return report(args)
    if args.phase == "cache":
        run_cache_phase(args)
        return 0
    if args.phase == "cache-one":
        run_cache_one(args)
        return 0
    if args.phase == "repeat":
        run_repeat_phase(args)
        return 0
    run_phase(args.phase, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
