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
    like,
    on,
    sample_graph,
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
