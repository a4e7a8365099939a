"""FusedLinearGeluLinear and FusedLinearBiasGelu match the feed-forward block and equal eager.

FusedLinearGeluLinear (listed first) takes the whole BERT feed-forward block: linear,
GELU, linear and the eval-mode dropout; FusedLinearBiasGelu the linear + GELU that
remain (none in the BERT samples).

In fp16/bf16 eager rounds the linear result before GELU, and so does the kernel. Where
the exact linear result lies within fp32 accumulation error of a rounding boundary, the
order of the fp32 sum (BLAS or Triton, CPU or GPU: none is canonical) decides which of
two neighbouring values GELU sees, and in GELU's flat negative tail the two outputs are
further apart than the fp16 tolerance. Those elements are checked against eager GELU of
either neighbour; every other element against eager at the baseline tolerance. In the
whole block those GELU outputs feed the second linear: an output may differ from eager
by what the possible choices of its row's tied GELU inputs move it, on top of the
baseline tolerance (about one output element in 300 needs it on the real values).
"""

from __future__ import annotations

import pytest
import torch

from passnet.passes import PassManager, trace_graph
from passnet.passes.library import get_reference_pass
from passnet.sample import load_sample
from passnet.score import baseline_tolerance
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

PASS, RULE, MLP = "linear_bias_gelu", "FusedLinearBiasGelu", "FusedLinearGeluLinear"
BERT_TINY = "transformers-auto-model/prajjwal1_bert-tiny"
TINYBERT = "transformers-auto-model/ms-marco-TinyBERT-L2"
BGE = "transformers-auto-model/bge-small-zh"


def _rounding_neighbours(exact, x64, w64, b64, dtype):
    """The two roundings to ``dtype`` an fp32 sum of ``x64 @ w64.T + b64`` can take."""
    # How far an fp32 sum of the K products can land from the exact value: each addition
    # errs by up to 2**-24 of its partial sum, and partial sums of terms of mixed signs
    # grow like sqrt(k) * rms(term), so the errors add to about
    # 2**-24 * sqrt(sum_k k * mean(term**2)); the band is four times that.
    K = x64.shape[-1]
    spread = ((x64**2 @ (w64**2).T) * (K + 1) / 2).sqrt() + b64.abs()
    band = 4 * 2.0**-24 * spread
    return (exact - band).to(dtype), (exact + band).to(dtype)


def _assert_matches_eager(module, inputs):
    bias, weight, x = inputs
    if x.dtype == torch.float32:
        assert_replacement_matches(module, inputs)
        return
    with torch.no_grad():
        expected = module.pattern(*inputs)
        actual = module.replacement_func()(*module.replacement_args(*inputs))
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    x64, w64 = x.double(), weight.double()
    b64 = (
        bias.double()
        if bias is not None
        else torch.zeros(weight.shape[0], dtype=torch.float64, device=x.device)
    )
    exact = torch.nn.functional.linear(x64, w64, b64)
    low, high = _rounding_neighbours(exact, x64, w64, b64, x.dtype)
    tie = low != high
    atol, rtol = baseline_tolerance(x.dtype)

    def close(reference):
        ref = reference.double()
        return (actual.double() - ref).abs() <= atol + rtol * ref.abs()

    gelu = torch._C._nn.gelu
    ok = close(expected) | (tie & (close(gelu(low)) | close(gelu(high))))
    assert ok.all(), f"{(~ok).sum().item()} elements differ from eager beyond rounding ties"
    assert tie.double().mean() < 0.05, "the band is too wide to check anything"


@pytest.mark.parametrize(
    ("sample", "expected"),
    [(BERT_TINY, 2), (TINYBERT, 2), (BGE, 4)],
    ids=["bert-tiny", "tinybert", "bge"],
)
def test_pattern_matches_every_intermediate_layer(load_rule, sample, expected):
    module = load_rule(PASS, RULE)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected  # one BertIntermediate per encoder layer


@pytest.mark.parametrize("dtype", DTYPES)
def test_replacement_equals_eager_on_real_tinybert_values(load_rule, device, dtype):
    module = load_rule(PASS, RULE)
    inputs = on(device, cast_floats(captured_inputs(TINYBERT, module.pattern), dtype))
    _assert_matches_eager(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("x_shape", "n_out"),
    [((2, 9, 100), 300), ((70, 256), 1024), ((2, 100, 48), 130)],
    ids=["k100-n300", "m70-k256", "m200-large-tiles"],
)
def test_replacement_equals_eager_on_other_shapes(load_rule, device, dtype, x_shape, n_out):
    module = load_rule(PASS, RULE)
    bias, weight, x = captured_inputs(TINYBERT, module.pattern)
    gen = torch.Generator().manual_seed(8)
    K = x_shape[-1]
    inputs = [
        like(bias, (n_out,), dtype, gen),
        like(weight, (n_out, K), dtype, gen),
        like(x, x_shape, dtype, gen),
    ]
    _assert_matches_eager(module, on(device, inputs))


def test_linear_without_bias_is_supported(load_rule, device):
    module = load_rule(PASS, RULE)
    _, weight, x = captured_inputs(TINYBERT, module.pattern)
    assert_replacement_matches(module, on(device, [None, weight, x]))


def test_mismatched_dtypes_are_refused_like_eager(load_rule, device):
    module = load_rule(PASS, RULE)
    bias, weight, x = captured_inputs(TINYBERT, module.pattern)
    with pytest.raises(TypeError, match="one dtype"):
        module.replacement_func()(*on(device, [x.half(), weight, bias]))


# --- FusedLinearGeluLinear: linear -> GELU -> linear -> eval dropout --------------------

SITES = [(BERT_TINY, 2), (TINYBERT, 2), (BGE, 4)]
SITE_IDS = ["bert-tiny", "tinybert", "bge"]


def _assert_mlp_matches_eager(module, inputs):
    x, w1, b1, w2, b2, _ = inputs
    if x.dtype == torch.float32:
        assert_replacement_matches(module, inputs)
        return
    with torch.no_grad():
        expected = module.pattern(*inputs)
        actual = module.replacement_func()(*module.replacement_args(*inputs))
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    dtype = x.dtype
    x64, w164, w264 = x.double().reshape(-1, x.shape[-1]), w1.double(), w2.double()
    b164 = b1.double() if b1 is not None else torch.zeros_like(w164[:, 0])
    exact = x64 @ w164.T + b164
    low, high = _rounding_neighbours(exact, x64, w164, b164, dtype)
    # GELU of either neighbour, computed in fp32 by two erf implementations: where its
    # value lies within their error of a rounding boundary it rounds either way (the
    # error is absolute near the tail, where 1 + erf cancels).
    choices = []
    for h in (low, high):
        h64 = h.double()
        g = torch._C._nn.gelu(h64)
        slack = 2.0**-22 * (g.abs() + h64.abs())
        choices += [(g - slack).to(dtype), (g + slack).to(dtype)]
    choices = torch.stack(choices).double()
    # How far the second linear's output moves over every choice of its row's GELU values.
    shift = (choices.amax(0) - choices.amin(0)) @ w264.abs().T
    atol, rtol = baseline_tolerance(dtype)
    reference = expected.double()
    diff = (actual.double() - reference).abs()
    base = atol + rtol * reference.abs()
    ok = diff <= base + shift.reshape(reference.shape)
    assert ok.all(), f"{(~ok).sum().item()} elements differ from eager beyond rounding ties"
    assert (low != high).double().mean() < 0.05, "the band is too wide to check anything"
    assert (diff > base).double().mean() < 0.01, "the tie allowance is not the exception"


def _mlp_inputs(gen, dtype, x_shape, inter, real):
    """Inputs of the block with ``x_shape`` and ``inter`` intermediate features, drawn
    like the real tensors ``real`` (x, w1, b1, w2, b2, p)."""
    x, w1, b1, w2, b2, p = real
    D = x_shape[-1]
    return [
        like(x, x_shape, dtype, gen),
        like(w1, (inter, D), dtype, gen),
        like(b1, (inter,), dtype, gen),
        like(w2, (D, inter), dtype, gen),
        like(b2, (D,), dtype, gen),
        p,
    ]


@pytest.mark.parametrize(("sample", "expected"), SITES, ids=SITE_IDS)
def test_mlp_pattern_matches_every_feed_forward_block(load_rule, sample, expected):
    module = load_rule(PASS, MLP)
    matches = find_matches(module.pattern, sample_graph(sample))
    assert len(matches) == expected  # BertIntermediate + BertOutput.dense + dropout per layer


def test_rules_are_ordered_whole_block_first():
    assert get_reference_pass(PASS).rules == [MLP, RULE]


@pytest.mark.parametrize(("sample", "expected"), SITES, ids=SITE_IDS)
def test_pass_manager_takes_every_block_whole_and_leaves_no_linear_gelu(sample, expected):
    manager = PassManager.from_dirs(get_reference_pass(PASS).folder)
    module = load_sample(sample_path(sample)).build_module("cpu")
    result = manager.apply(trace_graph(module))
    assert result.report.replacements == {MLP: expected, RULE: 0}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sample", [BERT_TINY, TINYBERT, BGE], ids=SITE_IDS)
def test_mlp_replacement_equals_eager_on_real_values(load_rule, device, sample, dtype):
    # bert-tiny: 11 tokens, one program; TinyBERT: 68 tokens over five programs;
    # bge-small-zh (512 x 2048): the intermediate split over programs, summed atomically.
    module = load_rule(PASS, MLP)
    inputs = on(device, cast_floats(captured_inputs(sample, module.pattern), dtype))
    _assert_mlp_matches_eager(module, inputs)


def test_mlp_replacement_equals_eager_on_every_real_layer(load_rule, device):
    module = load_rule(PASS, MLP)
    for match in range(4):
        _assert_mlp_matches_eager(module, on(device, captured_inputs(BGE, module.pattern, match)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("x_shape", "inter"),
    [((2, 9, 100), 300), ((70, 128), 512), ((1, 37, 200), 800), ((5, 96), 1000)],
    ids=["d100-two-programs", "m70-five-programs", "d200-split", "d96-split"],
)
def test_mlp_replacement_equals_eager_on_other_shapes(load_rule, device, dtype, x_shape, inter):
    module = load_rule(PASS, MLP)
    real = captured_inputs(TINYBERT, module.pattern)
    inputs = _mlp_inputs(torch.Generator().manual_seed(9), dtype, x_shape, inter, real)
    _assert_mlp_matches_eager(module, on(device, inputs))


def test_mlp_split_over_several_row_blocks(load_rule, device):
    # 120 tokens (8 row blocks) of bge-small-zh's size: every row block has its own counter.
    module = load_rule(PASS, MLP)
    real = captured_inputs(BGE, module.pattern)
    for dtype in DTYPES:
        inputs = _mlp_inputs(torch.Generator().manual_seed(10), dtype, (3, 40, 512), 2048, real)
        _assert_mlp_matches_eager(module, on(device, inputs))


@pytest.mark.parametrize("missing", ["b1", "b2", "both"])
def test_mlp_without_biases_is_supported(load_rule, device, missing):
    module = load_rule(PASS, MLP)
    x, w1, b1, w2, b2, p = captured_inputs(TINYBERT, module.pattern)
    b1 = None if missing in ("b1", "both") else b1
    b2 = None if missing in ("b2", "both") else b2
    assert_replacement_matches(module, on(device, [x, w1, b1, w2, b2, p]))


def test_mlp_non_contiguous_input_is_copied(load_rule, device):
    module = load_rule(PASS, MLP)
    x, w1, b1, w2, b2, p = captured_inputs(TINYBERT, module.pattern)
    xt = x.transpose(0, 1).contiguous().transpose(0, 1)  # same values, other strides
    assert not xt.is_contiguous()
    assert_replacement_matches(module, on(device, [xt, w1, b1, w2.t().contiguous().t(), b2, p]))


def test_mlp_refuses_mismatched_dtypes_and_shapes(load_rule, device):
    module = load_rule(PASS, MLP)
    x, w1, b1, w2, b2, _ = on(device, captured_inputs(TINYBERT, module.pattern))
    fused = module.replacement_func()
    with pytest.raises(TypeError, match="one dtype"):
        fused(x.half(), w1, b1, w2, b2)
    with pytest.raises(ValueError, match="does not take"):
        fused(x, w1[:, :64], b1, w2, b2)
    with pytest.raises(ValueError, match="does not return"):
        fused(x, w1, b1, w2[:64], b2)
