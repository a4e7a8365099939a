"""PassBench task assembly: bucketing, sampling, aggregation, a deterministic leak-free split."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from passnet.dataset import decompose_samples, generalize_samples
from passnet.dataset._bench import build_bench, shape_bucket
from passnet.errors import DatasetError
from passnet.sample import find_samples, load_sample
from passnet.task import TASK_SCHEMA_VERSION, load_task
from tests.conftest import BERT, DEV, MLP

BASELINE3D = DEV / "mmpose" / "SimpleBaseline3D"


@pytest.fixture(scope="module")
def subgraphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fusible and single-op subgraphs of three dev samples, plus float16/bfloat16 variants of
    the BERT fusible ones."""
    root = tmp_path_factory.mktemp("subgraphs")
    decompose_samples([MLP, BASELINE3D, BERT], root / "dec", ["fusible", "single-op"])
    fusible = find_samples([root / "dec" / "transformers-auto-model" / BERT.name / "fusible"])
    generalize_samples(fusible, root / "var", dtypes=["float16", "bfloat16"], shape_factors=[])
    return root


def tree(path: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(path)): (p.read_bytes(), os.stat(p).st_mode)
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def test_shape_bucket_is_log2_over_4_per_dimension() -> None:
    assert shape_bucket([[1, 15, 16, 255, 256, 4096]]) == ((0, 0, 1, 1, 2, 3),)
    assert shape_bucket([[0], []]) == ((0,), ())


def test_the_same_input_and_seed_give_a_byte_identical_tree(
    subgraphs: Path, tmp_path: Path
) -> None:
    a = build_bench(subgraphs, tmp_path / "a", seed=7)
    build_bench(subgraphs, tmp_path / "b", seed=7)
    assert a.tasks and tree(tmp_path / "a") == tree(tmp_path / "b")
    build_bench(subgraphs, tmp_path / "c", seed=8)
    manifest_a = json.loads((tmp_path / "a" / "manifest.json").read_text())
    manifest_c = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert [t["split"] for t in manifest_a["tasks"]] != [t["split"] for t in manifest_c["tasks"]]


def test_no_op_sequence_is_in_both_train_and_eval(subgraphs: Path, tmp_path: Path) -> None:
    result = build_bench(subgraphs, tmp_path / "bench", seed=0, eval_fraction=0.3)
    train = {tuple(t.op_sequence) for t in result.split("train")}
    evaluation = {tuple(t.op_sequence) for t in result.split("eval")}
    assert train and evaluation and not train & evaluation
    assert len(train | evaluation) == len(result.tasks)  # one task per op sequence
    for task in result.tasks:
        for graph in task.graphs:
            sample = load_sample(tmp_path / "bench" / task.split / task.name / graph["path"])
            assert tuple(sample.graph_net["subgraph"]["op_sequence"]) == tuple(task.op_sequence)


def test_a_task_aggregates_dtypes_and_has_the_passbench_layout(
    subgraphs: Path, tmp_path: Path
) -> None:
    result = build_bench(subgraphs, tmp_path / "bench", kinds=["fusible"])
    assert {t.kind for t in result.tasks} == {"fusible"}
    mixed = [
        t
        for t in result.tasks
        if {g["dtype"] for g in t.graphs} == {"float32", "float16", "bfloat16"}
    ]
    assert mixed
    task = mixed[0]
    task_dir = tmp_path / "bench" / task.split / task.name
    listed = (task_dir / "graph_list.txt").read_text().splitlines()
    assert listed == [g["path"] for g in task.graphs] and all(
        p.startswith("graphs/") for p in listed
    )
    assert {p.split("/")[1] for p in listed} == {"float32", "float16", "bfloat16"}
    assert [Path(p) for p in find_samples([task_dir])] == [task_dir / p for p in listed]
    assert (
        json.loads((task_dir / "pass_dir" / "sorted_output_pass_rule_names.json").read_text()) == []
    )
    entry = task_dir / "entry.sh"
    assert os.access(entry, os.X_OK)
    assert 'passnet eval "$(dirname "$0")" --compiler pass_mgr "$@"' in entry.read_text()
    document = json.loads((task_dir / "task.json").read_text())
    assert document["name"] == task.name and document["schema_version"] == TASK_SCHEMA_VERSION
    loaded = load_task(task_dir)  # the one task format: passnet.task reads what bench wrote
    assert loaded.name == task.name and loaded.entry == entry.resolve()
    assert loaded.metadata == {
        "builder": "bench",
        "split": task.split,
        "kind": task.kind,
        "op_sequence": task.op_sequence,
    }
    assert list(loaded.graph_metadata) == [
        {k: v for k, v in g.items() if k != "path"} for g in task.graphs
    ]


def test_stride_keeps_every_sigma_th_subgraph_of_a_sequence(
    subgraphs: Path, tmp_path: Path
) -> None:
    full = build_bench(
        subgraphs, tmp_path / "full", kinds=["single-op"], stride=1, max_graphs_per_task=100
    )
    thin = build_bench(
        subgraphs, tmp_path / "thin", kinds=["single-op"], stride=3, max_graphs_per_task=100
    )
    n_full = sum(len(t.graphs) for t in full.tasks)
    n_thin = sum(len(t.graphs) for t in thin.tasks)
    assert 0 < n_thin < n_full
    assert len(thin.tasks) < len(full.tasks)  # sequences with fewer than σ subgraphs may keep none


def test_catalog_records_tasks(subgraphs: Path, tmp_path: Path) -> None:
    from passnet.dataset import Catalog

    with Catalog(tmp_path / "catalog.sqlite") as catalog:
        result = build_bench(subgraphs, tmp_path / "bench", kinds=["fusible"], catalog=catalog)
        tasks = catalog.tasks()
    assert sorted(t.name for t in tasks) == sorted(t.name for t in result.tasks)
    assert all(t.split in ("train", "eval") and t.samples for t in tasks)


def test_bad_options_and_a_non_empty_output_are_refused(subgraphs: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    with pytest.raises(DatasetError, match="not empty"):
        build_bench(subgraphs, tmp_path / "out")
    with pytest.raises(DatasetError, match="stride"):
        build_bench(subgraphs, tmp_path / "x", stride=0)
    broken = tmp_path / "in" / "broken"
    broken.mkdir(parents=True)
    (broken / "model.py").write_text("import torch\n")
    result = build_bench([tmp_path / "in"], tmp_path / "y")
    assert result.tasks == [] and result.skipped[0]["path"] == str(broken)


def test_cli_bench_build_prints_the_split(
    subgraphs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.cli import main

    assert (
        main(["bench", "build", str(subgraphs), "--out", str(tmp_path / "b"), "--kind", "fusible"])
        == 0
    )
    out = capsys.readouterr().out
    assert "train" in out and "eval" in out and (tmp_path / "b" / "manifest.json").is_file()
