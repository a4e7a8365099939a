"""Session 13 development script: FusedFeedForwardAddLayerNorm on the real BERT values (GPU).

For each BERT sample and dtype: the rule's output against eager (max |diff|, elements beyond
the baseline tolerance) and device time per call (CUDA-graph replay of 20 calls, median of
5 replays of the graph) of the eager pattern and of the rule. (Its first run, on the rule's
first version, also timed the rule with a feature split and without.) Run from the repository root:

    PYTHONPATH=src:. python3 benchmarks/results/passes_h200_s13/ffn_device_dev.py
"""

import importlib
import statistics

import torch

from passnet.passes.library import get_reference_pass
from passnet.score import baseline_tolerance
from tests.passes.library import conftest as C

folder = get_reference_pass("linear_bias_gelu").folder
sources = {f.name: f.read_text() for f in folder.glob("*.py")}
with C._importing(C._SourceImporter(C.PACKAGE, folder, sources)):
    mod = importlib.import_module(f"{C.PACKAGE}.FusedFeedForwardAddLayerNorm")


def device_us(fn, calls=20, replays=5):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(replays + 1):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000 / calls)
    return statistics.median(times[1:])


rows = []
for s in ["prajjwal1_bert-tiny", "ms-marco-TinyBERT-L2", "bge-small-zh"]:
    cpu = C.captured_inputs(f"transformers-auto-model/{s}", mod.pattern)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        inp = C.on("cuda", C.cast_floats(cpu, dt))
        args = mod.replacement_args(*inp)
        run = mod.replacement_func()
        with torch.no_grad():
            e = mod.pattern(*inp)
            row = [s, str(dt)[6:], device_us(lambda: mod.pattern(*inp))]
            a = run(*args)
            atol, rtol = baseline_tolerance(dt)
            d = (a.double() - e.double()).abs()
            bad = int((d > atol + rtol * e.double().abs()).sum())
            row += [device_us(lambda: run(*args)), float(d.max()), bad]
        rows.append(row)
        print(row, flush=True)

print("\n== FusedFeedForwardAddLayerNorm, device µs per call; max |diff| and elements beyond the baseline tolerance vs eager ==")
print(f"{'sample':22s} {'dtype':9s} {'eager':>7s} {'rule':>7s} {'diff':>9s} {'bad':>4s}")
for r in rows:
    print(f"{r[0]:22s} {r[1]:9s} {r[2]:7.1f} {r[3]:7.1f} {r[4]:9.2e} {r[5]:4d}")
