"""A PassBench task end to end through the CLI: build, eval with pass_mgr, task score."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from passnet.dataset import build_reference_task

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_task_eval_with_pass_mgr_writes_the_task_score(tmp_path: Path) -> None:
    task = build_reference_task("masked_mean_pooling", tmp_path / "task", dtypes=[torch.float32])
    # The evaluation child interprets the Triton kernel on the CPU.
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TRITON_INTERPRET": "1"}
    cmd = [
        sys.executable,
        "-m",
        "passnet.cli",
        "eval",
        str(task.path),
        "--compiler",
        "pass_mgr",
        "--warmup",
        "1",
        "--trials",
        "3",
        "--threads",
        "1",
        "--quiet",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    score = json.loads((task.path / "aggregated_score.json").read_text())
    assert score["n_graphs"] == 1
    assert score["counts"]["ok"] == 1
    records = [
        json.loads(x)
        for x in (task.path / "passnet-out" / "results.jsonl").read_text().splitlines()
    ]
    (rec,) = records
    assert rec["status"] == "ok"
    assert rec["pass_report"]["matched"] is True
    assert rec["pass_report"]["replacements"] == {"FusedMaskedMeanPooling": 1}
    assert (
        "[PassMgrBackend] Applied 1 replacements with FusedMaskedMeanPooling."
        in (task.path / "passnet-out" / "eval.log").read_text()
    )


@pytest.mark.slow
def test_task_without_matching_pass_scores_b_everywhere(tmp_path: Path) -> None:
    from passnet.passes.library import install_pass
    from passnet.task import create_task
    from tests.conftest import MLP

    task = create_task(tmp_path / "task", [MLP], name="mlp")
    install_pass("rms_norm", task.path / "pass_dir")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TRITON_INTERPRET": "1"}
    cmd = [
        sys.executable,
        "-m",
        "passnet.cli",
        "eval",
        str(task.path),
        "--compiler",
        "pass_mgr",
        "--warmup",
        "1",
        "--trials",
        "3",
        "--quiet",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    # no graph ran (its passes matched nothing): exit 1, and the score is written all the same
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no graph could be evaluated" in done.stderr
    score = json.loads((task.path / "aggregated_score.json").read_text())
    assert score["counts"]["pass_mismatch"] == 1 and sum(score["counts"].values()) == 1
    assert score["score"] == pytest.approx(0.1)
    log = (task.path / "passnet-out" / "eval.log").read_text()
    assert "Has Any pass matched? [False]" in log


def _eval(argv: list[str]) -> tuple[int, str]:
    import io

    from rich.console import Console

    from passnet.cli import _eval as cli_eval
    from passnet.cli import build_parser

    args = build_parser().parse_args(argv)
    out = io.StringIO()
    try:
        code = args.func(args, Console(file=out, width=200))
    except Exception as exc:  # noqa: BLE001 - the command's error is what is checked
        return 2, f"{type(exc).__name__}: {exc}"
    assert cli_eval  # the eval group is what ran
    return code, out.getvalue()


def test_a_pass_compiler_without_pass_dir_stops_the_command_before_any_graph(
    tmp_path: Path,
) -> None:
    from passnet.cli import main
    from tests.conftest import MLP

    out = tmp_path / "out"
    assert main(["eval", str(MLP), "--compiler", "pass_mgr", "--out", str(out)]) == 2
    assert not out.exists()  # no graph ran, no record, no score of 0.1
    code, text = _eval(["eval", str(MLP), "--compiler", "pass_mgr", "--out", str(out)])
    assert code == 2 and "needs config pass_dir" in text


@pytest.mark.parametrize(
    ("manifest", "message"),
    [(None, "missing sorted_output_pass_rule_names.json"), ("[1,", "invalid JSON")],
)
def test_a_pass_dir_with_a_broken_manifest_stops_the_command(
    tmp_path: Path, manifest: str | None, message: str
) -> None:
    from passnet.task import MANIFEST_FILE, create_task
    from tests.conftest import MLP

    task = create_task(tmp_path / "task", [MLP], name="mlp")
    (task.pass_dir / MANIFEST_FILE).unlink()
    if manifest is not None:
        (task.pass_dir / MANIFEST_FILE).write_text(manifest)
    code, text = _eval(["eval", str(task.path), "--compiler", "pass_mgr"])
    assert code == 2 and message in text
    assert not (task.path / "passnet-out").exists()


def test_passes_that_import_a_missing_triton_are_a_missing_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from passnet.errors import MissingDependency
    from passnet.passes.integrity import inspect_pass_dir
    from passnet.passes.library import install_pass
    from passnet.task import create_task
    from tests.conftest import MLP

    task = create_task(tmp_path / "task", [MLP], name="mlp")
    install_pass("rms_norm", task.pass_dir)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a)
    )
    with pytest.raises(MissingDependency, match="imports triton, which is not installed"):
        inspect_pass_dir(task.pass_dir)  # one error, not dozens of "not allowed" findings
    code, text = _eval(["eval", str(task.path), "--compiler", "pass_mgr"])
    assert code == 2 and "pip install triton" in text


def test_a_baseline_on_a_task_does_not_overwrite_the_tasks_score(tmp_path: Path) -> None:
    from passnet.cli import main
    from passnet.task import create_task
    from tests.conftest import MLP

    task = create_task(tmp_path / "task", [MLP], name="mlp")
    (task.path / "aggregated_score.json").write_text('{"id": "mlp", "score": 1.5}\n')
    argv = ["eval", str(task.path), "--compiler", "eager", "--warmup", "1", "--trials", "2"]
    assert main([*argv, "--quiet"]) == 0
    assert json.loads((task.path / "aggregated_score.json").read_text())["score"] == 1.5
    assert json.loads((task.path / "aggregated_score.eager.json").read_text())["n_graphs"] == 1
