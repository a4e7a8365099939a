"""Experiment: where does a rewritten graph's time go? (host cost of Triton launches)

Part A: host µs per launch of a trivial Triton kernel through the JIT path, the
CompiledKernel runner, the raw launcher; an eager torch op for comparison.
Part B: for task graphs, eager module vs traced GM vs rewritten GM (e2e median),
and per-node host time of the replaced eager ops vs the replacement calls.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.fx
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


def per_call_us(fn, n=4000) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best.append((time.perf_counter_ns() - t0) / n / 1e3)
        torch.cuda.synchronize()
    return min(best)


def part_a() -> None:
    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    ck = _k[(1,)](x, y, 1024, 1024)
    torch.cuda.synchronize()
    runner = ck[(1, 1, 1)]
    stream = torch.cuda.current_stream().cuda_stream
    ck._init_handles()
    fn, meta = ck.function, ck.packed_metadata
    rows = [
        ("jit kernel[grid](...)", lambda: _k[(1,)](x, y, 1024, 1024)),
        ("CompiledKernel[grid](...)", lambda: runner(x, y, 1024, 1024)),
    ]
    try:
        ck.run(1, 1, 1, stream, fn, meta, None, None, None, x, y, 1024, 1024)
        rows.append(
            (
                "CompiledKernel.run raw",
                lambda: ck.run(1, 1, 1, stream, fn, meta, None, None, None, x, y, 1024, 1024),
            )
        )
    except Exception as exc:  # noqa: BLE001
        print("raw run failed:", type(exc).__name__, exc)
    rows += [
        ("torch.add(x, 1, out=y)", lambda: torch.add(x, 1.0, out=y)),
        ("x + 1", lambda: x + 1.0),
        ("torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("F.layer_norm", lambda: torch.nn.functional.layer_norm(x.view(8, 128), (128,))),
    ]
    print("== A: host µs per call (no sync) ==")
    for name, f in rows:
        print(f"{name:32s} {per_call_us(f):7.2f}")


def e2e_ms(fn, args, n=300) -> float:
    ts = []
    with torch.no_grad():
        for _ in range(30):
            fn(*args)
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            fn(*args)
            torch.cuda.synchronize()
            ts.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(ts)


class Timed(torch.fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.t: dict[str, list[float]] = {}

    def run_node(self, n):
        t0 = time.perf_counter_ns()
        out = super().run_node(n)
        self.t.setdefault(n.name, []).append((time.perf_counter_ns() - t0) / 1e3)
        return out


def node_times(gm, args, reps=200) -> dict[str, float]:
    it = Timed(gm)
    with torch.no_grad():
        for _ in range(reps):
            it.run(*args)
            torch.cuda.synchronize()
    return {k: statistics.median(v[20:]) for k, v in it.t.items()}


def part_b() -> None:
    from passnet.passes import PassManager, trace_graph
    from passnet.passes.library import build_reference_task
    from passnet.sample import load_sample

    cases = [
        ("add_layer_norm", "prajjwal1_bert-tiny_float32"),
        ("add_layer_norm", "bge-small-zh_float32"),
        ("linear_bias_gelu", "bge-small-zh_float32"),
        ("scale_mask_softmax", "yujiepan_tiny-random-swin-patch4-window7-224_float32"),
        ("scale_mask_softmax", "vuiseng9_tiny-random-SwinModel_float32"),
        ("rms_norm", "t5-efficient-large-el2_float32"),
    ]
    tmp = Path(tempfile.mkdtemp())
    built: dict = {}
    print("\n== B: whole graph e2e ms (median of 300, sync per call) ==")
    print(
        f"{'pass':18s} {'graph':42s} {'eager':>7s} {'traced':>7s} {'rewrit':>7s} "
        f"{'x eag':>6s} | host us: erased-eager  replacement-calls (n)"
    )
    for pname, gname in cases:
        if pname not in built:
            built[pname] = build_reference_task(pname, tmp / pname, dtypes=(torch.float32,))
        task = built[pname]
        gpath = next(p for p in task.graphs if p.name == gname)
        sample = load_sample(gpath)
        module = sample.build_module("cuda")
        inputs = sample.replay_inputs("cuda", 0)
        traced = trace_graph(module)
        mgr = PassManager.from_dirs(task.pass_dir)
        rewritten = mgr.apply(trace_graph(module)).graph_module
        te = e2e_ms(module, inputs)
        tt = e2e_ms(traced, inputs)
        tr = e2e_ms(rewritten, inputs)
        nt_t = node_times(traced, inputs)
        nt_r = node_times(rewritten, inputs)
        erased = [k for k in nt_t if k not in nt_r]
        new = [k for k in nt_r if k not in nt_t]
        host_erased = sum(nt_t[k] for k in erased)
        host_new = sum(nt_r[k] for k in new)
        ncalls = sum(1 for n in rewritten.graph.nodes if n.name in new and n.op == "call_function"
                     and "getitem" not in n.name)
        print(
            f"{pname:18s} {gname[:42]:42s} {te:7.3f} {tt:7.3f} {tr:7.3f} {te / tr:6.3f} | "
            f"{host_erased:8.1f} {host_new:8.1f} ({ncalls}) total nodes host "
            f"{sum(nt_t.values()):7.1f} vs {sum(nt_r.values()):7.1f}"
        )
        per = sorted(((nt_r[k], k) for k in new), reverse=True)[:3]
        print("      top new:", ", ".join(f"{k}={v:.1f}" for v, k in per))


if __name__ == "__main__":
    torch.manual_seed(0)
    part_a()
    part_b()
    sys.stdout.flush()
