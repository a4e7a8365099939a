"""Decomposition at corpus scale: isolated children with time and memory limits, outputs
that do not depend on the batch (whole corpus or chunks), motif tables, and symbolic dims
that are kept where they can be told and counted where they cannot."""

from __future__ import annotations

import json
import logging
import os
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from passnet.dataset import (
    DecomposeStatus,
    SubgraphStatus,
    build_motif_table,
    decompose_sample,
    decompose_samples,
    read_decompose_manifest,
)
from passnet.dataset._fold import fold_sequences
from passnet.errors import DatasetError
from passnet.sample import Constraints, TensorMeta, write_sample
from tests.conftest import MLP
from tests.dataset.test_decompose import TOY_SOURCE, make_toy

KINDS = ["classical", "single-op"]


def _toy_with(path: Path, line: str) -> Path:
    """The toy sample with ``line`` run first in its forward (and the imports it needs)."""
    make_toy(path)
    model = path / "model.py"
    source = model.read_text().replace(
        "import torch\n", "import ctypes\nimport time\nimport torch\n", 1
    )
    head = "        a = torch.nn.functional.linear(L_x_, L_w_)\n"
    model.write_text(source.replace(head, f"        {line}\n{head}", 1))
    return path


def _tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != "decompose.jsonl"
    }


def _records(out: Path) -> dict[str, dict[str, object]]:
    """The records of a run by sample, without what differs from run to run (timings)."""
    out_records = {}
    for r in read_decompose_manifest(out / "decompose.jsonl"):
        d = r.to_dict()
        d.pop("elapsed_s"), d.pop("peak_rss_mb")
        for sub in d["subgraphs"]:
            sub["path"] = os.path.relpath(sub["path"], out) if sub["path"] else ""
            sub["duplicate_of"] = (
                os.path.relpath(sub["duplicate_of"], out) if sub["duplicate_of"] else ""
            )
        out_records[r.sample] = d
    return out_records


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two families of one toy each (the same graph: a motif across the corpus)."""
    root = tmp_path_factory.mktemp("corpus")
    make_toy(root / "family_a" / "toy")
    make_toy(root / "family_b" / "toy")
    return root


def test_chunks_and_the_whole_corpus_write_the_same_files(corpus: Path, tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    decompose_samples([corpus], whole, KINDS, jobs=2)  # two children at once
    chunked = tmp_path / "chunked"
    # The first chunk names the root; the second chunk, into the same folder, finds it there.
    decompose_samples([corpus / "family_b" / "toy"], chunked, KINDS, root=corpus)
    decompose_samples([corpus / "family_a" / "toy"], chunked, KINDS)
    assert (whole / "family_a" / "toy" / "single-op").is_dir()
    assert _tree(whole) == _tree(chunked)
    assert _records(whole) == _records(chunked)


def test_a_sample_decomposed_alone_lands_where_the_corpus_run_put_it(
    corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    decompose_samples([corpus], out, ["single-op"])
    before = _tree(out)
    (again,) = decompose_samples([corpus / "family_a" / "toy"], out, ["single-op"], resume=False)
    assert again.name == "family_a/toy" and again.root == str(corpus.resolve())
    assert _tree(out) == before
    with pytest.raises(DatasetError, match="named relative to"):
        decompose_samples([corpus / "family_a"], out, ["single-op"], root=corpus / "family_a")


def test_written_parents_are_relative_to_the_root_and_the_catalog_resolves_them(
    tmp_path: Path,
) -> None:
    """A real sample copied into two corpora at different absolute folders: its subgraphs
    (decompose) and their variants (generalize) name their parent relative to --root, so
    the written files are byte-identical; the catalogs link each to its own copy."""
    from passnet.dataset import Catalog, generalize_samples

    outputs = []
    for place in (tmp_path / "a", tmp_path / "b" / "deeper"):
        corpus = place / "corpus"
        sample = Path(shutil.copytree(MLP, corpus / "transformers-auto-model" / MLP.name))
        with Catalog(place / "catalog.sqlite") as catalog:
            (result,) = decompose_samples(
                [sample], place / "sub", ["single-op"], root=corpus, isolated=False, catalog=catalog
            )
            written = [r.path for r in result.subgraphs if r.status is SubgraphStatus.WRITTEN]
            assert written and result.root == str(corpus.resolve())
            linked = catalog.subgraphs(sample)
            assert sorted(r.path for r in linked) == sorted(str(Path(w).resolve()) for w in written)
            assert {r.parent for r in linked} == {str(sample.resolve())}
            assert {r.provenance["parent"] for r in linked} == {str(sample.resolve())}
            generalize_samples(
                written[:1],
                place / "var",
                root=place / "sub",
                dtypes=["float16"],
                shape_factors=[],
                isolated=False,
                catalog=catalog,
            )
            (variant,) = catalog.samples(kind="variant")
            assert variant.provenance["generalization"]["parent"] == str(Path(written[0]).resolve())
        name = Path(written[0]).relative_to(place / "sub").as_posix()
        graph_net = json.loads((place / "var" / name / "float16" / "graph_net.json").read_text())
        assert graph_net["subgraph"]["parent"] == f"transformers-auto-model/{MLP.name}"
        assert graph_net["generalization"]["parent"] == name
        outputs.append(place)
    a, b = (
        {
            f"{d}/{k}": v
            for d in ("sub", "var")
            for k, v in _tree(p / d).items()
            if ".jsonl" not in k
        }
        for p in outputs
    )
    assert sum(n.endswith("graph_net.json") for n in a) > 2 and a == b


def test_samples_outside_the_root_are_refused_before_any_work(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not under the root"):
        decompose_samples([corpus], tmp_path / "o1", ["single-op"], root=corpus / "family_a")
    assert not list((tmp_path / "o1").rglob("model.py"))


def test_a_motif_table_finds_motifs_across_samples_whatever_the_chunk(
    corpus: Path, tmp_path: Path
) -> None:
    first = tmp_path / "first"
    alone = decompose_samples([corpus], first, ["classical"])
    # Folded alone, the toy has no repeated pair: no classical subgraph.
    assert all(r.count("classical") == 0 for r in alone)
    assert all(r.op_sequence and len(r.op_sequence) == r.units for r in alone)
    table = build_motif_table([first / "decompose.jsonl"], max_ops=62)
    (tmp_path / "motifs.json").write_text(table.to_json())
    whole, chunked = tmp_path / "whole", tmp_path / "chunked"
    with_table = decompose_samples(
        [corpus],
        whole,
        ["classical"],
        motifs=tmp_path / "motifs.json",
        op_bounds={"classical": (2, 62)},
    )
    assert all(r.count("classical", SubgraphStatus.WRITTEN) > 0 for r in with_table)
    for family in ("family_b", "family_a"):
        decompose_samples(
            [corpus / family / "toy"],
            chunked,
            ["classical"],
            root=corpus,
            motifs=table,
            op_bounds={"classical": (2, 62)},
        )
    assert _tree(whole) == _tree(chunked) and _records(whole) == _records(chunked)
    assert all(r.options["motifs"] == table.table_digest for r in with_table)


def test_the_incremental_folding_equals_recounting_the_corpus_after_every_fold() -> None:
    import random
    from collections import Counter

    def recount(sequences: list[list[str]], max_ops: int) -> list[tuple[str, str, int]]:
        tokens = [list(s) for s in sequences]
        ops: dict[str, int] = {}
        out = []
        while True:
            counts: Counter[tuple[str, str]] = Counter()
            first: dict[tuple[str, str], tuple[int, int]] = {}
            for s_idx, seq in enumerate(tokens):
                i = 0
                while i < len(seq) - 1:
                    pair = (seq[i], seq[i + 1])
                    counts[pair] += 1
                    first.setdefault(pair, (s_idx, i))
                    run = pair[0] == pair[1] and i + 2 < len(seq) and seq[i + 2] == pair[0]
                    i += 2 if run else 1
            best = [
                (-c, first[p], p)
                for p, c in counts.items()
                if c >= 2 and ops.get(p[0], 1) + ops.get(p[1], 1) <= max_ops
            ]
            if not best:
                return out
            neg, _, (left, right) = min(best)
            name = f"@{len(out) + 1}"
            ops[name] = ops.get(left, 1) + ops.get(right, 1)
            out.append((left, right, -neg))
            for s_idx, seq in enumerate(tokens):
                new, i = [], 0
                while i < len(seq):
                    if i + 1 < len(seq) and (seq[i], seq[i + 1]) == (left, right):
                        new.append(name)
                        i += 2
                    else:
                        new.append(seq[i])
                        i += 1
                tokens[s_idx] = new

    for trial in range(200):
        rng = random.Random(trial)
        alphabet = "abcdef"[: rng.randint(1, 6)]
        seqs = [[rng.choice(alphabet) for _ in range(rng.randint(0, 30))] for _ in range(5)]
        seqs.append(list(seqs[0]))  # a repeated sample counts twice
        max_ops = rng.choice([2, 3, 62])
        folding = fold_sequences(seqs, max_ops=max_ops)
        got = [(s.left, s.right, s.count) for s in folding.symbols.values()]
        assert got == recount(seqs, max_ops), trial


def test_crashes_hangs_and_memory_are_statuses_and_the_batch_carries_on(tmp_path: Path) -> None:
    root = tmp_path / "in"
    crash = _toy_with(root / "crash", "ctypes.string_at(0)")
    hang = _toy_with(root / "hang", "time.sleep(600)")
    greedy = _toy_with(root / "greedy", "big = torch.ones(2**30, dtype=torch.float64)")
    huge = write_sample(
        root / "huge",
        TOY_SOURCE,
        [
            TensorMeta("L_x_", [3, 4], torch.float32, mean=0.0, std=1.0),
            TensorMeta("L_w_", [2**28, 4], torch.float32, mean=0.0, std=0.5),
        ],
    )
    good = make_toy(root / "good")
    results = decompose_samples(
        [crash, hang, greedy, huge, good],
        tmp_path / "out",
        ["single-op"],
        timeout_s=20,
        memory_limit_gb=1.0,
    )
    by_name = {r.name: r for r in results}
    assert by_name["crash"].status == DecomposeStatus.CRASHED.value
    assert "SIGSEGV" in by_name["crash"].errors[-1].message
    assert by_name["hang"].status == DecomposeStatus.TIMEOUT.value
    assert by_name["greedy"].status == DecomposeStatus.OUT_OF_MEMORY.value
    assert by_name["huge"].status == DecomposeStatus.TOO_LARGE.value
    assert "GiB" in by_name["huge"].errors[0].message
    assert by_name["good"].status == "ok" and by_name["good"].count("single-op") > 0
    assert 0 < by_name["good"].peak_rss_mb < 4096
    recorded = read_decompose_manifest(tmp_path / "out" / "decompose.jsonl")
    assert [r.status for r in recorded] == [r.status for r in results]
    assert all(r.graph_hash for r in recorded)  # failed samples are resumable records too


SQUARE_SOURCE = textwrap.dedent(
    """\
    import torch


    class GraphModule(torch.nn.Module):
        def forward(self, L_x_: torch.Tensor):
            a = L_x_.relu()
            b = a.flatten(2)
            c = b.view(1, 3, 4, 4)
            d = c * 2.0
            e = d.view(1, 3, 2, 8)
            f = e.sigmoid()
            return (f,)
    """
)


def _square(path: Path) -> Path:
    return write_sample(
        path,
        SQUARE_SOURCE,
        [TensorMeta("L_x_", [1, 3, 4, 4], torch.float32, mean=0.0, std=1.0)],
        constraints=Constraints(
            symbols=["S0"], example_values={"S0": 4}, input_shapes={"L_x_": [1, 3, "S0", "S0"]}
        ),
    )


def test_symbols_follow_a_square_grid_and_lost_ones_are_counted_and_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sample = _square(tmp_path / "square")
    with caplog.at_level(logging.WARNING, logger="passnet.dataset._decompose"):
        result = decompose_sample(sample, tmp_path / "out", ["single-op"])
    assert result.status == "ok", result.errors
    written = {r.start: r for r in result.subgraphs if r.status is SubgraphStatus.WRITTEN}
    relu, flatten, view, mul, view_1, sigmoid = (written[i] for i in range(6))
    # flatten(2) of the S0 x S0 grid is S0**2; view(1, 3, 4, 4) of it: both 4s follow S0
    assert [r.symbols for r in (relu, flatten, view, mul, view_1)] == [["S0"]] * 5
    constraints = (Path(mul.path) / "input_tensor_constraints.py").read_text()
    assert '([1, 3, S0, S0], "view")' in constraints
    assert "S0**2" in (Path(view.path) / "input_tensor_constraints.py").read_text()
    # view(1, 3, 2, 8) cannot be tied to S0: the sigmoid after it cannot tell its dims
    assert sigmoid.symbols == [] and sigmoid.symbols_unknown == ["S0"]
    assert result.symbols == {"S0": {"carried": 5, "unknown": 1}}
    assert "view_1" in result.symbols_lost["S0"] and "cannot tell" in result.symbols_lost["S0"]
    assert "1 of 6 written subgraphs" in caplog.text
    record = json.loads(json.dumps(result.to_dict()))
    assert record["symbols"]["S0"]["unknown"] == 1 and record["symbols_lost"]["S0"]


def test_cpu_batches_have_the_forkserver_warm_inductor_up_once_for_every_child(
    monkeypatch,
) -> None:
    from passnet.dataset import _decompose
    from passnet.isolate import TORCH_PRELOAD

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    preload = _decompose._preload_for_children("cpu")
    assert preload[-2:] == ["torch._inductor.compile_fx", "passnet.dataset._warm"]
    assert _decompose._preload_for_children("cuda") == [
        *TORCH_PRELOAD,
        "passnet.dataset._decompose",
    ]


def test_warm_up_compiles_once_and_later_compilations_skip_the_start_up() -> None:
    from passnet.dataset._warm import warm_up  # importing warms up

    assert warm_up() < 5.0


def test_a_decomposition_draws_each_replayed_tensor_once(tmp_path: Path, monkeypatch) -> None:
    from passnet.sample import _replay

    drawn: list[tuple] = []
    real = _replay.replay_tensor

    def counting(meta, usage, seed):
        drawn.append(_replay._cache_key(meta, usage, seed))
        return real(meta, usage, seed)

    monkeypatch.setattr(_replay, "replay_tensor", counting)
    toy = make_toy(tmp_path / "toy")
    result = decompose_sample(toy, tmp_path / "out", ["single-op"])
    assert result.status == "ok" and result.subgraphs
    assert drawn and len(drawn) == len(set(drawn))  # without the cache the weights repeat
    assert _replay._CACHE.get() is None  # the cache lives only for the call
