"""Recursive folding: frequent op pairs become nested symbols; motifs become op ranges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passnet.dataset import SubgraphStatus, decompose_samples
from passnet.dataset._fold import fold_sequences, motif_occurrences
from passnet.dataset._subgraph import trace_parent
from tests.conftest import BERT, DEV

BGE = DEV / "transformers-auto-model" / "bge-small-zh"

CONV_BLOCK = ["conv2d", "batch_norm", "relu"]


def corpus() -> list[list[str]]:
    return [
        ["input", *CONV_BLOCK, *CONV_BLOCK, "pool", *CONV_BLOCK, "linear"],
        ["embed", *CONV_BLOCK, "add", *CONV_BLOCK],
        ["softmax", "matmul"],
    ]


def test_folding_finds_the_repeated_motif_and_its_hierarchy() -> None:
    folding = fold_sequences(corpus())
    first, second = folding.symbols["@1"], folding.symbols["@2"]
    assert (first.left, first.right, first.count) == ("conv2d", "batch_norm", 5)
    assert (second.left, second.right) == ("@1", "relu") and second.ops == tuple(CONV_BLOCK)
    assert [t[0] for t in folding.folded[1]] == ["embed", "@2", "add", "@2"]


def test_pairs_seen_once_are_not_folded() -> None:
    folding = fold_sequences(corpus())
    assert all(("softmax", "matmul") != (s.left, s.right) for s in folding.symbols.values())
    assert folding.folded[2] == [("softmax", 0, 1), ("matmul", 1, 2)]
    with pytest.raises(ValueError, match="at least 2"):
        fold_sequences(corpus(), min_count=1)


def test_occurrences_are_op_ranges_within_the_bounds() -> None:
    folding = fold_sequences(corpus())
    occ = motif_occurrences(folding, 0, min_ops=3, max_ops=3, nested=False)
    assert [(o.start, o.stop) for o in occ] == [(1, 4), (4, 7), (8, 11)]
    assert all(corpus()[0][o.start : o.stop] == CONV_BLOCK for o in occ)
    assert all(o.stop - o.start >= 4 for o in motif_occurrences(folding, 0, min_ops=4, max_ops=62))


def test_too_long_symbols_are_opened_and_nested_ones_listed_on_request() -> None:
    seqs = [["a", "b", "c", "d"] * 2, ["a", "b", "c", "d"]]
    folding = fold_sequences(seqs)
    assert max(len(s.ops) for s in folding.symbols.values()) >= 4
    # BPE builds left-deep symbols: a b -> @1, @1 c -> @2, @2 d -> @3
    assert [(s.left, s.right) for s in folding.symbols.values()] == [
        ("a", "b"),
        ("@1", "c"),
        ("@2", "d"),
    ]
    short = motif_occurrences(folding, 0, min_ops=2, max_ops=2, nested=False)
    assert [(o.start, o.stop) for o in short] == [(0, 2), (4, 6)]
    outer = motif_occurrences(folding, 1, min_ops=2, max_ops=4, nested=False)
    assert [(o.start, o.stop, o.symbol) for o in outer] == [(0, 4, "@3")]
    every = motif_occurrences(folding, 1, min_ops=2, max_ops=4)
    assert [(o.start, o.stop) for o in every] == [(0, 4), (0, 3), (0, 2)]


def test_max_ops_caps_symbol_length() -> None:
    seqs = [["x", "y"] * 8, ["x", "y"] * 8]
    folding = fold_sequences(seqs, max_ops=4)
    assert max(len(s.ops) for s in folding.symbols.values()) == 4


def test_folding_is_deterministic_and_serializable() -> None:
    a, b = fold_sequences(corpus()), fold_sequences(corpus())
    assert a.to_json() == b.to_json()
    data = json.loads(a.to_json())
    assert data["schema_version"] == 1 and data["symbols"][0]["name"] == "@1"


def test_transformer_layer_is_a_classical_motif_across_two_bert_samples(tmp_path: Path) -> None:
    seqs = [trace_parent(p).op_sequence for p in (BERT, BGE)]
    folding = fold_sequences(seqs)
    layers = [
        seqs[i][o.start : o.stop]
        for i in (0, 1)
        for o in motif_occurrences(folding, i, min_ops=4, max_ops=62)
    ]
    layer = ["F.linear", "Tensor.view", "Tensor.transpose"] * 3 + ["F.scaled_dot_product_attention"]
    assert any(ops[: len(layer)] == layer and ops.count("F.layer_norm") == 2 for ops in layers)
    results = decompose_samples(
        [BERT, BGE], tmp_path, ["classical"], op_bounds={"classical": (20, 30)}
    )
    written = [r for res in results for r in res.subgraphs if r.status is SubgraphStatus.WRITTEN]
    assert written and all(20 <= len(r.ops) <= 30 for r in written)
    assert all(r.symbol.startswith("@") for r in written)
