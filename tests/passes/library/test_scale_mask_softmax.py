"""scale_mask_softmax: Swin's scaled, biased window-attention softmax (with the eval dropout, and
the shifted block's window mask added through views): the rules match every site, equal eager."""

from __future__ import annotations

import pytest
import torch
import torch.fx

from passnet.passes import PassManager, trace_graph
from passnet.passes.library import get_reference_pass
from passnet.sample import load_sample
from tests.passes.library.conftest import (
    DTYPES,
    assert_replacement_matches,
    captured_inputs,
    cast_floats,
    find_matches,
    like,
    on,
    sample_graph,
    sample_path,
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


# --- FusedScaleMaskSoftmaxDropout: the same softmax with the eval-mode dropout absorbed ---

DROPOUT = "FusedScaleMaskSoftmaxDropout"


@pytest.mark.parametrize(
    ("sample", "expected"), [(SWIN, 3), (SWIN_224, 4)], ids=["swin-tiny-random", "swin-224"]
)
def test_dropout_pattern_matches_every_unshifted_window_attention(load_rule, sample, expected):
    module = load_rule(PASS, DROPOUT)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected
    assert all(isinstance(m.placeholder_nodes[2], float) for m in matches)
    assert all(m.placeholder_nodes[3] == 0.0 for m in matches)  # p, bound to the literal


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sample", [SWIN, SWIN_224], ids=["n4", "n49"])
def test_dropout_replacement_equals_eager_on_real_swin_values(load_rule, device, dtype, sample):
    module = load_rule(PASS, DROPOUT)
    for match in range(len(find_matches(module.pattern, sample_graph(sample)))):
        inputs = on(device, cast_floats(captured_inputs(sample, module.pattern, match), dtype))
        assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("scores_shape", "mask_shape", "divisor", "p"),
    [
        ((3, 4, 17, 17), (1, 4, 17, 17), 2.8284271247461903, 0.1),
        ((2, 2, 8, 100), (2, 1, 1, 100), 8, 0.0),
    ],
    ids=["n17-bias", "n100-padding-mask-int-divisor"],
)
def test_dropout_replacement_equals_eager_on_other_shapes(
    load_rule, device, dtype, scores_shape, mask_shape, divisor, p
):
    module = load_rule(PASS, DROPOUT)
    scores, mask, _, _ = captured_inputs(SWIN_224, module.pattern)
    gen = torch.Generator().manual_seed(11)
    inputs = [
        like(scores, scores_shape, dtype, gen),
        like(mask, mask_shape, dtype, gen),
        divisor,
        p,
    ]
    assert_replacement_matches(module, on(device, inputs))


def test_dropout_replacement_checks_p_like_eager(load_rule, device):
    module = load_rule(PASS, DROPOUT)
    scores, mask = on(device, [torch.randn(2, 2, 3, 5), torch.randn(1, 2, 3, 5)])
    with pytest.raises(ValueError, match="dropout probability"):
        torch.nn.functional.dropout(scores, 1.5, False, False)
    with pytest.raises(ValueError, match="dropout probability"):
        module.replacement_func()(*module.replacement_args(scores, mask, 2.0, 1.5))


def test_base_rule_still_covers_a_softmax_without_eval_dropout(load_rule):
    def attention(scores, mask):
        probs = torch.nn.functional.softmax(scores / 8.0 + mask, dim=-1)
        return torch.nn.functional.dropout(probs, 0.1, True, False)  # training: not absorbed

    gm = torch.fx.symbolic_trace(attention)
    assert len(find_matches(load_rule(PASS, DROPOUT).pattern, gm)) == 0
    assert len(find_matches(load_rule(PASS, RULE).pattern, gm)) == 1


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        (SWIN, {DROPOUT: 3, "FusedShiftedWindowSoftmaxDropout": 1, RULE: 0}),
        (SWIN_224, {DROPOUT: 4}),
    ],
    ids=["swin-tiny-random", "swin-224"],
)
def test_pass_dir_replaces_every_attention_softmax_of_the_swin_samples(device, sample, expected):
    rules = get_reference_pass(PASS).rules
    assert rules == [DROPOUT, "FusedShiftedWindowSoftmaxDropout", RULE]  # larger patterns first
    result = PassManager.from_dirs(get_reference_pass(PASS).folder).apply(
        trace_graph(load_sample(sample_path(sample)).build_module("cpu"))
    )
    assert result.report.replacements == {r: expected.get(r, 0) for r in rules}
    nodes = result.graph_module.graph.nodes
    assert not [n for n in nodes if n.target is torch.nn.functional.softmax]


# --- FusedShiftedWindowSoftmaxDropout: the shifted block's window mask added through views ---

SHIFTED = "FusedShiftedWindowSoftmaxDropout"


def test_shifted_pattern_matches_the_shifted_window_block(load_rule):
    module = load_rule(PASS, SHIFTED)
    assert len(find_matches(module.pattern, sample_graph(SWIN_224))) == 0
    (match,) = find_matches(module.pattern, sample_graph(SWIN))
    # divisor, the constant window mask [1, W, 1, N, N], the two views' sizes, p
    assert match.placeholder_nodes[2] == 4.0
    assert match.placeholder_nodes[3].op == "get_attr"
    assert match.placeholder_nodes[4:] == [1, 16, 2, 4, 4, -1, 2, 4, 4, 0.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_shifted_replacement_equals_eager_on_real_swin_values(load_rule, device, dtype):
    module = load_rule(PASS, SHIFTED)
    inputs = on(device, cast_floats(captured_inputs(SWIN, module.pattern), dtype))
    assert inputs[3].shape == (1, 16, 1, 4, 4) and set(inputs[3].unique().tolist()) == {0, -100}
    assert_replacement_matches(module, inputs)


def _window_mask(W, N, gen, dtype):
    """A shifted-window mask: 0 within a region, -100 across regions (as Swin builds it)."""
    region = torch.randint(0, 3, (W, N), generator=gen)
    return ((region[:, None, :] != region[:, :, None]) * -100.0).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("B", "W", "H", "N", "mask_form", "view_0", "divisor"),
    [
        (2, 4, 3, 49, "swin", 2, 5.656854249492381),  # Swin-T's window, two images
        (1, 4, 2, 9, "3d", -1, 8),  # mask [W, 1, N, N] broadcast, -1 view, int divisor
        (2, 2, 3, 5, "per-head", 2, 2.0),  # a mask that varies over images and heads
    ],
    ids=["n49-swin", "n9-broadcast-mask", "n5-full-mask"],
)
def test_shifted_replacement_equals_eager_on_other_shapes(
    load_rule, device, dtype, B, W, H, N, mask_form, view_0, divisor
):
    module = load_rule(PASS, SHIFTED)
    scores, bias, _, _, *_ = captured_inputs(SWIN, module.pattern)
    gen = torch.Generator().manual_seed(5)
    mask = _window_mask(W, N, gen, dtype)
    if mask_form == "swin":
        mask = mask.unsqueeze(1).unsqueeze(0)
    elif mask_form == "3d":
        mask = mask.unsqueeze(1)
    else:
        mask = (torch.randn(B, W, H, N, N, generator=gen) * 3).to(dtype)
    inputs = [
        like(scores, (B * W, H, N, N), dtype, gen),
        like(bias, (1, H, N, N), dtype, gen),
        divisor,
        mask,
        *(view_0, W, H, N, N),
        *(-1, H, N, N),
        0.0,
    ]
    assert_replacement_matches(module, on(device, inputs))


def test_shifted_replacement_refuses_views_it_does_not_implement(load_rule, device):
    module = load_rule(PASS, SHIFTED)
    scores, bias, mask = on(
        device, [torch.randn(4, 2, 4, 4), torch.randn(1, 2, 4, 4), torch.zeros(1, 4, 1, 4, 4)]
    )
    # softmax over rows of 8: not the rows the scores are read in
    args = module.replacement_args(scores, bias, 2.0, mask, 1, 4, 2, 4, 4, -1, 2, 2, 8, 0.0)
    with pytest.raises(ValueError, match="unsupported views"):
        module.replacement_func()(*args)
