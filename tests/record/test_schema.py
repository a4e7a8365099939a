"""Records: JSON round trip and the one JSON Lines reader."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from passnet.errors import InputFormatError
from passnet.record import (
    SCHEMA_VERSION,
    ErrorInfo,
    EvalRecord,
    append_jsonl,
    read_records,
    record_from_dict,
    record_from_json,
)
from passnet.status import Status


def _rec(graph: str, status: Status = Status.OK) -> EvalRecord:
    return EvalRecord(graph, "h" * 64, "eager", {}, "cfg", "cpu", status)


def test_record_round_trips_through_json() -> None:
    rec = _rec("a")
    assert record_from_json(rec.to_json()) == rec


def test_torn_final_line_without_newline_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_rec("a").to_json() + "\n" + '{"graph": "b", "sta')
    assert [r.graph for r in read_records(path)] == ["a"]


def test_complete_bad_line_is_an_error_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_rec("a").to_json() + "\n{broken}\n")
    with pytest.raises(InputFormatError) as info:
        read_records(path)
    assert info.value.context["line"] == "2"


def test_torn_final_line_is_skipped_with_a_warning_naming_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "r.jsonl"
    whole = _rec("a").to_json() + "\n" + _rec("b").to_json() + "\n"
    path.write_text(whole[:-20])  # a kill inside the second record's write
    with caplog.at_level(logging.WARNING, logger="passnet.record._jsonl"):
        assert [r.graph for r in read_records(path)] == ["a"]
    assert f"{path}:2: skipping a torn last line" in caplog.text
    assert "not an evaluation record" in caplog.text


def test_torn_final_line_cut_inside_a_character_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(_rec("a").to_json().encode() + b'\n{"graph": "\xe2\x82')
    assert [r.graph for r in read_records(path)] == ["a"]
    path.write_bytes(_rec("a").to_json().encode() + b'\n{"graph": "\xe2\x82\n')
    with pytest.raises(InputFormatError, match="not UTF-8") as info:
        read_records(path)
    assert info.value.context["line"] == "2"


def test_a_whole_final_record_without_its_newline_is_read(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_rec("a").to_json() + "\n" + _rec("b").to_json())
    assert [r.graph for r in read_records(path)] == ["a", "b"]


def test_a_bad_record_in_the_middle_names_file_line_and_field(tmp_path: Path) -> None:
    bad = json.loads(_rec("b").to_json())
    bad["graph"] = 5
    path = tmp_path / "r.jsonl"
    path.write_text(
        _rec("a").to_json() + "\n" + json.dumps(bad) + "\n" + _rec("c").to_json() + "\n"
    )
    with pytest.raises(InputFormatError, match="not an evaluation record: record.graph") as info:
        read_records(path)
    assert info.value.context["file"] == str(path)
    assert info.value.context["line"] == "2"


def test_a_record_of_a_newer_schema_is_an_error_even_as_the_last_line(tmp_path: Path) -> None:
    newer = json.loads(_rec("b").to_json())
    newer["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "r.jsonl"
    path.write_text(_rec("a").to_json() + "\n" + json.dumps(newer) + "\n")
    with pytest.raises(InputFormatError, match="newer than this passnet") as info:
        read_records(path)
    assert info.value.context["line"] == "2"
    assert info.value.context["field"] == "schema_version"


def test_records_appended_by_the_writer_read_back_after_a_kill(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    for graph in "abc":
        append_jsonl(path, _rec(graph).to_dict())
    assert path.read_text() == "".join(_rec(g).to_json() + "\n" for g in "abc")
    path.write_bytes(path.read_bytes()[:-7])  # the third write cut short
    assert [r.graph for r in read_records(path)] == ["a", "b"]
    append_jsonl(path, _rec("d").to_dict())  # the next run cuts the fragment off first
    assert [r.graph for r in read_records(path)] == ["a", "b", "d"]


def test_repeated_key_keeps_the_later_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_rec("a", Status.ACCURACY).to_json() + "\n" + _rec("a").to_json() + "\n")
    with caplog.at_level(logging.WARNING):
        (only,) = read_records(path)
    assert only.status is Status.OK
    assert f"{path}:2: repeated record for a replaces the earlier one" in caplog.text


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("correctness",), 5, "record.correctness must be an object"),
        (("eager",), "fast", "record.eager must be an object"),
        (("settings",), [1], "record.settings must be an object"),
        (("graph",), 5, "record.graph must be a string"),
        (("correctness", "allclose"), [True], "record.correctness.allclose must be an object"),
        (("correctness", "allclose"), {"-5": "no"}, "record.correctness.allclose.-5 must be true"),
    ],
)
def test_a_field_of_the_wrong_json_type_is_named(path, value, message) -> None:
    import json

    d = json.loads(_rec("g").to_json())
    d["correctness"] = {
        "num_outputs": 1,
        "outputs": [],
        "equal": True,
        "allclose": {"-5": True},
        "max_diff": 0.0,
        "mean_diff": 0.0,
        "draws": 2,
    }
    target = d
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InputFormatError, match=message.replace(".", r"\.")):
        record_from_json(json.dumps(d))


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        (("graph_hash", "device"), "record lacks the required fields graph_hash, device"),
        (("status",), "record lacks the required field status"),
        (("eager", "e2e"), "record.eager lacks the required field e2e"),
    ],
)
def test_a_missing_field_is_named_not_counted(drop, message) -> None:
    d = json.loads(_rec("g").to_json())
    d["eager"] = {"e2e": {"median_ms": 1.0}} if drop[0] == "eager" else None
    target = d["eager"] if drop[0] == "eager" else d
    for key in drop[1:] if drop[0] == "eager" else drop:
        del target[key]
    with pytest.raises(InputFormatError) as err:
        record_from_dict(d)
    assert message in err.value.message and "positional" not in err.value.message


def test_an_unknown_status_lists_the_known_ones() -> None:
    d = json.loads(_rec("g").to_json())
    d["status"] = "great"
    with pytest.raises(InputFormatError, match="record.status must be one of ok, accuracy, "):
        record_from_dict(d)


V1_RESULTS = Path(__file__).resolve().parents[2] / "benchmarks/results/cpu_inductor/results.jsonl"


def test_version_1_records_written_before_the_record_moved_still_load() -> None:
    lines = V1_RESULTS.read_text().splitlines()
    assert all(json.loads(line)["schema_version"] == 1 for line in lines)
    assert all("roofline" in json.loads(line) for line in lines)
    records = read_records(V1_RESULTS)
    assert len(records) == len(lines) == 29
    assert {r.schema_version for r in records} == {SCHEMA_VERSION}
    assert all(r.correctness is not None or r.error is not None for r in records)
    # the migrated record writes as the current version
    again = record_from_json(records[0].to_json())
    assert again == records[0] and records[0].roofline is None  # v1 never set it


@pytest.mark.parametrize("version", [0, "1", None, True, SCHEMA_VERSION + 1])
def test_a_schema_version_that_cannot_be_migrated_is_an_input_error(version) -> None:
    line = json.loads(V1_RESULTS.read_text().splitlines()[0])
    line["schema_version"] = version
    with pytest.raises(InputFormatError, match="schema_version"):
        record_from_json(json.dumps(line))


def test_a_record_dict_without_a_version_is_of_this_version_and_keeps_its_fields() -> None:
    rec = _rec("a")
    d = rec.to_dict()
    d.pop("schema_version")
    d["roofline"] = {
        "flops": 1.0,
        "min_bytes": 8,
        "compute_ms": 0.1,
        "memory_ms": 0.2,
        "floor_ms": 0.2,
        "bound": "memory",
    }
    again = record_from_dict(d)
    assert again.schema_version == SCHEMA_VERSION
    assert again.roofline is not None and again.roofline.floor_ms == 0.2


def test_an_errors_headline_says_where_first() -> None:
    error = ErrorInfo("NameError", "name 'x' is not defined\nmore", "eager", {"file": "model.py"})
    assert error.headline() == "name 'x' is not defined"  # no line: no place
    error.context["line"] = "19"
    assert error.headline() == "model.py:19: name 'x' is not defined"
    placed = ErrorInfo("SampleError", "bad field in model.py:19", "load", error.context)
    assert placed.headline() == "bad field in model.py:19"  # said once
    assert ErrorInfo("Timeout", "", "measure").headline() == "Timeout"


def test_a_turn_broken_while_it_timed_flags_the_timing() -> None:
    from passnet.record import TurnReport

    rec = _rec("a")
    rec.turn = TurnReport(4, "device", paused=3, began=100.0, ended=130.0)
    assert rec.timing_remarks() == []
    rec.turn.broken_after_s = 20.0  # broken while its rounds ran
    rec.turn.broken_turns = ["measure"]
    assert rec.timing_remarks() == [
        "timing turn broken after 20 s: the evaluations it stopped ran during its timing"
    ]
    again = record_from_json(rec.to_json())
    assert again == rec and again.turn is not None and again.turn.disturbed
    rec.turn.broken_after_s = 31.0  # broken while it waited to end: its rounds were clean
    assert not rec.turn.disturbed and rec.timing_remarks() == []


def test_a_turn_written_before_turns_could_be_broken_loads_unbroken() -> None:
    d = _rec("a").to_dict()
    d["turn"] = {
        "slots": 2,
        "scope": "host",
        "wait_s": 0.0,
        "paused": 1,
        "began": 1.0,
        "ended": 2.0,
    }
    turn = record_from_dict(d).turn
    assert turn is not None and turn.broken_after_s is None and turn.broken_turns == []
