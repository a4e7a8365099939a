"""What the L2 flush (``--flush-l2``) changes: eager timed with and without it (GPU).

For a few dev samples, ``eager`` is evaluated twice on CUDA through the runner, once
with ``EvalSettings.flush_l2`` off and once on (results in ``--work``/plain and
``--work``/flush), and the table gives each graph's median device and e2e
milliseconds of the eager side both ways.

    PYTHONPATH=src python3 benchmarks/bench_flush_l2.py --work /tmp/flush
    PYTHONPATH=src python3 benchmarks/bench_flush_l2.py --graphs torchvision/resnet18
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from passnet.data import dev_samples_dir
from passnet.evaluate import EvalSettings
from passnet.runner import plan_items, run_evaluations

GRAPHS = (
    "torchvision/resnet18",
    "transformers-auto-model/prajjwal1_bert-tiny",
    "transformers-auto-model/google/t5-efficient-large-el2",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graphs", nargs="+", default=list(GRAPHS))
    parser.add_argument("--work", default="/tmp/passnet-bench-flush")
    parser.add_argument("--warmup", type=int, default=25)
    parser.add_argument("--trials", type=int, default=100)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_flush_l2 needs a CUDA GPU", file=sys.stderr)
        return 2
    items = plan_items([dev_samples_dir() / g for g in args.graphs])
    runs = {}
    for tag, flush in (("plain", False), ("flush", True)):
        settings = EvalSettings(warmup=args.warmup, trials=args.trials, flush_l2=flush)
        runs[tag] = {
            r.graph: r
            for r in run_evaluations(
                items,
                compiler="eager",
                device="cuda",
                settings=settings,
                out_dir=Path(args.work) / tag,
                echo_logs=False,
            ).records
        }
    print(f"\nL2 {torch.cuda.get_device_properties(0).L2_cache_size / 2**20:.0f} MiB")
    print(f"{'graph':52s} {'device ms':>19s} {'ratio':>6s} {'e2e ms':>19s}")
    print(f"{'':52s} {'plain':>9s} {'flush':>9s} {'':6s} {'plain':>9s} {'flush':>9s}")
    for graph, plain in runs["plain"].items():
        flush = runs["flush"].get(graph)
        if plain.eager is None or flush is None or flush.eager is None:
            print(f"{graph[:52]:52s} {plain.status.value} / {flush.status.value if flush else '-'}")
            continue
        dp, df = plain.eager.device, flush.eager.device
        print(
            f"{graph[:52]:52s} {dp.median_ms:9.4f} {df.median_ms:9.4f} "
            f"{df.median_ms / dp.median_ms:6.2f} "
            f"{plain.eager.e2e.median_ms:9.4f} {flush.eager.e2e.median_ms:9.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
