"""The committed PassBench-GN baselines: docs/results/passbench_gn.md quotes what
`passnet bench table` computes from them (each run's G-mean and AS with their intervals,
and the paired ratios)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from passnet.score import bench_notes, bench_row, load_bench_runs
from tests.benchmarks.scripts import benchmark_script

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "benchmarks" / "passbench" / "results" / "baselines_h200"
DOC = ROOT / "docs" / "results" / "passbench_gn.md"
TABLES = {
    "eval-fusible": ("inductor", "eager", "cudagraphs"),
    "eval-classical": ("eager", "inductor"),
}


@pytest.mark.parametrize("split", sorted(TABLES))
def test_the_docs_quote_the_baselines_as_bench_table_computes_them(split: str) -> None:
    rows = [
        bench_row(run)
        for name in TABLES[split]
        for run in load_bench_runs(name, RUNS / f"{split}-{name}-sample")
    ]
    doc = DOC.read_text(encoding="utf-8")
    for row in rows:
        assert row.sampled_from == 200 and row.n_tasks == 20
        for value, (low, high) in (
            (row.gmean_speedup, row.gmean_interval),
            (row.aggregated_speedup, row.as_interval),
        ):
            assert f"{value:.3f} [{low:.3f}, {high:.3f}]" in doc, (row.name, value)
    paired = [n for n in bench_notes(rows) if "paired on the same" in n]
    assert len(paired) == len(rows) - 1
    for note in paired:
        assert f"- {note}" in doc, note


def test_the_docs_quote_baseline_facts_on_the_committed_runs(capsys, monkeypatch) -> None:
    with benchmark_script("passbench/baseline_facts.py") as script:
        runs = [str(p) for p in sorted(RUNS.glob("*-sample"))]
        monkeypatch.setattr(sys, "argv", ["baseline_facts.py", *runs])
        script.main()
    out = {line.strip() for line in capsys.readouterr().out.splitlines()}
    doc = DOC.read_text(encoding="utf-8")
    block = doc.split("* The script's lines behind these figures:", 1)[1].split("```")[1]
    quoted = [line.strip() for line in block.splitlines() if line.strip()]
    assert len(quoted) == 6
    for line in quoted:
        assert line in out, line
