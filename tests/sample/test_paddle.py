"""Paddle samples recognized and read without Paddle: framework, shape_patches_* variants,
Paddle's metadata, replay, the canonical hash."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from passnet.dataset import canonical_graph, graph_hash, hash_samples
from passnet.errors import DatasetError
from passnet.sample import (
    PADDLE,
    TORCH,
    find_samples,
    is_sample_dir,
    is_shape_patch_dir,
    load_sample,
    replay_paddle_arrays,
    sample_digest,
    sample_framework,
)
from passnet.status import Status
from tests.conftest import MLP

PADDLE_DATA = Path(__file__).parents[1] / "data" / "paddle"
EULER = PADDLE_DATA / "PaddleScience" / "euler_beam" / "subgraph_0"
TIMESNET = PADDLE_DATA / "PaddleX" / "TimesNet" / "subgraph_5"
PATCH = TIMESNET / "shape_patches_TimesNet_ad"


def test_the_framework_comes_from_graph_net_json_or_model_py(tmp_path: Path) -> None:
    assert sample_framework(EULER) == PADDLE
    assert sample_framework(MLP) == TORCH
    copy = tmp_path / "s"
    shutil.copytree(EULER, copy)
    (copy / "graph_net.json").unlink()  # then model.py's paddle.nn.Layer says it
    assert sample_framework(copy) == PADDLE
    assert load_sample(copy).framework == PADDLE
    assert load_sample(MLP).framework == TORCH


def test_a_shape_patch_folder_is_a_sample_with_its_parents_model(tmp_path: Path) -> None:
    assert is_shape_patch_dir(PATCH) and is_sample_dir(PATCH)
    assert not is_shape_patch_dir(TIMESNET)
    found = find_samples([PADDLE_DATA])
    assert PATCH in found and TIMESNET in found and len(found) == 6
    variant, parent = load_sample(PATCH), load_sample(TIMESNET)
    assert variant.model_source == parent.model_source
    assert variant.graph_hash == parent.graph_hash  # the same graph
    assert variant.framework == PADDLE
    # graph_net.json is the parent's; constraints are no part of Paddle's format
    assert variant.missing_files == parent.missing_files == ()
    shapes = {m.name: m.shape for m in variant.input_metas}
    assert shapes != {m.name: m.shape for m in parent.input_metas}
    # the digest follows the parent's model.py
    before = sample_digest(PATCH)
    copy = tmp_path / "t"
    shutil.copytree(TIMESNET, copy)
    assert sample_digest(copy / PATCH.name) == before
    (copy / "model.py").write_text((copy / "model.py").read_text() + "\n# edited\n")
    assert sample_digest(copy / PATCH.name) != before


def test_a_folder_named_shape_patches_without_a_parent_model_is_not_a_variant(
    tmp_path: Path,
) -> None:
    lone = tmp_path / "shape_patches_x"
    shutil.copytree(PATCH, lone)
    assert not is_shape_patch_dir(lone) and not is_sample_dir(lone)


def test_paddle_metadata_floats_written_as_float_strings_parse() -> None:
    metas = load_sample(EULER).metas
    # written as: max_val = float("0.5"), std = float("0.0441362"), ...
    assert metas["parameter_0"].max_val == 0.5
    dlinear = load_sample(PADDLE_DATA / "PaddleX" / "DLinear").weight_metas[0]
    assert dlinear.std == pytest.approx(0.0441362)


def test_replay_is_seeded_bounded_and_keeps_stored_data() -> None:
    sample = load_sample(EULER)
    a = replay_paddle_arrays(sample.param_names, sample.metas, 0)
    b = replay_paddle_arrays(sample.param_names, sample.metas, 0)
    c = replay_paddle_arrays(sample.param_names, sample.metas, 1)
    assert all(np.array_equal(x, y) for (x, _), (y, _) in zip(a, b))
    assert any(not np.array_equal(x, y) for (x, _), (y, _) in zip(a, c))
    for (array, dtype), name in zip(a, sample.param_names):
        meta = sample.metas[name]
        assert list(array.shape) == meta.shape and dtype == str(array.dtype)
        if meta.min_val is not None and meta.data is None and array.size:
            assert meta.min_val <= array.min() and array.max() <= meta.max_val
    # a range without statistics: uniform in it, not a normal clamped to it
    ranged = dict(zip(sample.param_names, a))["parameter_0"][0]
    assert ranged.shape == (1,) and 0.0 < float(ranged[0]) < 0.5
    many = replay_paddle_arrays(["parameter_0"], sample.metas, 0)[0][0]
    assert many.dtype == np.float32
    yolo = load_sample(PADDLE_DATA / "PaddleX" / "PP-YOLOE-R-L" / "subgraph_2")
    stored = [m for m in yolo.input_metas if m.data is not None]
    arrays = dict(zip(yolo.param_names, replay_paddle_arrays(yolo.param_names, yolo.metas, 3)))
    assert stored and all(arrays[m.name][0].reshape(-1).tolist() == list(m.data) for m in stored)


def test_the_canonical_hash_ignores_names_and_sees_operators(tmp_path: Path) -> None:
    copy = tmp_path / "s"
    shutil.copytree(EULER, copy)
    source = (copy / "model.py").read_text()
    assert "matmul_0" in source
    (copy / "model.py").write_text(source.replace("matmul_0", "renamed_product"))
    assert graph_hash(copy) == graph_hash(EULER)
    (copy / "model.py").write_text(source.replace("paddle._C_ops.matmul", "paddle._C_ops.add", 1))
    assert graph_hash(copy) != graph_hash(EULER)
    results = hash_samples([EULER, PATCH])
    assert [r.status for r in results] == [Status.OK, Status.OK] and results[0].op_count > 0


def test_an_unreadable_forward_statement_is_named(tmp_path: Path) -> None:
    copy = tmp_path / "s"
    shutil.copytree(EULER, copy)
    source = (copy / "model.py").read_text()
    (copy / "model.py").write_text(
        source.replace("    def forward(", "    def forward(", 1).replace(
            "        return ", "        for i in range(2):\n            pass\n        return ", 1
        )
    )
    with pytest.raises(DatasetError, match="cannot read this statement"):
        graph_hash(copy)


def test_the_hash_reads_operators_unpacked_through_a_lambda() -> None:
    """GraphNet writes multi-output operators as ``(lambda x, f: f(x))(op(...), ...)``."""
    sample = PADDLE_DATA / "PaddleX" / "TimesNet_cls" / "subgraph_1"
    assert "(lambda x, f: f(x))(" in (sample / "model.py").read_text()
    [result] = hash_samples([sample])
    assert result.status is Status.OK, result.error
    assert "paddle._C_ops.dropout" in canonical_graph(sample).ops


def test_the_hash_reads_python_operators_on_values_by_reference(tmp_path: Path) -> None:
    """Some samples pass ``x % paddle.cast(y, x.dtype)`` to an operator, in plain Python:
    read, and without the variables' names (``x.dtype`` is an attribute of a value)."""
    copy = tmp_path / "s"
    shutil.copytree(EULER, copy)
    source = (copy / "model.py").read_text()
    call = "paddle._C_ops.add(matmul_0, parameter_6)"
    assert call in source
    changed = "paddle._C_ops.add(matmul_0 % paddle.cast(parameter_6, matmul_0.dtype), parameter_6)"
    (copy / "model.py").write_text(source.replace(call, changed))
    first = graph_hash(copy)
    renamed = (copy / "model.py").read_text().replace("matmul_0", "product_0")
    (copy / "model.py").write_text(renamed)
    assert graph_hash(copy) == first
    (copy / "model.py").write_text(renamed.replace("product_0 % ", "product_0 // "))
    assert graph_hash(copy) != first
