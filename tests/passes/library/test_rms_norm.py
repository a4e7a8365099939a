"""FusedRMSNorm: matches T5's RMSNorm and equals eager in fp32/fp16/bf16."""

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
    sample_graph,
)

PASS, RULE = "rms_norm", "FusedRMSNorm"
T5 = "transformers-auto-model/google/t5-efficient-large-el2"


def test_pattern_matches_every_rms_norm_of_t5(load_rule):
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(T5))
    # Two encoder layers (attention + feed-forward norms) and the final norm.
    assert len(matches) == 5
    assert {(m.placeholder_nodes[2], m.placeholder_nodes[3]) for m in matches} == {
        (torch.float32, 1e-06)
    }


@pytest.mark.parametrize("dtype", DTYPES)
def test_replacement_equals_eager_on_real_t5_values(load_rule, dtype):
    module = load_rule(PASS, RULE)
    inputs = cast_floats(captured_inputs(T5, module.pattern), dtype)
    assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 5, 100), (3, 1000)], ids=["rows100", "rows1000"])
def test_replacement_equals_eager_on_other_shapes(load_rule, dtype, shape):
    module = load_rule(PASS, RULE)
    weight, x, _, eps = captured_inputs(T5, module.pattern)
    gen = torch.Generator().manual_seed(1)
    inputs = [like(weight, shape[-1:], dtype, gen), like(x, shape, dtype, gen), dtype, eps]
    assert_replacement_matches(module, inputs)


def test_half_input_with_fp32_variance_promotes_like_eager(load_rule):
    # The unrewritten T5 graph in fp16: variance in fp32, result promoted to fp32.
    module = load_rule(PASS, RULE)
    weight, x, cast, eps = captured_inputs(T5, module.pattern)
    inputs = [weight.half(), x.half(), cast, eps]
    assert_replacement_matches(module, inputs)
    out = module.replacement_func()(*module.replacement_args(*inputs))
    assert out.dtype == torch.float32
