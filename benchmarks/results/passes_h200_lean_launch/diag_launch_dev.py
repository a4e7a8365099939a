import time, statistics, torch, tempfile
from pathlib import Path
from passnet.passes import _launch, PassManager, trace_graph
from passnet.passes.library import build_reference_task
from passnet.sample import load_sample
print("probe", _launch._probe())
work = Path(tempfile.mkdtemp())
task = build_reference_task("scale_mask_softmax", work / "t", dtypes=(torch.float32,))
path = task.graphs[0]
s = load_sample(path); m = s.build_module("cuda"); inp = s.replay_inputs("cuda", 0)
def e2e(fn, n=300):
    ts=[]
    with torch.no_grad():
        for _ in range(30): fn(*inp)
        for _ in range(n):
            torch.cuda.synchronize(); t=time.perf_counter_ns(); fn(*inp); torch.cuda.synchronize(); ts.append((time.perf_counter_ns()-t)/1e6)
    return statistics.median(ts)
tr = trace_graph(m)
m1 = PassManager.from_dirs(task.pass_dir); r1 = m1.apply(trace_graph(m))
m2 = PassManager.from_dirs(task.pass_dir); print("accelerated", _launch.accelerate_rules(m2.rules)); r2 = m2.apply(trace_graph(m))
ns = _launch.rule_namespaces([r.replacement for r in m2.rules]); ks = _launch.kernels_of(ns)
print("kernels", [k.__name__ if hasattr(k,'__name__') else k for k in ks])
for k in range(3):
    print(path.name, "trace", round(e2e(tr),3), "jit", round(e2e(r1.graph_module),3), "lean", round(e2e(r2.graph_module),3))
print("fast calls", {getattr(k.fn,'__name__',''): (k.run.fast_calls, len(k.run.cache)) for k in ks if isinstance(k.__dict__.get('run'), _launch.FastRun)})
o0 = tr(*inp); o1 = r1.graph_module(*inp); o2 = r2.graph_module(*inp)
f = lambda o: o[0] if isinstance(o,(tuple,list)) else o
print("equal jit vs lean", torch.equal(f(o1), f(o2)))
