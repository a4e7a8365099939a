"""Development check (session 12): is Inductor's bert-tiny replay really 3x eager's?

Captures eager and Inductor on bert-tiny fp32 with ``capture_graph`` (as
``--replay-timing`` does), times 50 replays and lists one replay's kernels under
``torch.profiler``. Run: ``PYTHONPATH=src python3 benchmarks/results/replay_h200/replay_check_dev.py``.
"""

import torch
from torch.profiler import ProfilerActivity, profile

from passnet.compilers import create_compiler
from passnet.data import dev_samples_dir
from passnet.evaluate._timing import capture_graph
from passnet.sample import load_sample

s = load_sample(dev_samples_dir() / "transformers-auto-model/prajjwal1_bert-tiny")
m = s.build_module("cuda")
x = s.replay_inputs("cuda", 0)
with torch.no_grad():
    c = create_compiler("inductor").compile(m, x)
    for name, fn in (("eager", m), ("inductor", c)):
        g = capture_graph(fn, x)
        for _ in range(20):
            g.replay()
        torch.cuda.synchronize()
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(50):
            st.record()
            g.replay()
            en.record()
            en.synchronize()
            ts.append(st.elapsed_time(en))
        ts.sort()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            g.replay()
            torch.cuda.synchronize()
        ks = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        total = sum(e.device_time for e in ks) / 1e3
        print(
            f"{name}: replay median {ts[25]:.4f} ms, {len(ks)} kernels, kernel sum {total:.4f} ms"
        )
        for e in sorted(ks, key=lambda e: -e.device_time)[:6]:
            print(f"   {e.device_time:8.1f} us  {e.name[:90]}")
