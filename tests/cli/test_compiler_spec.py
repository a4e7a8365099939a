"""``--compiler path/file.py:Class``: checked in a child process, never imported here."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from passnet.cli import main
from passnet.compilers import CompilerInfo
from passnet.errors import CompilerConfigError, RegistryError
from passnet.evaluate import check_compiler
from tests.conftest import MLP

QUICK = ["--warmup", "1", "--trials", "3", "--threads", "1", "--quiet"]

# Importing this file in the test's own process raises, and leaves a trace in sys.modules.
GUARDED = """\
import os

from passnet.compilers import Compiler

if os.getpid() == {pid}:
    raise RuntimeError("compiler file imported in the parent process")


class Plain(Compiler):
    name = "plain"
    config_keys = frozenset({{"scale"}})

    def compile(self, module, example_inputs):
        return module
"""


def _module_names(path: Path) -> list[str]:
    return [m for m in sys.modules if m == f"passnet_plugin_{path.stem}"]


def _guarded(tmp_path: Path, stem: str = "guarded_compiler") -> Path:
    path = tmp_path / f"{stem}.py"
    path.write_text(GUARDED.format(pid=os.getpid()))
    return path


def test_a_compiler_file_is_never_imported_in_the_parent_and_the_run_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _guarded(tmp_path)
    out = tmp_path / "run"
    spec = f"{path}:Plain"
    assert main(["eval", str(MLP), "--compiler", spec, *QUICK, "--out", str(out)]) == 0, (
        capsys.readouterr().out
    )
    (line,) = (out / "results.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["compiler"] == spec and record["status"] == "ok"
    assert _module_names(path) == []


def test_check_compiler_sends_back_plain_facts(tmp_path: Path) -> None:
    spec = f"{_guarded(tmp_path, 'facts_compiler')}:Plain"
    info = check_compiler(spec, {"scale": 2})
    assert info == CompilerInfo("plain", False, False, ("scale",), False)
    with pytest.raises(CompilerConfigError, match="does not take config key nosuch"):
        check_compiler(spec, {"nosuch": 1})
    assert check_compiler("eager").name == "eager"  # a registered name: looked up here


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("import os\n\nclass Plain(:\n    pass\n", "SyntaxError: .*line 3"),
        (
            "import os\n\nx = 1\nraise ValueError('no GPU here')\n",
            r"ValueError: no GPU here.*line 4",
        ),
        ("import os\n\nclass Other:\n    pass\n", "has no attribute 'Plain'"),
        ("class Plain:\n    pass\n", "is not a Compiler subclass"),
    ],
)
def test_a_broken_compiler_file_exits_2_before_any_graph_with_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "broken_compiler.py"
    path.write_text(text)
    out = tmp_path / "run"
    assert main(["eval", str(MLP), "--compiler", f"{path}:Plain", *QUICK, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    printed = " ".join((captured.out + captured.err).split())
    assert str(path) in printed
    assert re.search(message, printed), printed
    assert not (out / "results.jsonl").exists()
    with pytest.raises(RegistryError):
        check_compiler(f"{path}:Plain")
    assert _module_names(path) == []


def test_an_unknown_config_key_of_a_compiler_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = f"{_guarded(tmp_path, 'config_compiler')}:Plain"
    out = tmp_path / "run"
    argv = ["eval", str(MLP), "--compiler", spec, "--config", "nosuch=1", *QUICK, "--out", str(out)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "does not take config key nosuch" in " ".join((captured.out + captured.err).split())
    assert not (out / "results.jsonl").exists()
