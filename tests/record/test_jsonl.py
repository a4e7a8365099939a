"""The one JSON Lines reader and writer: a torn last line is skipped with a warning (and cut off
before the next append), any other bad line is an error naming the file and the line."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from passnet.errors import DatasetError, InputFormatError
from passnet.record import append_jsonl, iter_jsonl, read_jsonl, repair_jsonl_tail

LOGGER = "passnet.record._jsonl"


def _parse(d: dict) -> int:
    if d["n"] < 0:
        raise DatasetError("negative")
    return d["n"]


def _read(path: Path) -> list[int]:
    return read_jsonl(path, _parse, what="a test line", errors=(DatasetError,))


def test_good_lines_are_read_in_order_and_blank_ones_skipped(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"n": 1}\n\n  \n{"n": 2}\r\n{"n": 3}\n')
    assert _read(path) == [1, 2, 3]
    assert list(iter_jsonl(path, _parse, what="a test line")) == [(1, 1), (4, 2), (5, 3)]


def test_a_whole_last_line_without_its_newline_is_read(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"n": 1}\n{"n": 2}')
    assert _read(path) == [1, 2]


@pytest.mark.parametrize(
    "tail",
    ['{"n": 3', '{"m": 3}', '{"n": -3}', "[3]"],
    ids=["cut_json", "missing_field", "refused_by_parse", "not_an_object"],
)
def test_a_bad_last_line_without_its_newline_is_a_torn_write_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, tail: str
) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"n": 1}\n{"n": 2}\n' + tail)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert _read(path) == [1, 2]
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith(f"{path}:3: skipping a torn last line")
    assert "not a test line" in message


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        ('{"n": 3', "invalid JSON"),
        ('{"m": 3}', "missing field 'n'"),
        ('{"n": -3}', "negative"),
        ('{"n": "x"}', "not supported between"),
        ("[3]", "a line must be a JSON object"),
    ],
)
@pytest.mark.parametrize("where", ["middle", "last_with_newline"])
def test_any_other_bad_line_is_an_error_naming_file_line_and_what_it_should_be(
    tmp_path: Path, line: str, detail: str, where: str
) -> None:
    path = tmp_path / "m.jsonl"
    after = '{"n": 4}\n' if where == "middle" else ""
    path.write_text('{"n": 1}\n\n' + line + "\n" + after)
    with pytest.raises(InputFormatError, match=f"not a test line: .*{detail}") as info:
        _read(path)
    assert info.value.context["file"] == str(path)
    assert info.value.context["line"] == "3"


def test_the_column_of_invalid_json_and_the_context_of_a_refusal_are_kept(tmp_path: Path) -> None:
    def parse(d: dict) -> int:
        raise InputFormatError("bad field", field="n", line="99")

    path = tmp_path / "m.jsonl"
    path.write_text('{"n": 1,,}\n')
    with pytest.raises(InputFormatError, match="invalid JSON") as info:
        read_jsonl(path, parse, what="x")
    assert info.value.context["column"] == "9"
    path.write_text('{"n": 1}\n')
    with pytest.raises(InputFormatError, match="not x: bad field") as info:
        read_jsonl(path, parse, what="x")
    assert info.value.context == {"field": "n", "line": "1", "file": str(path)}


def test_an_error_outside_the_listed_ones_is_not_swallowed(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"n": -1}\n')
    with pytest.raises(DatasetError):
        read_jsonl(path, _parse, what="a test line")  # DatasetError is not listed here


def test_non_utf8_bytes_in_a_torn_tail_are_skipped_but_elsewhere_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.jsonl"
    euro = '{"n": 2, "s": "\u20ac"}'.encode()  # a three-byte character, cut after its first byte
    path.write_bytes(b'{"n": 1}\n' + euro[: euro.index(b"\xe2") + 1])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert _read(path) == [1]
    assert "skipping a torn last line" in caplog.text
    path.write_bytes(b'{"n": 1}\n\xff\xfe\n{"n": 3}\n')
    with pytest.raises(InputFormatError, match="not UTF-8 text .* at byte 9") as info:
        _read(path)
    assert info.value.context["line"] == "2"


def test_lines_split_only_at_newlines(tmp_path: Path) -> None:
    # str.splitlines would also split at \u2028 and \x85; inside a JSON string they are text
    path = tmp_path / "m.jsonl"
    path.write_text('{"n": 1, "s": "a\u2028b\x85c"}\n', encoding="utf-8")
    assert _read(path) == [1]


def test_an_unreadable_file_is_an_input_format_error(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match="cannot read the file") as info:
        _read(tmp_path / "absent.jsonl")
    assert info.value.context["file"] == str(tmp_path / "absent.jsonl")


def test_the_writer_appends_fsynced_newline_terminated_sorted_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    path = tmp_path / "m.jsonl"
    append_jsonl(path, {"n": 1, "a": "\u20ac"})
    append_jsonl(path, {"n": 2})
    assert path.read_bytes() == b'{"a": "\\u20ac", "n": 1}\n{"n": 2}\n'
    assert len(synced) == 2
    assert _read(path) == [1, 2]


def test_the_writer_refuses_a_value_that_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="JSON object"):
        append_jsonl(tmp_path / "m.jsonl", [1])  # type: ignore[arg-type]
    assert not (tmp_path / "m.jsonl").exists()


def test_a_kill_mid_write_leaves_a_torn_tail_that_the_next_append_cuts_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.jsonl"
    append_jsonl(path, {"n": 1})
    append_jsonl(path, {"n": 2, "pad": "x" * 100_000})  # longer than one read-back chunk
    whole = path.read_bytes()
    path.write_bytes(whole[:-50])  # the second write cut short by a kill
    assert _read(path) == [1]  # skipped with a warning
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        append_jsonl(path, {"n": 3})
    assert "cutting off a torn last line" in caplog.text
    assert path.read_bytes() == b'{"n": 1}\n{"n": 3}\n'
    assert _read(path) == [1, 3]  # the torn fragment never becomes a bad middle line


def test_a_whole_last_line_without_its_newline_is_ended_not_cut(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}')
    append_jsonl(path, {"n": 3})
    assert path.read_bytes() == b'{"n": 1}\n{"n": 2}\n{"n": 3}\n'


def test_a_torn_first_and_only_line_is_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"n": ')
    append_jsonl(path, {"n": 1})
    assert path.read_bytes() == b'{"n": 1}\n'


def test_repair_leaves_a_sound_file_alone_and_mends_a_torn_one(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    repair_jsonl_tail(path)  # missing: nothing to do
    assert not path.exists()
    path.write_bytes(b'{"n": 1}\n')
    repair_jsonl_tail(path)
    assert path.read_bytes() == b'{"n": 1}\n'
    path.write_bytes(b'{"n": 1}\n{"n": 2, "s": "\xe2')  # cut mid-character
    repair_jsonl_tail(path)
    assert path.read_bytes() == b'{"n": 1}\n'
    path.write_bytes(b'{"n": 1}\n{"n": 2}')
    repair_jsonl_tail(path)
    assert json.loads(path.read_text().splitlines()[-1]) == {"n": 2}
    assert path.read_bytes().endswith(b"\n")
