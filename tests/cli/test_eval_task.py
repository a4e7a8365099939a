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
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    score = json.loads((task.path / "aggregated_score.json").read_text())
    assert score["counts"]["pass_mismatch"] == 1 and sum(score["counts"].values()) == 1
    assert score["score"] == pytest.approx(0.1)
    log = (task.path / "passnet-out" / "eval.log").read_text()
    assert "Has Any pass matched? [False]" in log
