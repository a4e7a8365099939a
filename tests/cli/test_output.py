"""What the command line shows: results on stdout, errors and warnings on stderr, exit
statuses, help for every option, and terminal output a person can read."""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

import passnet.cli
from passnet.cli import build_parser, main
from tests.conftest import MLP

FAST = ["--compiler", "eager", "--warmup", "1", "--trials", "2"]


def _terminal(monkeypatch: pytest.MonkeyPatch, width: int = 120) -> io.StringIO:
    """Make the commands write to a terminal of ``width`` columns; return what it shows."""
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=width, color_system=None)
    monkeypatch.setattr(passnet.cli, "make_console", lambda **_: console)
    return screen


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_errors_go_to_stderr_and_results_to_stdout(tmp_path: Path, capsys) -> None:
    assert main(["eval", str(tmp_path / "nowhere"), "--compiler", "eager"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ")


def test_bare_passnet_prints_the_help_and_exits_2(capsys) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: passnet") and "exit status:" in err and "eval" in err


def test_every_option_and_argument_has_help() -> None:
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "passnet")
    assert missing == []


def test_a_group_lists_the_subcommands_it_has() -> None:
    top = build_parser()._subparsers._group_actions[0]
    for choice in top._choices_actions:  # the listing `passnet --help` shows
        parser = top.choices[choice.dest]
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and ":" in choice.help:
            listed = [w.strip() for w in choice.help.split(":", 1)[1].split(",")]
            words = [w for w in listed if " " not in w]  # not the prose of a listing
            assert set(words) <= set(subs[0].choices), (choice.dest, listed)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("nosuch_key=1", "does not take config key nosuch_key"),
        ("warm=maybe", 'config warm must be a boolean, got "maybe"'),
        ("triton.cudagraphs=1", "config triton.cudagraphs must be a boolean, got 1"),
    ],
)
def test_a_bad_compiler_config_is_a_usage_error_before_anything_runs(
    tmp_path: Path, capsys, config: str, message: str
) -> None:
    out = tmp_path / "run"
    argv = ["eval", str(MLP), "--compiler", "inductor", "--config", config, "--out", str(out)]
    assert main(argv) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not out.exists()  # no record, no score


def _broken_set(root: Path) -> Path:
    """Two broken samples: a NameError on line 19 of model.py, a missing weight_meta.py."""
    shutil.copytree(MLP, root / "a", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(MLP, root / "b", ignore=shutil.ignore_patterns("__pycache__"))
    model = root / "a" / "model.py"
    lines = model.read_text().splitlines()
    assert lines[18].lstrip().startswith("linear = ")
    lines[18] = "        linear = torch._C._nn.linear(undefined_name,"
    model.write_text("\n".join(lines) + "\n")
    (root / "b" / "weight_meta.py").unlink()
    return root


def test_a_run_in_which_every_graph_failed_exits_1_and_says_where(tmp_path: Path, capsys) -> None:
    broken = _broken_set(tmp_path / "set")
    out = tmp_path / "run"
    assert main(["eval", str(broken), *FAST, "--out", str(out), "--quiet"]) == 1
    captured = capsys.readouterr()
    text = " ".join(captured.out.split())
    assert "model.py:19: name 'undefined_name' is not defined" in text  # the line kept
    assert "missing file weight_meta.py" in text
    assert "no graph could be evaluated" in captured.err
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in records} == {"sample_error"}  # kept all the same
    (a,) = [r for r in records if r["graph"] == "a"]
    assert a["error"]["context"]["file"] == "model.py" and a["error"]["context"]["line"] == "19"
    # one graph that runs is enough for 0
    assert main(["eval", str(broken), str(MLP), *FAST, "--out", str(out), "--quiet"]) == 0


def test_a_terminal_shows_one_line_per_graph_and_names_that_tell_rows_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    family = tmp_path / "set" / "transformers-auto-model-with-a-long-family-name"
    names = ["prajjwal1_bert-tiny", "opt-tiny-random"]
    for name in names:
        shutil.copytree(MLP, family / name, ignore=shutil.ignore_patterns("__pycache__"))
    screen = _terminal(monkeypatch)
    assert main(["eval", str(tmp_path / "set"), *FAST, "--out", str(tmp_path / "run")]) == 0
    shown = _plain(screen.getvalue())
    assert "[Speedup][e2e]" not in shown  # the PassNet log stays in eval.log
    assert "[Speedup][e2e]" in (tmp_path / "run" / "eval.log").read_text()
    done = re.findall(r"\[\d/2\] (\S+): ok", shown)
    assert len(done) == 2 and {d.rsplit("/", 1)[-1] for d in done} == set(names)
    rows = [line for line in shown.splitlines() if line.startswith("│") and "│ ok" in line]
    assert len(rows) == 2
    for name in names:  # each row's graph cell ends with the sample's own name
        assert sum(bool(re.match(rf"│ \S*/{name} +│ ok", row)) for row in rows) == 1
    # asked for, the log is echoed on a terminal too
    screen = _terminal(monkeypatch)
    argv = ["eval", str(MLP), *FAST, "--out", str(tmp_path / "log"), "--log-lines"]
    assert main(argv) == 0
    assert "[Speedup][e2e]" in _plain(screen.getvalue())


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('{"graph": "a", "status": "ok"}', "record lacks the required fields graph_hash, compiler"),
        (
            '{"graph": "a", "status": "great", "graph_hash": "h", "compiler": "c", '
            '"compiler_config": {}, "compiler_config_hash": "x", "device": "cpu"}',
            "record.status must be one of ok, accuracy",
        ),
        (
            '{"graph": "a", "status": "ok", "graph_hash": "h", "compiler": "c", '
            '"compiler_config": {}, "compiler_config_hash": "x", "device": "cpu", '
            '"speedup_e2e": "fast"}',
            'record.speedup_e2e must be a number, got "fast"',
        ),
    ],
)
def test_a_malformed_records_file_names_the_file_line_and_field(
    tmp_path: Path, capsys, line: str, says: str
) -> None:
    records = tmp_path / "results.jsonl"
    good = (Path(__file__).parents[2] / "benchmarks/results/harness_h200/run1.jsonl").read_text()
    records.write_text(good.splitlines()[0] + "\n" + line + "\n")
    assert main(["score", str(records)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert says in err and f"file={records}" in err and "line=2" in err
    assert "positional argument" not in err


def test_the_summary_shows_device_speedups_only_where_there_are_any() -> None:
    from passnet.cli._eval import _print_summary
    from passnet.record import read_records

    records = read_records(Path(__file__).parents[2] / "benchmarks/results/harness_h200/run1.jsonl")
    records = records[:4]
    assert any(r.speedup_device for r in records)  # timed on CUDA

    def header(records) -> str:
        console = Console(record=True, width=200)
        _print_summary(records, console)
        return console.export_text()

    assert "speedup device" in header(records)
    for r in records:  # as on the CPU: no device time
        r.speedup_device = None
    assert "speedup device" not in header(records) and "speedup e2e" in header(records)
