#!/usr/bin/env python3
"""Diagnostic: is the harness's repeat-run variation set per process or per time window?

For each graph, PROCS fresh Python processes one after another. Each loads the
sample on CUDA, compiles it (inductor, warm compile as the harness does), pins to
the harness's core, then times eager vs compiled in several *epochs* (the
harness's interleaved adaptive timing, default settings), one second apart:

* ``same``: the original inputs;
* ``fresh``: freshly allocated copies of the inputs (new device addresses; the old
  copies are kept alive, so the allocator cannot hand the same blocks back);
* ``core``: the original inputs, on another core.

It prints the speedup of every epoch and, per graph, the largest spread within one
process against the spread across processes. With ``PIN_EARLY=1`` a process pins
itself before importing torch (so torch's thread pool is sized for one core).

Usage (CUDA GPU)::

    PYTHONPATH=src python3 benchmarks/harness_epochs.py
    PIN_EARLY=1 PROCS=4 EPOCHS=same,same,fresh GRAPHS=torchvision/squeezenet1_1 \
        PYTHONPATH=src python3 benchmarks/harness_epochs.py

Writes ``$OUT/epochs[_pin_early].json`` when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

GRAPHS = tuple(
    os.environ.get(
        "GRAPHS",
        "transformers-auto-model/prajjwal1_bert-tiny,torchvision/mobilenet_v3_small,"
        "transformers-auto-model/yujiepan_tiny-random-swin-patch4-window7-224,torchvision/squeezenet1_1",
    ).split(",")
)
PROCS = int(os.environ.get("PROCS", "3"))
EPOCHS = tuple(os.environ.get("EPOCHS", "same,same,fresh,fresh,core,same").split(","))


def pin_early() -> None:
    # The choice of passnet.evaluate.pin_to_one_core for GPU 0, written out here
    # because importing passnet imports torch, and this runs before that.
    cores = sorted(os.sched_getaffinity(0))
    sib = {cores[0]}
    try:
        text = open(f"/sys/devices/system/cpu/cpu{cores[0]}/topology/thread_siblings_list").read()
        for part in text.strip().split(","):
            lo, _, hi = part.partition("-")
            sib.update(range(int(lo), int(hi or lo) + 1))
    except OSError:
        pass
    cand = [c for c in reversed(cores) if c not in sib]
    os.sched_setaffinity(0, {cand[0]})


def _clone(values: list) -> list:
    """Fresh copies of the tensors among ``values`` (new device addresses), as the harness
    clones inputs."""
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def child(graph: str) -> None:
    if os.environ.get("PIN_EARLY"):
        pin_early()

    from passnet.compilers import compile_warm
    from passnet.data import dev_samples_dir
    from passnet.evaluate import EvalSettings, measure_sides, pin_to_one_core
    from passnet.sample import load_sample

    s = EvalSettings()
    sample = load_sample(dev_samples_dir() / graph)
    module = sample.build_module("cuda")
    inputs = sample.replay_inputs("cuda", 0)
    compiled = compile_warm(module, _clone(inputs), backend="inductor", dynamic=False)
    allowed = sorted(os.sched_getaffinity(0))
    pin_to_one_core("cuda")
    home = os.sched_getaffinity(0)
    keep = []
    for i, kind in enumerate(EPOCHS):
        args = inputs
        if kind == "fresh":
            args = _clone(inputs)
            keep.append(args)
        if kind == "core":
            others = [c for c in allowed if c not in home]
            os.sched_setaffinity(0, {others[len(others) // 2]})
        else:
            os.sched_setaffinity(0, home)
        t0 = time.time()
        t = measure_sides(compiled, module, args, "cuda", s, mutating=False)  # the harness's timing
        e, c = t["eager"].e2e.median_ms, t["compiled"].e2e.median_ms
        print(
            "EPOCH "
            + json.dumps(
                {
                    "graph": graph,
                    "epoch": i,
                    "kind": kind,
                    "eager": e,
                    "compiled": c,
                    "s": e / c,
                    "n": t["eager"].e2e.n,
                    "secs": time.time() - t0,
                    "core": sorted(os.sched_getaffinity(0)),
                }
            ),
            flush=True,
        )
        time.sleep(1.0)


def main() -> None:
    rows = []
    for graph in GRAPHS:
        for p in range(PROCS):
            out = subprocess.run(
                [sys.executable, __file__, "--child", graph],
                capture_output=True,
                text=True,
            )
            got = [
                json.loads(line[6:])
                for line in out.stdout.splitlines()
                if line.startswith("EPOCH ")
            ]
            if not got:
                print(out.stderr[-3000:])
            for r in got:
                r["proc"] = p
                rows.append(r)
    if os.environ.get("OUT"):
        name = "epochs_pin_early.json" if os.environ.get("PIN_EARLY") else "epochs.json"
        with open(os.path.join(os.environ["OUT"], name), "w") as f:
            json.dump(rows, f)
    print(f"{'graph':28s} proc  " + " ".join(f"{k[:5]:>7s}" for k in EPOCHS) + "   eagerms  secs")
    for graph in GRAPHS:
        for p in range(PROCS):
            rs = [r for r in rows if r["graph"] == graph and r["proc"] == p]
            print(
                f"{graph[-28:]:28s} {p:4d}  "
                + " ".join(f"{r['s']:7.4f}" for r in rs)
                + f"   {rs[0]['eager'] if rs else 0:7.3f} {sum(r['secs'] for r in rs):5.1f}"
            )
    print("\nspread in % (max-min of log speedup)")
    for graph in GRAPHS:
        rs = [r for r in rows if r["graph"] == graph]
        within = []
        for p in range(PROCS):
            v = [math.log(r["s"]) for r in rs if r["proc"] == p and r["kind"] != "core"]
            if v:
                within.append(100 * (max(v) - min(v)))
        first = [math.log(r["s"]) for r in rs if r["epoch"] == 0]
        med = []
        for p in range(PROCS):
            v = sorted(math.log(r["s"]) for r in rs if r["proc"] == p and r["kind"] != "core")
            if v:
                med.append(v[len(v) // 2])
        print(
            f"{graph[-28:]:28s} within-proc max {max(within, default=0):5.2f}  "
            f"across-proc epoch0 {100 * (max(first) - min(first)) if first else 0:5.2f}  "
            f"across-proc median-of-epochs {100 * (max(med) - min(med)) if med else 0:5.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--child", metavar="GRAPH", help=argparse.SUPPRESS)
    cli = parser.parse_args()
    if cli.child:
        child(cli.child)
    else:
        main()
