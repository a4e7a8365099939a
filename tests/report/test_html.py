"""The HTML report: self-contained, every graph of every run aligned (by graph_hash, else
name), scores as computed, and a page a real browser renders, sorts, filters and fits in a
1,400-px window (skipped without Chromium)."""

from __future__ import annotations

import dataclasses
import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from passnet.cli import main
from passnet.record import read_records
from passnet.report import first_passing_t, graph_rows, render_html_report
from passnet.score import compute_scores
from passnet.status import Status

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "harness_h200"
RUN1, RUN2 = RESULTS / "run1.jsonl", RESULTS / "run2.jsonl"
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


def _runs() -> dict:
    return {"first": read_records(RUN1), "second": read_records(RUN2)[:20]}


def test_the_page_has_every_graph_of_every_run_and_their_scores() -> None:
    runs = _runs()
    reports = {name: compute_scores(records) for name, records in runs.items()}
    page = render_html_report(runs, reports)
    rows = re.findall(r"<tr><td data-sort=\"([^\"]+)\">", page)
    assert sorted(rows) == sorted({r.graph for r in runs["first"]})  # aligned: one row a graph
    for name, report in reports.items():
        assert f"<h3>{name}</h3>" in page
        assert f">{report.score:.3f}<" in page
    # graphs missing from the second run have empty cells there, not a second row
    assert page.count("<tr><td") == len(rows) + sum(len(r.es) for r in reports.values())


def test_the_page_needs_no_network() -> None:
    page = render_html_report(_runs(), {"first": None, "second": None})
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    assert "@import" not in page and not re.search(r"url\((?!['\"]?#)", page)  # only #ids
    assert page.count("<svg") == 1  # no score: the violins only


def test_first_passing_t_is_the_strictest_level_that_holds() -> None:
    records = read_records(RUN1)
    for record in records:
        t = first_passing_t(record)
        if record.status is Status.OK:
            assert t is not None and t <= -5
        elif t is not None:
            assert record.correct_at(t) and not record.correct_at(t - 1)


def test_cli_report_writes_the_page_and_refuses_a_folder_as_out(tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.html"
    assert main(["report", f"a={RUN1}", f"b={RUN2}", "--out", str(out)]) == 0
    assert "<h3>a</h3>" in out.read_text() and "<h3>b</h3>" in out.read_text()
    assert main(["report", str(RUN1), "--out", str(tmp_path)]) == 2
    assert "--out names a folder" in capsys.readouterr().err


def _dom(page: Path, fragment: str = "", window: str = "1280,800") -> str:
    result = subprocess.run(
        [
            BROWSER,
            "--headless",
            f"--window-size={window}",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={page.parent / 'profile'}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


@pytest.mark.skipif(BROWSER is None, reason="no Chromium here (apt-get install chromium)")
def test_a_real_browser_runs_the_page_filters_and_sorts(tmp_path: Path) -> None:
    runs = {"first": read_records(RUN1)}
    page = tmp_path / "report.html"
    page.write_text(render_html_report(runs, {"first": compute_scores(runs["first"])}))
    total = len(runs["first"])

    dom = _dom(page)
    assert f"{total} of {total} graphs" in dom  # the script ran

    timm = sum(1 for r in runs["first"] if r.graph.startswith("timm/"))
    dom = _dom(page, "#filter=timm")
    assert f"{timm} of {total} graphs" in dom
    assert dom.count('style="display: none;"') == total - timm

    # sorted by e2e speedup (column 2), fastest first
    dom = _dom(page, "#sort=2&desc")
    graphs = re.findall(r"<tr><td data-sort=\"([^\"]+)\">", dom)
    by_speedup = sorted(runs["first"], key=lambda r: -(r.speedup_e2e or -1))
    assert [html.unescape(g) for g in graphs] == [r.graph for r in by_speedup]


def test_total_seconds_are_the_evaluations_not_the_sum_of_its_phases_and_total() -> None:
    record = read_records(RUN1)[0]
    record.phases_s = {"process_start": 1.0, "load": 2.0, "compile": 3.0, "total": 7.5}
    page = render_html_report({"one": [record]}, {"one": None})
    assert '<td data-sort="7.5">7.5</td>' in page and ">13.5<" not in page


def test_one_graph_under_two_names_is_one_row() -> None:
    first = read_records(RUN1)[:3]
    renamed = [dataclasses.replace(r, graph="elsewhere/" + r.graph) for r in first]
    page = render_html_report({"a": first, "b": renamed}, {"a": None, "b": None})
    rows = re.findall(r"<tr><td data-sort=\"([^\"]+)\">", page)
    assert sorted(html.unescape(g) for g in rows) == sorted(r.graph for r in first)
    for r in first:  # the other name is shown in the row
        assert f"= elsewhere/{html.escape(r.graph)}</span>" in page
    assert "share no graph" not in page
    # the same graph twice in one run (duplicates of a set) keeps a row each
    twice = [first[0], dataclasses.replace(first[0], graph="copy/" + first[0].graph)]
    assert len(graph_rows({"a": twice})) == 2


def test_runs_that_share_no_graph_are_said_to(tmp_path: Path, capsys) -> None:
    records = read_records(RUN1)
    a, b = records[:5], records[5:10]
    assert not {r.graph_hash for r in a} & {r.graph_hash for r in b}
    page = render_html_report({"a": a, "b": b}, {"a": None, "b": None})
    assert "These 2 runs share no graph" in page
    jsonl = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, part in zip(jsonl, (a, b), strict=True):
        path.write_text("".join(r.to_json() + "\n" for r in part))
    out = tmp_path / "r.html"
    assert main(["report", f"a={jsonl[0]}", f"b={jsonl[1]}", "--out", str(out)]) == 0
    assert "the 2 runs share no graph" in " ".join(capsys.readouterr().err.split())
    assert main(["report", f"a={jsonl[0]}", f"b={RUN1}", "--out", str(out)]) == 0
    assert "share no graph" not in capsys.readouterr().err


@pytest.mark.skipif(BROWSER is None, reason="no Chromium here (apt-get install chromium)")
def test_the_table_of_two_runs_fits_a_1400_px_window(tmp_path: Path) -> None:
    runs = {"first": read_records(RUN1), "second": read_records(RUN2)}
    page = render_html_report(runs, {name: compute_scores(r) for name, r in runs.items()})
    probe = (
        "<script>const t=document.getElementById('graphs');document.body.setAttribute("
        "'data-fit',t.scrollWidth+' '+t.parentElement.clientWidth+' '+"
        "t.tBodies[0].rows[0].cells[0].getBoundingClientRect().width);</script></body>"
    )
    path = tmp_path / "report.html"
    path.write_text(page.replace("</body>", probe))
    dom = _dom(path, window="1400,900")
    table, room, name = map(float, re.search(r'data-fit="([^"]+)"', dom).group(1).split())
    assert table <= room  # no scrolling sideways
    assert name >= 150  # and the names are not squeezed to make it so
