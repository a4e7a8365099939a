"""Records: JSON round trip and the one JSON Lines reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from passnet.errors import InputFormatError
from passnet.evaluate import EvalRecord, read_records, record_from_json
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


def test_repeated_key_keeps_the_later_record(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(_rec("a", Status.ACCURACY).to_json() + "\n" + _rec("a").to_json() + "\n")
    (only,) = read_records(path)
    assert only.status is Status.OK


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
