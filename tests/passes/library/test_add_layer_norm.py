"""FusedAddLayerNorm: matches the BERT-style residual add + LayerNorm and equals eager."""

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

PASS, RULE = "add_layer_norm", "FusedAddLayerNorm"
BERT_TINY = "transformers-auto-model/prajjwal1_bert-tiny"
TINYBERT = "transformers-auto-model/ms-marco-TinyBERT-L2"
BGE = "transformers-auto-model/bge-small-zh"


@pytest.mark.parametrize(
    ("sample", "expected"),
    # embeddings + (attention output, feed-forward output) per encoder layer
    [(BERT_TINY, 5), (TINYBERT, 5), (BGE, 9)],
    ids=["bert-tiny", "tinybert", "bge"],
)
def test_pattern_matches_every_add_layer_norm_of_bert_samples(load_rule, sample, expected):
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected
    assert {m.placeholder_nodes[5] for m in matches} == {1e-12}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("match", [0, 1], ids=["embeddings-broadcast", "residual"])
def test_replacement_equals_eager_on_real_tinybert_values(load_rule, device, dtype, match):
    module = load_rule(PASS, RULE)
    inputs = on(device, cast_floats(captured_inputs(TINYBERT, module.pattern, match), dtype))
    if match == 0:  # position embeddings [1, S, D] broadcast over the batch of 2
        assert inputs[3].shape[0] == 1 and inputs[2].shape[0] == 2
    assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 9, 100), (4, 33, 768)], ids=["d100", "d768"])
def test_replacement_equals_eager_on_other_shapes(load_rule, device, dtype, shape):
    module = load_rule(PASS, RULE)
    bias, weight, a, b, _, eps = captured_inputs(TINYBERT, module.pattern, 1)
    gen = torch.Generator().manual_seed(4)
    D = shape[-1]
    inputs = [
        like(bias, (D,), dtype, gen),
        like(weight, (D,), dtype, gen),
        like(a, shape, dtype, gen),
        like(b, shape, dtype, gen),
        (D,),
        eps,
    ]
    assert_replacement_matches(module, on(device, inputs))


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_affine_parameters_and_a_scalar_operand_follow_eager(load_rule, device, dtype):
    module = load_rule(PASS, RULE)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(3, 50, generator=gen).to(dtype).to(device)
    assert_replacement_matches(module, [None, None, x, 0.5, (50,), 1e-5])
    assert_replacement_matches(module, [None, None, 0.5, x, (50,), 1e-5])


def test_mixed_dtypes_promote_like_eager(load_rule, device):
    module = load_rule(PASS, RULE)
    gen = torch.Generator().manual_seed(6)
    a = torch.randn(2, 5, 64, generator=gen).half()
    b = torch.randn(2, 5, 64, generator=gen)
    w, bias = torch.ones(64), torch.zeros(64)
    assert_replacement_matches(module, on(device, [bias, w, a, b, (64,), 1e-5]))


def test_two_dim_normalized_shape_over_a_transposed_operand(load_rule, device):
    module = load_rule(PASS, RULE)
    gen = torch.Generator().manual_seed(7)
    a = torch.randn(3, 6, 10, generator=gen)
    b = torch.randn(3, 10, 6, generator=gen).transpose(1, 2)
    w, bias = torch.randn(6, 10, generator=gen), torch.randn(6, 10, generator=gen)
    assert_replacement_matches(module, on(device, [bias, w, a, b, (6, 10), 1e-5]))
