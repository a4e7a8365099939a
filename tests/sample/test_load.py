"""Reading GraphNet samples: the real dev set, and precise errors for malformed input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from passnet.errors import SampleError
from passnet.sample import find_samples, is_module_state, load_sample
from tests.conftest import BERT, DEV, MLP, SYMINT_HEAD

ALL = find_samples([DEV])


def test_the_29_dev_samples_are_found() -> None:
    assert len(ALL) == 29


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.relative_to(DEV).as_posix())
def test_every_dev_sample_runs_eagerly_with_finite_outputs(path: Path) -> None:
    sample = load_sample(path)
    module = sample.build_module("cpu")
    with torch.no_grad():
        outs = module(*sample.replay_inputs("cpu", seed=0))
    floats = [o for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point()]
    assert floats, "every dev sample returns at least one floating tensor"
    assert all(torch.isfinite(o).all() for o in floats)


def test_shipped_samples_are_identical_to_the_shared_fixtures() -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "data" / "graphnet"
    if not shared.is_dir():
        pytest.skip(
            "no reference copy to compare with: the development workspace keeps the GraphNet "
            "fixtures in ../shared/data/graphnet beside the checkout, a clone elsewhere has none"
        )
    for f in shared.rglob("*"):
        if f.is_file():
            assert (DEV / f.relative_to(shared)).read_bytes() == f.read_bytes(), f


def test_symint_parameter_is_passed_as_int() -> None:
    sample = load_sample(SYMINT_HEAD)
    assert sample.is_symint("s0")
    values = dict(zip(sample.param_names, sample.replay_inputs()))
    assert values["s0"] == 4 and isinstance(values["s0"], int)


def test_literal_data_is_used_as_stored() -> None:
    sample = load_sample(BERT)
    ids = dict(zip(sample.param_names, sample.replay_inputs()))["L_input_ids_"]
    assert ids.tolist() == [[101, 10629, 7159, 2003, 2109, 2000, 14817, 15078, 19287, 1012, 102]]


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return dst


def test_syntax_error_in_model_names_file_and_line(tmp_path: Path) -> None:
    s = _copy(MLP, tmp_path)
    lines = (s / "model.py").read_text().splitlines()
    lines[5] = lines[5] + " )("
    (s / "model.py").write_text("\n".join(lines))
    with pytest.raises(SampleError) as err:
        load_sample(s)
    assert err.value.context["file"] == "model.py"
    assert err.value.context["line"] == "6"


def test_meta_class_without_shape_names_class_and_field(tmp_path: Path) -> None:
    s = _copy(MLP, tmp_path)
    text = (s / "weight_meta.py").read_text()
    (s / "weight_meta.py").write_text(text.replace("    shape = [5, 4]\n", "", 1))
    with pytest.raises(SampleError, match="no 'shape'") as err:
        load_sample(s)
    assert err.value.context["file"] == "weight_meta.py"
    assert err.value.context["field"].endswith(".shape")


def test_a_bad_shape_is_reported_at_its_own_line(tmp_path: Path) -> None:
    s = _copy(MLP, tmp_path)
    text = (s / "weight_meta.py").read_text()
    (s / "weight_meta.py").write_text(
        text.replace("    shape = [5, 4]\n", "    shape = [5, -4]\n", 1)
    )
    with pytest.raises(SampleError, match="shape must be a list of non-negative ints") as err:
        load_sample(s)
    lines = (s / "weight_meta.py").read_text().splitlines()
    assert lines[int(err.value.context["line"]) - 1] == "    shape = [5, -4]"
    assert err.value.context["field"].endswith(".shape")


def test_unknown_dtype_is_reported(tmp_path: Path) -> None:
    s = _copy(MLP, tmp_path)
    text = (s / "weight_meta.py").read_text()
    (s / "weight_meta.py").write_text(text.replace('"torch.float32"', '"torch.float33"', 1))
    with pytest.raises(SampleError, match="unknown dtype 'torch.float33'") as err:
        load_sample(s)
    assert err.value.context["field"].endswith(".dtype")


def test_missing_file_is_reported(tmp_path: Path) -> None:
    s = _copy(MLP, tmp_path)
    (s / "weight_meta.py").unlink()
    with pytest.raises(SampleError, match="missing file weight_meta.py"):
        load_sample(s)


def test_parameter_without_metadata_is_reported(tmp_path: Path) -> None:
    s = _copy(MLP, tmp_path)
    text = (s / "weight_meta.py").read_text()
    first_class_end = text.index("\n\n\n") + 3
    (s / "weight_meta.py").write_text(text[first_class_end:])
    with pytest.raises(SampleError, match="has no metadata class") as err:
        load_sample(s)
    assert err.value.context["field"] == "L_self_modules_fc1_parameters_weight_"


def test_data_length_must_match_shape(tmp_path: Path) -> None:
    s = _copy(SYMINT_HEAD, tmp_path)
    text = (s / "weight_meta.py").read_text()
    (s / "weight_meta.py").write_text(text.replace("data = [4]", "data = [4, 5]", 1))
    with pytest.raises(SampleError, match="data has 2 values"):
        load_sample(s)


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("L_self_modules_conv1_modules_0_parameters_weight_", True),
        ("L_self_modules_0_modules_auto_model_modules_embeddings_buffers_position_ids_", True),
        ("L_self_modules_encoder_modules_layer_modules_0_modules_layernorm_before_eps", True),
        ("l_self_modules_fc_parameters_bias_", True),
        ("L_x_", False),
        ("L_input_input_ids_", False),
        ("L_args_0_", False),
        ("s0", False),
        ("L_kwargs_pixel_values_", False),
    ],
)
def test_module_state_is_told_from_inputs_by_dynamos_names(name: str, state: bool) -> None:
    assert is_module_state(name) is state


def test_a_graphs_module_state_positions_are_its_weights_not_its_inputs() -> None:
    sample = load_sample(DEV / "transformers-auto-model" / "bge-small-zh")
    state = set(sample.module_state_positions)
    inputs = [n for i, n in enumerate(sample.param_names) if i not in state]
    assert inputs == ["L_input_input_ids_", "L_input_attention_mask_"]
    assert len(state) == len(sample.param_names) - 2
