"""benchmarks/passbench/slowdown_by_size.py on the committed inductor records: the table
docs/results/passbench_gn.md quotes is what the script prints."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from passnet.record import KernelProfile, read_records
from tests.benchmarks.scripts import benchmark_script

ROOT = Path(__file__).resolve().parents[2]
RECORDS = (
    ROOT
    / "benchmarks/passbench/results/baselines_h200/eval-fusible-inductor-dynamic_false"
    / "results.jsonl"
)


@pytest.fixture(scope="module")
def script():
    with benchmark_script("passbench/slowdown_by_size.py") as module:
        yield module


def test_every_timed_graph_is_in_one_bin_and_the_docs_quote_the_table(script) -> None:
    text = script.report(read_records(RECORDS))
    assert text.startswith("188 correct timed graphs of 225 records")
    rows = [line for line in text.splitlines() if re.match(r"\| [<≥\d]", line)]
    assert sum(int(row.split("|")[2]) for row in rows) == 188
    docs = (ROOT / "docs" / "results" / "passbench_gn.md").read_text()
    for row in rows:
        assert row in docs, row


def test_too_few_graphs_is_said(script) -> None:
    with pytest.raises(SystemExit, match="0 correct timed graphs"):
        script.report([])


def test_a_kernel_profile_divides_each_sides_call_into_gpu_time_and_the_rest(script) -> None:
    records = read_records(RECORDS)
    assert "kernel profile" not in script.report(records)  # these records hold none
    timed = [r for r in records if r.status.value == "ok" and r.speedup_e2e is not None][:3]
    profiled = [
        dataclasses.replace(
            r,
            eager=dataclasses.replace(r.eager, kernels=KernelProfile(0.01 * (i + 1), 3.0, 20)),
            compiled=dataclasses.replace(r.compiled, kernels=KernelProfile(0.005, 1.0, 20)),
        )
        for i, r in enumerate(timed)
    ]
    text = script.report(profiled + records[3:])
    assert "kernel profile (3 graphs profiled on both sides; medians per call):" in text
    row = {line.split("|")[1].strip(): line.split("|")[2:6] for line in text.splitlines()[-2:]}
    eager_ms = sorted(r.eager.e2e.median_ms for r in timed)[1]
    assert float(row["eager"][0]) == pytest.approx(eager_ms, abs=1e-4)
    assert float(row["eager"][1]) == pytest.approx(0.02)
    assert float(row["compiled"][1]) == pytest.approx(0.005)
    rest = sorted(r.compiled.e2e.median_ms - 0.005 for r in timed)[1]
    assert float(row["compiled"][2]) == pytest.approx(rest, abs=1e-4)
    assert row["eager"][3].strip() == "3" and row["compiled"][3].strip() == "1"
