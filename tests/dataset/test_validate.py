"""Validation: the five constraints on extracted and real samples, and precise failures."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from passnet.dataset import (
    CheckStatus,
    Constraint,
    ValidationReport,
    extract,
    extract_file,
    read_reports,
    validate_sample,
    validate_samples,
)
from passnet.errors import InputFormatError
from passnet.sample import find_samples, load_sample
from passnet.status import Status
from tests.conftest import BERT, DEV, MLP, SYMINT_HEAD
from tests.dataset.tiny_models import (
    CUSTOM_OP_FILE,
    ConvBnRelu,
    GraphBreak,
    ScaledNorm,
    TinyAttention,
    build,
    inputs_for,
)
from tests.dataset.tiny_models import MLP as TinyMLP

GCN_LIKE = DEV / "torchgeometric" / "GAE"  # torch._check_is_size, data-dependent sizes


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for f in dst.rglob("*"):
        f.chmod(0o755 if f.is_dir() else 0o644)
    return dst


def _extracted(cls: type[nn.Module], tmp_path: Path, **kwargs: object) -> list[Path]:
    model = build(cls)
    ex = extract(model, out=tmp_path, **kwargs)
    with torch.no_grad():
        ex(*inputs_for(model))
    assert ex.result.ok
    return ex.samples


def _assert_all_passed(report: ValidationReport) -> None:
    assert report.ok, [c.to_dict() for c in report.failed]
    assert [c.constraint for c in report.checks] == list(Constraint)
    assert all(c.status is CheckStatus.PASSED for c in report.checks)


@pytest.mark.parametrize(
    ("cls", "dynamic"),
    [
        (TinyMLP, False),
        (ConvBnRelu, False),
        (TinyAttention, False),
        (GraphBreak, False),
        (ScaledNorm, True),
    ],
    ids=["mlp", "conv_bn_relu", "attention", "graph_break", "dynamic_symint_scalar"],
)
def test_extract_then_validate_round_trip_passes_all_five_constraints(
    cls: type[nn.Module], dynamic: bool, tmp_path: Path
) -> None:
    samples = _extracted(cls, tmp_path, dynamic=dynamic)
    for path in samples:
        report = validate_sample(path)
        _assert_all_passed(report)
        assert report.graph_hash == (path / "graph_hash.txt").read_text()


@pytest.mark.parametrize("path", [MLP, SYMINT_HEAD, BERT, GCN_LIKE], ids=lambda p: p.name)
def test_real_graphnet_samples_pass(path: Path) -> None:
    _assert_all_passed(validate_sample(path))


@pytest.mark.slow
@pytest.mark.parametrize("path", find_samples([DEV]), ids=lambda p: p.relative_to(DEV).as_posix())
def test_every_dev_sample_passes(path: Path) -> None:
    _assert_all_passed(validate_sample(path))


def test_decomposition_check_reports_where_it_cut(tmp_path: Path) -> None:
    (path,) = _extracted(TinyAttention, tmp_path)
    check = validate_sample(path).check(Constraint.DECOMPOSABLE)
    assert check.status is CheckStatus.PASSED and check.message.startswith("split at op ")


def test_missing_metadata_class_fails_serializable_and_skips_the_rest(tmp_path: Path) -> None:
    sample = _copy(MLP, tmp_path / "s")
    meta = sample / "weight_meta.py"
    blocks = meta.read_text().split("\n\n\n")
    meta.write_text("\n\n\n".join(b for b in blocks if "meta_L_x_:" not in b))
    report = validate_sample(sample)
    assert report.status is Status.SAMPLE_ERROR
    (failed,) = report.failed
    assert failed.constraint is Constraint.SERIALIZABLE
    assert (
        failed.node == "L_x_"
        and failed.file == "weight_meta.py"
        and "no metadata class" in failed.message
    )
    assert {c.status for c in report.checks if c is not failed} == {CheckStatus.SKIPPED}


def test_runtime_failure_names_the_node_and_line(tmp_path: Path) -> None:
    sample = _copy(MLP, tmp_path / "s")
    model = sample / "model.py"
    source = model.read_text()
    model.write_text(
        source.replace("act = torch.relu(linear)", "act = torch.relu(linear).view(7, -1)")
    )
    report = validate_sample(sample)
    (failed,) = report.failed
    assert failed.constraint is Constraint.RUNNABLE and failed.node == "view"
    lines = model.read_text().splitlines()
    assert failed.line is not None and "view(7, -1)" in lines[failed.line - 1]
    assert report.check(Constraint.DECOMPOSABLE).status is CheckStatus.SKIPPED


def test_data_dependent_python_control_flow_is_not_statically_analyzable(tmp_path: Path) -> None:
    sample = _copy(MLP, tmp_path / "s")
    model = sample / "model.py"
    model.write_text(
        model.read_text().replace(
            "act = torch.relu(linear)", "act = torch.relu(linear) if linear.sum() > 0 else linear"
        )
    )
    report = validate_sample(sample)
    check = report.check(Constraint.STATICALLY_ANALYZABLE)
    assert check.status is CheckStatus.FAILED and check.file == "model.py"
    assert "linear.sum() > 0" in model.read_text().splitlines()[check.line - 1]
    assert report.check(Constraint.RUNNABLE).status is CheckStatus.PASSED


def test_code_that_dynamo_cannot_keep_in_one_graph_fails_re_extraction(tmp_path: Path) -> None:
    sample = _copy(MLP, tmp_path / "s")
    model = sample / "model.py"
    model.write_text(
        model.read_text().replace(
            "act = torch.relu(linear)", "act = torch.relu(linear)\n        print(act)"
        )
    )
    report = validate_sample(sample)
    check = report.check(Constraint.STATICALLY_ANALYZABLE)
    assert check.status is CheckStatus.FAILED and "2 graphs instead of one" in check.message
    assert "torch.relu(linear)" in model.read_text().splitlines()[check.line - 1]
    assert report.check(Constraint.RUNNABLE).status is CheckStatus.PASSED


def test_re_extraction_that_records_other_ops_names_the_first_differing_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import passnet.dataset._validate as validate_module

    other = _copy(MLP, tmp_path / "other")
    (other / "model.py").write_text(
        (other / "model.py").read_text().replace("torch.relu(linear)", "torch.sigmoid(linear)")
    )
    capture = validate_module.capture_graphs

    def capture_other(module: nn.Module, args: tuple[object, ...]) -> object:
        # stands in for a Dynamo that records sigmoid where model.py says relu
        return capture(load_sample(other).build_module("cpu"), args)

    monkeypatch.setattr(validate_module, "capture_graphs", capture_other)
    check = validate_sample(MLP).check(Constraint.STATICALLY_ANALYZABLE)
    assert check.status is CheckStatus.FAILED
    assert (
        check.message
        == "re-extracted graph differs: op 1 is torch.sigmoid after re-extraction, torch.relu in model.py"
    )
    assert check.node == "relu" and check.line == 27


def test_custom_operator_must_be_declared_to_be_accessible(tmp_path: Path) -> None:
    file = tmp_path / "custom.py"
    file.write_text(CUSTOM_OP_FILE)
    (sample,) = extract_file(file, tmp_path / "out").samples
    _assert_all_passed(validate_sample(sample))
    info = json.loads((sample / "graph_net.json").read_text())
    del info["custom_ops"]
    (sample / "graph_net.json").write_text(json.dumps(info))
    check = validate_sample(sample).check(Constraint.CUSTOM_OP_ACCESSIBLE)
    assert check.status is CheckStatus.FAILED and check.node == "passnet_test_ext::twice"
    assert "not declared" in check.message and check.line is not None


def test_a_declared_custom_operator_source_must_travel_with_the_sample(tmp_path: Path) -> None:
    file = tmp_path / "custom.py"
    file.write_text(CUSTOM_OP_FILE)
    (sample,) = extract_file(file, tmp_path / "out").samples
    (sample / "custom_ops" / "custom.py").unlink()
    check = validate_sample(sample).check(Constraint.CUSTOM_OP_ACCESSIBLE)
    assert check.status is CheckStatus.FAILED
    assert "custom_ops/custom.py is declared but missing" in check.message


def test_a_folder_that_is_no_sample_is_a_report_not_an_exception(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = validate_sample(tmp_path / "empty")
    assert report.status is Status.SAMPLE_ERROR
    assert report.check(Constraint.SERIALIZABLE).status is CheckStatus.FAILED


def test_reports_round_trip_through_json_lines_and_batches_resume(tmp_path: Path) -> None:
    out = tmp_path / "reports.jsonl"
    (tmp_path / "broken").mkdir()
    paths = [MLP, tmp_path / "broken"]
    with out.open("w") as f:
        reports = validate_samples(paths, on_report=lambda r: f.write(r.to_json() + "\n"))
    assert [r.ok for r in reports] == [True, False]
    again = read_reports(out)
    assert [r.to_dict() for r in again] == [r.to_dict() for r in reports]
    assert validate_samples(paths, done={r.sample for r in again}) == []


def test_torn_last_line_is_ignored_but_a_bad_middle_line_is_an_error(tmp_path: Path) -> None:
    report = validate_sample(MLP)
    out = tmp_path / "r.jsonl"
    out.write_text(report.to_json() + "\n" + report.to_json()[:40])
    assert len(read_reports(out)) == 1
    out.write_text("{oops\n" + report.to_json() + "\n")
    with pytest.raises(InputFormatError) as info:
        read_reports(out)
    assert info.value.context["line"] == "1"
