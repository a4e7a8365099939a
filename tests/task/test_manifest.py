from __future__ import annotations

from pathlib import Path

import pytest

from passnet.errors import PassLoadError
from passnet.status import Status
from passnet.task import MANIFEST_FILE, read_manifest


def _dir(tmp_path: Path, manifest: str | None, files: tuple[str, ...] = ("A.py", "B.py")) -> Path:
    for name in files:
        (tmp_path / name).write_text("")
    if manifest is not None:
        (tmp_path / MANIFEST_FILE).write_text(manifest)
    return tmp_path


def test_names_come_back_in_manifest_order(tmp_path: Path) -> None:
    assert read_manifest(_dir(tmp_path, '["B", "A"]')) == ["B", "A"]


def test_empty_manifest_is_valid(tmp_path: Path) -> None:
    assert read_manifest(_dir(tmp_path, "[]")) == []


@pytest.mark.parametrize(
    ("manifest", "message", "line"),
    [
        ('["A",\n "A"]', "listed twice", 2),
        ('["A",\n "C"]', "no file C.py", 2),
        ('["A.py"]', "without its .py suffix", 1),
        ('["not-a-module"]', "not a valid Python module name", 1),
        ('["A",\n 3]', "must be a string", None),
        ('{"A": 1}', "JSON list", 1),
        ('["A",\n', "invalid JSON", 2),
    ],
)
def test_malformed_manifest_names_file_and_line(
    tmp_path: Path, manifest: str, message: str, line: int | None
) -> None:
    with pytest.raises(PassLoadError) as info:
        read_manifest(_dir(tmp_path, manifest))
    assert message in info.value.message
    assert info.value.context["file"] == MANIFEST_FILE
    assert info.value.context.get("line") == (str(line) if line is not None else None)
    assert info.value.status is Status.PASS_REJECTED


def test_missing_manifest_and_missing_directory_are_load_errors(tmp_path: Path) -> None:
    with pytest.raises(PassLoadError, match="missing sorted_output_pass_rule_names.json"):
        read_manifest(_dir(tmp_path, None))
    with pytest.raises(PassLoadError, match="does not exist"):
        read_manifest(tmp_path / "nope")
