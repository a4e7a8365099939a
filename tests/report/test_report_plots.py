"""PNG plots of score curves and speedup violins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import passnet
from passnet.record import Correctness, EvalRecord, OutputCheck
from passnet.report import default_category_of, plot_score_curves, plot_speedup_violin
from passnet.score import compute_scores
from passnet.status import Status

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _record(graph: str, speedup: float | None, status: Status = Status.OK) -> EvalRecord:
    correctness = None
    if status.ran:
        correctness = Correctness(
            num_outputs=1,
            outputs=[OutputCheck(0, "float32", "float32", [2], [2])],
            equal=False,
            allclose={t: t >= -6 for t in range(-10, 2)},
            max_diff=1e-6,
            mean_diff=1e-7,
            draws=2,
        )
    return EvalRecord(
        graph=graph,
        graph_hash="00" * 32,
        compiler="inductor",
        compiler_config={},
        compiler_config_hash="0" * 16,
        device="cpu",
        status=status,
        correctness=correctness,
        speedup_e2e=speedup,
    )


def _result_set(scale: float) -> list[EvalRecord]:
    return [
        _record("timm/a", 1.5 * scale),
        _record("timm/b", 0.7 * scale),
        _record("timm/c", 1.1 * scale),
        _record("torchvision/d", 2.0 * scale),
        _record("torchvision/e", 0.9 * scale),
        _record("torchvision/f", None, Status.COMPILE_ERROR),
    ]


def _assert_png(path):
    assert path.is_file() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_score_curves_write_s_and_es_pngs(tmp_path):
    reports = {
        "inductor": compute_scores(_result_set(1.0)),
        "passes": compute_scores(_result_set(1.3), interpretation="mismatch_extended"),
    }
    paths = plot_score_curves(reports, tmp_path / "plots")
    assert [p.name for p in paths] == ["s_curve.png", "es_curve.png"]
    for path in paths:
        _assert_png(path)


def test_speedup_violin_writes_one_png_per_call(tmp_path):
    records = {"inductor": _result_set(1.0), "passes": _result_set(1.4)}
    (path,) = plot_speedup_violin(records, tmp_path)
    _assert_png(path)


def test_speedup_violin_without_any_speedup_still_writes_a_png(tmp_path):
    records = {"broken": [_record("timm/x", None, Status.COMPILE_ERROR)]}
    (path,) = plot_speedup_violin(records, tmp_path, filename="empty.png")
    _assert_png(path)


def test_plots_leave_the_environment_and_pyplot_alone(tmp_path):
    """In a fresh interpreter: no pyplot import, no environment change, Agg output."""
    script = f"""
import os, sys
env = dict(os.environ)
from passnet.report import plot_score_curves
from passnet.score import GraphOutcome, compute_scores
from passnet.status import Status
report = compute_scores([GraphOutcome("g", Status.OK, (True,) * 12, 1.5)])
paths = plot_score_curves({{"x": report}}, {str(tmp_path)!r})
assert all(p.is_file() for p in paths)
assert "matplotlib.pyplot" not in sys.modules, "pyplot was imported"
assert dict(os.environ) == env, "environment changed"
"""
    src = str(Path(passnet.__file__).parents[1])
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": src},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "graph, family",
    [
        ("timm/resnet18", "timm"),
        ("transformers-auto-model/google/t5", "transformers-auto-model"),
        ("samples/torchvision/resnet18", "torchvision"),
        ("./mmseg/x", "mmseg"),
        ("single", "single"),
    ],
)
def test_default_category_is_the_source_family(graph, family):
    assert default_category_of(_record(graph, 1.0)) == family


def test_empty_inputs_are_rejected(tmp_path):
    with pytest.raises(ValueError):
        plot_score_curves({}, tmp_path)
    with pytest.raises(ValueError):
        plot_speedup_violin({}, tmp_path)


def test_the_score_curves_say_what_the_region_from_t_1_means() -> None:
    from passnet.record import read_records
    from passnet.report import score_curve_figure
    from passnet.score import compute_scores

    results = Path(__file__).resolve().parents[2] / "benchmarks/results/harness_h200/run1.jsonl"
    report = compute_scores(read_records(results))
    ax = score_curve_figure({"run": report}, lambda r: r.es, "ES_t").axes[0]
    assert any("errors forgiven by class" in t.get_text() for t in ax.texts)
    # no unexplained vertical line: the region is shaded and labelled instead
    assert not [line for line in ax.get_lines() if len(set(line.get_xdata())) == 1]
