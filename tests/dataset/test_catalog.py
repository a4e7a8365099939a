"""The SQLite catalog: samples, subgraphs, tasks, provenance, counts and op-sequence search."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from passnet.dataset import Catalog, canonical_graph
from passnet.errors import SampleError, StoreError
from tests.conftest import BERT, DEV, MLP, SYMINT_HEAD

RESNET = DEV / "torchvision" / "resnet18"


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    with Catalog(tmp_path / "catalog.sqlite") as cat:
        for path in (MLP, SYMINT_HEAD, BERT, RESNET):
            cat.add_sample(path)
        yield cat


def test_a_sample_row_holds_its_graph_facts(catalog: Catalog) -> None:
    record = catalog.get_sample(MLP)
    graph = canonical_graph(MLP)
    assert record is not None and record.path == str(MLP.resolve())
    assert (
        record.kind == "graph"
        and record.source == "huggingface_hub"
        and record.model_name == "sadhaklal/mlp-iris"
    )
    assert (
        record.graph_hash == graph.graph_hash and record.ops == graph.ops and record.op_count == 3
    )
    assert record.input_shapes == [[2, 4], [5, 4], [5], [3, 5], [3]] and set(
        record.input_dtypes
    ) == {"torch.float32"}


def test_adding_a_sample_again_updates_it(catalog: Catalog) -> None:
    catalog.add_sample(MLP, kind="variant", provenance={"tool": "test"})
    assert len(catalog.samples()) == 4
    record = catalog.get_sample(MLP)
    assert record is not None and record.kind == "variant" and record.provenance == {"tool": "test"}


def test_counts_by_source_kind_and_op_count(catalog: Catalog) -> None:
    assert dict(catalog.counts("source")) == {"huggingface_hub": 2, "timm": 1, "torchvision": 1}
    assert catalog.counts("kind") == [("graph", 4)]
    buckets = dict(catalog.counts("op_count"))
    assert buckets == {"2-3": 2, "32-63": 1, "64-127": 1}  # mlp 3, head 3, bert 62, resnet 69
    with pytest.raises(ValueError, match="choose from"):
        catalog.counts("colour")


def test_find_returns_samples_containing_an_op_sequence(catalog: Catalog) -> None:
    found = catalog.find(["linear", "gelu"])
    assert [Path(r.path).name for r, _ in found] == ["prajjwal1_bert-tiny"]
    record, at = found[0]
    assert record.ops[at : at + 2] == ["F.linear", "F.gelu"]
    conv = [Path(r.path).name for r, _ in catalog.find(["F.conv2d", "F.batch_norm", "relu"])]
    assert conv == ["resnet18"]
    assert catalog.find(["gelu", "linear", "F.layer_norm", "F.conv2d"]) == []


def test_find_matches_whole_op_names_only(catalog: Catalog) -> None:
    assert catalog.find(["near"]) == []  # no substring matches (F.linear)
    assert {Path(r.path).name for r, _ in catalog.find(["F.linear"])} == {
        "sadhaklal_mlp-iris",
        "sequencer2d_l.in1k",
        "prajjwal1_bert-tiny",
        "resnet18",
    }


def test_subgraphs_record_parent_and_range(catalog: Catalog) -> None:
    child = catalog.add_subgraph(BERT, (3, 7), MLP, kind="fusible", provenance={"by": "test"})
    (record,) = catalog.subgraphs(BERT)
    assert record.id == child and record.op_range == (3, 7) and record.kind == "fusible"
    assert record.parent == str(BERT.resolve())
    assert record.provenance == {"by": "test", "parent": str(BERT.resolve()), "range": [3, 7]}
    assert ("fusible", 1) in catalog.counts("kind")
    with pytest.raises(ValueError, match="start < stop"):
        catalog.add_subgraph(BERT, (5, 5), MLP, kind="fusible")


def test_tasks_hold_their_samples(catalog: Catalog) -> None:
    catalog.add_task(
        "linear_gelu",
        samples=[BERT, MLP],
        split="train",
        ops=["F.linear", "F.gelu"],
        extra={"bucket": 1},
    )
    (task,) = catalog.tasks()
    assert (
        task.name == "linear_gelu" and task.split == "train" and task.ops == ["F.linear", "F.gelu"]
    )
    assert task.samples == sorted([str(BERT.resolve()), str(MLP.resolve())]) and task.extra == {
        "bucket": 1
    }
    catalog.add_task("linear_gelu", samples=[MLP], split="eval")
    (task,) = catalog.tasks()
    assert task.split == "eval" and task.samples == [str(MLP.resolve())]


def test_duplicates_and_validation_outcomes(catalog: Catalog) -> None:
    catalog.mark_duplicate(SYMINT_HEAD, MLP)
    assert catalog.get_sample(SYMINT_HEAD).duplicate_of == str(MLP.resolve())
    assert len(catalog.samples(unique=True)) == 3
    assert sum(n for _, n in catalog.counts("source", unique=True)) == 3
    catalog.record_validation(MLP, "ok", [])
    assert ("ok", 1) in catalog.counts("validation")
    with pytest.raises(StoreError, match="not in the catalog"):
        catalog.record_validation(DEV, "ok", [])


def test_a_broken_sample_is_not_recorded(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "broken").mkdir()
    with pytest.raises(SampleError):
        catalog.add_sample(tmp_path / "broken")
    assert len(catalog.samples()) == 4


def test_the_catalog_persists_and_refuses_newer_schemas(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with Catalog(path) as cat:
        cat.add_sample(MLP)
    with Catalog(path) as cat:
        assert [r.name for r in cat.samples()] == ["sadhaklal_mlp-iris"]
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer"):
        Catalog(path)
