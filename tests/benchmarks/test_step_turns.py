"""benchmarks/passbench/step_turns.py on the committed baseline records: the steps it finds
are the device calls' steps, and docs/results/passbench_gn.md quotes its table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from passnet.record import read_records
from tests.benchmarks.scripts import benchmark_script

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "benchmarks" / "passbench" / "results" / "baselines_h200"


@pytest.fixture(scope="module")
def script():
    with benchmark_script("passbench/step_turns.py") as module:
        yield module


def test_the_steps_are_the_calls_and_the_docs_quote_the_table(script) -> None:
    records = read_records(RUNS / "eval-fusible-inductor-sample" / "results.jsonl")
    assert [len(step) for step in script.steps(records, 15.0)] == [107, 18]
    assert [len(step) for step in script.steps(records, 1e9)] == [125]
    text = script.report(records)
    rows = text.splitlines()
    assert rows[2].startswith("| 1 | 107 | 348 | 18.4 | 299 | 86% | 2.80 |")
    docs = (ROOT / "docs" / "results" / "passbench_gn.md").read_text()
    for row in rows:
        assert row in docs, row


def test_records_without_turns_or_times_are_said(script) -> None:
    records = read_records(RUNS / "eval-fusible-eager-sample" / "results.jsonl")[:3]
    untimed = [dataclasses.replace(r, turn=None) for r in records]
    row = script.report(untimed).splitlines()[2]
    assert row.split("|")[5:8] == [" 0 ", " - ", " - "]
    with pytest.raises(SystemExit, match="no record says when it ran"):
        script.report([dataclasses.replace(r, started_at="") for r in records])
