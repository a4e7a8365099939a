"""How wide a sample run's intervals are, on records already taken: the tasks of a split
whose every graph has a record are tabulated as if they were a sample of the split
(``bench table``'s 95 % bootstrap intervals over tasks). They are whichever tasks the
records cover, not the split's sample order, so the row shows the width only::

    python3 benchmarks/passbench/interval_width.py "$(passnet bench path)/eval-fusible" \\
        benchmarks/passbench/results/baselines_h200/eval-fusible-inductor-dynamic_false/results.jsonl \\
        --compiler inductor --device cuda
"""

from __future__ import annotations

import argparse
import dataclasses

from passnet.record import read_records
from passnet.runner import plan_split
from passnet.score import BenchRun, bench_markdown, bench_row
from passnet.task import SAMPLE_ORDER, load_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("split", help="the split folder the records are of")
    parser.add_argument("records", help="a bench eval run's results.jsonl")
    parser.add_argument("--compiler", required=True, help="the run's compiler")
    parser.add_argument("--device", default="cuda", help="the run's device (default: cuda)")
    args = parser.parse_args()
    records = read_records(args.records)
    have = {r.graph for r in records}
    split = load_split(args.split)
    index = plan_split(split, args.compiler, args.device).index
    whole = tuple(t for t in index.tasks if all(g in have for g in t.graphs))
    as_sample = dataclasses.replace(
        index, tasks=whole, sampled_from=len(index.tasks), sample_order=SAMPLE_ORDER
    )
    row = bench_row(BenchRun(args.compiler, records, as_sample, args.records))
    print(bench_markdown([row]))


if __name__ == "__main__":
    main()
