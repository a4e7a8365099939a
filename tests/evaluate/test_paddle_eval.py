"""Paddle samples through `passnet eval`, `validate`: the child's Paddle stages, records,
eval.log, the score and the report; what is refused before any graph runs; the status of
a Paddle sample where Paddle is missing."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from passnet.cli import main
from passnet.record import read_records
from tests.conftest import MLP
from tests.sample.test_paddle import EULER, PADDLE_DATA, PATCH, TIMESNET

needs_paddle = pytest.mark.skipif(
    importlib.util.find_spec("paddle") is None, reason="PaddlePaddle is not installed"
)
FEW = ["--warmup", "1", "--trials", "3", "--timeout", "300"]


@needs_paddle
@pytest.mark.parametrize("compiler", ["paddle-static", "eager"])
def test_eval_runs_paddle_samples_end_to_end(
    compiler: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert (
        main(
            [
                "eval",
                str(EULER),
                str(TIMESNET.parent),
                "--compiler",
                compiler,
                *FEW,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    records = {r.graph: r for r in read_records(out / "results.jsonl")}
    assert set(records) == {
        "subgraph_0",
        "subgraph_5",
        "subgraph_5/shape_patches_TimesNet_ad",
    }
    for rec in records.values():
        assert rec.status.value == "ok", (rec.graph, rec.error)
        assert rec.correctness is not None and rec.correctness.draws == 2
        assert rec.correctness.allclose[-5]
        assert rec.eager is not None and rec.compiled is not None and rec.speedup_e2e
        assert rec.versions["paddle"] and rec.device_name == "cpu"
    log = (out / "eval.log").read_text()
    assert f"[Config] compiler: {compiler}" in log and "[Speedup][e2e]:" in log
    score = json.loads((out / "aggregated_score.json").read_text())
    assert score["n_graphs"] == 3 and score["score"] > 0
    assert (out / "report.html").is_file()
    assert main(["score", str(out), "--json", str(tmp_path / "s.json")]) == 0


@needs_paddle
def test_a_sample_with_training_mode_dropout_is_judged(tmp_path: Path) -> None:
    """Paddle's random state is seeded before every checked call (as GraphNet's harness
    does): a graph captured with dropout(is_test=False) draws the same mask on each side,
    rather than reading as a nondeterministic sample."""
    sample = PADDLE_DATA / "PaddleX" / "TimesNet_cls" / "subgraph_1"
    assert 'False, "upscale_in_train"' in (sample / "model.py").read_text()
    out = tmp_path / "run"
    assert main(["eval", str(sample), "--compiler", "paddle-static", *FEW, "--out", str(out)]) == 0
    [rec] = read_records(out / "results.jsonl")
    assert rec.status.value == "ok", rec.error


@needs_paddle
def test_threads_are_set_in_paddle(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        main(["eval", str(EULER), "--compiler", "eager", "--threads", "1", *FEW, "--out", str(out)])
        == 0
    )
    [rec] = read_records(out / "results.jsonl")
    assert rec.status.value == "ok", rec.error


@needs_paddle
def test_a_wrong_static_graph_is_an_accuracy_status(tmp_path: Path) -> None:
    """The comparison is real: a compiled side that differs from eager is caught."""
    spec = Path(__file__).parent / "faulty_paddle.py"
    out = tmp_path / "run"
    assert (
        main(["eval", str(EULER), "--compiler", f"{spec}:Perturbed", *FEW, "--out", str(out)]) == 0
    )
    [rec] = read_records(out / "results.jsonl")
    assert rec.status.value == "accuracy" and not rec.correctness.allclose[-5]


def test_torch_and_paddle_samples_in_one_run_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = tmp_path / "mixed"
    shutil.copytree(EULER, mixed / "paddle")
    shutil.copytree(MLP, mixed / "torch")
    assert main(["eval", str(mixed), "--compiler", "eager", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "two frameworks" in err and "1 paddle" in err and "1 torch" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("compiler", "path"), [("inductor", EULER), ("paddle-static", MLP)])
def test_a_compiler_of_the_other_framework_is_refused(
    compiler: str, path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(path), "--compiler", compiler, "--out", str(tmp_path / "o")]) == 2
    assert "compiles" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@needs_paddle
def test_paddle_cinn_is_refused_where_paddle_has_no_cinn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.evaluate import probe_paddle

    if probe_paddle().cinn:
        pytest.skip("this Paddle has CINN")
    assert (
        main(["eval", str(EULER), "--compiler", "paddle-cinn", "--out", str(tmp_path / "o")]) == 2
    )
    assert "is_compiled_with_cinn() is False" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@needs_paddle
def test_a_cuda_device_is_refused_where_paddle_is_a_cpu_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.evaluate import probe_paddle

    if probe_paddle().cuda:
        pytest.skip("this Paddle is a CUDA build")
    args = ["eval", str(EULER), "--compiler", "paddle-static", "--device", "cuda"]
    assert main([*args, "--out", str(tmp_path / "o")]) == 2
    assert "is_compiled_with_cuda() is False" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_without_paddle_a_paddle_sample_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import passnet.evaluate._evaluate as evaluate_module

    monkeypatch.setattr(evaluate_module, "paddle_missing", lambda: "PaddlePaddle is not installed")
    out = tmp_path / "run"
    assert (
        main(["eval", str(PATCH), "--compiler", "paddle-static", "--out", str(out)]) == 1
    )  # nothing ran
    [rec] = read_records(out / "results.jsonl")
    assert rec.status.value == "sample_error" and rec.error.type == "MissingDependency"
    assert rec.error.context["install"] == "pip install 'passnet[paddle]'"
    assert rec.graph_hash  # the sample loaded: only Paddle is missing


@needs_paddle
def test_validate_and_hash_accept_paddle_samples(tmp_path: Path) -> None:
    reports = tmp_path / "v.jsonl"
    assert main(["validate", str(PADDLE_DATA), "--out", str(reports)]) == 0
    lines = [json.loads(x) for x in reports.read_text().splitlines()]
    assert len(lines) == 6 and {r["status"] for r in lines} == {"ok"}
    assert main(["hash", str(PADDLE_DATA)]) == 0
