"""Loading records (folder, JSONL, log) and writing aggregated_score.json."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from passnet.errors import InputFormatError
from passnet.record import render_log
from passnet.score import (
    compare_table,
    compute_scores,
    load_records,
    read_score,
    score_table,
    split_by_run,
    write_score,
)
from passnet.status import Status
from tests.score.score_records import build_record


def _records():
    return [
        build_record("timm/a", speedup=2.0),
        build_record("timm/b", Status.ACCURACY, speedup=0.5, correct_from=-2),
        build_record("torchvision/c", Status.COMPILE_ERROR),
    ]


def _write_jsonl(path, records):
    path.write_text("".join(r.to_json() + "\n" for r in records))
    return path


def test_load_records_from_a_results_folder(tmp_path):
    _write_jsonl(tmp_path / "results.jsonl", _records())
    loaded = load_records(tmp_path)
    assert [r.graph for r in loaded] == ["timm/a", "timm/b", "torchvision/c"]
    assert loaded[1].correctness is not None and loaded[1].correctness.allclose[-2] is True


def test_repeated_record_replaces_the_earlier_one(tmp_path):
    first = build_record("timm/a", Status.RUNTIME_ERROR)
    again = build_record("timm/a", speedup=3.0)
    path = _write_jsonl(tmp_path / "r.jsonl", [first, build_record("timm/b"), again])
    loaded = load_records(path)
    assert [(r.graph, r.status) for r in loaded] == [("timm/b", Status.OK), ("timm/a", Status.OK)]


def test_load_records_detects_logs_by_suffix_and_by_content(tmp_path):
    text = "\n".join(line for r in _records() for line in render_log(r))
    (tmp_path / "eval.log").write_text(text)
    (tmp_path / "eval_output").write_text(text)
    _write_jsonl(tmp_path / "records_no_suffix", _records())
    for name in ("eval.log", "eval_output", "records_no_suffix"):
        loaded = load_records(tmp_path / name)
        assert [r.status for r in loaded] == [r.status for r in _records()], name


def test_bad_jsonl_line_names_file_and_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(_records()[0].to_json() + "\n{not json\n")
    with pytest.raises(InputFormatError, match="invalid JSON") as info:
        load_records(path)
    assert info.value.context["file"] == str(path)
    assert info.value.context["line"] == "2"


def test_missing_inputs_are_input_format_errors(tmp_path):
    with pytest.raises(InputFormatError, match=r"no results\.jsonl"):
        load_records(tmp_path)
    with pytest.raises(InputFormatError, match="no such"):
        load_records(tmp_path / "absent.jsonl")


def test_write_then_read_score(tmp_path):
    report = compute_scores(_records(), score_id="task-1")
    path = write_score(report, tmp_path)
    assert path == tmp_path / "aggregated_score.json"
    data = json.loads(path.read_text())
    assert data["id"] == "task-1" and data["score"] == report.score
    assert data["es"]["-5"] == report.es[-5]
    assert read_score(path) == report
    assert read_score(tmp_path) == report
    written = write_score(report, tmp_path / "out" / "custom.json")
    assert written.is_file() and read_score(written) == report


def test_read_score_rejects_other_json(tmp_path):
    path = tmp_path / "aggregated_score.json"
    path.write_text('{"id": "x", "score": 0.5}')
    with pytest.raises(InputFormatError, match="not an aggregated score") as info:
        read_score(path)
    assert info.value.context["file"] == str(path)


def test_split_by_run_labels_compilers_and_configs():
    records = _records() + [build_record("timm/a", compiler="eager")]
    other_config = build_record("timm/a")
    other_config.compiler_config_hash = "0123456789abcdef"
    groups = split_by_run(records + [other_config])
    assert sorted(groups) == ["eager", "inductor@01234567", "inductor@cafebabe"]
    assert len(groups["inductor@cafebabe"]) == 3


def _text(renderable) -> str:
    console = Console(record=True, width=160)
    console.print(renderable)
    return console.export_text()


def test_score_table_shows_levels_components_and_summary():
    report = compute_scores(_records(), score_id="inductor")
    text = _text(score_table(report))
    for needle in ("ES_t", "S_t", "α", "γ", "inductor", f"AS {report.score:.3f}", "fast_1"):
        assert needle in text
    assert text.count("\n│") >= 15  # one row per t = -10..4
    assert "compile_error 1" in text and "ok 1" in text
    assert f"{report.es[-5]:.3f}" in text


def test_compare_table_has_one_row_per_result_set():
    reports = {
        "inductor": compute_scores(_records()),
        "eager": compute_scores([build_record("timm/a")]),
    }
    text = _text(compare_table(reports))
    assert "inductor" in text and "eager" in text
    assert "1.000" in text  # eager's AS and g-mean


def test_an_empty_folder_names_the_command_that_writes_a_results_folder(tmp_path):
    with pytest.raises(InputFormatError, match="give the folder written by `passnet eval`"):
        load_records(tmp_path)
