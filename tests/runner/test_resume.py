"""Runs persist each record as it finishes; a rerun resumes; SIGKILL loses nothing finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from passnet.evaluate import EvalSettings
from passnet.runner import ResultStore, plan_items, read_records, run_evaluations
from passnet.status import Status
from tests.conftest import MLP, SYMINT_HEAD, faulty

REPO = Path(__file__).resolve().parents[2]


def test_rerun_skips_finished_evaluations(tmp_path: Path, fast: EvalSettings) -> None:
    items = plan_items([MLP, SYMINT_HEAD])
    first = run_evaluations(
        items, compiler="eager", settings=fast, out_dir=tmp_path, echo_logs=False
    )
    assert first.evaluated == 2 and first.resumed == 0
    second = run_evaluations(
        items, compiler="eager", settings=fast, out_dir=tmp_path, echo_logs=False
    )
    assert second.evaluated == 0 and second.resumed == 2
    assert [r.finished_at for r in second.records] == [r.finished_at for r in first.records]
    assert len(read_records(tmp_path / "results.jsonl")) == 2


def test_other_compiler_config_is_a_different_evaluation(
    tmp_path: Path, fast: EvalSettings
) -> None:
    items = plan_items([MLP])
    compiler = faulty("Slow")  # a compiler that takes any config key (eager takes none)
    run_evaluations(items, compiler=compiler, settings=fast, out_dir=tmp_path, echo_logs=False)
    again = run_evaluations(
        items,
        compiler=compiler,
        compiler_config={"x": 1},
        settings=fast,
        out_dir=tmp_path,
        echo_logs=False,
    )
    assert again.evaluated == 1


def test_torn_last_line_is_dropped_and_sqlite_rebuilt(tmp_path: Path, fast: EvalSettings) -> None:
    run_evaluations(
        plan_items([MLP]), compiler="eager", settings=fast, out_dir=tmp_path, echo_logs=False
    )
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write('{"graph": "half a rec')
    store = ResultStore(tmp_path)
    assert len(store) == 1
    assert (tmp_path / "results.jsonl").read_text().endswith("}\n")
    (n,) = store._db.execute("SELECT COUNT(*) FROM records").fetchone()
    assert n == 1


def test_a_whole_last_record_without_its_newline_is_kept(
    tmp_path: Path, fast: EvalSettings
) -> None:
    run_evaluations(
        plan_items([MLP]), compiler="eager", settings=fast, out_dir=tmp_path, echo_logs=False
    )
    results = tmp_path / "results.jsonl"
    results.write_text(results.read_text().rstrip("\n"))
    store = ResultStore(tmp_path)
    assert len(store) == 1
    assert results.read_text().endswith("}\n")


def test_sigkill_during_a_run_loses_no_finished_record_and_resume_completes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    samples = tmp_path / "list.txt"
    samples.write_text(f"{MLP}\n{SYMINT_HEAD}\n{MLP.parent / 'prajjwal1_bert-tiny'}\n")
    cmd = [
        sys.executable,
        "-m",
        "passnet.cli",
        "eval",
        str(samples),
        "--compiler",
        faulty("Sleeps"),
        "--warmup",
        "1",
        "--trials",
        "3",
        "--threads",
        "1",
        "--out",
        str(out),
        "--quiet",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    results = out / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (
        results.exists() and results.read_text().count("\n") >= 1
    ):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = read_records(results)
    assert 1 <= len(before) < 3
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    after = {r.graph: r for r in read_records(results)}
    assert len(after) == 3
    for rec in before:
        assert after[rec.graph].finished_at == rec.finished_at  # kept, not re-evaluated
        assert after[rec.graph].status is Status.OK
    score = json.loads((out / "aggregated_score.json").read_text())
    assert score["n_graphs"] == 3
