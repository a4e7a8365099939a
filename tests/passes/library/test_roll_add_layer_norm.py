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
    like,
    on,
    sample_graph,
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


# The window merge before the add: FusedWindowReverseAddLayerNorm (unshifted blocks) and
# FusedWindowReverseRollAddLayerNorm (the shifted block) share one wrapper and kernel.
MERGE, MERGE_ROLL = "FusedWindowReverseAddLayerNorm", "FusedWindowReverseRollAddLayerNorm"


@pytest.mark.parametrize(("rule", "sites"), [(MERGE, 3), (MERGE_ROLL, 1)])
def test_window_merge_patterns_match_every_swin_block(load_rule, rule, sites):
    module = load_rule(PASS, rule)
    matches = find_matches(module.pattern, sample_graph(SWIN))
    assert len(matches) == sites
    for match in matches:
        assert len(match.returning_nodes) == 2
    shifted = matches[0].placeholder_nodes if rule == MERGE_ROLL else None
    if shifted is not None:
        # p, the four views, the roll's shifts, the row view, normalized_shape, eps
        assert shifted[4:] == [0.0, -1, 2, 2, 32, -1, 4, 4, 2, 2, 32, -1, 8, 8, 32, (1, 1)] + [
            1,
            64,
            32,
            (32,),
            1e-05,
        ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("rule", "match"), [(MERGE, 0), (MERGE, 2), (MERGE_ROLL, 0)])
def test_window_merge_replacement_equals_eager_on_real_swin_values(
    load_rule, device, dtype, rule, match
):
    module = load_rule(PASS, rule)
    inputs = on(device, cast_floats(captured_inputs(SWIN, module.pattern, match), dtype))
    assert_replacement_matches(module, inputs)


def _merge_inputs(dtype, B, nH, nW, WH, WW, C, shifts, gen):
    """Inputs of the shifted rule for a window layout; the unshifted rule drops ``shifts``."""
    H, W = nH * WH, nW * WW
    values = [
        torch.randn(C, generator=gen).to(dtype),
        (1 + 0.1 * torch.randn(C, generator=gen)).to(dtype),
        torch.randn(B, H * W, C, generator=gen).to(dtype),
        torch.randn(B * nH * nW, WH * WW, C, generator=gen).to(dtype),
        0.0,
        *(-1, WH, WW, C),
        *(-1, nH, nW, WH, WW, C),
        *(-1, H, W, C),
        shifts,
        *(B, H * W, C),
        (C,),
        1e-05,
    ]
    return values


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("layout", "shifts"),
    [((2, 2, 3, 7, 7, 96), (3, 3)), ((1, 3, 2, 4, 5, 100), (-2, 7))],
    ids=["swin-t-stage", "rectangular-windows-c100"],
)
@pytest.mark.parametrize("rule", [MERGE, MERGE_ROLL])
def test_window_merge_replacement_equals_eager_on_other_shapes(
    load_rule, device, dtype, layout, shifts, rule
):
    module = load_rule(PASS, rule)
    inputs = _merge_inputs(dtype, *layout, shifts, torch.Generator().manual_seed(5))
    if rule == MERGE:
        del inputs[19]
    assert_replacement_matches(module, on(device, inputs))


def test_window_merge_general_path_handles_a_broadcast_residual_and_no_affine(load_rule, device):
    module = load_rule(PASS, MERGE_ROLL)
    inputs = _merge_inputs(
        torch.float32, 1, 2, 2, 3, 3, 8, (1, 2), torch.Generator().manual_seed(6)
    )
    inputs[2] = inputs[2][:, :1]  # [1, 1, C]: broadcast over the rows
    inputs[0] = inputs[1] = None
    assert_replacement_matches(module, on(device, inputs))


def test_window_merge_views_that_do_not_merge_windows_take_the_general_path(load_rule, device):
    # view(-1, H, W, C) after the permute with H != nH * WH: a legal view, not a window merge
    module = load_rule(PASS, MERGE_ROLL)
    inputs = _merge_inputs(
        torch.float32, 1, 2, 4, 2, 2, 8, (1, 1), torch.Generator().manual_seed(7)
    )
    inputs[16:18] = [8, 4]  # [-1, 8, 4, C] instead of [-1, 4, 8, C]
    assert_replacement_matches(module, on(device, inputs))


def test_window_merge_refuses_what_eager_refuses(load_rule, device):
    module = load_rule(PASS, MERGE)
    inputs = _merge_inputs(
        torch.float32, 1, 2, 2, 2, 2, 8, (0, 0), torch.Generator().manual_seed(8)
    )
    del inputs[19]
    bad_view = list(inputs)
    bad_view[6] = 3  # view(-1, 3, 2, 8) of 128 elements
    bad_p = list(inputs)
    bad_p[4] = 1.5
    for values, error in ((bad_view, RuntimeError), (bad_p, ValueError)):
        with pytest.raises(error):
            module.pattern(*values)
        with pytest.raises(error):
            module.replacement_func()(*module.replacement_args(*on(device, values)))
