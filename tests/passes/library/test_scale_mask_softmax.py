"""FusedScaleMaskSoftmax: matches Swin's scaled, biased window-attention softmax, equals eager."""

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

PASS, RULE = "scale_mask_softmax", "FusedScaleMaskSoftmax"
SWIN = "transformers-auto-model/vuiseng9_tiny-random-SwinModel"
SWIN_224 = "transformers-auto-model/yujiepan_tiny-random-swin-patch4-window7-224"


@pytest.mark.parametrize(
    ("sample", "expected"),
    # vuiseng9: the shifted block adds a window mask through views, a different pattern
    [(SWIN, 3), (SWIN_224, 4)],
    ids=["swin-tiny-random", "swin-224"],
)
def test_pattern_matches_window_attention_softmax(load_rule, sample, expected):
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected
    assert all(isinstance(m.placeholder_nodes[2], float) for m in matches)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sample", [SWIN, SWIN_224], ids=["n4", "n49"])
def test_replacement_equals_eager_on_real_swin_values(load_rule, device, dtype, sample):
    module = load_rule(PASS, RULE)
    inputs = on(device, cast_floats(captured_inputs(sample, module.pattern), dtype))
    assert inputs[1].shape[0] == 1  # the relative-position bias broadcasts over windows
    assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("scores_shape", "mask_shape", "divisor"),
    [((3, 4, 17, 17), (1, 4, 17, 17), 2.8284271247461903), ((2, 2, 8, 100), (2, 1, 1, 100), 8.0)],
    ids=["n17-bias", "n100-padding-mask"],
)
def test_replacement_equals_eager_on_other_shapes(
    load_rule, device, dtype, scores_shape, mask_shape, divisor
):
    module = load_rule(PASS, RULE)
    scores, mask, _ = captured_inputs(SWIN_224, module.pattern)
    gen = torch.Generator().manual_seed(9)
    inputs = [like(scores, scores_shape, dtype, gen), like(mask, mask_shape, dtype, gen), divisor]
    assert_replacement_matches(module, on(device, inputs))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_fully_masked_rows_give_nan_like_eager(load_rule, device):
    module = load_rule(PASS, RULE)
    scores = torch.randn(1, 2, 3, 5, device=device)
    mask = torch.zeros(1, 1, 3, 5, device=device)
    mask[..., 1, :] = float("-inf")
    out = module.replacement_func()(*module.replacement_args(scores, mask, 2.0))
    assert out[..., 1, :].isnan().all() and out[..., 0, :].isfinite().all()
    assert_replacement_matches(module, [scores, mask, 2.0])


def test_tensor_divisor_is_refused(load_rule, device):
    module = load_rule(PASS, RULE)
    with pytest.raises(TypeError, match="numeric divisor"):
        module.replacement_func()(
            *on(device, [torch.randn(2, 4), torch.tensor(2.0), torch.zeros(2, 4)])
        )
