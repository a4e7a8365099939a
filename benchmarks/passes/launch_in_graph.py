#!/usr/bin/env python3
"""What does one extra launch cost *inside* a graph, and where is a GEMM pass slower? (GPU)

Three measurements, one process, three tables:

A. In-graph launch cost. Into the pass manager's trace of a real graph, calls to a
   no-argument function are inserted at 8 evenly spaced places, one function per
   variant: nothing (``py``: the FX call alone), an eager op (``torch.add(out=)``),
   a trivial Triton kernel launched through the JIT (``kernel[grid](...)``, with 4
   and with 14 arguments), through the compiled kernel's runner, through its raw
   launcher. The e2e median (synchronised calls, variants interleaved over 5
   rounds) minus the unmodified trace's, divided by 8, is the cost of one such call
   between the graph's own ops, where CPU caches hold the graph's code and not the
   launcher's. The same calls in a tight loop are printed beside it.

B. Linear + bias + GELU on the real call sites' arguments (``linear_bias_gelu``
   graphs): device microseconds per call (``torch.profiler``) of eager (cuBLAS
   linear, then GELU), of the pass's Triton kernel as it ships (fp32 with
   ``input_precision="tf32x3"``: three TF32 tensor-core products that recover fp32
   accuracy), and of the same kernel with ``input_precision="ieee"`` (fp32 products
   on the CUDA cores); with each one's max abs error against a float64 reference.

C. ``add_layer_norm`` task graphs, e2e median: the trace, rewritten with the task's
   passes (FusedLinearAddLayerNorm first, then FusedAddLayerNorm), rewritten with
   FusedAddLayerNorm alone.

Usage::

    PYTHONPATH=src python3 benchmarks/passes/launch_in_graph.py
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.fx
import triton
import triton.language as tl
from profile_rewrite import (  # this folder (the script's own)
    _add_one,
    device_kernels,
    e2e_ms,
    host_us_per_call,
)

N_SITES = 8
ROUNDS = 5


@triton.jit
def _add_one_wide(
    x_ptr, y_ptr, a_ptr, b_ptr, n, s0, s1, s2, s3, s4, s5, s6, s7, BLOCK: tl.constexpr
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    extra = (s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7) * 0.0
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0 + extra, mask=m)


_X: torch.Tensor
_Y: torch.Tensor
_LAUNCH: dict[str, Callable[[], Any]] = {}


def _setup_launchers() -> None:
    global _X, _Y
    _X = torch.randn(1024, device="cuda")
    _Y = torch.empty_like(_X)
    x, y = _X, _Y
    compiled = _add_one[(1,)](x, y, 1024, 1024)
    _add_one_wide[(1,)](x, y, x, y, 1024, 3, 5, 7, 9, 11, 13, 15, 17, 1024)
    torch.cuda.synchronize()
    runner = compiled[(1, 1, 1)]
    stream = torch.cuda.current_stream().cuda_stream
    fn, meta = compiled.function, compiled.packed_metadata
    _LAUNCH.update(
        py=lambda: None,
        torch=lambda: torch.add(x, 1.0, out=y),
        jit4=lambda: _add_one[(1,)](x, y, 1024, 1024),
        jit14=lambda: _add_one_wide[(1,)](x, y, x, y, 1024, 3, 5, 7, 9, 11, 13, 15, 17, 1024),
        runner=lambda: runner(x, y, 1024, 1024),
        raw=lambda: compiled.run(1, 1, 1, stream, fn, meta, None, None, None, x, y, 1024, 1024),
    )


# Module-level functions (FX calls them by qualified name in the generated code).
def site_py() -> None:
    _LAUNCH["py"]()


def site_torch() -> None:
    _LAUNCH["torch"]()


def site_jit4() -> None:
    _LAUNCH["jit4"]()


def site_jit14() -> None:
    _LAUNCH["jit14"]()


def site_runner() -> None:
    _LAUNCH["runner"]()


def site_raw() -> None:
    _LAUNCH["raw"]()


SITES = {
    "py": site_py,
    "torch": site_torch,
    "jit4": site_jit4,
    "jit14": site_jit14,
    "runner": site_runner,
    "raw": site_raw,
}


def with_sites(traced: torch.fx.GraphModule, site: Callable[[], None]) -> torch.fx.GraphModule:
    gm = torch.fx.GraphModule(traced, torch.fx.Graph())
    gm.graph = _copy_graph(traced.graph)
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    step = max(1, len(nodes) // (N_SITES + 1))
    for node in nodes[step : step * (N_SITES + 1) : step][:N_SITES]:
        with gm.graph.inserting_after(node):
            gm.graph.call_function(site, ())
    gm.recompile()
    return gm


def _copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    new = torch.fx.Graph()
    out = new.graph_copy(graph, {})
    new.output(out)
    return new


def in_graph(cases: list[str]) -> None:
    from passnet.sample import load_sample, trace_graph

    print(f"== A: in-graph cost of one call, µs (e2e delta / {N_SITES}); tight loop µs in () ==")
    loops = {k: host_us_per_call(f, 3000) for k, f in _LAUNCH.items()}
    print(f"{'graph':40s} {'trace ms':>9s} " + " ".join(f"{k:>14s}" for k in SITES))
    for rel in cases:
        sample = load_sample(rel)
        module = sample.build_module("cuda")
        inputs = sample.replay_inputs("cuda", 0)
        traced = trace_graph(module)
        variants = {"none": traced} | {k: with_sites(traced, f) for k, f in SITES.items()}
        runs: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(ROUNDS):
            for k, gm in variants.items():
                runs[k].append(e2e_ms(gm, inputs))
        med = {k: statistics.median(v) for k, v in runs.items()}
        cells = [f"{(med[k] - med['none']) * 1e3 / N_SITES:6.1f} ({loops[k]:5.1f})" for k in SITES]
        print(
            f"{Path(rel).name[:40]:40s} {med['none']:9.3f} " + " ".join(f"{c:>14s}" for c in cells)
        )


def device_us(fn: Callable[[], Any]) -> float:
    """Device µs per call: the sum over kernels of profile_rewrite's device_kernels."""
    return sum(us for _, us in device_kernels(fn, []).values())


def _load_variant(source: Path, name: str, edit: Callable[[str], str]) -> Any:
    tmp = Path(tempfile.mkdtemp(prefix="passnet-variant-")) / f"{name}.py"
    tmp.write_text(edit(source.read_text()))
    spec = importlib.util.spec_from_file_location(name, tmp)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Capture(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule, target: Any) -> None:
        super().__init__(gm)
        self.target, self.calls = target, []

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target is self.target:
            self.calls.append(tuple(a.clone() if torch.is_tensor(a) else a for a in args))
        return super().call_function(target, args, kwargs)


def _gemm_calls(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, **kernels: Callable[..., Any]
) -> dict[str, Callable[[], Any]]:
    calls = {"eager": lambda: torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b))}
    for name, fn in kernels.items():
        calls[name] = functools.partial(fn, x, w, b)
    return calls


def gemm_precision(work: Path) -> None:
    from passnet.dataset import build_reference_task
    from passnet.passes import PassManager
    from passnet.sample import load_sample, trace_graph

    print("\n== B: linear+bias+GELU per call site: device µs (max abs error vs float64) ==")
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    task = build_reference_task("linear_bias_gelu", work / "lbg", dtypes=dtypes)
    source = Path(task.pass_dir) / "FusedLinearBiasGelu.py"
    # The library kernel uses tf32x3 for fp32; the variant is the same file with IEEE products.
    tf32x3_line = 'acc = tl.dot(a, b, acc, input_precision="tf32x3")'
    variant = _load_variant(
        source,
        "lbg_ieee",
        lambda text: text.replace(
            tf32x3_line, 'acc = tl.dot(a, b, acc, input_precision="ieee")', 1
        ),
    )
    print(
        f"{'graph':32s} {'M,N,K':>14s} {'eager':>16s} {'triton ieee':>16s} {'triton tf32x3':>16s}"
    )
    for path in task.graphs:
        sample = load_sample(path)
        module = sample.build_module("cuda")
        inputs = sample.replay_inputs("cuda", 0)
        manager = PassManager.from_dirs(task.pass_dir)
        result = manager.apply(trace_graph(module))
        site = next(iter(result.sites), None)
        if site is None:
            print(f"{path.name[:32]:32s} (no site)")
            continue
        target = site.call.target
        cap = _Capture(result.graph_module, target)
        with torch.no_grad():
            cap.run(*inputs)
        x, w, b = cap.calls[0]
        ref = torch.nn.functional.gelu(
            torch.nn.functional.linear(x.double(), w.double(), b.double())
        )
        fns = _gemm_calls(x, w, b, ieee=variant.fused_linear_bias_gelu, tf32x3=target)
        cells = []
        for f in fns.values():
            err = (f().double() - ref).abs().max().item()
            cells.append(f"{device_us(f):6.1f} ({err:7.1e})")
        m = x.numel() // x.shape[-1]
        shape = f"{m},{w.shape[0]},{w.shape[1]}"
        print(f"{path.name[:32]:32s} {shape:>14s} " + " ".join(f"{c:>16s}" for c in cells))


def add_layer_norm_alone(work: Path) -> None:
    from passnet.dataset import build_reference_task
    from passnet.passes import PassManager
    from passnet.sample import load_sample, trace_graph

    print(
        "\n== C: add_layer_norm task, e2e median ms: trace / both passes / FusedAddLayerNorm alone =="
    )
    task = build_reference_task(
        "add_layer_norm", work / "aln", dtypes=(torch.float32, torch.float16)
    )
    alone = work / "aln_alone_pass_dir"
    shutil.copytree(task.pass_dir, alone)
    (alone / "sorted_output_pass_rule_names.json").write_text(json.dumps(["FusedAddLayerNorm"]))
    (alone / "FusedLinearAddLayerNorm.py").unlink()
    for path in task.graphs:
        sample = load_sample(path)
        module = sample.build_module("cuda")
        inputs = sample.replay_inputs("cuda", 0)
        traced = trace_graph(module)
        both = PassManager.from_dirs(task.pass_dir).apply(trace_graph(module))
        only = PassManager.from_dirs(alone).apply(trace_graph(module))
        variants = {"trace": traced, "both": both.graph_module, "alone": only.graph_module}
        runs: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(ROUNDS):
            for k, gm in variants.items():
                runs[k].append(e2e_ms(gm, inputs))
        med = {k: statistics.median(v) for k, v in runs.items()}
        print(
            f"{path.name[:40]:40s} {med['trace']:7.3f} {med['both']:7.3f} ({len(both.sites)} sites) "
            f"{med['alone']:7.3f} ({len(only.sites)} sites)  "
            f"speedup both {med['trace'] / med['both']:.3f}, alone {med['trace'] / med['alone']:.3f}"
        )


def main() -> int:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    if not torch.cuda.is_available():
        print("launch_in_graph needs a CUDA GPU", file=sys.stderr)
        return 2
    from passnet.data import dev_samples_dir

    root = dev_samples_dir()
    _setup_launchers()
    in_graph(
        [
            str(root / "transformers-auto-model/prajjwal1_bert-tiny"),
            str(root / "transformers-auto-model/yujiepan_tiny-random-swin-patch4-window7-224"),
        ]
    )
    work = Path(tempfile.mkdtemp(prefix="passnet-launch-"))
    gemm_precision(work)
    add_layer_norm_alone(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
