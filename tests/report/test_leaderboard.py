"""The report's leaderboard: benchmark runs' Table 1 rows, best AS first, with their
speedup distributions and the table's notes."""

from __future__ import annotations

import dataclasses
import re

from passnet.report import render_html_report
from passnet.score import BenchRun, bench_row
from passnet.status import Status
from tests.score.score_records import build_record


def _run(name: str, speedups: list[float], failed: int = 0):  # type: ignore[no-untyped-def]
    records = [
        dataclasses.replace(
            build_record(f"t{i % 2}/graphs/float32/0/g{i}", speedup=s, compiler=name),
            graph_hash=f"{i:064d}",
        )
        for i, s in enumerate(speedups)
    ]
    records += [
        dataclasses.replace(
            build_record(f"t9/graphs/float32/0/f{i}", Status.RUNTIME_ERROR, compiler=name),
            graph_hash=f"9{i:063d}",
        )
        for i in range(failed)
    ]
    return records, bench_row(BenchRun(name, records))


def test_leaderboard_ranks_by_as_and_shows_the_distribution() -> None:
    slow, slow_row = _run("slow", [0.5, 0.8, 1.1, 0.9], failed=1)
    fast, fast_row = _run("fast", [1.5, 2.5, 1.1, 0.9])
    page = render_html_report(
        {"slow": slow, "fast": fast},
        {"slow": slow_row.score, "fast": fast_row.score},
        leaderboard=[slow_row, fast_row],
    )
    board = page[page.index("<h2>Leaderboard</h2>") : page.index("<h2>Scores</h2>")]
    ranked = re.findall(r"<tr><td>(\d)</td><td>(\w+)</td>", board)
    assert ranked == [("1", "fast"), ("2", "slow")]
    assert f"<td>{fast_row.aggregated_speedup:.3f}</td>" in board
    assert "<td>1 (25.0%)</td>" in board  # fast: one each of < 1.0, 1.0-1.2, 1.2-2.0, >= 2.0
    assert board.count("class='dist'") == 2
    assert "share no graph" not in board and "cover different graphs" in board


def test_no_leaderboard_without_benchmark_runs() -> None:
    records, row = _run("x", [1.0])
    assert "Leaderboard" not in render_html_report({"x": records}, {"x": row.score})
