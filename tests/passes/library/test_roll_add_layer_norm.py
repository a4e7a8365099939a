"""FusedRollAddLayerNorm: matches Swin's roll + add + layer_norm (two outputs), equals eager."""

from __future__ import annotations

import pytest
import torch

from tests.passes.library.conftest import (
    DTYPES,
    assert_replacement_matches,
    captured_inputs,
    cast_floats,
    find_matches,
    general_path_not_taken,
    like,
    meta,
    on,
    sample_graph,
    too_large,
)

PASS, RULE = "roll_add_layer_norm", "FusedRollAddLayerNorm"
SWIN = "transformers-auto-model/vuiseng9_tiny-random-SwinModel"


def test_pattern_matches_the_shifted_window_block_of_swin(load_rule):
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(SWIN))
    assert len(matches) == 1
    match = matches[0]
    assert match.placeholder_nodes[4:] == [(1, 1), 1, 64, 32, (32,), 1e-05]
    # Both outputs are returned: the sum is also the next block's residual.
    assert len(match.returning_nodes) == 2
    assert len(match.returning_nodes[0].users) > 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_replacement_equals_eager_on_real_swin_values(load_rule, device, dtype):
    module = load_rule(PASS, RULE)
    inputs = on(device, cast_floats(captured_inputs(SWIN, module.pattern), dtype))
    assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("windows_shape", "shifts"),
    [((2, 7, 7, 96), (3, 3)), ((1, 12, 10, 100), (-5, 2))],
    ids=["swin-t-stage", "c100-negative-shift"],
)
def test_replacement_equals_eager_on_other_shapes(load_rule, device, dtype, windows_shape, shifts):
    module = load_rule(PASS, RULE)
    bias, weight, residual, windows, _, _, _, _, _, eps = captured_inputs(SWIN, module.pattern)
    B, H, W, C = windows_shape
    gen = torch.Generator().manual_seed(3)
    inputs = [
        like(bias, (C,), dtype, gen),
        like(weight, (C,), dtype, gen),
        like(residual, (B, H * W, C), dtype, gen),
        like(windows, windows_shape, dtype, gen),
        shifts,
        B,
        -1,
        C,
        (C,),
        eps,
    ]
    assert_replacement_matches(module, on(device, inputs))


def test_non_contiguous_window_tensor_gives_the_eager_result(load_rule, device):
    module = load_rule(PASS, RULE)
    bias, weight, residual, windows, *rest = captured_inputs(SWIN, module.pattern)
    transposed = windows.transpose(1, 2).contiguous().transpose(1, 2)  # same values, new strides
    assert not transposed.is_contiguous()
    # eager's .view() needs a contiguous roll output, which torch.roll always returns
    assert_replacement_matches(module, on(device, [bias, weight, residual, transposed, *rest]))


def _meta_swin_block(B, dtype, affine=True):
    """Pattern inputs of windows [B, 32, 32, 1024] on the meta device (no memory)."""
    H = W = 32
    C = 1024
    windows, residual = meta(B, H, W, C, dtype=dtype), meta(B, H * W, C, dtype=dtype)
    weight, bias = (meta(C, dtype=dtype), meta(C, dtype=dtype)) if affine else (None, None)
    return [bias, weight, residual, windows, (-3, -3), B, H * W, C, (C,), 1e-05]


@pytest.mark.parametrize(
    ("dtype", "affine"),
    [(torch.float16, True), (torch.float32, False)],
    ids=["fast-path-form", "no-weight-or-bias"],
)
def test_tensors_of_2_31_elements_are_refused_before_any_launch(load_rule, launches, dtype, affine):
    # The kernel's offsets are int32: 2**31 elements would overflow them.
    module = load_rule(PASS, RULE)
    inputs = _meta_swin_block(2**11, dtype, affine)
    with pytest.raises(ValueError, match=too_large(RULE, "windows")):
        module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == []


def test_just_fewer_than_2_31_elements_take_the_fast_path(load_rule, launches, monkeypatch):
    module = load_rule(PASS, RULE)
    monkeypatch.setattr(module, "_general", general_path_not_taken)
    inputs = _meta_swin_block(2**11 - 1, torch.float16)
    total, out = module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == ["_roll_add_layer_norm_kernel"]
    assert total.shape == out.shape == (2**11 - 1, 1024, 1024)
