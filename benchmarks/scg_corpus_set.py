"""Choose the corpus graphs on which CUDA graphs are expected to cost the most (issue 26):
the largest inputs a replay must copy in (every forward parameter that is not the
module's state) and graphs Dynamo captured with symbolic sizes (``SymInt`` parameters:
shapes that change from call to call in the model they came from). Only samples the eager
sweep ran (status ``ok``) and that fit a budget of tensor bytes are chosen.

    python3 benchmarks/scg_corpus_set.py CORPUS SWEEP.jsonl --large 8 --symbolic 4 \
        [--max-gb 4] [--json set.json] > list.txt

prints one sample path per line (relative to CORPUS's parent, as ``passnet eval`` takes a
list), and with ``--json`` the figures that chose them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from passnet.sample import load_sample


def describe(path: Path) -> dict:
    sample = load_sample(path)
    metas, state = sample.metas, set(sample.module_state_positions)
    inputs = weights = 0
    symbolic = []
    for i, name in enumerate(sample.param_names):
        if sample.is_symint(name):
            symbolic.append(name)
            continue
        meta = metas.get(name)
        if meta is None:
            continue
        size = meta.numel * meta.dtype.itemsize
        if i in state:
            weights += size
        else:
            inputs += size
    return {"input_bytes": inputs, "weight_bytes": weights, "symbolic": symbolic}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("sweep", type=Path, help="results.jsonl of an eager sweep of CORPUS")
    ap.add_argument("--large", type=int, default=8, help="graphs with the largest inputs")
    ap.add_argument("--symbolic", type=int, default=4, help="graphs with SymInt parameters")
    ap.add_argument("--max-gb", type=float, default=4.0, help="tensor bytes at most")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    ran = set()
    for line in args.sweep.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a running sweep
        if record.get("status") == "ok":
            ran.add(record["graph"])
    figures = {}
    for graph in sorted(ran):
        path = args.corpus / graph
        if not path.is_dir():
            continue
        d = describe(path)
        if d["input_bytes"] + d["weight_bytes"] <= args.max_gb * 2**30:
            figures[graph] = d
    large = sorted(figures, key=lambda g: -figures[g]["input_bytes"])[: args.large]
    symbolic = [g for g in figures if figures[g]["symbolic"] and g not in large]
    symbolic = sorted(symbolic, key=lambda g: figures[g]["weight_bytes"])[: args.symbolic]
    chosen = {g: {**figures[g], "why": "large inputs"} for g in large}
    chosen |= {g: {**figures[g], "why": "symbolic sizes"} for g in symbolic}
    for graph in chosen:
        print(f"{args.corpus.name}/{graph}")
    if args.json:
        args.json.write_text(json.dumps(chosen, indent=1) + "\n")
    for graph, d in chosen.items():
        print(
            f"{d['why']:15} in {d['input_bytes'] / 2**20:8.1f} MiB  weights "
            f"{d['weight_bytes'] / 2**20:8.1f} MiB  {graph}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
