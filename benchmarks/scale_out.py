"""Throughput of evaluation on one host: sequential, with prepare workers, on several GPUs,
and what prepare workers do to the timing (docs/results/prepare_workers_h100.md).

Each phase is one ``passnet eval`` process with its own, empty Inductor and Triton caches
(as a first run on a machine would have), its wall time and records kept in ``--work``::

    PYTHONPATH=src python3 benchmarks/scale_out.py --phase seq     --graphs LIST --work W
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase overlap --graphs LIST --work W --prepare-workers 8
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase gpus    --graphs LIST --work W --prepare-workers 8 --jobs 2
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase aa      --graphs LIST --work W --prepare-workers 8 --jobs 2 --load LOADLIST
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase turns1  --graphs LIST --work W --overlap 6
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase turns2  --graphs LIST --work W --overlap 6 --jobs 2
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase aa-turns --graphs LIST --work W --overlap 6 --jobs 2
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase report  --work W
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase report  --records benchmarks/results/scale_out_h100
    PYTHONPATH=src python3 benchmarks/scale_out.py --phase report  --records DIR2 --one-gpu DIR1

* ``seq``: inductor, one GPU, each evaluation compiling for itself (cold, then warm);
* ``overlap``: the same with ``--prepare-workers`` compiling ahead on spare cores;
* ``gpus``: the same over ``--jobs`` GPUs;
* ``aa``: eager against eager over ``--jobs`` GPUs with prepare workers on, while a
  background load compiles ``--load``'s graphs with Inductor on the spare cores (a compile
  load like that of a real overlapped run): every speedup should be 1;
* ``turns1``, ``turns2``: inductor with ``--overlap`` evaluations per GPU (compiling side
  by side, timed in turns), on one GPU and on ``--jobs`` GPUs;
* ``aa-turns``: eager against eager with ``--overlap`` on ``--jobs`` GPUs, all busy.

``report`` prints, per phase, graphs, the span from the first start to the last finish
(a phase stopped at a time limit counts what it finished; the span flatters a phase that
was stopped while several graphs were in flight, so the phase's window is printed too:
graphs finished of those planned, in the seconds from its start to its end or stop, as
``phase.json`` records them), seconds per graph, throughput
against ``seq``, and the projection for ``--suite`` graphs (default 2,060, PassBench's count); for
``aa`` and ``aa-turns`` the per-graph deviation from 1 over graphs whose eager median is at
least 50 µs; and how far ``overlap``'s and ``turns1``'s per-graph speedups are from ``seq``'s. With ``OUT`` set, the
report goes to ``$OUT/scale_out.json`` too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from passnet.data import dev_samples_dir
from passnet.evaluate import EvalSettings, prepare_sample, spare_cores
from passnet.runner import plan_items, read_records

PHASES = ("seq", "overlap", "gpus", "aa", "turns1", "turns2", "aa-turns")
THROUGHPUT = ("seq", "overlap", "gpus", "turns1", "turns2")


def _eval(phase: str, args: argparse.Namespace) -> None:
    folder = Path(args.work) / phase
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor-cache"),
        "TRITON_CACHE_DIR": str(folder / "triton-cache"),
        "PYTHONUNBUFFERED": "1",
    }
    compiler = "eager" if phase.startswith("aa") else args.compiler
    cmd = [
        sys.executable, "-m", "passnet.cli", "eval", args.graphs,
        "--compiler", compiler, "--device", args.device, "--out", str(folder / "run"), "--quiet",
    ]  # fmt: skip
    if phase in ("overlap", "gpus", "aa"):
        cmd += ["--prepare-workers", str(args.prepare_workers)]
    if phase in ("turns1", "turns2", "aa-turns"):
        cmd += ["--overlap", str(args.overlap), "--overlap-scope", args.overlap_scope]
    if phase in ("gpus", "aa", "turns2", "aa-turns"):
        cmd += ["--jobs", str(args.jobs)]
    stop = threading.Event()
    load = None
    if phase == "aa" and args.load:
        load = threading.Thread(target=_compile_load, args=(args, folder, stop), daemon=True)
        load.start()
    stamp = folder / "phase.json"  # the phase's window, also when a time limit stops it
    planned = len(plan_items([args.graphs]))
    stamp.write_text(json.dumps({"started": time.time(), "graphs": planned}))
    child = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )

    def stopped(signum: int, _frame: object) -> None:
        child.terminate()  # passnet keeps what finished, ends what is in flight
        try:
            child.wait(timeout=120)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        _stamp(stamp, ended=time.time(), stopped=True)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    started = time.perf_counter()
    _, err = child.communicate()
    done = subprocess.CompletedProcess(cmd, child.returncode, None, err)
    wall = time.perf_counter() - started
    _stamp(stamp, ended=time.time(), stopped=False)
    stop.set()
    if load is not None:
        load.join()
    (folder / "wall.json").write_text(json.dumps({"wall_s": wall, "returncode": done.returncode}))
    if done.returncode not in (0, 1):
        print(done.stderr[-3000:], file=sys.stderr)
    print(f"{phase}: {wall:.1f} s (exit {done.returncode})")


def _stamp(path: Path, **more: object) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **more}))


def _window(args: argparse.Namespace, phase: str) -> dict | None:
    """The phase's window (``phase.json``: started, ended, stopped, graphs planned), if known."""
    if args.records:
        path = Path(args.records) / f"{phase}.phase.json"
    else:
        path = Path(args.work) / phase / "phase.json"
    data = json.loads(path.read_text()) if path.is_file() else None
    return data if data and "ended" in data else None


def _compile_load(args: argparse.Namespace, folder: Path, stop: threading.Event) -> None:
    """Compile the load list's graphs with Inductor on the spare cores until stopped (each
    compile in its own child, as a prepare worker's), with caches of its own."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "load-cache")
    cores = spare_cores(sorted(os.sched_getaffinity(0)), max(1, args.jobs))
    settings = EvalSettings(timeout_s=300)
    items = plan_items([args.load])
    i = 0
    while not stop.is_set() and items:
        item = items[i % len(items)]
        prepare_sample(item.path, args.compiler, {}, "cuda:0", settings, cores=cores)
        i += 1


def _records(args: argparse.Namespace, phase: str) -> dict:
    """A phase's records: ``--records DIR/<phase>.jsonl`` (a results folder) or the run's."""
    if args.records:
        path = Path(args.records) / f"{phase}.jsonl"
    else:
        path = Path(args.work) / phase / "run" / "results.jsonl"
    return {r.graph: r for r in read_records(path)} if path.is_file() else {}


def _steady(records: dict) -> float | None:
    """Seconds per graph from the first graph finished to the last (the pipeline's start,
    which every phase pays once, left out); None below two graphs."""
    ends = sorted(datetime.fromisoformat(r.finished_at).timestamp() for r in records.values())
    return (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else None


def _span(records: dict) -> float:
    """Seconds from the first evaluation's start to the last one's end (a phase stopped at
    a time limit counts the graphs it finished)."""
    starts = [datetime.fromisoformat(r.started_at).timestamp() for r in records.values()]
    ends = [datetime.fromisoformat(r.finished_at).timestamp() for r in records.values()]
    return max(ends) - min(starts)


def report(args: argparse.Namespace) -> dict:
    out: dict = {"phases": {}}
    base = None
    print(
        f"{'phase':8s} {'graphs':>6s} {'span s':>8s} {'s/graph':>8s} {'steady':>7s} {'x seq':>6s}"
        f" {'proj h':>7s} {'window':>14s}"
    )
    for phase in THROUGHPUT:
        records = _records(args, phase)
        if not records:
            continue
        span = _span(records)
        per = span / len(records)
        base = per if phase == "seq" else base
        ratio = base / per if base else None
        hours = per * args.suite / 3600
        caches = [r.compile_cache for r in records.values() if r.compile_cache]
        out["phases"][phase] = {
            "graphs": len(records),
            "span_s": span,
            "s_per_graph": per,
            "steady_s_per_graph": _steady(records),
            "throughput_vs_seq": ratio,
            "projected_h": hours,
            "statuses": _count(r.status.value for r in records.values()),
            "prepared": sum(1 for c in caches if c.prepared),
            "cache_misses": sum(c.fxgraph_misses for c in caches),
            "median_compile_s": statistics.median(
                r.phases_s.get("compile", 0.0) for r in records.values()
            ),
        }
        ratio_text = f"{ratio:6.2f}" if ratio else "     -"
        window = _window(args, phase)
        window_text = ""
        if window:  # finished graphs over the whole phase: fair to a phase a limit stopped
            seconds = window["ended"] - window["started"]
            out["phases"][phase]["window"] = {**window, "s_per_graph": seconds / len(records)}
            how = "stopped" if window.get("stopped") else "done"
            window_text = f" {len(records)}/{window['graphs']} in {seconds:.0f} s {how}"
        steady = _steady(records)
        steady_text = f"{steady:7.2f}" if steady else "      -"
        print(
            f"{phase:8s} {len(records):6d} {span:8.1f} {per:8.2f} {steady_text} {ratio_text}"
            f" {hours:7.2f}" + window_text
        )
    for name in ("aa", "aa-turns"):
        _aa_report(_records(args, name), name, out)
    seq = _records(args, "seq")
    for name in ("overlap", "turns1"):
        _vs_seq(seq, _records(args, name), name, out)
    _two_gpus(args, out)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "scale_out.json").write_text(json.dumps(out, indent=2))
    return out


def _aa_report(aa: dict, name: str, out: dict) -> None:
    """Eager against eager: how far each speedup is from 1 (graphs of 50 µs or more)."""
    if aa:
        dev = [
            abs(r.speedup_e2e - 1.0)
            for r in aa.values()
            if r.speedup_e2e and r.eager and r.eager.e2e.median_ms >= 0.05
        ]
        out[name] = {
            "graphs": len(dev),
            "max_abs_dev": max(dev) if dev else None,
            "median_abs_dev": statistics.median(dev) if dev else None,
            "within_1pct": sum(1 for d in dev if d <= 0.01),
            "within_2pct": sum(1 for d in dev if d <= 0.02),
        }
        print(
            f"{name} over {len(dev)} graphs >= 50 us: max |s-1| {out[name]['max_abs_dev']:.4f}, "
            f"median {out[name]['median_abs_dev']:.4f}, within 1%: {out[name]['within_1pct']}, "
            f"within 2%: {out[name]['within_2pct']}"
        )


def _vs_seq(seq: dict, overlap: dict, name: str, out: dict) -> None:
    """How far a phase's per-graph speedups are from the sequential run's."""
    both = [
        abs(math.log(overlap[g].speedup_e2e / seq[g].speedup_e2e))
        for g in set(seq) & set(overlap)
        if seq[g].speedup_e2e and overlap[g].speedup_e2e
    ]
    if both:
        out[f"{name}_vs_seq"] = {
            "graphs": len(both),
            "median_abs_log": statistics.median(both),
            "max_abs_log": max(both),
        }
        print(
            f"{name} vs seq speedups over {len(both)} graphs: median |dlog| "
            f"{statistics.median(both):.4f}, max {max(both):.4f}"
        )


def _two_gpus(args: argparse.Namespace, out: dict) -> None:
    """``turns2`` against one GPU's ``turns1`` (``--one-gpu``: a records folder, default
    the same): throughput in steady state and per-graph speedups."""
    two = _records(args, "turns2")
    base = argparse.Namespace(**{**vars(args), "records": args.one_gpu or args.records})
    one = _records(base, "turns1")
    if not (one and two):
        return
    ratio = _steady(one) / _steady(two) if _steady(one) and _steady(two) else None
    both = sorted(set(one) & set(two))
    apart = [
        abs(two[g].speedup_e2e / one[g].speedup_e2e - 1)
        for g in both
        if one[g].speedup_e2e and two[g].speedup_e2e
    ]
    out["turns2_vs_turns1"] = {
        "steady_throughput": ratio,
        "graphs": len(apart),
        "median_abs_dev": statistics.median(apart) if apart else None,
        "beyond_2pct": sum(1 for d in apart if d > 0.02),
    }
    if ratio:
        print(f"turns2 vs turns1: {ratio:.2f}x steady throughput", end="")
    if apart:
        print(
            f"; speedups over {len(apart)} graphs median {statistics.median(apart):.4f} apart,"
            f" {out['turns2_vs_turns1']['beyond_2pct']} beyond 2%",
            end="",
        )
    print()


def _count(values) -> dict:
    found: dict = {}
    for v in values:
        found[v] = found.get(v, 0) + 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=[*PHASES, "report"], required=True)
    parser.add_argument("--graphs", default=str(dev_samples_dir()), help="PATH of the graphs")
    parser.add_argument("--work", default=None, help="folder for the phases' runs")
    parser.add_argument(
        "--records", default=None, help="report: a folder of <phase>.jsonl files instead of --work"
    )
    parser.add_argument("--compiler", default="inductor")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--prepare-workers", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--overlap", type=int, default=6, help="turns phases: --overlap K")
    parser.add_argument("--overlap-scope", default="host", choices=("host", "device"))
    parser.add_argument(
        "--one-gpu", default=None, help="report: records folder whose turns1 is the 1-GPU baseline"
    )
    parser.add_argument("--load", default=None, help="aa: graphs compiled as background load")
    parser.add_argument("--suite", type=int, default=2060, help="graphs to project for")
    args = parser.parse_args()
    if args.phase != "report" and not args.work:
        parser.error("--work is needed to run a phase")
    if args.phase == "report":
        report(args)
    else:
        _eval(args.phase, args)


if __name__ == "__main__":
    main()
