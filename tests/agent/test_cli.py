"""The agent commands refuse what cannot work before any episode starts (exit status 2)."""

from __future__ import annotations

import sys

import pytest

from passnet.cli import main


def test_without_the_openai_client_agent_run_says_how_to_install_it(
    mlp_task, tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "openai", None)  # import openai -> ImportError
    out = tmp_path / "out"
    argv = ["agent", "run", str(mlp_task.path), "--model", "m", "--base-url", "http://x/v1"]
    assert main([*argv, "--out", str(out)]) == 2
    assert "pip install 'passnet[agent]'" in capsys.readouterr().err.replace("\n", "")
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["agent", "run", "TASK"], "--model is required"),
        (["agent", "run", "TASK", "--model", "m"], "--base-url is required"),
        (["agent", "export", "nowhere", "--out", "x.jsonl"], "no trajectories.jsonl"),
    ],
)
def test_missing_options_stop_the_command(argv, message, mlp_task, capsys):
    pytest.importorskip("openai")
    argv = [str(mlp_task.path) if a == "TASK" else a for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err.replace("\n", "")


def test_serve_without_a_token_refuses_to_start(mlp_task, monkeypatch, capsys):
    monkeypatch.delenv("PASSNET_SERVE_TOKEN", raising=False)
    assert main(["serve", str(mlp_task.path), "--port", "0"]) == 2
    assert "PASSNET_SERVE_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("PASSNET_SERVE_TOKEN", "short")
    assert main(["serve", str(mlp_task.path), "--port", "0"]) == 2
    assert "at least 16 characters" in capsys.readouterr().err.replace("\n", "")
