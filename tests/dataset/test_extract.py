"""Extraction: live models → GraphNet samples that load, replay and compute what the model did."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

import passnet
from passnet.dataset import ExtractOptions, Extractor, extract, extract_file
from passnet.errors import DatasetError
from passnet.sample import load_sample
from tests.dataset.tiny_models import (
    CUSTOM_OP_FILE,
    MLP,
    ConvBnRelu,
    GraphBreak,
    RepeatedBlock,
    ScaledNorm,
    TinyAttention,
    build,
    inputs_for,
)

FILES = (
    "model.py",
    "weight_meta.py",
    "input_meta.py",
    "input_tensor_constraints.py",
    "graph_net.json",
    "graph_hash.txt",
)


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _replay(path: Path, seed: int = 0) -> tuple[torch.Tensor, ...]:
    sample = load_sample(path)
    with torch.no_grad():
        return sample.build_module("cpu")(*sample.replay_inputs("cpu", seed))


def _run_extracted(
    model: nn.Module, tmp_path: Path, **kwargs: object
) -> tuple[Extractor, torch.Tensor]:
    ex = extract(model, out=tmp_path, **kwargs)
    with torch.no_grad():
        out = ex(*inputs_for(model))
    return ex, out


def test_top_level_passnet_extract_is_the_dataset_extract() -> None:
    assert passnet.extract is extract


def test_mlp_sample_has_the_six_graphnet_files_and_replays_the_model_exactly(
    tmp_path: Path,
) -> None:
    model = build(MLP)
    ex, out = _run_extracted(model, tmp_path, name="mlp")
    assert ex.result.ok and ex.samples == [tmp_path / "mlp"]
    assert sorted(p.name for p in (tmp_path / "mlp").iterdir()) == sorted(FILES)
    # every tensor of this model is small, so it is stored literally: replay is exact
    (replayed,) = _replay(tmp_path / "mlp")
    assert torch.equal(replayed, out)


def test_model_py_follows_graphnet_layout_with_public_spellings(tmp_path: Path) -> None:
    _run_extracted(build(MLP), tmp_path, name="mlp")
    source = (tmp_path / "mlp" / "model.py").read_text()
    assert source.startswith("import torch\n")
    assert "class GraphModule(torch.nn.Module):\n    def forward(self, " in source
    assert "L_x_ : torch.Tensor" in source and ": torch.nn.parameter.Parameter" in source
    assert "torch.nn.functional.linear(" in source and "torch._C._nn" not in source
    assert re.search(r"return \(\w+,\)\n$", source)
    compile(source, "model.py", "exec")  # imports on its own


def test_large_float_tensors_keep_full_precision_statistics_and_range(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(64, 32)).eval()
    ex = extract(model, name="wide", out=tmp_path)
    with torch.no_grad():
        ex(torch.randn(2, 64))
    metas = load_sample(tmp_path / "wide").metas
    weight = model[0].weight.detach().double()
    meta = next(m for name, m in metas.items() if name.endswith("weight_"))
    assert meta.data is None  # 2048 elements: statistics only
    assert meta.mean == pytest.approx(weight.mean().item(), abs=1e-15)
    assert meta.std == pytest.approx(weight.std().item(), abs=1e-15)
    assert (meta.min_val, meta.max_val) == (weight.min().item(), weight.max().item())
    assert len(repr(meta.std)) > 8  # not GraphNet's three decimals


def test_token_ids_and_masks_are_stored_literally(tmp_path: Path) -> None:
    model = build(TinyAttention)
    ids, mask = inputs_for(model)
    ex = extract(model, name="attn", out=tmp_path)
    with torch.no_grad():
        out = ex(ids, mask)
    metas = load_sample(tmp_path / "attn").metas
    assert metas["L_input_ids_"].data == ids.flatten().tolist()
    assert metas["L_attention_mask_"].data == mask.flatten().tolist()
    assert (metas["L_input_ids_"].min_val, metas["L_input_ids_"].max_val) == (
        ids.min().item(),
        ids.max().item(),
    )
    # the 50x16 embedding table replays from statistics, so outputs match in shape only
    (replayed,) = _replay(tmp_path / "attn")
    assert replayed.shape == out.shape and torch.isfinite(replayed).all()


def test_conv_bn_relu_sample_replays_to_the_model_output(tmp_path: Path) -> None:
    model = build(ConvBnRelu)
    ex, out = _run_extracted(model, tmp_path, name="cbr", float_data_limit=10_000)
    (replayed,) = _replay(ex.samples[0])
    torch.testing.assert_close(replayed, out, rtol=0, atol=0)


def test_graph_break_gives_one_sample_per_graph_in_subgraph_folders(tmp_path: Path) -> None:
    model = build(GraphBreak)
    ex, out = _run_extracted(model, tmp_path, name="gb")
    assert ex.result.ok
    assert ex.samples == [tmp_path / "gb" / "subgraph_0", tmp_path / "gb" / "subgraph_1"]
    assert not (tmp_path / "gb" / "model.py").exists()
    hashes = [(p / "graph_hash.txt").read_text() for p in ex.samples]
    assert hashes == [g.graph_hash for g in ex.result.graphs] and len(set(hashes)) == 2
    first, second = (json.loads((p / "graph_net.json").read_text()) for p in ex.samples)
    assert (first["passnet"]["graph_index"], second["passnet"]["graph_index"]) == (0, 1)


def test_identical_graphs_in_one_session_are_written_once(tmp_path: Path) -> None:
    ex, _ = _run_extracted(build(RepeatedBlock), tmp_path, name="rep")
    assert len(ex.samples) == 1 and ex.samples == [tmp_path / "rep"]
    assert [i for i, _ in ex.result.duplicates] == [1]


def test_dynamic_extraction_round_trips_symints_and_lifted_scalars(tmp_path: Path) -> None:
    model = build(ScaledNorm)
    (x,) = inputs_for(model)
    ex = extract(model, name="dyn", out=tmp_path, dynamic=True)
    with torch.no_grad():
        out = ex(x)
    sample = load_sample(ex.samples[0])
    symints = [name for name, ann in sample.params if ann == "torch.SymInt"]
    assert symints and sample.metas[symints[0]].data == [3]
    eps = next(m for name, m in sample.metas.items() if name.endswith("eps"))
    assert eps.shape == [] and eps.dtype == torch.float64 and eps.data == [1e-5]
    assert sample.constraints is not None and sample.constraints.example_values == {"S0": 3}
    assert sample.constraints.input_shapes["L_x_"] == ["S0", 6]
    (replayed,) = _replay(ex.samples[0])
    torch.testing.assert_close(replayed, out, rtol=0, atol=0)


def test_class_decorator_makes_instances_that_extract(tmp_path: Path) -> None:
    @extract(name="decorated", out=tmp_path)
    class Doubler(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 + 1

    model = Doubler()
    assert isinstance(model, Extractor)
    assert torch.equal(model(torch.ones(3)), torch.full((3,), 3.0))
    assert (tmp_path / "decorated" / "model.py").is_file()


def test_context_manager_exposes_the_result(tmp_path: Path) -> None:
    with extract(build(MLP), name="ctx", out=tmp_path) as ex:
        ex(*inputs_for(ex.model))
    assert ex.result.to_dict()["graphs"][0]["path"] == str(tmp_path / "ctx")


def test_existing_output_is_refused_unless_overwrite(tmp_path: Path) -> None:
    _run_extracted(build(MLP), tmp_path, name="mlp")
    with pytest.raises(DatasetError, match="already exists"):
        extract(build(MLP), name="mlp", out=tmp_path)
    ex, _ = _run_extracted(build(MLP), tmp_path, name="mlp", overwrite=True)
    assert ex.result.ok


def test_unimportable_call_fails_its_graph_only_and_names_the_node(tmp_path: Path) -> None:
    @torch._dynamo.allow_in_graph
    def opaque_helper(t: torch.Tensor) -> torch.Tensor:
        return t + 1

    class Mixed(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.sin(x)
            torch._dynamo.graph_break()
            return opaque_helper(y) * 3

    ex = extract(Mixed(), name="mixed", out=tmp_path)
    x = torch.randn(4)
    assert torch.allclose(ex(x), (torch.sin(x) + 1) * 3)  # the model itself still runs
    assert [g.index for g in ex.result.graphs] == [0]
    (failure,) = ex.result.failures
    assert failure.stage == "serialize" and failure.graph == 1
    assert "opaque_helper" in failure.message and failure.node
    assert not ex.result.ok


def test_forward_that_raises_is_a_recorded_run_failure(tmp_path: Path) -> None:
    ex = extract(build(MLP), name="bad", out=tmp_path)
    with pytest.raises(DatasetError, match="forward failed") as info:
        ex(torch.randn(2, 5))  # wrong feature size
    assert info.value.context["model"] == "bad"
    assert ex.result.failures[0].stage == "run"


def test_model_without_tensor_operations_reports_no_graph(tmp_path: Path) -> None:
    class Identity(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    ex = extract(Identity(), name="id", out=tmp_path)
    ex(torch.ones(2))
    assert ex.result.failures[0].stage == "capture" and "no graph" in ex.result.failures[0].message


MODEL_FILE = """
import torch
from torch import nn

GRAPH_NET = {"source": "unit-test", "heuristic_tag": "other"}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x, scale):
        return torch.sigmoid(self.fc(x)) * scale


def get_model():
    torch.manual_seed(0)
    return Net().eval()


def get_inputs():
    return {"x": torch.randn(4, 3), "scale": torch.full((1,), 2.0)}
"""


def test_model_file_convention_writes_graph_net_fields_and_resumes(tmp_path: Path) -> None:
    file = tmp_path / "net.py"
    file.write_text(MODEL_FILE)
    result = extract_file(file, tmp_path / "out")
    assert result.ok and result.samples == [tmp_path / "out" / "net"]
    info = json.loads((tmp_path / "out" / "net" / "graph_net.json").read_text())
    assert (info["source"], info["heuristic_tag"], info["model_name"]) == (
        "unit-test",
        "other",
        "net",
    )
    again = extract_file(file, tmp_path / "out")
    assert again.skipped and again.ok and again.graphs[0].graph_hash == result.graphs[0].graph_hash


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def get_model(:\n", "fails at import: SyntaxError"),
        ("def get_model():\n    return None\n", "defines no get_inputs()"),
        (
            "import torch\ndef get_model():\n    raise RuntimeError('no weights')\ndef get_inputs():\n    return ()\n",
            "RuntimeError: no weights",
        ),
    ],
)
def test_broken_model_file_is_a_load_failure_not_an_exception(
    tmp_path: Path, source: str, expected: str
) -> None:
    file = tmp_path / "broken.py"
    file.write_text(source)
    result = extract_file(file, tmp_path / "out")
    assert not result.ok and result.failures[0].stage == "load"
    assert expected in result.failures[0].message


def test_custom_operator_is_declared_and_its_source_travels_with_the_sample(tmp_path: Path) -> None:
    file = tmp_path / "custom.py"
    file.write_text(CUSTOM_OP_FILE)
    result = extract_file(file, tmp_path / "out", options=ExtractOptions())
    assert result.ok, result.failures
    sample = result.samples[0]
    (entry,) = json.loads((sample / "graph_net.json").read_text())["custom_ops"]
    assert entry["op"] == "passnet_test_ext::twice" and entry["source"] == "custom_ops/custom.py"
    assert (sample / "custom_ops" / "custom.py").read_text() == file.read_text()
    assert "torch.ops.passnet_test_ext.twice.default(" in (sample / "model.py").read_text()
