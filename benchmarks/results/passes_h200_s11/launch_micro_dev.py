# development script: run at commit 51e973c (direct launches)
"""One-off: where the lean launch of a real pass kernel spends its host time (GPU)."""

import statistics
import tempfile
import time
from pathlib import Path

import torch

from passnet.passes import PassManager
from passnet.passes._launch import accelerate_rules
from passnet.passes.library import build_reference_task


def host_us(fn, n=300, loops=9):
    for _ in range(30):
        fn()
    torch.cuda.synchronize()
    res = []
    for _ in range(loops):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        res.append((time.perf_counter_ns() - t0) / n / 1e3)
        torch.cuda.synchronize()
    return min(res), statistics.median(res)


work = Path(tempfile.mkdtemp())
task = build_reference_task("linear_bias_gelu", work / "t", dtypes=(torch.float32,))
manager = PassManager.from_dirs(task.pass_dir)
accelerate_rules(manager.rules)
fused = manager.rules[0].replacement
g = fused.__globals__
kernel = g["_linear_gelu_kernel"]
S, D, N = 11, 128, 512
x = torch.randn(1, S, D, device="cuda")
W = torch.randn(N, D, device="cuda")
b = torch.randn(N, device="cuda")
out = fused(x, W, b)
out = fused(x, W, b)
run = kernel.run
((key, entry),) = run.cache.items()
print("entry addresses:", entry[6], "launch:", entry[1])
args = (x, W, b, out, S, N, D, 8)
grid = (entry[2],)
kw = dict(num_warps=2) if "num_warps" in str(key) else {}
rows = {
    "fused(x, W, b) (lean)": lambda: fused(x, W, b),
    "kernel[grid](*args) (FastRun)": lambda: kernel[grid](*args, **kw),
    "run(*args, grid=grid, warmup=False)": lambda: run(*args, grid=grid, warmup=False, **kw),
    "x.new_empty": lambda: x.new_empty((1, S, N)),
    "eager gelu(linear)": lambda: torch._C._nn.gelu(torch._C._nn.linear(x, W, b)),
}
print(f"{'what':40s} {'min':>7s} {'median':>7s}  (host µs per call, loops of 300)")
for name, fn in rows.items():
    with torch.no_grad():
        mn, md = host_us(fn)
    print(f"{name:40s} {mn:7.2f} {md:7.2f}")
