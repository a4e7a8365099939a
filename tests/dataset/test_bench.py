"""PassBench task assembly: bucketing, sampling, aggregation, a deterministic leak-free split."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

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


def test_the_candidate_step_in_children_two_at_a_time_gives_the_same_tree(
    subgraphs: Path, tmp_path: Path
) -> None:
    """The candidate step is a dataset stage: read in isolated children, on an executor
    with two jobs, the samples give the tasks that reading them in this process gives."""
    from passnet.runner import LocalExecutor

    build_bench(subgraphs, tmp_path / "here", seed=3)
    with LocalExecutor(["cpu", "cpu"]) as two:
        build_bench(subgraphs, tmp_path / "children", seed=3, isolated=True, executor=two)
    assert tree(tmp_path / "children") == tree(tmp_path / "here") != {}


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


def test_catalog_records_tasks_with_their_source_samples_and_kinds(
    subgraphs: Path, tmp_path: Path
) -> None:
    from passnet.dataset import Catalog

    with Catalog(tmp_path / "catalog.sqlite") as catalog:
        result = build_bench(subgraphs, tmp_path / "bench", kinds=["fusible"], catalog=catalog)
        tasks = catalog.tasks()
        kinds = {r.kind for r in catalog.samples()}
        counts = dict(catalog.counts("kind"))
    assert sorted(t.name for t in tasks) == sorted(t.name for t in result.tasks)
    assert all(t.split in ("train", "eval") and t.samples for t in tasks)
    # A task's graphs are copies of subgraphs and variants: those are its samples, with
    # their own kinds; no copy is counted as a whole graph.
    assert kinds == {"fusible", "variant"} and "graph" not in counts
    n_graphs = sum(len(t.graphs) for t in result.tasks)
    assert sum(counts.values()) == n_graphs
    by_name = {t.name: t for t in result.tasks}
    for t in tasks:
        sources = sorted(g["source"] for g in by_name[t.name].graphs)
        assert sorted(str(Path(s)) for s in t.samples) == sorted(
            str(Path(s).resolve()) for s in sources
        )
        assert [g["path"] for g in t.extra["graphs"]] == [g["path"] for g in by_name[t.name].graphs]


def test_generalize_catalogues_its_variants(tmp_path: Path) -> None:
    from passnet.dataset import Catalog

    decompose_samples([MLP], tmp_path / "dec", ["single-op"])
    with Catalog(tmp_path / "catalog.sqlite") as catalog:
        results = generalize_samples(
            [tmp_path / "dec"],
            tmp_path / "var",
            dtypes=["float16"],
            shape_factors=[],
            catalog=catalog,
        )
        variants = catalog.samples(kind="variant")
    written = [v for r in results for v in r.variants if v.status.value == "written"]
    assert written and len(variants) == len(written)
    assert all(v.provenance["generalization"]["dtype"] == "float16" for v in variants)


def test_graphs_are_filed_under_their_declared_dtype_or_most_of_their_bytes(tmp_path: Path) -> None:
    from passnet.dataset._bench import graph_dtype
    from passnet.sample import TensorMeta, write_sample

    source = "import torch\n\nclass GraphModule(torch.nn.Module):\n    def forward(self, {}):\n        return ({},)\n"

    def sample(name: str, metas: list[TensorMeta], graph_net: dict | None = None) -> Path:
        params = ", ".join(f"{m.name}: torch.Tensor" for m in metas)
        body = " + ".join(f"{m.name}.sum()" for m in metas) or "torch.arange(4) + 0.5"
        return write_sample(
            tmp_path / name, source.format(params, body), metas, graph_net=graph_net
        )

    momentum = TensorMeta("L_momentum_", [], torch.float64, data=[0.1])
    stats = TensorMeta("L_running_mean_", [64], torch.float32, mean=0.0, std=1.0)
    half = TensorMeta("L_x_", [8, 64, 16, 16], torch.float16, mean=0.0, std=1.0)
    full = TensorMeta("L_x_", [8, 64, 16, 16], torch.float32, mean=0.0, std=1.0)
    # a 0-dim float64 momentum first, then float32 activations: float32 (yolo11n-cls)
    assert graph_dtype(load_sample(sample("yolo", [momentum, full]))) == "float32"
    # float32 running statistics first, float16 activations: float16 (a batch-norm variant)
    assert graph_dtype(load_sample(sample("bn", [stats, half]))) == "float16"
    declared = sample("declared", [stats, full], {"generalization": {"dtype": "bfloat16"}})
    assert graph_dtype(load_sample(declared)) == "bfloat16"
    cast = sample("cast", [stats, full], {"dtype_generalization": {"dtype": "torch.float16"}})
    assert graph_dtype(load_sample(cast)) == "float16"
    ints = TensorMeta("L_ids_", [2, 7], torch.int64, data=list(range(14)))
    assert graph_dtype(load_sample(sample("ids", [ints]))) == "int64"
    assert graph_dtype(load_sample(sample("constant", []))) is None


def test_input_less_graphs_are_left_out_with_the_reason(tmp_path: Path) -> None:
    from passnet.sample import write_sample

    constant = write_sample(
        tmp_path / "in" / "arange",
        "import torch\n\nclass GraphModule(torch.nn.Module):\n    def forward(self):\n"
        "        return (torch.arange(4) + 0.5,)\n",
        [],
    )
    result = build_bench([tmp_path / "in"], tmp_path / "bench")
    assert result.tasks == []
    assert result.skipped == [
        {
            "path": str(constant),
            "reason": "no tensor inputs: a constant computation (nothing for a pass to rewrite "
            "at run time)",
        }
    ]
    assert not (tmp_path / "bench" / "train").exists()


def test_a_float16_batch_norm_variant_is_a_float16_graph(tmp_path: Path) -> None:
    decompose_samples([BASELINE3D], tmp_path / "dec", ["single-op"])
    norms = [
        p
        for p in find_samples([tmp_path / "dec"])
        if load_sample(p).graph_net["subgraph"]["op_sequence"] == ["F.batch_norm"]
    ]
    generalize_samples(norms[:1], tmp_path / "var", dtypes=["float16"], shape_factors=[])
    (variant,) = find_samples([tmp_path / "var"])
    sample = load_sample(variant)
    assert sample.graph_net["generalization"]["protected_float32"]  # statistics stay float32
    result = build_bench([norms[0], variant], tmp_path / "bench", eval_fraction=0.0)
    (task,) = result.tasks
    assert sorted(g["path"].split("/")[1] for g in task.graphs) == ["float16", "float32"]


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


def test_generalizing_the_tasks_sources_gives_the_tasks_their_variants(
    subgraphs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two passes: the draft's sources are generalized, the final build takes the variants."""
    from passnet.cli import main

    dec = subgraphs / "dec"
    sources = tmp_path / "used.txt"
    assert (
        main(
            [
                "bench",
                "build",
                str(dec),
                "--out",
                str(tmp_path / "draft"),
                "--sources",
                str(sources),
            ]
        )
        == 0
    )
    draft = json.loads((tmp_path / "draft" / "manifest.json").read_text())
    listed = sources.read_text().splitlines()
    task_sources = [g["source"] for t in draft["tasks"] for g in t["graphs"]]
    assert listed == list(dict.fromkeys(task_sources))  # each once, in task order
    assert 0 < len(listed) < len(find_samples([dec]))  # not every subgraph is in a task
    assert "source samples of the tasks' graphs" in capsys.readouterr().out

    variants = tmp_path / "var"
    generalize_samples(listed, variants, root=dec, dtypes=["float16"], shape_factors=[])
    final = build_bench([dec, variants], tmp_path / "final")
    assert [t.op_sequence for t in final.tasks] == [t["op_sequence"] for t in draft["tasks"]]
    assert [t.split for t in final.tasks] == [t["split"] for t in draft["tasks"]]
    dtypes = {g["dtype"] for t in final.tasks for g in t.graphs}
    assert "float16" in dtypes and "float16" not in {
        g["dtype"] for t in draft["tasks"] for g in t["graphs"]
    }
