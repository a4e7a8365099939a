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
from passnet.task import (
    ENTRY_SCRIPT,
    MANIFEST_FILE,
    TASK_SCHEMA_VERSION,
    TaskError,
    TaskGraph,
    create_task,
    load_task,
    write_task,
)
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
    document = json.loads((root / "task.json").read_text())
    assert document == {
        "schema_version": TASK_SCHEMA_VERSION,
        "name": "pooling",
        "metadata": {},
        "graphs": [
            {"path": "graphs/splade-mini", "source": str(sample_path(SPLADE).resolve())},
            {"path": "graphs/sadhaklal_mlp-iris", "source": str(sample_path(MLP).resolve())},
        ],
    }
    assert task.graph_metadata[1] == {"source": str(sample_path(MLP).resolve())}
    assert task.schema_version == TASK_SCHEMA_VERSION


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


def test_write_task_is_the_one_writer_and_records_metadata(tmp_path: Path) -> None:
    graphs = [
        TaskGraph("graphs/float16/a", sample_path(MLP), {"dtype": "float16", "bucket": [[0, 1]]}),
        TaskGraph("graphs/float32/a", sample_path(SPLADE)),
    ]
    metadata = {"builder": "test", "op_sequence": ["F.linear"], "split": "train"}
    task = write_task(tmp_path / "t", graphs, name="mine", metadata=metadata)
    root = tmp_path / "t"
    assert task.graph_entries == ("graphs/float16/a", "graphs/float32/a")
    assert task.metadata == metadata
    assert task.graph_metadata == ({"dtype": "float16", "bucket": [[0, 1]]}, {})
    assert (root / "entry.sh").read_text() == ENTRY_SCRIPT
    assert os.stat(root / "entry.sh").st_mode & 0o777 == 0o755
    text = (root / "task.json").read_text()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert json.loads(text)["schema_version"] == TASK_SCHEMA_VERSION
    # Byte for byte: the copy is the sample's files, nothing else.
    for name in os.listdir(sample_path(MLP)):
        if name != "__pycache__":
            assert (root / "graphs/float16/a" / name).read_bytes() == (
                sample_path(MLP) / name
            ).read_bytes()


def test_write_task_copies_a_pass_dir(tmp_path: Path) -> None:
    passes = tmp_path / "passes"
    passes.mkdir()
    (passes / "Fuse.py").write_text("# a pass\n")
    (passes / "kernels.py").write_text("# a helper\n")
    (passes / MANIFEST_FILE).write_text('["Fuse"]')
    task = write_task(
        tmp_path / "t", [TaskGraph("graphs/mlp", sample_path(MLP))], name="t", pass_dir=passes
    )
    assert task.pass_names == ("Fuse",)
    assert sorted(p.name for p in task.pass_dir.iterdir()) == [
        "Fuse.py",
        "kernels.py",
        MANIFEST_FILE,
    ]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/abs/graph", "normalized relative path"),
        ("graphs/../x", "normalized relative path"),
        ("graphs//x", "normalized relative path"),
        ("pass_dir/x", "under graphs/"),
        ("graphs", "under graphs/"),
        (" graphs/x", "surrounding blanks"),
        ("graphs/a/b", "nested in another"),
        ("graphs/a", "listed twice"),
    ],
)
def test_write_task_refuses_bad_graph_paths_before_writing(
    tmp_path: Path, path: str, message: str
) -> None:
    graphs = [TaskGraph("graphs/a", sample_path(MLP)), TaskGraph(path, sample_path(MLP))]
    with pytest.raises(TaskError, match=message) as info:
        write_task(tmp_path / "t", graphs, name="t")
    assert info.value.context["field"] == "graphs[1]"
    assert not (tmp_path / "t").exists()


def test_write_task_refuses_what_it_cannot_write(tmp_path: Path) -> None:
    mlp = TaskGraph("graphs/mlp", sample_path(MLP))
    with pytest.raises(TaskError, match="not a sample folder"):
        write_task(tmp_path / "t", [TaskGraph("graphs/x", tmp_path)], name="t")
    with pytest.raises(TaskError, match="not plain JSON") as info:
        write_task(tmp_path / "t", [mlp], name="t", metadata={"when": object()})
    assert info.value.context["field"] == "metadata"
    with pytest.raises(TaskError, match='must not set "path"'):
        write_task(
            tmp_path / "t", [TaskGraph("graphs/m", sample_path(MLP), {"path": "x"})], name="t"
        )
    with pytest.raises(TaskError, match="at least one graph"):
        write_task(tmp_path / "t", [], name="t")
    with pytest.raises(TaskError, match="non-empty string"):
        write_task(tmp_path / "t", [mlp], name="")
    assert not (tmp_path / "t").exists()
    (tmp_path / "t").mkdir()
    # A pass directory that fails to load is refused, and the (empty) folder stays empty.
    with pytest.raises(PassLoadError):
        write_task(tmp_path / "t", [mlp], name="t", pass_dir=tmp_path / "nope")
    assert list((tmp_path / "t").iterdir()) == []


OLD_BENCH_TASK_JSON = {
    "graphs": [
        {
            "dtype": "float32",
            "graph_hash": "ab" * 32,
            "path": "graphs/float32/0_1/sadhaklal_mlp-iris_abababab",
            "shape_bucket": [[0, 1]],
            "source": "/data/subgraphs/sadhaklal_mlp-iris",
        }
    ],
    "kind": "fusible",
    "name": "linear_relu-0123456789",
    "op_sequence": ["F.linear", "F.relu"],
    "split": "eval",
}


def test_a_bench_task_written_before_schema_version_2_still_loads(tmp_path: Path) -> None:
    # The layout build_bench wrote before the one writer: its own sh entry.sh, a manifest
    # written by hand and a task.json without a schema_version (its BenchTask fields).
    root = tmp_path / "old"
    graph = root / "graphs/float32/0_1/sadhaklal_mlp-iris_abababab"
    shutil.copytree(sample_path(MLP), graph)
    (root / "graph_list.txt").write_text("graphs/float32/0_1/sadhaklal_mlp-iris_abababab\n")
    (root / "pass_dir").mkdir()
    (root / "pass_dir" / MANIFEST_FILE).write_text("[]\n")
    (root / "entry.sh").write_text(
        '#!/bin/sh\nexec passnet eval "$(dirname "$0")" --compiler pass_mgr "$@"\n'
    )
    (root / "task.json").write_text(json.dumps(OLD_BENCH_TASK_JSON, indent=2, sort_keys=True))
    task = load_task(root)
    assert task.name == "linear_relu-0123456789"
    assert task.schema_version == 0
    assert task.graphs == (graph.resolve(),)
    assert task.metadata == {
        "builder": "bench",
        "kind": "fusible",
        "op_sequence": ["F.linear", "F.relu"],
        "split": "eval",
    }
    assert task.graph_metadata == (
        {
            "dtype": "float32",
            "graph_hash": "ab" * 32,
            "shape_bucket": [[0, 1]],
            "source": "/data/subgraphs/sadhaklal_mlp-iris",
        },
    )
    assert task.entry is not None


def test_a_version_1_task_json_still_loads(tmp_path: Path) -> None:
    root = _task(tmp_path)
    (root / "task.json").write_text('{"schema_version": 1, "name": "old"}\n')
    task = load_task(root)
    assert (task.name, task.schema_version, task.metadata) == ("old", 1, {})
    assert task.graph_metadata == ({},)
    (root / "task.json").write_text('{"name": "unversioned"}')  # hand-written, name only
    task = load_task(root)
    assert (task.name, task.schema_version, task.metadata) == ("unversioned", 0, {})
    (root / "task.json").unlink()
    assert (load_task(root).name, load_task(root).schema_version) == ("t", None)


@pytest.mark.parametrize(
    ("document", "message", "field"),
    [
        ({"schema_version": 99, "name": "x"}, "newer than this passnet", "schema_version"),
        ({"schema_version": "2", "name": "x"}, "positive integer", "schema_version"),
        ({"schema_version": 0, "name": "x"}, "positive integer", "schema_version"),
        ({"schema_version": 2, "name": "x", "metadata": []}, "JSON object", "metadata"),
        ({"schema_version": 2, "name": "x", "graphs": [{"dtype": 1}]}, '"path"', "graphs[0].path"),
        ({"schema_version": 2, "name": 3}, 'string "name"', "name"),
    ],
)
def test_a_bad_task_json_names_the_field(
    tmp_path: Path, document: dict, message: str, field: str
) -> None:
    root = _task(tmp_path)
    (root / "task.json").write_text(json.dumps(document))
    with pytest.raises(TaskError, match=message) as info:
        load_task(root)
    assert info.value.context["file"] == "task.json"
    assert info.value.context["field"] == field


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
