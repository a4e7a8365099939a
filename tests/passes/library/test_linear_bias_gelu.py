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

from passnet.passes import PassManager
from passnet.passes.library import get_reference_pass
from passnet.record import baseline_tolerance
from passnet.sample import load_sample, trace_graph
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
    sample_path,
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


# --- FusedFeedForwardAddLayerNorm: the whole feed-forward sublayer -------------------------

FFN_RULE = "FusedFeedForwardAddLayerNorm"


def test_the_feed_forward_rule_is_applied_first():
    # it takes every BERT site; FusedLinearBiasGelu stays for linear + GELU elsewhere
    assert get_reference_pass(PASS).rules == [FFN_RULE, RULE]


@pytest.mark.parametrize(
    ("sample", "expected"),
    [(BERT_TINY, 2), (TINYBERT, 2), (BGE, 4)],
    ids=["bert-tiny", "tinybert", "bge"],
)
def test_feed_forward_rule_matches_every_layer_and_leaves_nothing_to_the_gelu_rule(
    sample, expected
):
    manager = PassManager.from_dirs(get_reference_pass(PASS).folder)
    report = manager.apply(trace_graph(load_sample(sample_path(sample)).build_module("cpu"))).report
    assert report.replacements == {FFN_RULE: expected, RULE: 0}


@pytest.mark.parametrize("dtype", [torch.float32])
@pytest.mark.parametrize(
    "sample",
    # bert-tiny and TinyBERT: one program per 16 rows; bge-small-zh's 2 x 1M weights: the
    # features split over programs of one launch, the last one normalising
    [BERT_TINY, TINYBERT, BGE],
    ids=["bert-tiny", "tinybert", "bge-split"],
)
def test_feed_forward_rule_equals_eager_on_real_values(load_rule, device, dtype, sample):
    module = load_rule(PASS, FFN_RULE)
    inputs = on(device, cast_floats(captured_inputs(sample, module.pattern), dtype))
    assert_replacement_matches(module, inputs)


def _exact_inputs(x_shape, n, f, dtype, gen, *, contiguous=True):
    """Feed-forward inputs on which every sum is exact in fp32 and GELU exact in fp32, so
    that fp16/bf16 roundings are the same whatever the summation order (the real values'
    rounding ties are not: see the module doc). x and the weights are small multiples of
    1/4 and 1/8; each first-linear output is at least 10 away from zero (b1 is +48 or
    -64, |x . w1| <= n / 16 < 38), where erf is exactly +-1 in fp32 and GELU is x or 0."""

    def steps(shape, low, high, scale):
        return torch.randint(low, high, shape, generator=gen).to(torch.float64) * scale

    assert n <= 600
    x = steps(x_shape, -2, 3, 0.25)
    if not contiguous:  # the same values through a transposed view
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    w1 = steps((f, n), -1, 2, 0.125)
    b1 = torch.where(torch.rand(f, generator=gen) < 0.5, 48.0, -64.0).to(torch.float64)
    w2 = steps((n, f), -1, 2, 0.125)
    b2 = steps((n,), -8, 9, 0.125)
    ln_w = steps((n,), 1, 9, 0.25)
    ln_b = steps((n,), -4, 5, 0.25)
    values = [x, w1, b1, w2, b2, 0.1, (n,), ln_w, ln_b, 1e-12]
    return [v.to(dtype) if isinstance(v, torch.Tensor) else v for v in values]


def _exact_reference(x, w1, b1, w2, b2, p, ns, ln_w, ln_b, eps):
    """Eager's sequence of roundings computed in float64: on the exact inputs every sum is
    exact, so this is what any fp32 summation order gives (cuBLAS may reduce split-K sums
    in fp16/bf16 on the GPU, which PyTorch allows by default: eager itself is not a
    reliable reference there)."""
    dt, f64 = x.dtype, torch.float64

    def r(t):
        return t.to(dt).to(f64)

    X = x.to("cpu", f64)
    W1, W2 = w1.to("cpu", f64), w2.to("cpu", f64)
    zeros = torch.zeros
    B1 = b1.to("cpu", f64) if b1 is not None else zeros(w1.shape[0], dtype=f64)
    B2 = b2.to("cpu", f64) if b2 is not None else zeros(w2.shape[0], dtype=f64)
    product = X @ W1.T
    if b1 is not None and x.dim() != 2 and not x.is_contiguous():
        product = r(product)  # eager's matmul, then the bias add
    h = r(product + B1)
    g = r(h * 0.5 * (1 + torch.erf(h / 2**0.5)))
    s = r(r(g @ W2.T + B2) + X)
    lw = ln_w.to("cpu", f64) if ln_w is not None else None
    lb = ln_b.to("cpu", f64) if ln_b is not None else None
    out = torch.nn.functional.layer_norm(s, tuple(ns), lw, lb, eps)
    return out.to(dt).to(x.device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("x_shape", "n", "f"),
    [
        ((1, 11, 128), 128, 512),  # bert-tiny: one program
        ((2, 34, 128), 128, 512),  # TinyBERT: five row blocks
        ((1, 10, 512), 512, 2048),  # bge-small-zh: 32 programs, the last one normalising
        ((40, 256), 256, 1100),  # three row blocks, each split; a partial last chunk
        ((2, 5, 600), 600, 96),  # rows longer than 512: column blocks + the finishing kernel
        ((3, 48), 48, 40),  # widths that are no power of two
    ],
    ids=["bert-tiny", "tinybert", "bge-split", "rows-split", "columns", "odd"],
)
def test_feed_forward_rule_equals_eager_on_exact_inputs(load_rule, device, dtype, x_shape, n, f):
    module = load_rule(PASS, FFN_RULE)
    gen = torch.Generator().manual_seed(13)
    inputs = on(device, _exact_inputs(x_shape, n, f, dtype, gen))
    assert_replacement_matches(module, inputs, reference=_exact_reference)
    if device == "cpu":  # eager's CPU GEMMs accumulate in fp32: eager is the reference too
        assert_replacement_matches(module, inputs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_feed_forward_rule_general_cases_follow_eager(load_rule, device, dtype):
    module = load_rule(PASS, FFN_RULE)
    gen = torch.Generator().manual_seed(14)
    # a non-contiguous 3-d x (eager rounds the product before adding the bias)
    inputs = _exact_inputs((2, 6, 48), 48, 64, dtype, gen, contiguous=False)
    assert not inputs[0].is_contiguous()
    assert_replacement_matches(module, on(device, inputs), reference=_exact_reference)
    # no biases and no LayerNorm affine parameters
    x, w1, _, w2, _, p, ns, _, _, eps = _exact_inputs((2, 6, 48), 48, 64, dtype, gen)
    inputs = on(device, [x, w1, None, w2, None, p, ns, None, None, eps])
    assert_replacement_matches(module, inputs, reference=_exact_reference)
    # a 1-d x; eps an int; normalized_shape a list
    x, w1, b1, w2, b2, p, _, ln_w, ln_b, _ = _exact_inputs((48,), 48, 64, dtype, gen)
    assert_replacement_matches(
        module, on(device, [x, w1, b1, w2, b2, p, [48], ln_w, ln_b, 1]), reference=_exact_reference
    )


def test_feed_forward_rule_refuses_what_it_cannot_compute(load_rule, device):
    module = load_rule(PASS, FFN_RULE)
    run = module.replacement_func()
    gen = torch.Generator().manual_seed(15)
    x, w1, b1, w2, b2, p, ns, ln_w, ln_b, eps = on(
        device, _exact_inputs((2, 5, 48), 48, 64, torch.float32, gen)
    )
    with pytest.raises(ValueError, match="dropout probability"):
        run(x, w1, b1, w2, b2, 1.5, ns, ln_w, ln_b, eps)
    with pytest.raises(TypeError, match="one dtype, got x torch.float16"):
        run(x.half(), w1, b1, w2, b2, p, ns, ln_w, ln_b, eps)
    with pytest.raises(ValueError, match=r"w2 \(48, 32\) is not \(48, 64\)"):
        run(x, w1, b1, w2[:, :32], b2, p, ns, ln_w, ln_b, eps)
    with pytest.raises(ValueError, match=r"normalized_shape \[5, 48\] is not \[48\]"):
        run(x, w1, b1, w2, b2, p, (5, 48), ln_w, ln_b, eps)
    with pytest.raises(ValueError, match=r"b1 \(48,\) is not \(64,\)"):
        run(x, w1, b2, w2, b2, p, ns, ln_w, ln_b, eps)


@pytest.mark.parametrize(
    ("x_shape", "n", "f", "expected"),
    [
        ((1, 11, 128), 128, 512, ["_ffn_kernel"]),
        ((1, 10, 512), 512, 2048, ["_ffn_kernel"]),  # split, one launch
        ((2, 5, 600), 600, 96, ["_ffn_kernel", "_ffn_finish_kernel"]),
    ],
    ids=["one-program", "split", "column-blocks"],
)
def test_feed_forward_rule_launches(load_rule, launches, monkeypatch, x_shape, n, f, expected):
    module = load_rule(PASS, FFN_RULE)
    monkeypatch.setattr(module, "_general", general_path_not_taken)
    H = torch.float16
    x, w1, b1, w2, b2 = (
        meta(*x_shape, dtype=H),
        meta(f, n, dtype=H),
        meta(f, dtype=H),
        meta(n, f, dtype=H),
        meta(n, dtype=H),
    )
    out = module.replacement_func()(
        x, w1, b1, w2, b2, 0.1, (n,), meta(n, dtype=H), meta(n, dtype=H), 1e-12
    )
    assert launches == expected
    assert out.shape == x.shape and out.dtype == H


def test_feed_forward_rule_refuses_2_31_elements_before_any_launch(load_rule, launches):
    module = load_rule(PASS, FFN_RULE)
    H = torch.float16
    x, w1, b1, w2, b2 = (
        meta(2**21, 1024, dtype=H),
        meta(16, 1024, dtype=H),
        meta(16, dtype=H),
        meta(1024, 16, dtype=H),
        meta(1024, dtype=H),
    )
    ln = meta(1024, dtype=H)
    with pytest.raises(ValueError, match=too_large(FFN_RULE, "x")):
        module.replacement_func()(x, w1, b1, w2, b2, 0.1, (1024,), ln, ln, 1e-12)
    assert launches == []
