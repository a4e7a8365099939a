"""``passnet library ...`` commands call the library."""

from __future__ import annotations

import argparse
import io

import pytest
from rich.console import Console

from passnet.cli._library import add_commands
from passnet.task import read_manifest


def _run(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="passnet")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    status = args.func(args, Console(file=out, width=200))
    return status, out.getvalue()


def test_list_names_every_pass_with_its_rules():
    status, out = _run("library", "list")
    assert status == 0
    assert "rms_norm" in out and "FusedRollAddLayerNorm" in out and "splade-mini" in out


def test_install_writes_the_pass_into_a_pass_dir(tmp_path):
    status, out = _run("library", "install", "scale_mask_softmax", str(tmp_path / "pd"))
    assert status == 0 and "FusedScaleMaskSoftmax.py" in out
    assert read_manifest(tmp_path / "pd") == [
        "FusedRelPosBiasSoftmaxDropout",
        "FusedRelPosBiasShiftedWindowSoftmaxDropout",
        "FusedScaleMaskSoftmaxDropout",
        "FusedShiftedWindowSoftmaxDropout",
        "FusedScaleMaskSoftmax",
    ]


def test_task_builds_the_requested_dtypes(tmp_path):
    status, out = _run(
        "library", "task", "masked_mean_pooling", str(tmp_path / "t"), "--dtypes", "bfloat16"
    )
    assert status == 0 and "1 graphs" in out
    assert (tmp_path / "t" / "graph_list.txt").read_text() == "graphs/splade-mini_bfloat16\n"


def test_the_task_suggests_the_device_this_machine_has(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    status, out = _run("library", "task", "rms_norm", str(tmp_path / "t"), "--dtypes", "float32")
    assert status == 0 and "evaluate with: bash" in out and "--device cuda" not in out


def test_an_unknown_pass_stops_the_command_naming_the_known_ones(tmp_path, capsys):
    from passnet.cli import main

    assert main(["library", "install", "nope", str(tmp_path / "pd")]) == 2
    out = capsys.readouterr().err
    assert "unknown reference pass 'nope'; known: masked_mean_pooling" in out
    assert not (tmp_path / "pd").exists()  # nothing was done


def test_help_shows_examples(capsys):
    with pytest.raises(SystemExit):
        _run("library", "--help")
    assert "passnet library task rms_norm" in capsys.readouterr().out
