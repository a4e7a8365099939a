"""Experiment: host cost of one replacement call inside a real rewritten graph."""

from __future__ import annotations

import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

import torch
import torch.fx


def per_call_us(fn, args, n=3000) -> float:
    for _ in range(100):
        fn(*args)
    torch.cuda.synchronize()
    best = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn(*args)
        best.append((time.perf_counter_ns() - t0) / n / 1e3)
        torch.cuda.synchronize()
    return min(best)


class Capture(torch.fx.Interpreter):
    def __init__(self, gm, names):
        super().__init__(gm)
        self.names = names
        self.got = {}

    def run_node(self, n):
        if n.name in self.names and n.name not in self.got:
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            self.got[n.name] = (n.target, args)
        return super().run_node(n)


def main() -> None:
    from passnet.passes import PassManager, trace_graph
    from passnet.passes.library import build_reference_task
    from passnet.sample import load_sample

    tmp = Path(tempfile.mkdtemp())
    for pname, gname in (
        ("add_layer_norm", "prajjwal1_bert-tiny_float32"),
        ("scale_mask_softmax", "yujiepan_tiny-random-swin-patch4-window7-224_float32"),
        ("rms_norm", "t5-efficient-large-el2_float32"),
    ):
        task = build_reference_task(pname, tmp / pname, dtypes=(torch.float32,))
        gpath = next(p for p in task.graphs if p.name == gname)
        sample = load_sample(gpath)
        module = sample.build_module("cuda")
        inputs = sample.replay_inputs("cuda", 0)
        mgr = PassManager.from_dirs(task.pass_dir)
        res = mgr.apply(trace_graph(module))
        names = {s.call.name for s in res.sites}
        cap = Capture(res.graph_module, names)
        with torch.no_grad():
            cap.run(*inputs)
        seen = set()
        for name, (target, args) in cap.got.items():
            rule = next(s.rule for s in res.sites if s.call.name == name)
            if rule.name in seen:
                continue
            seen.add(rule.name)
            fn = rule.replacement
            with torch.no_grad():
                t_target = per_call_us(target, args)
                t_fn = per_call_us(fn, args)
            print(f"{pname:18s} {rule.name:36s} guarded {t_target:6.2f} us  bare {t_fn:6.2f} us")
            pr = cProfile.Profile()
            with torch.no_grad():
                pr.enable()
                for _ in range(2000):
                    fn(*args)
                pr.disable()
            torch.cuda.synchronize()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
            lines = [l for l in s.getvalue().splitlines() if l.strip()][4:20]
            print("\n".join("    " + l[:150] for l in lines))


if __name__ == "__main__":
    main()
