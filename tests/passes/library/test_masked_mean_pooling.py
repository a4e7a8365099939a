"""FusedMaskedMeanPooling: matches splade-mini's mean pooling and equals eager."""

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

PASS, RULE = "masked_mean_pooling", "FusedMaskedMeanPooling"
SPLADE = "transformers-auto-model/splade-mini"


def test_pattern_matches_the_mean_pooling_of_splade_mini(load_rule):
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(SPLADE))
    assert len(matches) == 1
    hidden, mask, sizes, cast, clamp_min = matches[0].placeholder_nodes
    assert (sizes, cast, clamp_min) == ((1, 10, 256), torch.float32, 1e-09)
    assert mask.name == "l_input_attention_mask_"


@pytest.mark.parametrize("dtype", DTYPES)
def test_replacement_equals_eager_on_real_splade_values(load_rule, device, dtype):
    module = load_rule(PASS, RULE)
    inputs = on(device, cast_floats(captured_inputs(SPLADE, module.pattern), dtype))
    assert inputs[1].dtype == torch.int64  # the mask stays an integer tensor
    assert_replacement_matches(module, inputs)


# The fully padded row divides 0 by 0 in fp16 in the interpreter (numpy warns) as eager does.
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 37, 100), (2, 129, 384)], ids=["d100", "s129"])
def test_replacement_equals_eager_on_other_shapes_with_padding(load_rule, device, dtype, shape):
    module = load_rule(PASS, RULE)
    hidden, _, _, _, clamp_min = captured_inputs(SPLADE, module.pattern)
    gen = torch.Generator().manual_seed(2)
    mask = torch.randint(0, 2, shape[:2], generator=gen)
    mask[0] = 0  # a fully padded row: 0 / clamp(0) as eager computes it (NaN in fp16)
    inputs = [like(hidden, shape, dtype, gen), mask, shape, dtype, clamp_min]
    assert_replacement_matches(module, on(device, inputs))


def test_bf16_hidden_states_with_fp32_mask_promote_like_eager(load_rule, device):
    # The unrewritten graph in bf16: the mask is cast to fp32, so the pooled output is fp32.
    module = load_rule(PASS, RULE)
    hidden, mask, sizes, cast, clamp_min = captured_inputs(SPLADE, module.pattern)
    inputs = on(device, [hidden.bfloat16(), mask, sizes, cast, clamp_min])
    assert_replacement_matches(module, inputs)
    assert module.replacement_func()(*module.replacement_args(*inputs)).dtype == torch.float32


def test_mask_expanded_to_another_shape_is_refused(load_rule, device):
    module = load_rule(PASS, RULE)
    hidden, mask, _, cast, clamp_min = captured_inputs(SPLADE, module.pattern)
    with pytest.raises(ValueError, match="not to the hidden states' shape"):
        module.replacement_func()(*on(device, [hidden, mask, (1, 10, 128), cast, clamp_min]))


@pytest.mark.parametrize(
    ("shape", "dtype", "mask_dtype", "name"),
    [
        ((2**10, 2**11, 1024), torch.float32, torch.float32, "hidden"),
        ((2**10, 2**11, 1024), torch.bfloat16, torch.float16, "hidden"),  # the general path
        ((2**21, 0, 1024), torch.float32, torch.float32, "out"),  # empty sequences
    ],
    ids=["fast-path-form", "mixed-dtypes", "out"],
)
def test_tensors_of_2_31_elements_are_refused_before_any_launch(
    load_rule, launches, shape, dtype, mask_dtype, name
):
    # The kernel's offsets are int32: hidden [B, S, D] and out [B, D] of 2**31 elements
    # would overflow them.
    module = load_rule(PASS, RULE)
    hidden, mask = meta(*shape, dtype=dtype), meta(*shape[:2], dtype=torch.int64)
    inputs = [hidden, mask, hidden.shape, mask_dtype, 1e-09]
    with pytest.raises(ValueError, match=too_large(RULE, name)):
        module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == []


def test_just_fewer_than_2_31_elements_take_the_fast_path(load_rule, launches, monkeypatch):
    module = load_rule(PASS, RULE)
    monkeypatch.setattr(module, "_general", general_path_not_taken)
    # hidden and out together just below 2**31 elements
    hidden, mask = meta(2**10, 2**11 - 2, 1024), meta(2**10, 2**11 - 2, dtype=torch.int64)
    inputs = [hidden, mask, hidden.shape, torch.float32, 1e-09]
    out = module.replacement_func()(*module.replacement_args(*inputs))
    assert launches == ["_masked_mean_pool_kernel"]
    assert out.shape == (2**10, 1024) and out.dtype == torch.float32
