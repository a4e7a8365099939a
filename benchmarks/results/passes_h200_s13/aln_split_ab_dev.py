"""Session 13 development script: add_layer_norm's FusedLinearAddLayerNorm before and after
a K split that was tried and not kept (one launch for bge-small-zh's 512x2048 weight with a
zeroed scratch and an atomic last-program epilogue, instead of a tiled GEMM and a LayerNorm
kernel), in one process per graph, alternating rounds (``rule_set_ab.py``'s
``measure_graph``). ``before`` is the rule file of commit 9272cbf (the library's, kept),
``after`` the split version (``FusedLinearAddLayerNorm_split.py.txt``), each in a copy of
the task's pass directory. Also the device time of both on bge-small-zh's feed-forward
output values (CUDA-graph replay of 20 calls).

    PYTHONPATH=src:.:benchmarks/passes python3 benchmarks/results/passes_h200_s13/aln_split_ab_dev.py
"""

import importlib
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from rule_set_ab import measure_graph

from passnet.passes.library import build_reference_task
from tests.passes.library import conftest as C

here = Path(__file__).parent
work = Path(tempfile.mkdtemp(prefix="aln-ab-"))
task = build_reference_task("add_layer_norm", work / "task")
dirs = {}
for name in ("before", "after"):
    dirs[name] = work / name
    shutil.copytree(task.pass_dir, dirs[name])
    source = (here / f"FusedLinearAddLayerNorm_{'before' if name == 'before' else 'split'}.py.txt").read_text()
    (dirs[name] / "FusedLinearAddLayerNorm.py").write_text(source)


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


mods = {}
for name, folder in dirs.items():
    sources = {f.name: f.read_text() for f in folder.glob("*.py")}
    with C._importing(C._SourceImporter(C.PACKAGE, folder, sources)):
        mods[name] = importlib.import_module(f"{C.PACKAGE}.FusedLinearAddLayerNorm")
    for key in [k for k in sys.modules if k.startswith(C.PACKAGE)]:
        del sys.modules[key]
cpu = C.captured_inputs("transformers-auto-model/bge-small-zh", mods["after"].pattern, 1)
print("== device µs per call, bge-small-zh feed-forward output (eager / before / after) ==")
for dt in (torch.float32, torch.float16, torch.bfloat16):
    inp = C.on("cuda", C.cast_floats(cpu, dt))
    with torch.no_grad():
        cells = [device_us(lambda: mods["after"].pattern(*inp))]
        for name in ("before", "after"):
            m = mods[name]
            args = m.replacement_args(*inp)
            cells.append(device_us(lambda: m.replacement_func()(*args)))
    print(str(dt)[6:], " ".join(f"{c:.1f}" for c in cells), flush=True)

rows = []
for path in task.graphs:
    row = measure_graph(path, dirs, 7, 200)
    rows.append(row)
    print(row["graph"][:50], " ".join(f"{k} {v:.3f}" for k, v in row["median_ms"].items()), flush=True)
print("\n== e2e median ms over rounds (speedup vs eager) ==")
for r in rows:
    print(f"{r['graph'][:40]:40s} " + " ".join(f"{n} {r['median_ms'][n]:.3f} ({r['speedup'][n]:.3f})" for n in r["median_ms"]))
