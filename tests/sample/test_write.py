"""Writing samples: every file, full-precision metadata, and a faithful round trip."""

from __future__ import annotations

from pathlib import Path

import torch

from passnet.sample import load_sample, parse_meta_file, render_meta_file, write_sample
from tests.conftest import BERT, SYMINT_HEAD

FILES = {
    "model.py",
    "weight_meta.py",
    "input_meta.py",
    "input_tensor_constraints.py",
    "graph_net.json",
    "graph_hash.txt",
}


def test_written_sample_has_all_six_files_and_reloads_identically(tmp_path: Path) -> None:
    src = load_sample(BERT)
    out = write_sample(
        tmp_path / "copy",
        src.model_source,
        src.weight_metas,
        input_metas=src.input_metas,
        constraints=src.constraints,
        graph_net=src.graph_net,
        graph_hash=src.graph_hash,
    )
    assert {p.name for p in out.iterdir()} == FILES
    copy = load_sample(out)
    assert copy.graph_hash == src.graph_hash
    assert copy.constraints.example_values == src.constraints.example_values
    assert copy.constraints.input_shapes == src.constraints.input_shapes
    for a, b in zip(src.replay_inputs(seed=5), copy.replay_inputs(seed=5)):
        assert torch.equal(a, b)


def test_meta_file_round_trip_keeps_full_precision(tmp_path: Path) -> None:
    metas = load_sample(SYMINT_HEAD).weight_metas
    metas[1].mean = 0.123456789012345
    metas[1].std = float("nan")
    path = tmp_path / "weight_meta.py"
    path.write_text(render_meta_file(metas))
    back = parse_meta_file(path)
    assert back[1].mean == 0.123456789012345
    assert back[1].std != back[1].std  # NaN survives
    assert [m.name for m in back] == [m.name for m in metas]
    assert back[0].data == [4]
