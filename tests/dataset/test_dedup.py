"""Deduplication: one sample kept per canonical hash, the others recorded, errors listed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from passnet.dataset import DedupReport, dedup
from passnet.errors import InputFormatError
from passnet.sample import find_samples
from passnet.status import Status
from tests.conftest import BERT, MLP, SYMINT_HEAD


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for f in dst.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)
    return dst


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """a_bert, b_mlp, c_bert (copy), d_bert (variables renamed), e_sym; and a broken f."""
    root = tmp_path / "corpus"
    _copy(BERT, root / "a_bert")
    _copy(MLP, root / "b_mlp")
    _copy(BERT, root / "c_bert")
    renamed = _copy(BERT, root / "d_bert")
    model = renamed / "model.py"
    model.write_text(model.read_text().replace("inputs_embeds", "embedded_tokens"))
    _copy(SYMINT_HEAD, root / "e_sym")
    (root / "f_broken").mkdir()
    (root / "f_broken" / "model.py").write_text("this is not python(\n")
    return root


def test_copies_and_renamed_copies_are_duplicates_of_the_first(corpus: Path) -> None:
    report = dedup(find_samples([corpus]))
    assert report.total == 6 and len(report.groups) == 3
    assert report.kept == [str(corpus / n) for n in ("a_bert", "b_mlp", "e_sym")]
    assert report.duplicates == {
        str(corpus / "c_bert"): str(corpus / "a_bert"),
        str(corpus / "d_bert"): str(corpus / "a_bert"),
    }


def test_an_unhashable_sample_is_an_error_and_the_batch_carries_on(corpus: Path) -> None:
    report = dedup(find_samples([corpus]))
    (error,) = report.errors
    assert error.sample == str(corpus / "f_broken") and error.status is Status.SAMPLE_ERROR
    assert "syntax error" in error.error and "model.py" in error.error
    assert str(corpus / "f_broken") not in report.kept


def test_report_round_trips_through_json(corpus: Path, tmp_path: Path) -> None:
    report = dedup(find_samples([corpus]))
    report.write(tmp_path / "dedup.json")
    again = DedupReport.read(tmp_path / "dedup.json")
    assert again.to_dict() == report.to_dict()
    assert again.to_dict()["unique"] == 3 and again.to_dict()["duplicates"] == 2


def test_reading_something_else_is_an_input_format_error(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"groups": [{"kept": 1}]}')
    with pytest.raises(InputFormatError) as info:
        DedupReport.read(tmp_path / "x.json")
    assert info.value.context["file"] == str(tmp_path / "x.json")
