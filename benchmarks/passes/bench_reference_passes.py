#!/usr/bin/env python3
"""GPU benchmark of the reference passes (passnet.passes.library).

For every reference pass it builds the pass's task (the real source samples in
float32/float16/bfloat16, see ``build_reference_task``; with ``--scope site`` the
subgraphs around the pass's matches in them, PassBench's unit, in several shapes)
and measures three things:

* rewrite cost: loading the pass directory, tracing each graph, matching and
  rewriting it, in milliseconds (target: under one second per graph);
* pattern level: the first matched subgraph of each graph alone, on the real values
  that reach it — eager ops vs the pass's Triton replacement vs Inductor on the
  subgraph — checked for agreement with eager at the dtype's baseline tolerance and
  timed twice: CUDA events around each call (warmup/trials as given; at the dev
  samples' sizes this is mostly launch overhead, as in a real run) and CUDA-graph
  replay (the device time of the kernels alone, without launch overhead);
* graph level: the whole graph, eager vs ``pass_mgr`` vs ``inductor``, through
  ``passnet.evaluate.evaluate_sample`` (isolated child, correctness on two input
  draws, interleaved timing), with ES_t / AS of each pass's task.

Usage (torch + triton with a CUDA GPU, no internet needed)::

    PYTHONPATH=src python3 benchmarks/passes/bench_reference_passes.py
    PYTHONPATH=src python3 benchmarks/passes/bench_reference_passes.py --passes rms_norm --dtypes float16
    PYTHONPATH=src python3 benchmarks/passes/bench_reference_passes.py --skip-graphs --trials 50
    PYTHONPATH=src python3 benchmarks/passes/bench_reference_passes.py --scope site --skip-patterns

Prints one table per measurement and writes everything as JSON to
``$OUT/bench_reference_passes.json`` when the environment variable OUT is set
(or to ``--json PATH``). Graph-level records are also appended, one per
evaluation as it finishes, to ``<that path minus .json>.records.jsonl`` (readable
by ``passnet score``), and logged with their speedup: a run cut short keeps them.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from passnet.dataset import DEFAULT_SHAPE_FACTORS, SCOPES, build_reference_task
from passnet.evaluate import EvalSettings, evaluate_sample
from passnet.passes import Matcher, PassManager, load_pass_dir
from passnet.passes.library import reference_passes
from passnet.record import EvalRecord, baseline_tolerance
from passnet.sample import load_sample, trace_graph
from passnet.score import compute_scores, gmean
from passnet.task import Task

log = logging.getLogger("bench_reference_passes")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
REWRITE_TARGET_MS = 1000.0


@dataclass
class RewriteRow:
    pass_name: str
    graph: str
    load_ms: float
    trace_ms: float
    rewrite_ms: float
    replacements: int

    @property
    def total_ms(self) -> float:
        return self.load_ms + self.trace_ms + self.rewrite_ms


@dataclass
class PatternRow:
    pass_name: str
    graph: str
    dtype: str
    eager_us: float
    replacement_us: float
    inductor_us: float | None
    eager_host_us: float
    replacement_host_us: float
    eager_graph_us: float | None
    replacement_graph_us: float | None
    inductor_graph_us: float | None
    correct: bool
    max_diff: float
    note: str = ""

    @property
    def speedup(self) -> float:
        return self.eager_us / self.replacement_us

    @property
    def vs_inductor(self) -> float | None:
        return self.inductor_us / self.replacement_us if self.inductor_us else None


@dataclass
class GraphRow:
    pass_name: str
    graph: str
    dtype: str
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    """compiler -> status, speedups, compiled medians, max diff, replacements."""


def _dtype_of(graph: Path) -> str:
    return graph.name.rpartition("_")[2]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def time_cuda(fn: Any, warmup: int, trials: int) -> tuple[float, float]:
    """(median device µs from CUDA events, median host µs around a synchronized call)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    device, host = [], []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        host.append((time.perf_counter() - t0) * 1e6)
        device.append(start.elapsed_time(end) * 1e3)
    return _median(device), _median(host)


GRAPH_REPS = 10


def time_cuda_graph(fn: Any, trials: int) -> float | None:
    """Median device µs per call from replaying a CUDA graph of GRAPH_REPS calls (None if
    the callable cannot be captured)."""
    try:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(GRAPH_REPS):
                fn()
        graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - not capturable: reported as missing
        log.warning("cannot capture a CUDA graph: %s: %s", type(exc).__name__, exc)
        return None
    times = []
    for _ in range(max(1, trials // GRAPH_REPS)):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / GRAPH_REPS)
    return _median(times)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _agree(expected: Any, actual: Any) -> tuple[bool, float]:
    ok, worst = True, 0.0
    expected, actual = _as_tuple(expected), _as_tuple(actual)
    if len(expected) != len(actual):
        return False, math.inf
    for e, a in zip(expected, actual):
        if e.dtype != a.dtype or e.shape != a.shape:
            return False, math.inf
        atol, rtol = baseline_tolerance(e.dtype)
        ok &= bool(torch.allclose(a, e, atol=atol, rtol=rtol, equal_nan=True))
        finite = e.isfinite() & a.isfinite()
        if finite.any():
            worst = max(worst, (a[finite].double() - e[finite].double()).abs().max().item())
    return ok, worst


def _capture(
    gm: torch.fx.GraphModule, nodes: set[torch.fx.Node], inputs: list[Any]
) -> dict[Any, Any]:
    values: dict[Any, Any] = {}

    class _Capture(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            result = super().run_node(n)
            if n in nodes:
                values[n] = result
            return result

    with torch.no_grad():
        _Capture(gm).run(*inputs)
    return values


def bench_rewrite(name: str, task: Task) -> list[RewriteRow]:
    rows = []
    for graph in task.graphs:
        module = load_sample(graph).build_module("cuda")
        t0 = time.perf_counter()
        manager = PassManager.from_dirs(task.pass_dir)
        t1 = time.perf_counter()
        gm = trace_graph(module)
        t2 = time.perf_counter()
        result = manager.apply(gm)
        t3 = time.perf_counter()
        rows.append(
            RewriteRow(
                name,
                graph.name,
                (t1 - t0) * 1e3,
                (t2 - t1) * 1e3,
                (t3 - t2) * 1e3,
                sum(result.report.replacements.values()),
            )
        )
    return rows


def bench_patterns(
    name: str, task: Task, warmup: int, trials: int, inductor: bool
) -> list[PatternRow]:
    rows = []
    rule = load_pass_dir(task.pass_dir)[0]
    for graph in task.graphs:
        sample = load_sample(graph)
        gm = trace_graph(sample.build_module("cuda"))
        matches = Matcher(rule.pattern).find(gm.graph)
        if not matches:
            log.warning("%s: %s does not match %s", name, rule.name, graph.name)
            continue
        bindings = matches[0].bindings
        values = _capture(
            gm,
            {b for b in bindings if isinstance(b, torch.fx.Node)},
            sample.replay_inputs("cuda", 0),
        )
        inputs = [values[b] if isinstance(b, torch.fx.Node) else b for b in bindings]
        args = rule.arg_spec.apply(inputs)
        pattern_gm = rule.pattern.graph_module

        def eager(pattern_gm: Any = pattern_gm, inputs: list[Any] = inputs) -> Any:
            return pattern_gm(*inputs)

        def replacement(fn: Any = rule.replacement, args: list[Any] = args) -> Any:
            return fn(*args)

        with torch.no_grad():
            correct, max_diff = _agree(eager(), replacement())
            eager_us, eager_host = time_cuda(eager, warmup, trials)
            repl_us, repl_host = time_cuda(replacement, warmup, trials)
            eager_graph = time_cuda_graph(eager, trials)
            repl_graph = time_cuda_graph(replacement, trials)
            inductor_us = inductor_graph = None
            note = ""
            if inductor:
                try:
                    torch._dynamo.reset()
                    compiled = torch.compile(pattern_gm, dynamic=False)

                    def run_compiled(compiled: Any = compiled, inputs: list[Any] = inputs) -> Any:
                        return compiled(*inputs)

                    inductor_us, _ = time_cuda(run_compiled, warmup, trials)
                    inductor_graph = time_cuda_graph(run_compiled, trials)
                except Exception as exc:  # noqa: BLE001 - a compile failure is reported in the table
                    note = f"inductor: {type(exc).__name__}: {exc}"[:120]
        rows.append(
            PatternRow(
                name,
                graph.name,
                _dtype_of(graph),
                eager_us,
                repl_us,
                inductor_us,
                eager_host,
                repl_host,
                eager_graph,
                repl_graph,
                inductor_graph,
                correct,
                max_diff,
                note,
            )
        )
    return rows


def _record_summary(record: EvalRecord) -> dict[str, Any]:
    compiled = record.compiled
    return {
        "status": record.status.value,
        "speedup_e2e": record.speedup_e2e,
        "speedup_device": record.speedup_device,
        "compiled_e2e_ms": compiled.e2e.median_ms if compiled else None,
        "compiled_device_ms": compiled.device.median_ms if compiled and compiled.device else None,
        "eager_e2e_ms": record.eager.e2e.median_ms if record.eager else None,
        "max_diff": record.correctness.max_diff if record.correctness else None,
        "replacements": dict(record.pass_report.replacements) if record.pass_report else None,
        "error": record.error.message[:200] if record.error else None,
    }


def bench_graphs(
    name: str,
    task: Task,
    compilers: list[str],
    settings: EvalSettings,
    records_path: Path | None = None,
    graph_filter: str | None = None,
) -> tuple[list[GraphRow], dict[str, Any]]:
    """Evaluate every graph of the task (those whose name matches ``graph_filter``) with
    each compiler; each record is appended to ``records_path`` (JSON Lines) as soon as
    it exists, so a run cut short keeps it."""
    rows, records = [], {c: [] for c in compilers}
    for graph in task.graphs:
        if graph_filter and not re.search(graph_filter, graph.name):
            continue
        row = GraphRow(name, graph.name, _dtype_of(graph))
        for compiler in compilers:
            real, jit = compiler.removesuffix("-jit"), compiler.endswith("-jit")
            config = task.compiler_config() if real.startswith("pass_mgr") else {}
            if jit:  # "pass_mgr-jit": every pass kernel launched through Triton's JIT
                config = {**config, "lean_launch": False}
            record = evaluate_sample(
                graph,
                real,
                config,
                device="cuda",
                settings=settings,
                graph_label=f"{name}/{graph.name}",
            )
            records[compiler].append(record)
            row.records[compiler] = _record_summary(record)
            if records_path is not None:
                with records_path.open("a") as f:
                    f.write(record.to_json() + "\n")
            s_e2e = record.speedup_e2e
            log.info(
                "%s %s %s: %s, e2e speedup vs eager %s",
                name,
                graph.name,
                compiler,
                record.status.value,
                f"{s_e2e:.3f}" if s_e2e is not None else "-",
            )
        rows.append(row)
    scores = {}
    for compiler, recs in records.items():
        try:
            report = compute_scores(recs, score_id=f"{name}:{compiler}")
            scores[compiler] = {
                "AS": report.score,
                "ES_t": {str(t): v for t, v in report.es.items()},
            }
        except ValueError as exc:  # every graph a sample error: nothing to score
            scores[compiler] = {"error": str(exc)}
    return rows, scores


def _vs_inductor(row: GraphRow, key: str) -> float | None:
    """Inductor's compiled time over ``pass_mgr``'s (``key``: e2e or device median), or None."""
    pm, ind = row.records.get("pass_mgr", {}), row.records.get("inductor", {})
    return ind[key] / pm[key] if pm.get(key) and ind.get(key) else None


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, spec)
    )


def print_rewrite(rows: list[RewriteRow]) -> None:
    print("\n== load + trace + match + rewrite per graph (ms) ==")
    print(
        f"{'pass':22} {'graph':60} {'load':>7} {'trace':>7} {'rewrite':>8} {'total':>8} {'repl':>5}"
    )
    for r in rows:
        flag = "  > 1 s" if r.total_ms > REWRITE_TARGET_MS else ""
        print(
            f"{r.pass_name:22} {r.graph:60} {r.load_ms:7.1f} {r.trace_ms:7.1f} {r.rewrite_ms:8.1f} "
            f"{r.total_ms:8.1f} {r.replacements:5d}{flag}"
        )


def print_patterns(rows: list[PatternRow]) -> None:
    print("\n== pattern level: matched subgraph alone, median µs per call ==")
    print("   per call: CUDA events around each call (launch included); graph: CUDA-graph replay")
    print(
        f"{'pass':22} {'graph':60} {'eager':>7} {'triton':>7} {'induct':>7} {'x eager':>8} {'x ind':>6} "
        f"{'g.eager':>8} {'g.trit':>7} {'g.ind':>7} {'g.x eag':>8} {'ok':>3} {'max diff':>9}"
    )
    for r in rows:
        g_speedup = (
            r.eager_graph_us / r.replacement_graph_us
            if r.eager_graph_us and r.replacement_graph_us
            else None
        )
        print(
            f"{r.pass_name:22} {r.graph:60} {r.eager_us:7.1f} {r.replacement_us:7.1f} "
            f"{_fmt(r.inductor_us, '7.1f'):>7} {r.speedup:8.2f} {_fmt(r.vs_inductor):>6} "
            f"{_fmt(r.eager_graph_us, '8.2f'):>8} {_fmt(r.replacement_graph_us, '7.2f'):>7} "
            f"{_fmt(r.inductor_graph_us, '7.2f'):>7} {_fmt(g_speedup, '8.2f'):>8} "
            f"{'yes' if r.correct else 'NO':>3} {r.max_diff:9.2e} {r.note}"
        )


def print_graphs(rows: list[GraphRow], scores: dict[str, dict[str, Any]]) -> None:
    print("\n== graph level: pass_mgr vs eager and inductor (evaluate_sample) ==")
    print(
        f"{'pass':22} {'dtype':9} {'graph':60} {'status':15} {'e2e x':>7} {'dev x':>7} "
        f"{'vs ind e2e':>10} {'vs ind dev':>10}"
    )
    for r in rows:
        pm = r.records.get("pass_mgr", {})
        vs_e2e, vs_dev = _vs_inductor(r, "compiled_e2e_ms"), _vs_inductor(r, "compiled_device_ms")
        print(
            f"{r.pass_name:22} {r.dtype:9} {r.graph:60} {pm.get('status', '-'):15} "
            f"{_fmt(pm.get('speedup_e2e')):>7} {_fmt(pm.get('speedup_device')):>7} {_fmt(vs_e2e):>10} {_fmt(vs_dev):>10}"
        )
    print("\n== per pass task: pass_mgr's e2e speedup over the task's graphs (geometric mean) ==")
    by_pass: dict[str, list[GraphRow]] = {}
    for r in rows:
        by_pass.setdefault(r.pass_name, []).append(r)
    for key, group in by_pass.items():
        speedups = [
            r.records["pass_mgr"]["speedup_e2e"]
            for r in group
            if r.records.get("pass_mgr", {}).get("speedup_e2e")
        ]
        vs_ind = [v for r in group if (v := _vs_inductor(r, "compiled_e2e_ms")) is not None]
        print(
            f"{key:22} graphs {len(group):3d}  timed {len(speedups):3d}  "
            f"x eager {_fmt(gmean(speedups) if speedups else None, '.3f')}  "
            f">= 1.0: {sum(s >= 1.0 for s in speedups):3d}  "
            f"vs inductor {_fmt(gmean(vs_ind) if vs_ind else None, '.3f')} "
            f"({sum(v > 1.0 for v in vs_ind)} of {len(vs_ind)} faster)"
        )
    print("\n== per pass task: AS and ES_t at t = -5 / -3 / 0 ==")
    for key, by_compiler in scores.items():
        for compiler, s in by_compiler.items():
            if "error" in s:
                print(f"{key:22} {compiler:12} {s['error']}")
                continue
            es = s["ES_t"]
            print(
                f"{key:22} {compiler:12} AS={s['AS']:.3f}  ES(-5)={es.get('-5', math.nan):.3f}  "
                f"ES(-3)={es.get('-3', math.nan):.3f}  ES(0)={es.get('0', math.nan):.3f}"
            )


def main(argv: list[str] | None = None) -> int:
    names = [p.name for p in reference_passes()]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", nargs="+", default=names, choices=names, metavar="NAME")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    parser.add_argument(
        "--compilers",
        nargs="+",
        default=["pass_mgr", "inductor"],
        help="compilers to evaluate; pass_mgr-jit is pass_mgr with lean_launch off",
    )
    parser.add_argument(
        "--scope",
        choices=list(SCOPES),
        default="graph",
        help="tasks of whole source graphs (default) or of the subgraphs around the matches",
    )
    parser.add_argument(
        "--shape-factors",
        nargs="*",
        type=int,
        default=list(DEFAULT_SHAPE_FACTORS),
        help="site scope: also each site with its dynamic dimension scaled by these",
    )
    parser.add_argument(
        "--graph-filter",
        default=None,
        metavar="REGEX",
        help="evaluate only the task graphs whose name matches (re.search)",
    )
    parser.add_argument("--warmup", type=int, default=25)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--skip-graphs", action="store_true", help="no graph-level evaluation")
    parser.add_argument("--skip-patterns", action="store_true", help="no pattern-level timing")
    parser.add_argument(
        "--no-pattern-inductor", action="store_true", help="pattern level without Inductor"
    )
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the tasks (default: a temp folder)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="JSON output (default: $OUT/bench_reference_passes.json)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("passnet.pass_mgr").setLevel(logging.WARNING)
    if not torch.cuda.is_available():
        print("bench_reference_passes needs a CUDA GPU", file=sys.stderr)
        return 2
    out_json = args.json or (
        Path(os.environ["OUT"]) / "bench_reference_passes.json" if os.environ.get("OUT") else None
    )
    settings = EvalSettings(warmup=args.warmup, trials=args.trials)
    dtypes = [DTYPES[d] for d in args.dtypes]
    work = args.work or Path(tempfile.mkdtemp(prefix="passnet-bench-passes-"))
    results: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "settings": {
            "warmup": args.warmup,
            "trials": args.trials,
            "dtypes": args.dtypes,
            "scope": args.scope,
            "shape_factors": args.shape_factors if args.scope == "site" else [],
        },
        "rewrite": [],
        "patterns": [],
        "graphs": [],
        "scores": {},
    }
    rewrite_rows: list[RewriteRow] = []
    pattern_rows: list[PatternRow] = []
    graph_rows: list[GraphRow] = []
    for name in args.passes:
        task = build_reference_task(
            name,
            work / name,
            dtypes=dtypes,
            scope=args.scope,
            shape_factors=tuple(args.shape_factors),
        )
        rewrite_rows += bench_rewrite(name, task)
        if not args.skip_patterns:
            pattern_rows += bench_patterns(
                name, task, args.warmup, args.trials, not args.no_pattern_inductor
            )
        if not args.skip_graphs:
            records_path = out_json.with_suffix(".records.jsonl") if out_json else None
            rows, scores = bench_graphs(
                name, task, args.compilers, settings, records_path, args.graph_filter
            )
            graph_rows += rows
            results["scores"][name] = scores
    print_rewrite(rewrite_rows)
    if pattern_rows:
        print_patterns(pattern_rows)
    if graph_rows:
        print_graphs(graph_rows, results["scores"])
    results["rewrite"] = [{**asdict(r), "total_ms": r.total_ms} for r in rewrite_rows]
    results["patterns"] = [
        {**asdict(r), "speedup": r.speedup, "vs_inductor": r.vs_inductor} for r in pattern_rows
    ]
    results["graphs"] = [asdict(r) for r in graph_rows]
    if out_json:
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"\nwritten: {out_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
