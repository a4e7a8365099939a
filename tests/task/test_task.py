"""Tasks in the PassBench layout, and dtype variants of samples."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from passnet.dataset import cast_sample
from passnet.errors import PassLoadError, SampleError
from passnet.sample import TensorMeta, find_samples, load_sample, write_sample
from passnet.task import MANIFEST_FILE, TaskError, create_task, load_task
from tests.passes.conftest import MLP, SPLADE, sample_path


def test_create_task_writes_the_layout_and_load_task_reads_it(tmp_path: Path) -> None:
    task = create_task(tmp_path / "t", [sample_path(SPLADE), sample_path(MLP)], name="pooling")
    root = tmp_path / "t"
    assert task.name == "pooling"
    assert task.graph_entries == ("graphs/splade-mini", "graphs/sadhaklal_mlp-iris")
    assert [g.name for g in task.graphs] == ["splade-mini", "sadhaklal_mlp-iris"]
    assert (
        root / "graph_list.txt"
    ).read_text() == "graphs/splade-mini\ngraphs/sadhaklal_mlp-iris\n"
    assert json.loads((root / "pass_dir" / MANIFEST_FILE).read_text()) == []
    assert task.pass_names == ()
    entry = (root / "entry.sh").read_text()
    assert 'passnet eval "$(dirname "$0")" --compiler pass_mgr "$@"' in entry
    assert os.access(root / "entry.sh", os.X_OK)
    assert task.compiler_config() == {"pass_dir": str((root / "pass_dir").resolve())}
    # The copies are samples, found the way `passnet eval TASK` finds them.
    assert [p.name for p in find_samples([root])] == ["splade-mini", "sadhaklal_mlp-iris"]
    assert load_sample(task.graphs[0]).graph_hash == load_sample(sample_path(SPLADE)).graph_hash
    assert load_task(root) == task


def test_samples_with_the_same_folder_name_get_distinct_graph_folders(tmp_path: Path) -> None:
    other = tmp_path / "other" / "sadhaklal_mlp-iris"
    shutil.copytree(sample_path(MLP), other)
    task = create_task(tmp_path / "t2", [sample_path(MLP), other])
    assert task.name == "t2"
    assert task.graph_entries == ("graphs/sadhaklal_mlp-iris", "graphs/sadhaklal_mlp-iris_2")


def test_create_task_refuses_a_non_empty_folder_and_broken_samples(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x").write_text("")
    with pytest.raises(TaskError, match="not empty"):
        create_task(tmp_path / "t", [sample_path(MLP)])
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.py").write_text("import torch\n")
    with pytest.raises(SampleError):
        create_task(tmp_path / "t3", [broken])
    assert not (tmp_path / "t3").exists()


def _task(tmp_path: Path) -> Path:
    create_task(tmp_path / "t", [sample_path(MLP)])
    return tmp_path / "t"


@pytest.mark.parametrize(
    ("graph_list", "message", "line"),
    [
        ("graphs/nope\n", "does not exist", 1),
        (
            "graphs/sadhaklal_mlp-iris\n\ngraphs/sadhaklal_mlp-iris\n",
            "listed twice (first on line 1)",
            3,
        ),
        ("# only a comment\n", "lists no graph", None),
        ("/abs/path\n", "is absolute", 1),
        ("../outside\n", "outside the task folder", 1),
        ("pass_dir\n", "has no model.py", 1),
    ],
)
def test_a_bad_graph_list_names_file_and_line(
    tmp_path: Path, graph_list: str, message: str, line: int | None
) -> None:
    root = _task(tmp_path)
    (tmp_path / "outside").mkdir()
    (root / "graph_list.txt").write_text(graph_list)
    with pytest.raises(TaskError) as info:
        load_task(root)
    assert message in info.value.message
    assert info.value.context["file"] == "graph_list.txt"
    assert info.value.context.get("line") == (str(line) if line else None)


def test_missing_pieces_are_precise_errors(tmp_path: Path) -> None:
    root = _task(tmp_path)
    (root / "pass_dir" / MANIFEST_FILE).write_text('["Missing"]')
    with pytest.raises(PassLoadError, match="no file Missing.py"):
        load_task(root)
    (root / "pass_dir" / MANIFEST_FILE).unlink()
    (root / "pass_dir").rmdir()
    with pytest.raises(TaskError, match="missing pass_dir/"):
        load_task(root)
    (root / "graph_list.txt").unlink()
    with pytest.raises(TaskError, match="missing graph_list.txt"):
        load_task(root)


def test_const_pass_dir_is_part_of_the_compiler_config(tmp_path: Path) -> None:
    root = _task(tmp_path)
    (root / "const_pass_dir").mkdir()
    (root / "const_pass_dir" / MANIFEST_FILE).write_text("[]")
    task = load_task(root)
    assert task.compiler_config()["const_pass_dir"] == str((root / "const_pass_dir").resolve())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cast_sample_keeps_batch_norm_parameters_float32_and_runs(
    tmp_path: Path, dtype: torch.dtype
) -> None:
    src = sample_path("torchvision/resnet18")
    dst = cast_sample(src, tmp_path / "v", dtype)
    variant = load_sample(dst)
    metas = variant.metas
    bn = "L_self_modules_bn1_buffers_running_var_"
    assert metas[bn].dtype == torch.float32
    assert metas["L_self_modules_bn1_parameters_weight_"].dtype == torch.float32
    assert metas["L_self_modules_conv1_parameters_weight_"].dtype == dtype
    assert metas["L_x_"].dtype == dtype
    assert variant.model_source == load_sample(src).model_source
    info = variant.graph_net["dtype_generalization"]
    assert info["dtype"] == str(dtype) and bn in info["kept_float32"]
    assert variant.graph_hash != load_sample(src).graph_hash
    with torch.no_grad():
        (out,) = variant.build_module("cpu")(*variant.replay_inputs("cpu"))
    assert out.dtype == dtype


def test_cast_sample_casts_everything_without_normalization(tmp_path: Path) -> None:
    variant = load_sample(cast_sample(sample_path(SPLADE), tmp_path / "v", "bfloat16"))
    floats = {m.dtype for m in variant.weight_metas if m.dtype.is_floating_point}
    assert floats == {torch.bfloat16}
    assert {m.dtype for m in variant.weight_metas if not m.dtype.is_floating_point} == {torch.int64}


def test_cast_sample_reports_a_variant_that_cannot_run(tmp_path: Path) -> None:
    # model.py builds a float32 tensor and matmuls it with the (cast) input: no variant runs.
    source = (
        "import torch\n\n\nclass GraphModule(torch.nn.Module):\n"
        "    def forward(self, L_x_: torch.Tensor):\n"
        "        w = torch.ones((4, 4), dtype=torch.float32)\n"
        "        return (torch.matmul(L_x_, w),)\n"
    )
    src = write_sample(
        tmp_path / "src", source, [TensorMeta("L_x_", [2, 4], torch.float32, mean=0.0, std=1.0)]
    )
    with pytest.raises(SampleError, match="does not run eagerly") as info:
        cast_sample(src, tmp_path / "dst", torch.float16)
    assert "expected" in info.value.message or "dtype" in info.value.message
    assert not (tmp_path / "dst").exists()


def test_cast_sample_needs_a_floating_dtype(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="floating dtype"):
        cast_sample(sample_path(MLP), tmp_path / "v", torch.int32)
