"""PassBench task assembly: bucketing, sampling, aggregation, a deterministic leak-free split."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from passnet.dataset import decompose_samples, generalize_samples
from passnet.dataset._bench import (
    BenchResult,
    BenchTask,
    _task_kind,
    _task_measurement,
    allocate_quotas,
    build_bench,
    shape_bucket,
    write_candidate_list,
)
from passnet.errors import DatasetError
from passnet.record import Correctness, EvalRecord, OutputCheck, append_jsonl
from passnet.sample import find_samples, load_sample
from passnet.status import Status
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


def _absolute_parents(inputs: Path) -> None:
    """Make the inputs' ``graph_net.json`` name their parents by absolute paths into the
    folder they lie in, as an older passnet wrote them (the path the stage was given)."""
    fusible = inputs / "dec" / "transformers-auto-model" / BERT.name / "fusible"
    for file in inputs.rglob("graph_net.json"):
        graph_net = json.loads(file.read_text())
        for key, base in (("subgraph", inputs / "corpus"), ("generalization", fusible)):
            if key in graph_net:
                graph_net[key]["parent"] = str(base / graph_net[key]["parent"])
        file.write_text(json.dumps(graph_net, indent=4) + "\n")


def test_the_tree_does_not_depend_on_the_folder_the_inputs_lie_in(
    subgraphs: Path, tmp_path: Path
) -> None:
    """Sources, parents and ranges are relative: the same inputs copied to two absolute
    folders give byte-identical benchmarks (task.json, manifest and every copied
    graph_net.json included), also when the inputs' graph_net.json name their parents by
    absolute paths into those folders."""
    one = shutil.copytree(subgraphs, tmp_path / "one" / "in")
    two = shutil.copytree(subgraphs, tmp_path / "elsewhere" / "deeper" / "in")
    build_bench(one, tmp_path / "a", seed=2)
    build_bench(two, tmp_path / "b", seed=2)
    a, b = tree(tmp_path / "a"), tree(tmp_path / "b")
    assert a and a == b
    for copy in (one, two):
        _absolute_parents(copy)
    assert str(one) in (next(one.rglob("fusible/*/graph_net.json"))).read_text()
    build_bench(one, tmp_path / "c", seed=2)
    build_bench(two, tmp_path / "d", seed=2)
    assert tree(tmp_path / "c") == tree(tmp_path / "d") == a
    for path in (tmp_path / "c").rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert str(tmp_path) not in text and str(subgraphs) not in text, path
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    graph = next(g for t in manifest["tasks"] for g in t["graphs"] if t["kind"] == "fusible")
    # decompose named its parent relative to the corpus; the cut range is the folder's
    assert graph["parent"].split("/")[0] in ("transformers-auto-model", "mmpose")
    start, stop = graph["range"]
    assert graph["source"].startswith(f"dec/{graph['parent']}/fusible/{start:04d}-{stop:04d}")
    # a copied graph names its parent as the manifest does, a variant its origin's source
    sources = {g["graph_hash"]: g["source"] for t in manifest["tasks"] for g in t["graphs"]}
    variants = 0
    for task in manifest["tasks"]:
        for g in task["graphs"]:
            graph_net = json.loads(
                (
                    tmp_path / "a" / task["split"] / task["name"] / g["path"] / "graph_net.json"
                ).read_text()
            )
            assert graph_net["subgraph"]["parent"] == g["parent"]
            if "generalization" in graph_net:
                origin = graph_net["generalization"]
                assert origin["parent"] == sources.get(
                    origin["parent_graph_hash"], origin["parent"]
                )
                assert origin["parent"].startswith(
                    f"dec/transformers-auto-model/{BERT.name}/fusible/"
                )
                variants += 1
    assert variants


def test_the_manifest_lists_every_file_with_its_hash_and_the_splits(
    subgraphs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "bench"
    result = build_bench(subgraphs, out, seed=0, version="3")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema_version"] == 2 and manifest["name"] == "passbench-gn"
    assert manifest["version"] == "3"
    assert manifest["build"]["eval_fraction"] == 0.2 and manifest["build"]["selection"] is None
    assert {"seed", "stride", "max_graphs_per_task", "eval_tasks", "torch", "passnet"} <= set(
        manifest["build"]
    )
    files = {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in out.rglob("*")
        if p.is_file() and p.name != "manifest.json"
    }
    assert manifest["files"] == files and list(manifest["files"]) == sorted(files)
    for split, counts in manifest["splits"].items():
        tasks = result.split(split)
        assert counts["tasks"] == len(tasks)
        assert counts["graphs"] == sum(len(t.graphs) for t in tasks)
        assert counts["bytes"] == sum(
            (out / f).stat().st_size for f in files if f.startswith(f"{split}/")
        )
    # the manifest's own text is deterministic: indent 2, sorted keys
    text = (out / "manifest.json").read_text()
    assert text == json.dumps(manifest, indent=2, sort_keys=True) + "\n"


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
    train = {tuple(t.op_sequence) for t in result.split("train-fusible")}
    evaluation = {tuple(t.op_sequence) for t in result.split("eval-fusible")}
    single = {tuple(t.op_sequence) for t in result.split("single-op")}
    assert train and evaluation and single and not train & evaluation
    assert len(train | evaluation | single) == len(result.tasks)  # one task per op sequence
    assert {t.split for t in result.tasks} == {"train-fusible", "eval-fusible", "single-op"}
    assert all(len(t.op_sequence) == 1 for t in result.split("single-op"))
    assert all(
        len(t.op_sequence) > 1 and t.kind == "fusible"
        for t in result.tasks
        if t.split != "single-op"
    )
    assert sorted(p.name for p in (tmp_path / "bench").iterdir()) == [
        "eval-fusible",
        "manifest.json",
        "single-op",
        "train-fusible",
    ]
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
        "family": "transformers-auto-model",
        "selection": None,
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
    assert all(t.split in ("train-fusible", "eval-fusible") and t.samples for t in tasks)
    # A task's graphs are copies of subgraphs and variants: those are its samples, with
    # their own kinds; no copy is counted as a whole graph.
    assert kinds == {"fusible", "variant"} and "graph" not in counts
    n_graphs = sum(len(t.graphs) for t in result.tasks)
    assert sum(counts.values()) == n_graphs
    by_name = {t.name: t for t in result.tasks}
    for t in tasks:
        sources = sorted(by_name[t.name].source_paths)
        assert sorted(str(Path(s)) for s in t.samples) == sorted(
            str(Path(s).resolve()) for s in sources
        )
        assert all(Path(s).is_relative_to(subgraphs) for s in sources)
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
            "path": constant.name,
            "reason": "no tensor inputs: a constant computation (nothing for a pass to rewrite "
            "at run time)",
        }
    ]
    assert not (tmp_path / "bench" / "train-fusible").exists()


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
    assert result.tasks == [] and result.skipped[0]["path"] == "broken"


def test_cli_bench_build_prints_the_split(
    subgraphs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.cli import main

    assert (
        main(["bench", "build", str(subgraphs), "--out", str(tmp_path / "b"), "--kind", "fusible"])
        == 0
    )
    out = capsys.readouterr().out
    assert "train-fusible" in out and "eval-fusible" in out
    assert (tmp_path / "b" / "manifest.json").is_file()


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
    task_sources = [str(dec / g["source"]) for t in draft["tasks"] for g in t["graphs"]]
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


def test_a_sequence_seen_with_several_kinds_takes_the_scarcer_kind() -> None:
    ops = ["F.linear", "F.relu"]
    assert _task_kind(ops, ["classical", "fusible"]) == "fusible"
    assert _task_kind(ops, ["graph", "classical"]) == "classical"
    assert _task_kind(ops, ["graph"]) == "graph"
    assert _task_kind(["F.linear"], ["fusible", "classical"]) == "single-op"  # one operator


def test_quotas_follow_candidate_counts_with_a_floor_of_one() -> None:
    # proportional, rounded by largest remainder: 10 * (6, 3, 1) / 10
    assert allocate_quotas(10, {"a": 60, "b": 30, "c": 10}) == {"a": 6, "b": 3, "c": 1}
    # a family whose share is below one gets one; the others share the rest
    assert allocate_quotas(4, {"big": 100, "tiny": 1, "small": 2}) == {
        "big": 2,
        "small": 1,
        "tiny": 1,
    }
    # equal remainders: the family first by name takes the extra task
    assert allocate_quotas(3, {"y": 10, "x": 10}) == {"x": 2, "y": 1}
    # no more than there are: every candidate is chosen
    assert allocate_quotas(50, {"a": 3, "b": 2}) == {"a": 3, "b": 2}
    # more families than tasks: one each to the largest, ties by name
    assert allocate_quotas(2, {"a": 1, "b": 5, "c": 1}) == {"a": 1, "b": 1, "c": 0}
    for n in range(1, 40):
        quotas = allocate_quotas(n, {"a": 17, "b": 9, "c": 2, "d": 1})
        assert sum(quotas.values()) == min(n, 29)
        assert all(quotas[f] <= c for f, c in {"a": 17, "b": 9, "c": 2, "d": 1}.items())
        assert n < 4 or min(quotas.values()) >= 1


def _inductor_record(path: str, graph_hash: str, status: Status, speedup: float | None, ok: bool):
    correctness = None
    if status.ran:
        correctness = Correctness(
            num_outputs=1,
            outputs=[OutputCheck(0, "float32", "float32", [2], [2])],
            equal=False,
            allclose={t: ok for t in range(-10, 2)},
            max_diff=1e-6,
            mean_diff=1e-7,
            draws=2,
        )
    return EvalRecord(
        graph=path,
        graph_hash=graph_hash,
        compiler="inductor",
        compiler_config={},
        compiler_config_hash="0" * 16,
        device="cuda",
        status=status,
        correctness=correctness,
        speedup_e2e=speedup,
    )


def test_long_tail_selection_from_inductor_records(subgraphs: Path, tmp_path: Path) -> None:
    """Build, list the representatives, measure them (here: synthetic Inductor records
    written by the record writer), build again: the weakest tasks of each family are
    chosen, in proportion to the families' candidates, the same bytes every time."""
    dec = subgraphs / "dec"
    draft = build_bench(dec, tmp_path / "draft", kinds=["fusible"])
    reps = write_candidate_list(draft, tmp_path / "lists" / "reps.txt")
    listed = reps.read_text().splitlines()
    assert all(not Path(line).is_absolute() for line in listed)
    assert [p.resolve() for p in find_samples([reps])] == [
        p.resolve() for p in draft.representatives()
    ]
    by_family: dict[str, list] = {}
    for task in draft.tasks:
        by_family.setdefault(task.family, []).append(task)
    assert sorted(by_family) == ["mmpose", "transformers-auto-model"]
    hf, pose = by_family["transformers-auto-model"], by_family["mmpose"]
    assert len(hf) == 7 and len(pose) == 2
    plan = [  # (status, speedup, allclose at t = -5), in the family's task order
        (Status.OK, 2.0, True),  # fast
        (Status.ACCURACY, 0.9, False),  # wrong: not allclose at the baseline tolerance
        (Status.OK, 0.5, True),  # slow
        (Status.COMPILE_ERROR, None, False),  # wrong: Inductor failed
        (Status.OK, 1.1, True),  # marginal
        (Status.SAMPLE_ERROR, None, False),  # unmeasured: eager failed, not Inductor
    ]  # the remaining tasks have no record: unmeasured
    (tmp_path / "run").mkdir()
    records = tmp_path / "run" / "results.jsonl"
    for task, (status, speedup, ok) in zip(hf, plan):
        graph = task.graphs[0]
        record = _inductor_record(
            f"{task.split}/{task.name}/{graph['path']}", graph["graph_hash"], status, speedup, ok
        )
        append_jsonl(records, record.to_dict())
    for task, speedup in zip(pose, (3.0, 1.05)):
        graph = task.graphs[0]
        append_jsonl(
            records,
            _inductor_record(
                graph["path"], graph["graph_hash"], Status.OK, speedup, True
            ).to_dict(),
        )
    append_jsonl(  # another compiler's record is left aside
        records,
        {
            **_inductor_record("x", hf[0].graphs[0]["graph_hash"], Status.OK, 0.1, True).to_dict(),
            "compiler": "eager",
        },
    )

    # 3 of 9 fusible candidates: mmpose's share (0.67) is raised to one, the rest go to
    # transformers-auto-model, whose two wrong tasks come first (speedup 0.9, then none)
    result = build_bench(
        dec, tmp_path / "a", kinds=["fusible"], eval_tasks=3, measurements=[records]
    )
    chosen = {t.name: t.selection for t in result.split("eval-fusible")}
    assert {n: s.category for n, s in chosen.items()} == {
        hf[1].name: "wrong",
        hf[3].name: "wrong",
        pose[1].name: "marginal",
    }
    assert chosen[hf[1].name].rank == 0 and chosen[hf[3].name].rank == 1
    assert chosen[pose[1].name].speedup == 1.05 and chosen[pose[1].name].family == "mmpose"
    assert all(t.selection is None for t in result.split("train-fusible"))
    assert result.warnings == [
        "fusible: 2 of 9 candidate tasks have no usable Inductor record: they train "
        "(measure the --candidates list of this build)"
    ]
    assert len(result.split("train-fusible")) == len(draft.tasks) - 3
    summary = result.selection_summary["fusible"]
    assert summary["quotas"] == {"mmpose": 1, "transformers-auto-model": 2}
    hf_counts = summary["families"]["transformers-auto-model"]
    assert hf_counts["wrong"] == {"candidates": 2, "eval": 2}
    assert hf_counts["unmeasured"]["candidates"] == len(hf) - 5
    assert hf_counts["fast"] == {"candidates": 1, "eval": 0}
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    digest = hashlib.sha256(records.read_bytes()).hexdigest()
    assert manifest["build"]["selection"]["measurements_sha256"] == [digest]
    assert manifest["build"]["selection"]["rule"] == "long-tail-v1"
    assert manifest["build"]["eval_fraction"] is None
    assert manifest["selection_summary"] == result.selection_summary
    task_json = json.loads(
        (tmp_path / "a" / "eval-fusible" / pose[1].name / "task.json").read_text()
    )
    assert task_json["metadata"]["selection"]["category"] == "marginal"

    # the same inputs and records: the same bytes
    build_bench(dec, tmp_path / "b", kinds=["fusible"], eval_tasks=3, measurements=[records])
    assert tree(tmp_path / "a") == tree(tmp_path / "b")

    # 6 of the 7 measured: shares 1.71 and 4.29, the larger remainder rounds up: mmpose
    # gets both; the unmeasured never evaluate (nothing says they are in the long tail)
    six = build_bench(dec, tmp_path / "c", kinds=["fusible"], eval_tasks=6, measurements=[records])
    assert six.selection_summary["fusible"]["quotas"] == {
        "mmpose": 2,
        "transformers-auto-model": 4,
    }
    trained = {t.name for t in six.split("train-fusible")}
    assert trained == {hf[0].name, hf[5].name, hf[6].name}  # fast, then the unmeasured
    # more than are measured: every measured task is an eval task, with a warning
    every = build_bench(
        dec, tmp_path / "d", kinds=["fusible"], eval_tasks=50, measurements=[records]
    )
    assert len(every.split("eval-fusible")) == 7
    assert {t.name for t in every.split("train-fusible")} == {hf[5].name, hf[6].name}
    assert any("7 measured candidate task(s)" in w for w in every.warnings)


def test_measurements_of_two_inductor_configurations_are_refused(
    subgraphs: Path, tmp_path: Path
) -> None:
    records = tmp_path / "results.jsonl"
    one = _inductor_record("a", "1" * 64, Status.OK, 1.0, True)
    append_jsonl(records, one.to_dict())
    append_jsonl(records, {**one.to_dict(), "graph": "b", "compiler_config_hash": "f" * 16})
    with pytest.raises(DatasetError, match="mix 2 Inductor configurations"):
        build_bench(subgraphs, tmp_path / "out", measurements=[records])
    other = tmp_path / "eager.jsonl"
    append_jsonl(other, {**one.to_dict(), "compiler": "eager"})
    with pytest.raises(DatasetError, match="no record of compiler 'inductor'"):
        build_bench(subgraphs, tmp_path / "out", measurements=[other])
    with pytest.raises(DatasetError, match="exclude each other"):
        build_bench(subgraphs, tmp_path / "out", measurements=[records], eval_fraction=0.2)
    assert not (tmp_path / "out").exists()


def test_cli_eval_fraction_with_measurements_is_a_usage_error(
    subgraphs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from passnet.cli import main

    records = tmp_path / "results.jsonl"
    append_jsonl(records, _inductor_record("a", "1" * 64, Status.OK, 1.0, True).to_dict())
    argv = ["bench", "build", str(subgraphs), "--out", str(tmp_path / "b")]
    assert main([*argv, "--measurements", str(records), "--eval-fraction", "0.1"]) == 2
    assert "exclude each other" in capsys.readouterr().err
    assert main([*argv, "--candidates", str(tmp_path / "b" / "reps.txt")]) == 2
    assert not (tmp_path / "b").exists()
    assert main([*argv, "--kind", "fusible", "--candidates", str(tmp_path / "reps.txt")]) == 0
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    listed = (tmp_path / "reps.txt").read_text().splitlines()
    expected = {f"b/{t['split']}/{t['name']}/{t['graphs'][0]['path']}" for t in manifest["tasks"]}
    assert len(listed) == len(expected) and set(listed) == expected  # in measurement order


def test_the_category_of_an_inductor_record() -> None:
    """wrong before slow: a failure or outputs beyond the baseline tolerance (t = -5, as
    the scorer reads the record); unmeasured: no record, the sample's own failure, or a
    correct run without a usable speedup. A contended timing still counts."""
    from passnet.dataset._bench import _categorize
    from passnet.record import CpuContention

    def category(status: Status, speedup: float | None, ok: bool = True) -> str:
        return _categorize(_inductor_record("g", "1" * 64, status, speedup, ok)).category

    assert _categorize(None).category == "unmeasured"
    assert category(Status.SAMPLE_ERROR, None) == "unmeasured"
    assert category(Status.TOO_LARGE, None) == "unmeasured"
    assert category(Status.OK, None) == "unmeasured"  # ran and correct, timing unusable
    assert category(Status.TIMEOUT, None) == "wrong"
    assert category(Status.NONFINITE, None) == "wrong"
    assert category(Status.ACCURACY, 3.0, ok=False) == "wrong"
    assert category(Status.OK, 0.999) == "slow"
    assert category(Status.OK, 1.0) == "marginal"
    assert category(Status.OK, 1.199) == "marginal"
    assert category(Status.OK, 1.2) == "fast"
    # outputs allclose only from t = -4 on: wrong at the baseline t = -5
    record = _inductor_record("g", "1" * 64, Status.OK, 2.0, True)
    record.correctness.allclose = {t: t >= -4 for t in range(-10, 2)}
    assert _categorize(record).category == "wrong"
    contended = _inductor_record("g", "1" * 64, Status.OK, 0.7, True)
    contended.cpu_contention = CpuContention(0.5, 0.6, 3, 10.0, 10.0, 0.1, True)
    assert _categorize(contended).category == "slow"


def test_a_parent_is_named_by_the_decompose_records_else_by_the_folder_layout(
    subgraphs: Path, tmp_path: Path
) -> None:
    """A sample whose decompose record was lost (its subgraphs written) still names its
    parent by where decompose put them; a subgraph outside any decompose folder by the
    relative name its graph_net.json gives (decompose's, relative to its --root); one
    whose graph_net.json holds an absolute path (an older passnet) has no parent name,
    and the build says so."""
    dec = shutil.copytree(subgraphs / "dec", tmp_path / "dec")
    records = dec / "decompose.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    kept = [line for line in lines if MLP.name not in json.loads(line)["name"]]
    assert len(kept) == len(lines) - 1
    records.write_text("".join(kept))
    result = build_bench(dec, tmp_path / "bench", kinds=["fusible"])
    mlp = [g for t in result.tasks for g in t.graphs if MLP.name in g["source"]]
    assert mlp and {g["parent"] for g in mlp} == {f"transformers-auto-model/{MLP.name}"}
    assert not result.warnings

    lone = tmp_path / "lone" / "cut"
    shutil.copytree(Path(dec / mlp[0]["source"]), lone)
    alone = build_bench(lone, tmp_path / "alone")
    (task,) = alone.tasks
    assert task.graphs[0]["parent"] == f"transformers-auto-model/{MLP.name}"
    assert task.family == "transformers-auto-model" and not alone.warnings

    graph_net = json.loads((lone / "graph_net.json").read_text())
    graph_net["subgraph"]["parent"] = str(MLP)
    (lone / "graph_net.json").write_text(json.dumps(graph_net, indent=4) + "\n")
    alone = build_bench(lone, tmp_path / "alone", overwrite=True)
    (task,) = alone.tasks
    assert task.graphs[0]["parent"] is None and task.family == "(unknown)"
    copied = tmp_path / "alone" / task.split / task.name / task.graphs[0]["path"]
    assert json.loads((copied / "graph_net.json").read_text())["subgraph"]["parent"] is None
    assert alone.warnings == [
        "1 graph(s) have no parent name: no decompose.jsonl above them names the sample "
        "they were cut from (their tasks' family is '(unknown)')"
    ]


def test_representatives_are_a_seeded_draw_of_every_kind_in_turn(tmp_path: Path) -> None:
    """The measurement list interleaves the kinds, each in its seeded order, so a prefix
    (a measurement that stops part-way) is a random draw of each kind; single-op tasks are
    not measured; the order depends on the seed, not on the task list's order."""

    def task(kind: str, i: int) -> BenchTask:
        graph = {"path": f"graphs/float32/b/{kind}{i}", "graph_hash": f"{kind}{i}"}
        return BenchTask(f"{kind}{i}", f"train-{kind}", kind, [kind, f"op{i}"], [graph])

    tasks = [task("fusible", i) for i in range(3)] + [task("classical", i) for i in range(5)]
    tasks.append(BenchTask("one", "single-op", "single-op", ["relu"], [{"path": "g"}]))

    def order(seed: int, listed: list[BenchTask]) -> list[str]:
        result = BenchResult(str(tmp_path), seed, 1, 0.2, 16, tasks=listed)
        return [p.name for p in result.representatives()]

    first = order(0, tasks)
    assert [n[:-1] for n in first] == ["fusible", "classical"] * 3 + ["classical"] * 2
    assert sorted(first) == sorted(t.graphs[0]["path"].rsplit("/", 1)[1] for t in tasks[:-1])
    assert order(0, list(reversed(tasks))) == first
    assert any(order(seed, tasks) != first for seed in range(1, 6))


def test_a_task_is_measured_by_its_first_graph_with_a_record() -> None:
    """Variants added after the measurement can come first in a task (a smaller shape
    bucket): the task is then judged by the first of its graphs that was measured, else
    by the first measured graph of its op sequence."""
    task = BenchTask(
        "t",
        "train-fusible",
        "fusible",
        ["a", "b"],
        [{"path": "v", "graph_hash": "variant"}, {"path": "s", "graph_hash": "measured"}],
    )
    record = _inductor_record("s", "measured", Status.OK, 0.5, True)
    measured, graph_hash = _task_measurement(task, {"measured": record})
    assert (measured.category, measured.speedup, graph_hash) == ("slow", 0.5, "measured")
    assert _task_measurement(task, {})[0].category == "unmeasured"
    # the cap on a task's graphs can leave the measured graph out: its op sequence's
    # other graphs still judge the task
    task.measured_hashes = ["variant", "dropped", "measured"]
    dropped = _inductor_record("d", "dropped", Status.ACCURACY, 0.9, False)
    assert _task_measurement(task, {"dropped": dropped})[0].category == "wrong"
    assert _task_measurement(task, {"dropped": dropped, "measured": record})[1] == "measured"
