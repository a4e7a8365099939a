"""benchmarks/passbench/slowdown_by_size.py on the committed inductor records: the table
docs/results/passbench_gn.md quotes is what the script prints."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from passnet.record import read_records

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "passbench" / "slowdown_by_size.py"
RECORDS = (
    ROOT
    / "benchmarks/passbench/results/baselines_h200/eval-fusible-inductor-dynamic_false"
    / "results.jsonl"
)


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("slowdown_by_size", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["slowdown_by_size"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["slowdown_by_size"]


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
