"""``passnet task new`` / ``passnet task check``."""

from __future__ import annotations

from pathlib import Path

import pytest

from passnet.cli import main
from tests.passes.conftest import MLP, REDTEAM, sample_path


def test_task_new_then_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "task"
    assert main(["task", "new", str(out), str(sample_path(MLP)), "--name", "mlp"]) == 0
    assert "created task 'mlp': 1 graphs" in capsys.readouterr().out
    assert main(["task", "check", str(out)]) == 0
    assert "no integrity finding" in capsys.readouterr().out


def test_task_check_lists_findings_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "task"
    main(["task", "new", str(out), str(sample_path(MLP))])
    cheat = (REDTEAM / "exploits" / "getattr_delegation" / "Cheat.py").read_text()
    (out / "pass_dir" / "Cheat.py").write_text(cheat)
    (out / "pass_dir" / "sorted_output_pass_rule_names.json").write_text('["Cheat"]')
    capsys.readouterr()
    assert main(["task", "check", str(out)]) == 1
    text = capsys.readouterr().out
    assert "pass_dir/Cheat.py:7:12: [builtin] builtin `getattr` is not allowed in pass code" in text
    assert "2 finding(s)" in text  # getattr, and torch passed to it as a value


def test_task_errors_are_reported_not_raised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["task", "check", str(tmp_path / "missing")]) == 2
    assert "task folder does not exist" in capsys.readouterr().err


def test_task_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["task", "new", "--help"])
    assert "examples:" in capsys.readouterr().out
