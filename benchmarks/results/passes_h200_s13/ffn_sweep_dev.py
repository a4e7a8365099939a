"""Session 13 development script: device time of FusedFeedForwardAddLayerNorm's launch
shapes on the real BERT values (GPU): split of the intermediate features over programs,
features per step (BLOCK_I) and warps, set through the rule module's knobs. Device µs per
call (CUDA-graph replay of 20 calls, median of 5), and max |diff| against eager.

    PYTHONPATH=src:. python3 benchmarks/results/passes_h200_s13/ffn_sweep_dev.py
"""

import importlib
import statistics

import torch

from passnet.passes.library import get_reference_pass
from tests.passes.library import conftest as C

folder = get_reference_pass("linear_bias_gelu").folder
sources = {f.name: f.read_text() for f in folder.glob("*.py")}
with C._importing(C._SourceImporter(C.PACKAGE, folder, sources)):
    mod = importlib.import_module(f"{C.PACKAGE}.FusedFeedForwardAddLayerNorm")
knobs = {k: getattr(mod, k) for k in ("_WEIGHT_PER_PROGRAM", "_MAX_SPLIT", "_MAX_PROGRAMS", "_BLOCK_I", "_NUM_WARPS")}


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


SMALL = [(1, 32, 4), (1, 64, 4), (1, 128, 4), (1, 64, 8), (2, 32, 4), (4, 32, 4), (8, 32, 4), (16, 32, 4)]
LARGE = [(8, 32, 4), (16, 32, 4), (32, 32, 4), (64, 32, 4), (64, 16, 4), (16, 64, 4), (32, 64, 8), (32, 32, 8)]
rows = []
for s in ["prajjwal1_bert-tiny", "ms-marco-TinyBERT-L2", "bge-small-zh"]:
    cpu = C.captured_inputs(f"transformers-auto-model/{s}", mod.pattern)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        inp = C.on("cuda", C.cast_floats(cpu, dt))
        args = mod.replacement_args(*inp)
        run = mod.replacement_func()
        with torch.no_grad():
            e = mod.pattern(*inp)
            eager = device_us(lambda: mod.pattern(*inp))
            variants = SMALL if inp[0].shape[-1] <= 128 else LARGE
            cells = []
            for split, bi, warps in variants:
                mod._WEIGHT_PER_PROGRAM, mod._MAX_SPLIT, mod._MAX_PROGRAMS = 1, split, 1 << 30
                mod._BLOCK_I, mod._NUM_WARPS = bi, warps
                a = run(*args)
                d = float((a.double() - e.double()).abs().max())
                cells.append((f"s{split}/i{bi}/w{warps}", device_us(lambda: run(*args)), d))
            for k, v in knobs.items():
                setattr(mod, k, v)
        rows.append((s, str(dt)[6:], eager, cells))
        print(rows[-1], flush=True)

print("\n== device µs per call: eager pattern, then split/BLOCK_I/warps variants (max |diff| vs eager) ==")
for s, dt, eager, cells in rows:
    print(f"{s[:20]:20s} {dt:8s} eager {eager:6.1f} | " + " ".join(f"{n} {t:.1f}" for n, t, _ in cells))
    print(f"{'':29s} max diff " + " ".join(f"{d:.1e}" for _, _, d in cells))
