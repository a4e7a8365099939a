"""Reading the decompose/generalize manifests: bad lines are skipped and named, the rest kept."""

from __future__ import annotations

import logging

import pytest

from passnet.errors import DatasetError
from passnet.record import read_manifest


def _parse(d: dict) -> int:
    if d["n"] < 0:
        raise DatasetError("negative")
    return d["n"]


def test_good_lines_are_read_and_bad_ones_skipped_with_file_and_line(tmp_path, caplog) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"n": 1}\n\n{"m": 2}\n{"n": "x"\n{"n": 3}\n{"n": -1}\n{"n": 4')
    with caplog.at_level(logging.WARNING, logger="passnet.record._jsonl"):
        assert read_manifest(path, _parse, "test", (DatasetError,)) == [1, 3]
    lines = [r.getMessage() for r in caplog.records]
    assert [m.split(": ")[0] for m in lines] == [f"{path}:{n}" for n in (3, 4, 6, 7)]
    assert all("unreadable test record" in m for m in lines)


def test_an_error_outside_the_listed_ones_is_not_swallowed(tmp_path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"n": -1}\n')
    with pytest.raises(DatasetError):
        read_manifest(path, _parse, "test")
