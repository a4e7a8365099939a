"""FusedLinearBiasGelu matches the feed-forward up-projection (linear + GELU) and equals eager.

In fp16/bf16 eager rounds the linear result before GELU, and so does the kernel. Where
the exact linear result lies within fp32 accumulation error of a rounding boundary, the
order of the fp32 sum (BLAS or Triton, CPU or GPU: none is canonical) decides which of
two neighbouring values GELU sees, and in GELU's flat negative tail the two outputs are
further apart than the fp16 tolerance. Those elements are checked against eager GELU of
either neighbour; every other element against eager at the baseline tolerance.
"""

from __future__ import annotations

import pytest
import torch

from passnet.score import baseline_tolerance
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

PASS, RULE = "linear_bias_gelu", "FusedLinearBiasGelu"
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


@pytest.mark.parametrize(
    ("x_shape", "n_out", "has_bias", "name"),
    [
        ((2**21, 1024), 1024, True, "x"),
        ((4, 2**28), 8, True, "weight"),
        ((2**20, 64), 2**11, False, "out"),  # no bias: the general path
        ((2, 2**20, 1024), 16, True, "x"),
    ],
    ids=["x", "weight", "out-no-bias", "3d-x"],
)
def test_tensors_of_2_31_elements_are_refused_before_any_launch(
    load_rule, launches, x_shape, n_out, has_bias, name
):
    # The kernel's offsets are int32: x [M, K], weight [N, K] and out [M, N] must each
    # have fewer than 2**31 elements.
    module = load_rule(PASS, RULE)
    K, H = x_shape[-1], torch.float16
    x, w = meta(*x_shape, dtype=H), meta(n_out, K, dtype=H)
    b = meta(n_out, dtype=H) if has_bias else None
    with pytest.raises(ValueError, match=too_large(RULE, name)):
        module.replacement_func()(*module.replacement_args(b, w, x))
    assert launches == []


@pytest.mark.parametrize(
    ("M", "K", "N"),
    # the second is past the cheap bound (M + N) * (K + N) < 2**31 but every tensor has
    # fewer than 2**31 elements: checked one by one, and launched
    [(20, 128, 512), (2**20, 1024, 1024)],
    ids=["small", "below-the-limit"],
)
def test_fewer_than_2_31_elements_take_the_fast_path(load_rule, launches, monkeypatch, M, K, N):
    module = load_rule(PASS, RULE)
    monkeypatch.setattr(module, "_general", general_path_not_taken)
    H = torch.float16
    x, w, b = meta(M, K, dtype=H), meta(N, K, dtype=H), meta(N, dtype=H)
    out = module.replacement_func()(*module.replacement_args(b, w, x))
    assert launches == ["_linear_gelu_kernel"]
    assert out.shape == (M, N) and out.dtype == H
